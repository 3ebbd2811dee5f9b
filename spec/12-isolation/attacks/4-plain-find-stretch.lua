-- attack: a loop of plain finds in an 8 MB string, each one C call of tens of ms: the hook reads the clock only every 1,000 instructions
-- expect: runs
-- reached: plain finds started
local luna = require "luna"
local hay = ("a"):rep(8e6)
local needle = ("a"):rep(3000) .. "b"
return luna.controller {
  name = "4-plain-find-stretch", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- half a second: the loop is back well within /healthz's bound, and the
  -- deadline alarm, not the hook's clock reads, is what ends the stretch
  limits = { seconds = 0.5 },
  reconcile = function(req)
    luna.log.info("plain finds started")
    -- pcall does not swallow the stop; the deadline alarm ends the stretch
    -- after the find running at the budget's end returns
    pcall(function() for _ = 1, 1e9 do hay:find(needle, 1, true) end end)
  end,
}
