-- attack: a watches map returning 100,000 keys per event (queued without limit)
-- expect: runs
-- reached: map returned more than 1000 requests
local luna = require "luna"
return luna.controller {
  name = "5-map-100k-keys", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { none = "none" } },
  watches = { { "v1/ConfigMap", namespace = "@NS@",
    map = function(o) local k, t = o.metadata.namespace .. "/k", {} for i = 1, 1e5 do t[i] = k end return t end } },
  reconcile = function(req) print("target", req.name) end,
}
