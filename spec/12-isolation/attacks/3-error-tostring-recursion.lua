-- attack: fail with an error object whose __tostring (run by the host to log it) recurses through gsub
-- expect: runs
local luna = require "luna"
local mt = {}
mt.__tostring = function(e) return (("x"):gsub("x", function() return tostring(e) end)) end
return luna.controller {
  name = "3-error-tostring-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function() error(setmetatable({}, mt)) end,
}
