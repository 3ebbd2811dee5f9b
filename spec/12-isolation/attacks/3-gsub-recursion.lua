-- attack: recurse through string.gsub replacement functions until the C stack overflows (segfault)
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-gsub-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local function f() return (("x"):gsub("x", f)) end
    return f()
  end,
}
