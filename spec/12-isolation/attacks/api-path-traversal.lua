-- attack: path traversal and query injection through names and namespaces
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "api-path-traversal", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function()
    luna.get("v1/ConfigMap", "..", "..")
    luna.get("v1/ConfigMap", "../../../api/v1/namespaces/kube-system/secrets", "x")
    luna.get("v1/ConfigMap", "@NS@", "x?watch=true&resourceVersion=0")
    luna.delete("v1/ConfigMap", "@NS@", "../target-a")
    luna.get("v1/ConfigMap", "@NS@", "a\0b")
    luna.get("v1/ConfigMap", "@NS@", "a\r\nX-Injected: 1")
  end,
}
