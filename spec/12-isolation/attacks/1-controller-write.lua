-- attack: change the controller luna.controller returned before returning it
-- expect: refused
-- error: read-only
local luna = require "luna"
local c = luna.controller {
  name = "1-controller-write", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function() end,
}
c.owns = { "v1/Secret", "v1/Secret" }
return c
