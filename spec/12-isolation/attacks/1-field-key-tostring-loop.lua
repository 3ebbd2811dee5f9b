-- attack: a spec key that is a table whose __tostring loops (named in the unknown-field error)
-- expect: refused
-- error: controller has unknown field
local luna = require "luna"
return luna.controller {
  name = "1-field-key-tostring-loop", watch = { "v1/ConfigMap", namespace = "@NS@" },
  [setmetatable({}, { __tostring = function() while true do end end })] = true,
  reconcile = function() end,
}
