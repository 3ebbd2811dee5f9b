-- attack: start the API call from a comparator two hundred times, catching each error
-- expect: runs
-- reached: comparator calls refused
local luna = require "luna"
return luna.controller {
  name = "2-sort-in-pcall-loop", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local refused = 0
    for _ = 1, 200 do
      local ok = pcall(table.sort, { 3, 1, 2 }, function(x, y) luna.get("v1/ConfigMap", req.namespace, req.name) return x < y end)
      if not ok then refused = refused + 1 end
    end
    luna.log.info("comparator calls refused", { n = refused })
    local cm, err = luna.get("v1/ConfigMap", req.namespace, req.name)
    if not cm then return nil, err end
  end,
}
