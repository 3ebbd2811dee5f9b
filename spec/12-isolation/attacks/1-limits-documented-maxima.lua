-- attack: the maxima the docs once allowed (1e12 instructions, a day) to hold the loop for a day
-- expect: refused
-- error: a controller's limits can lower its budgets, never raise them
local luna = require "luna"
return luna.controller {
  name = "1-limits-documented-maxima", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { instructions = 1e12, seconds = 86400 },
  reconcile = function() while true do end end,
}
