-- attack: recurse through tostring calling a __tostring that calls tostring (no C frames: the watchdog's)
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-tostring-loop", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local mt = {}
    mt.__tostring = function(v) return tostring(v) end
    return tostring(setmetatable({}, mt))
  end,
}
