-- attack: a map function on the primary watch, where it would be silently ignored
-- expect: refused
-- error: a map function only applies to watches
local luna = require "luna"
return luna.controller {
  name = "1-map-on-watch", watch = { "v1/ConfigMap", namespace = "@NS@", map = function() return "x/y" end },
  reconcile = function() end,
}
