-- attack: recurse through string.format calling a __tostring that formats
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-format-tostring-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local mt = {}
    mt.__tostring = function(v) return string.format("%s", v) end
    return string.format("%s", setmetatable({}, mt))
  end,
}
