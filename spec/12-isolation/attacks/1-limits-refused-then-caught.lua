-- attack: have the refusal of limits 0 caught by pcall, then return a controller that spins
-- expect: runs
-- reached: limits refused
local luna = require "luna"
local ok, err = pcall(luna.controller, { name = "x", watch = "v1/ConfigMap",
  limits = { instructions = 0, seconds = 0 }, reconcile = function() end })
return luna.controller {
  name = "1-limits-refused-then-caught", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function()
    print("limits refused", ok, err ~= nil)
    while true do end
  end,
}
