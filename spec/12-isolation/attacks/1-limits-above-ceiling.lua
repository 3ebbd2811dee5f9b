-- attack: a time budget a little above any ceiling the runner's hosts set, then spin
-- expect: refused
-- error: controller field 'limits.seconds' must be a number > 0 and <=
local luna = require "luna"
return luna.controller {
  name = "1-limits-above-ceiling", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { seconds = 2.001 },
  reconcile = function() while true do end end,
}
