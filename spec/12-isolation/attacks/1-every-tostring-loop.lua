-- attack: an `every` that is a table whose __tostring loops (the spec reader must not call it)
-- expect: refused
-- error: controller field 'every' must be a number of seconds (1 to 31536000) or a cron schedule
local luna = require "luna"
return luna.controller {
  name = "1-every-tostring-loop", watch = { "v1/ConfigMap", namespace = "@NS@" },
  every = setmetatable({}, { __tostring = function() while true do end end }),
  reconcile = function() end,
}
