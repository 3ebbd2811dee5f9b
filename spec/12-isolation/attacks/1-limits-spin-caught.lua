-- attack: no limits of its own: spin, catch the stop with pcall in a loop, and spin again until SIGTERM
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "1-limits-spin-caught", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function()
    while true do pcall(function() while true do end end) end
  end,
}
