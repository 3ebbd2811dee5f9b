-- attack: a loop of json.decode calls on 6 MB of whitespace, each one long C call
-- expect: runs
-- reached: decodes started
local luna = require "luna"
local json = require("luna.core").json
local text = (" "):rep(6e6) .. "1"
return luna.controller {
  name = "4-decode-whitespace-stretch", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- half a second: the loop is back well within /healthz's bound, and the
  -- deadline alarm, not the hook's clock reads, is what ends the stretch
  limits = { seconds = 0.5 },
  reconcile = function(req)
    luna.log.info("decodes started")
    for _ = 1, 1e9 do json.decode(text) end
  end,
}
