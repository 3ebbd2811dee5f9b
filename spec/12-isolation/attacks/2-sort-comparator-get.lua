-- attack: call the API from a table.sort comparator (yield across a C call: use-after-free)
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-sort-comparator-get", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    table.sort({ "b", "a", "c" }, function(x, y) luna.get("v1/ConfigMap", req.namespace, req.name) return x < y end)
  end,
}
