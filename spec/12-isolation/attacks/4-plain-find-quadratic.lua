-- attack: a plain find whose naive search is quadratic
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-plain-find-quadratic", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    local hay = ("a"):rep(4e6)
    local needle = ("a"):rep(2e6) .. "b"
    return hay:find(needle, 1, true)
  end,
}
