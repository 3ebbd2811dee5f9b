-- attack: a watches map returning a 2 MiB key, and a key with a NUL byte
-- (the host's bound is 317 bytes, checked on the length: any size past it
-- takes the same path.  The key was 10 MiB; with a state per controller
-- the 10 MiB string and string.rep's 10 MiB build buffer are both this
-- controller's, past its fair share of the tight batch's 64 MiB heap, so
-- the watchdog stopped the map before the host ever saw the key: memory
-- is what the 2-* and 5-load-alloc attacks try.)
-- expect: runs
-- reached: watches map result ignored
local luna = require "luna"
return luna.controller {
  name = "5-map-huge-key", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { none = "none" } },
  watches = { { "v1/ConfigMap", namespace = "@NS@",
    map = function(o) return { ("k"):rep(2 * 2 ^ 20), "a\0b", { namespace = ("n"):rep(1000), name = "x" } } end } },
  reconcile = function() end,
}
