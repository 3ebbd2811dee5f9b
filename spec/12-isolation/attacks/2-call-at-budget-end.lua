-- attack: start an API call just as the time budget runs out
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-call-at-budget-end", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { seconds = 0.1 },
  reconcile = function(req)
    local t = os.clock()
    while os.clock() - t < 0.09 do end
    for _ = 1, 50 do luna.get("v1/ConfigMap", req.namespace, req.name) end
    while true do end
  end,
}
