-- attack: switch the watchdog off with the "0: none" the docs once promised, then spin forever
-- expect: refused
-- error: 0 does not mean unlimited
local luna = require "luna"
return luna.controller {
  name = "1-limits-zero", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { instructions = 0, seconds = 0 },
  reconcile = function() while true do end end,
}
