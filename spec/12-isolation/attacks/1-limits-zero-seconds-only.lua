-- attack: keep an instruction budget but take the clock off, then spend the time in C calls
-- expect: refused
-- error: controller field 'limits.seconds' must be a number > 0
local luna = require "luna"
return luna.controller {
  name = "1-limits-zero-seconds-only", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { instructions = 1e6, seconds = 0 },
  reconcile = function() local s = ("a"):rep(1e6) while true do s:find("b", 1, true) end end,
}
