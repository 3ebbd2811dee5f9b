-- attack: number keys in a labels table (lua_tostring would convert them in place during lua_next)
-- expect: refused
-- error: must map strings to strings
local luna = require "luna"
return luna.controller {
  name = "1-labels-number-keys",
  watch = { "v1/ConfigMap", namespace = "@NS@", labels = { [1] = "a", [2.5] = "b", app = "x" } },
  reconcile = function() end,
}
