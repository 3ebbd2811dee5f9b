-- attack: a billion workers
-- expect: refused
-- error: controller field 'workers' must be a positive integer
local luna = require "luna"
return luna.controller {
  name = "1-workers-absurd", watch = { "v1/ConfigMap", namespace = "@NS@" }, workers = 1e9,
  reconcile = function() end,
}
