-- attack: an index value of 16 MiB for every object (C memory outside the Lua cap)
-- expect: runs
local luna = require "luna"
local big = ("x"):rep(16 * 2 ^ 20)
return luna.controller {
  name = "5-index-huge-value", watch = { "v1/ConfigMap", namespace = "@NS@" },
  indexes = { by_big = function() return big end },
  reconcile = function() end,
}
