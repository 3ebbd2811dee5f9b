-- attack: call the API from an xpcall message handler
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-xpcall-handler-get", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    xpcall(function() error("first") end, function(m) luna.get("v1/ConfigMap", req.namespace, req.name) return m end)
  end,
}
