-- attack: recurse through gsub with a replacement table whose __index calls gsub
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-gsub-table-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local t
    t = setmetatable({}, { __index = function(_, k) return (("x"):gsub("x", t)) end })
    return t.x
  end,
}
