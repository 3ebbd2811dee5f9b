-- attack: a burst of half a token
-- expect: refused
-- error: controller field 'rate_limit.burst' must be an integer
local luna = require "luna"
return luna.controller {
  name = "1-rate-limit-fractional-burst", watch = { "v1/ConfigMap", namespace = "@NS@" },
  rate_limit = { burst = 0.5 },
  reconcile = function() end,
}
