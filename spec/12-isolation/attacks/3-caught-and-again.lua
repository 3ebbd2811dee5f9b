-- attack: catch the C stack overflow with pcall at depth and recurse again from there
-- expect: runs
-- reached: overflows caught
local luna = require "luna"
return luna.controller {
  name = "3-caught-and-again", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    local n = 0
    local function f(d)
      if d > 0 then return (("x"):gsub("x", function() return f(d - 1) end)) end
      for _ = 1, 50 do
        local ok = pcall(function() local function g() return (("x"):gsub("x", g)) end return g() end)
        if not ok then n = n + 1 end
      end
      return "x"
    end
    f(100)
    luna.log.info("overflows caught", { n = n })
  end,
}
