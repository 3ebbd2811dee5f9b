-- attack: a plain find whose naive search is quadratic
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-plain-find-quadratic", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local hay = ("a"):rep(4e6)
    local needle = ("a"):rep(2e6) .. "b"
    return hay:find(needle, 1, true)
  end,
}
