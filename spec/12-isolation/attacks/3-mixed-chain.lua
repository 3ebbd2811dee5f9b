-- attack: chain gsub, sort, wrap and xpcall handlers into one recursion
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-mixed-chain", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local f
    f = function(d)
      local k = d % 4
      if k == 0 then return (("x"):gsub("x", function() return f(d + 1) end)) end
      if k == 1 then table.sort({ 2, 1 }, function(a, b) f(d + 1) return a < b end) return "x" end
      if k == 2 then return coroutine.wrap(function() return f(d + 1) end)() end
      return select(2, xpcall(error, function() return f(d + 1) end))
    end
    return f(0)
  end,
}
