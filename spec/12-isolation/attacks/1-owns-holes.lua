-- attack: an owns "list" with holes and extra keys
-- expect: refused
-- error: controller field 'owns' must be a list
local luna = require "luna"
return luna.controller {
  name = "1-owns-holes", watch = { "v1/ConfigMap", namespace = "@NS@" },
  owns = { [1] = "v1/Secret", [3] = "v1/Secret", [1e9] = "v1/Secret", x = "v1/Secret" },
  reconcile = function() end,
}
