-- attack: ask for a 4 GiB string in one C call
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "5-string-rep-huge", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function() return #string.rep("x", 2 ^ 32) end,
}
