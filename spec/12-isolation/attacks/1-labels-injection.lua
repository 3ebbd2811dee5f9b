-- attack: smuggle a second requirement into a label selector through a value
-- expect: refused
-- error: is not a valid label key and value
local luna = require "luna"
return luna.controller {
  name = "1-labels-injection",
  watch = { "v1/ConfigMap", namespace = "@NS@", labels = { app = "x,evil!=1" } },
  reconcile = function() end,
}
