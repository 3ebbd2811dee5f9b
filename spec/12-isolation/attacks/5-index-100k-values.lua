-- attack: an index function returning 100,000 values for every object (quadratic de-duplication held the loop for 25 s)
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "5-index-100k-values", watch = { "v1/ConfigMap", namespace = "@NS@" },
  indexes = { by_all = function(o) local t = {} for i = 1, 1e5 do t[i] = "v" .. i end return t end },
  reconcile = function() end,
}
