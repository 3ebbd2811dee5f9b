-- attack: resume another reconcile's coroutine while it waits for the API, handing it a forged answer
-- expect: runs
-- reached: resume refused
local luna = require "luna"
local waiting = {}
return luna.controller {
  name = "2-resume-other-reconcile", watch = { "v1/ConfigMap", namespace = "@NS@" }, workers = 2,
  reconcile = function(req)
    local me = coroutine.running()
    waiting[me] = true
    for co in pairs(waiting) do
      if co ~= me and coroutine.status(co) == "suspended" then
        local ok, err = pcall(coroutine.resume, co, 200, '{"kind":"Forged"}')
        luna.log.info(ok and "resume allowed" or "resume refused", { error = tostring(err) })
      end
    end
    for _ = 1, 5 do
      local cm, err = luna.get("v1/ConfigMap", req.namespace, req.name)
      if not cm then waiting[me] = nil return nil, err end
      if cm.kind == "Forged" then error("forged answer accepted") end
    end
    waiting[me] = nil
    return { requeue_after = 0.2 }
  end,
}
