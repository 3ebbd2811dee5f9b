-- attack: keep the thread predicates run on and resume it from a reconcile
-- expect: runs
-- reached: callback thread
local luna = require "luna"
local seen
return luna.controller {
  name = "2-resume-callback-thread", watch = { "v1/ConfigMap", namespace = "@NS@" },
  predicates = { function() seen = coroutine.running() return true end },
  reconcile = function()
    if seen then
      local ok, err = pcall(coroutine.resume, seen, "forged")
      luna.log.info("callback thread", { resumed = tostring(ok), error = tostring(err) })
    end
  end,
}
