-- attack: a NaN time budget (every comparison false: no budget at all)
-- expect: refused
-- error: controller field 'limits.seconds' must be a number > 0
local luna = require "luna"
return luna.controller {
  name = "1-limit-nan", watch = { "v1/ConfigMap", namespace = "@NS@" }, limits = { seconds = 0 / 0 },
  reconcile = function() end,
}
