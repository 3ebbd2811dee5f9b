-- attack: a negative token-bucket rate
-- expect: refused
-- error: controller field 'rate_limit.qps' must be a number > 0
local luna = require "luna"
return luna.controller {
  name = "1-rate-limit-negative-qps", watch = { "v1/ConfigMap", namespace = "@NS@" },
  rate_limit = { qps = -1 },
  reconcile = function() end,
}
