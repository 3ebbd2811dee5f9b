-- luna.schedule across a hot reload: the controller's workqueue moves to
-- the new generation with its waiting keys, so a key scheduled by the old
-- code is reconciled by the new code when it is due (as requeue_after).
local helpers = require("helpers")
local luna_env = require("support.luna_env")

local SIGHUP = 1

local function timer(version, ns)
  return ([[
local luna = require "luna"
return luna.controller {
  name = "timer",
  watch = { "v1/ConfigMap", namespace = %q, labels = { ["luna-spec"] = "timer" } },
  reconcile = function(req)
    if req.name == "due" then
      luna.log.info("timer fired", { version = %q })
      return
    end
    if %q == "v1" then
      luna.schedule(req.namespace .. "/due", { after = 8 })
      luna.log.info("timer scheduled", { key = req.key })
    end
  end,
}
]]):format(ns, version, version)
end

describe("luna.schedule across a reload", function()
  local env
  after_each(function() if env then env:stop() end env = nil end)

  it("fires a key the old code scheduled, in the new code", function()
    env = luna_env.start{ sources = { ["a.lua"] = timer("v1", "none") } }
    local ns = env.srv.ns
    helpers.write_file(env.dir .. "/a.lua", timer("v1", ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    env.srv:create_cm("one", nil, { ["luna-spec"] = "timer" })
    env.luna:expect("timer scheduled", 20)
    helpers.write_file(env.dir .. "/a.lua", timer("v2", ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    local line = env.luna:expect("timer fired[^\n]*", 30)
    assert.matches("v2", line)
  end)
end)
