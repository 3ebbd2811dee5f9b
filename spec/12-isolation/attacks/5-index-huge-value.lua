-- attack: an index value of 8 MiB for every object (C memory outside the Lua cap;
-- 8 MiB: the file's share of the runner's 64 MiB heap is 32 MiB, and building
-- the string takes twice its size)
-- expect: runs
local luna = require "luna"
local big = ("x"):rep(8 * 2 ^ 20)
return luna.controller {
  name = "5-index-huge-value", watch = { "v1/ConfigMap", namespace = "@NS@" },
  indexes = { by_big = function() return big end },
  reconcile = function() end,
}
