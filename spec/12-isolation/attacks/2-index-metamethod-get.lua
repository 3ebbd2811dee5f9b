-- attack: call the API from an __index metamethod the VM runs, then go on
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-index-metamethod-get", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local lazy = setmetatable({}, { __index = function(_, k) return luna.get("v1/ConfigMap", req.namespace, k) end })
    local cm = lazy[req.name]
    if not cm then return nil, "no object" end
  end,
}
