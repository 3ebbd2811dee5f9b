-- attack: a cron schedule of a megabyte (the parser must refuse it by length, not walk it)
-- expect: refused
-- error: a schedule of at most 128 bytes
local luna = require "luna"
return luna.controller {
  name = "1-every-cron-huge", watch = { "v1/ConfigMap", namespace = "@NS@" },
  every = string.rep("1,", 500000) .. "1 * * * *",
  reconcile = function() end,
}
