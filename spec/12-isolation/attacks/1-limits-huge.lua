-- attack: 2^63 instructions, past what a 64-bit counter or a cast to integer holds
-- expect: refused
-- error: controller field 'limits.instructions' must be a number > 0 and <=
local luna = require "luna"
return luna.controller {
  name = "1-limits-huge", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { instructions = 2 ^ 63 },
  reconcile = function() while true do end end,
}
