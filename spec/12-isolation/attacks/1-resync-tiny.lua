-- attack: a resync of a nanosecond that burns a core
-- expect: refused
-- error: controller field 'resync' must be
local luna = require "luna"
return luna.controller {
  name = "1-resync-tiny", watch = { "v1/ConfigMap", namespace = "@NS@" }, resync = 1e-9,
  reconcile = function() end,
}
