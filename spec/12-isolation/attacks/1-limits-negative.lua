-- attack: a negative budget (a signed/unsigned confusion would make it huge)
-- expect: refused
-- error: controller field 'limits.instructions' must be a number > 0
local luna = require "luna"
return luna.controller {
  name = "1-limits-negative", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { instructions = -1 },
  reconcile = function() while true do end end,
}
