-- attack: call the API from a watches map function
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-api-in-map", watch = { "v1/ConfigMap", namespace = "@NS@" },
  watches = { { "v1/ConfigMap", namespace = "@NS@",
    map = function(o) return luna.get("v1/ConfigMap", o.metadata.namespace, o.metadata.name) end } },
  reconcile = function() end,
}
