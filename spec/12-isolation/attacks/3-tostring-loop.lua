-- attack: recurse through tostring calling a __tostring that calls tostring (no C frames: the watchdog's)
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-tostring-loop", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    local mt = {}
    mt.__tostring = function(v) return tostring(v) end
    return tostring(setmetatable({}, mt))
  end,
}
