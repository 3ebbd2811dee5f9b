-- attack: call the API from a __tostring that tostring() runs
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-tostring-get", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    return tostring(setmetatable({}, { __tostring = function() luna.get("v1/ConfigMap", req.namespace, req.name) return "x" end }))
  end,
}
