-- attack: a controller name that is a table whose __tostring loops
-- expect: refused
-- error: controller field 'name' must be a lowercase DNS-style name
local luna = require "luna"
return luna.controller {
  name = setmetatable({}, { __tostring = function() while true do end end }),
  watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function() end,
}
