-- attack: catch an API call inside pcall, then raise with the call done
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-pcall-get-then-error", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local ok, cm = pcall(luna.get, "v1/ConfigMap", req.namespace, req.name)
    if not ok then return nil, cm end
    error({ code = 1 })
  end,
}
