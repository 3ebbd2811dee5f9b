-- attack: an infinite maximum backoff
-- expect: refused
-- error: controller field 'rate_limit.max_delay' must be
local luna = require "luna"
return luna.controller {
  name = "1-rate-limit-infinite-delay", watch = { "v1/ConfigMap", namespace = "@NS@" },
  rate_limit = { max_delay = math.huge },
  reconcile = function() end,
}
