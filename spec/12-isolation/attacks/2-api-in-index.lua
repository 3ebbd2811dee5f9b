-- attack: call the API from an index function
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-api-in-index", watch = { "v1/ConfigMap", namespace = "@NS@" },
  indexes = { by_x = function(o) return luna.get("v1/ConfigMap", o.metadata.namespace, o.metadata.name) end },
  reconcile = function() end,
}
