-- attack: a watches map returning a thousand new keys for every event, growing the queue
-- expect: runs
-- reached: fresh key reconciled
local luna = require "luna"
local n = 0
return luna.controller {
  name = "5-map-fresh-keys", watch = { "v1/ConfigMap", namespace = "@NS@" },
  watches = { { "v1/ConfigMap", namespace = "@NS@",
    map = function(o) local t = {} for i = 1, 1000 do n = n + 1 t[i] = o.metadata.namespace .. "/fresh-" .. n end return t end } },
  reconcile = function(req) print("fresh key reconciled", req.name) return { requeue_after = 3600 } end,
}
