-- attack: an index function that never returns
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "5-index-loop", watch = { "v1/ConfigMap", namespace = "@NS@" },
  indexes = { by_loop = function() while true do end end },
  reconcile = function() end,
}
