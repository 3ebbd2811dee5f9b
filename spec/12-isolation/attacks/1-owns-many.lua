-- attack: a thousand owned kinds (a thousand informers)
-- expect: refused
-- error: has more than 64 entries
local luna = require "luna"
local owns = {}
for i = 1, 1000 do owns[i] = "v1/Secret" end
return luna.controller {
  name = "1-owns-many", watch = { "v1/ConfigMap", namespace = "@NS@" }, owns = owns,
  reconcile = function() end,
}
