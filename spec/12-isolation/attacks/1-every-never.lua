-- attack: a cron schedule that never runs (the 30th of February: the next-run search must end)
-- expect: refused
-- error: the schedule never runs
local luna = require "luna"
return luna.controller {
  name = "1-every-never", watch = { "v1/ConfigMap", namespace = "@NS@" },
  every = "0 0 30 2 *",
  reconcile = function() end,
}
