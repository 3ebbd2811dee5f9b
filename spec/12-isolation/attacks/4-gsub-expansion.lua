-- attack: a gsub whose replacement grows the string a thousandfold
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-gsub-expansion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    return #(("x"):rep(1e5):gsub("x", ("%0"):rep(1000)))
  end,
}
