-- attack: -inf seconds (a deadline in the past, or never, depending on the sign check)
-- expect: refused
-- error: controller field 'limits.seconds' must be a number > 0
local luna = require "luna"
return luna.controller {
  name = "1-limits-negative-infinite", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { seconds = -math.huge },
  reconcile = function() while true do end end,
}
