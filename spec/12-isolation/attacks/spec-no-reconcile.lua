-- attack: a controller without a reconcile function
-- expect: refused
-- error: needs a 'reconcile' function
local luna = require "luna"
return luna.controller { name = "spec-no-reconcile", watch = "v1/ConfigMap" }
