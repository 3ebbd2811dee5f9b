-- attack: a spec table whose __index loops for every field the host may look up
-- expect: runs
local luna = require "luna"
return luna.controller(setmetatable({
  name = "1-spec-table-index-loop", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function() end,
}, { __index = function() while true do end end }))
