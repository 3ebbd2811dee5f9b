-- attack: an instruction budget as a string with a __tostring-free "inf"
-- expect: refused
-- error: not a string
local luna = require "luna"
return luna.controller {
  name = "1-limits-string-instructions", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { instructions = "inf" },
  reconcile = function() while true do end end,
}
