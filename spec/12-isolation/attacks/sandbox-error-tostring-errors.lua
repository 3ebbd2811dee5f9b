-- attack: fail with an error object whose __tostring raises another such object
-- expect: runs
local luna = require "luna"
local mt = {}
mt.__tostring = function() error(setmetatable({}, mt)) end
return luna.controller {
  name = "sandbox-error-tostring-errors", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function() return nil, setmetatable({}, mt) end,
}
