-- attack: call the API from a predicate (outside any reconcile)
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-api-in-predicate", watch = { "v1/ConfigMap", namespace = "@NS@" },
  predicates = { function(ev) luna.get("v1/ConfigMap", ev.object.metadata.namespace, "x") return true end },
  reconcile = function() end,
}
