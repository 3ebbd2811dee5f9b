-- attack: query-string injection through label and field selectors and paging arguments
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "api-selector-injection", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function()
    luna.list("v1/ConfigMap", { namespace = "@NS@", labels = "a=b&watch=true" })
    luna.list("v1/ConfigMap", { namespace = "@NS@", fields = "metadata.name=x#frag", limit = -1 })
    luna.list("v1/ConfigMap", { namespace = "@NS@", continue = "\0\r\n", limit = 1e300 })
    luna.list("v1/ConfigMap", { namespace = "@NS@", labels = { ["a&b"] = "c=d" } })
    return luna.cache("v1/ConfigMap"):list { namespace = "@NS@", labels = "!!!(((" }
  end,
}
