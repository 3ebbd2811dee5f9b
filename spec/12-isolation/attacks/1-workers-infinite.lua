-- attack: infinitely many workers
-- expect: refused
-- error: controller field 'workers' must be a positive integer
local luna = require "luna"
return luna.controller {
  name = "1-workers-infinite", watch = { "v1/ConfigMap", namespace = "@NS@" }, workers = math.huge,
  reconcile = function() end,
}
