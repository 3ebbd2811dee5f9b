-- attack: limits = { seconds = false } (a falsy value read as "not set", or as 0)
-- expect: refused
-- error: not a boolean
local luna = require "luna"
return luna.controller {
  name = "1-limits-boolean", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { seconds = false },
  reconcile = function() while true do end end,
}
