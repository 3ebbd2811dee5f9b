-- attack: a NaN instruction budget (every comparison false: neither over nor under)
-- expect: refused
-- error: controller field 'limits.instructions' must be a number > 0
local luna = require "luna"
return luna.controller {
  name = "1-limits-nan-instructions", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { instructions = -(0 / 0) },
  reconcile = function() while true do end end,
}
