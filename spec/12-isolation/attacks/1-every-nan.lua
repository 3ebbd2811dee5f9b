-- attack: a period that is not a number (0/0 compares false with everything)
-- expect: refused
-- error: controller field 'every' must be a number of seconds (1 to 31536000)
local luna = require "luna"
return luna.controller {
  name = "1-every-nan", watch = { "v1/ConfigMap", namespace = "@NS@" },
  every = 0 / 0,
  reconcile = function() end,
}
