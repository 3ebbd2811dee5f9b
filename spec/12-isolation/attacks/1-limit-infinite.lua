-- attack: an infinite instruction budget
-- expect: refused
-- error: controller field 'limits.instructions' must be a number > 0
local luna = require "luna"
return luna.controller {
  name = "1-limit-infinite", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { instructions = math.huge },
  reconcile = function() end,
}
