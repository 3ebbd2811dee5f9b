-- The event latency probe (host/cache/event_latency.h): LUNA_EVENT_LATENCY=1 makes
-- `luna run` time each watch event from the informer hand-off to the start
-- of its reconcile, and log the distribution on SIGUSR1 and at exit.
local helpers = require("helpers")
local luna_env = require("support.luna_env")

local SIGUSR1 = 10

local CONTROLLER = [[
local luna = require "luna"
return luna.controller {
  name = "probe", watch = { "v1/ConfigMap", labels = { probe = "yes" } },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    luna.log.info("probe reconciled", { seq = cm and cm.data and cm.data.seq or "none" })
  end,
}
]]

local function touch(env, seq)
  local path = env.srv:ns_path("configmaps", "probed")
  local code = env.srv:request("PATCH", path, { data = { seq = tostring(seq) } },
    { content_type = "application/merge-patch+json" })
  assert.equal(200, code)
  env.luna:expect("probe reconciled.* seq=" .. seq, 15)
end

describe("event latency probe", function()
  it("pairs events with reconcile starts and computes percentiles (C, LeakSanitizer)", function()
    local out, rc = helpers.run_leak_checked(helpers.fixtures .. "/event_latency_c")
    assert.equal(0, rc, out)
    assert.matches("event_latency_c: all ok", out)
    assert.not_matches("LeakSanitizer", out)
  end)

  describe("in luna run", function()
    local env
    after_each(function() if env then env:stop() end env = nil end)

    it("reports watch events matched to reconciles on SIGUSR1, then starts over", function()
      env = luna_env.start{ sources = { ["probe.lua"] = CONTROLLER }, env = { LUNA_EVENT_LATENCY = "1" } }
      env.srv:create_cm("probed", { seq = "0" }, { probe = "yes" })
      env.luna:expect("probe reconciled.* seq=0", 15)
      touch(env, 1)
      touch(env, 2)
      -- a ConfigMap the controller does not watch: no reconcile, no sample
      env.srv:create_cm("ignored", { seq = "x" }, { probe = "no" })
      env.luna:kill(SIGUSR1)
      local line = env.luna:expect("event latency", 10)
      assert.equal("3", line:match(" events=(%d+)"))
      for _, f in ipairs{ "p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms", "recv_p50_ms", "recv_p99_ms" } do
        local v = tonumber(line:match(" " .. f .. "=([%d.]+)"))
        assert.is_number(v, f)
        assert.is_true(v >= 0, f)
      end
      assert.is_true(tonumber(line:match(" p50_ms=([%d.]+)")) <= tonumber(line:match(" max_ms=([%d.]+)")))
      touch(env, 3)
      env.luna:kill(SIGUSR1)
      line = env.luna:expect("event latency", 10)
      assert.equal("1", line:match(" events=(%d+)"))
      local out = env:stop()
      assert.matches("event latency events=0 ", out)
    end)

    it("is off by default and ignores values other than 0 and 1", function()
      env = luna_env.start{ sources = { ["probe.lua"] = CONTROLLER }, env = { LUNA_EVENT_LATENCY = "yes" } }
      env.srv:create_cm("probed", { seq = "0" }, { probe = "yes" })
      env.luna:expect("probe reconciled.* seq=0", 15)
      local out = env:stop()
      assert.matches("LUNA_EVENT_LATENCY ignored value=yes", out)
      assert.not_matches("event latency", out)

      env = luna_env.start{ sources = { ["probe.lua"] = CONTROLLER } }
      out = env:stop()
      assert.not_matches("event latency", out)
    end)
  end)
end)
