-- attack: a watches map returning a 10 MiB key, and a key with a NUL byte
-- expect: runs
-- reached: watches map result ignored
local luna = require "luna"
return luna.controller {
  name = "5-map-huge-key", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { none = "none" } },
  watches = { { "v1/ConfigMap", namespace = "@NS@",
    map = function(o) return { ("k"):rep(10 * 2 ^ 20), "a\0b", { namespace = ("n"):rep(1000), name = "x" } } end } },
  reconcile = function() end,
}
