-- attack: a controller name of 100,000 characters (log lines, metric labels)
-- expect: refused
-- error: must be a lowercase DNS-style name
local luna = require "luna"
return luna.controller { name = string.rep("a", 100000), watch = "v1/ConfigMap",
  reconcile = function() end }
