-- attack: a label selector of ten thousand entries
-- expect: refused
-- error: has more than 64 entries
local luna = require "luna"
local labels = {}
for i = 1, 10000 do labels["k" .. i] = "v" end
return luna.controller {
  name = "1-labels-huge", watch = { "v1/ConfigMap", namespace = "@NS@", labels = labels },
  reconcile = function() end,
}
