-- attack: call the API from a predicate, where nothing may yield
-- expect: runs
-- reached: lua callback failed
local luna = require "luna"
return luna.controller {
  name = "api-outside-reconcile", watch = { "v1/ConfigMap", namespace = "@NS@" },
  predicates = { function(ev) return luna.get("v1/ConfigMap", "@NS@", "target-a") ~= nil end },
  reconcile = function() end,
}
