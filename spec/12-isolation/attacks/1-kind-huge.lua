-- attack: a kind string of a megabyte
-- expect: refused
-- error: invalid kind
local luna = require "luna"
return luna.controller {
  name = "1-kind-huge", watch = { "v1/" .. ("A"):rep(1e6), namespace = "@NS@" },
  reconcile = function() end,
}
