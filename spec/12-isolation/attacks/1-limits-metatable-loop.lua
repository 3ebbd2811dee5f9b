-- attack: limits whose __index loops forever (hung a running host on reload)
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "1-limits-metatable-loop", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = setmetatable({}, { __index = function() while true do end end }),
  rate_limit = setmetatable({}, { __index = function() while true do end end }),
  reconcile = function() end,
}
