-- attack: -0.0, which is neither > 0 nor < 0 and compares equal to 0
-- expect: refused
-- error: 0 does not mean unlimited
local luna = require "luna"
return luna.controller {
  name = "1-limits-negative-zero", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { instructions = -0.0 },
  reconcile = function() while true do end end,
}
