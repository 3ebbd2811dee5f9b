-- attack: unbounded Lua recursion in reconcile
-- expect: runs
local luna = require "luna"
local function f(n) return f(n + 1) + 1 end
return luna.controller {
  name = "sandbox-stack-overflow", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function() return f(1) end,
}
