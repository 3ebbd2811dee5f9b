-- attack: recurse through string.format calling a __tostring that formats
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-format-tostring-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    local mt = {}
    mt.__tostring = function(v) return string.format("%s", v) end
    return string.format("%s", setmetatable({}, mt))
  end,
}
