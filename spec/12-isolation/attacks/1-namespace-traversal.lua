-- attack: a namespace that walks up the API path
-- expect: refused
-- error: controller field 'watch.namespace' must be a namespace name
local luna = require "luna"
return luna.controller {
  name = "1-namespace-traversal", watch = { "v1/ConfigMap", namespace = "../../../apis" },
  reconcile = function() end,
}
