-- attack: call the API from a string.gsub replacement function
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-gsub-callback-get", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    return (("abc"):gsub("%w", function(ch) luna.get("v1/ConfigMap", req.namespace, req.name) return ch end))
  end,
}
