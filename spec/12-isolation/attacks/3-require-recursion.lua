-- attack: a module that requires itself through a chain of requires, and a require inside a gsub callback
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-require-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function()
    local function f(d) if d > 10000 then return "x" end return (("x"):gsub("x", function() pcall(require, "no.such.module") return f(d + 1) end)) end
    return f(0)
  end,
}
