-- attack: the smallest positive budgets (5e-324 s, 1e-300 instructions): a step of zero, a deadline of now
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "1-limits-subnormal", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { instructions = 1e-300, seconds = 5e-324 },
  reconcile = function() local n = 0 while true do n = n + 1 end end,
}
