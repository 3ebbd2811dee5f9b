-- attack: a watches map returning 100,000 keys per event (queued without limit)
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "5-map-100k-keys", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { none = "none" } },
  watches = { { "v1/ConfigMap", namespace = "@NS@",
    map = function(o) local t = {} for i = 1, 1e5 do t[i] = o.metadata.namespace .. "/k" .. i end return t end } },
  reconcile = function(req) print("target", req.name) end,
}
