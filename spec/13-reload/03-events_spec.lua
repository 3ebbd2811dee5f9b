-- luna.event's de-duplication memory survives reloads, as the caches do:
-- the same Event recorded before and after two reloads stays one Event
-- whose series count grows (client-go's recorder keeps its memory for the
-- life of the process).
local helpers = require("helpers")
local rt = require("11-runtime.support")

local SIGHUP = 1

-- Records the same Event on every reconcile of the labelled ConfigMap;
-- `version` only changes the file, so a reload re-enqueues every key.
local function recorder(token, version)
  return rt.source([[
local luna = require "luna"
-- version @VERSION@
return luna.controller {
  name = "eventful",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm then return end
    local ok, err = luna.event(cm, "Warning", "StillBroken", "the same note every time")
    luna.log.info("event recorded", { version = "@VERSION@", ok = tostring(ok), err = tostring(err) })
  end,
}
]], { TOKEN = token, VERSION = version })
end

local function events_about(env, name)
  local code, list = env.srv:request("GET", "/apis/events.k8s.io/v1/namespaces/" .. env.srv.ns .. "/events")
  assert.equal(200, code)
  local out = {}
  for _, ev in ipairs(list.items) do
    if ev.regarding and ev.regarding.name == name and ev.reason == "StillBroken" then out[#out + 1] = ev end
  end
  return out
end

local function count_of(ev)
  return ev.series and ev.series.count or 1
end

describe("the Event memory (api/event_memory.h)", function()
  it("is a bounded least recently used map per controller, freed without leaks", function()
    local out, rc = helpers.run_leak_checked(helpers.fixtures .. "/event_memory_c")
    assert.equal(0, rc, out)
    assert.matches("event_memory_c: all ok", out)
  end)
end)

describe("Event de-duplication across reloads #integration", function()
  local env
  after_each(function() if env then env:stop() end env = nil end)

  it("keeps a repeated Event one Event with a growing count through two reloads", function()
    local token = rt.token()
    env = rt.start{ sources = { ["a.lua"] = recorder(token, "v1") } }
    rt.cm(env, "broken", {}, { [rt.LABEL] = token })
    local rec = rt.wait(env, rt.msg("event recorded", { version = "v1" }), 20, "the first Event")
    assert.equal("true", rec.ok, rec.err)
    for i, version in ipairs({ "v2", "v3" }) do
      helpers.write_file(env.dir .. "/a.lua", recorder(token, version))
      env.luna:kill(SIGHUP)
      rt.wait_count(env, rt.msg("reload done", { result = "success" }), i, 20, "reload " .. i)
      rec = rt.wait(env, rt.msg("event recorded", { version = version }), 20, "the Event from " .. version)
      assert.equal("true", rec.ok, rec.err)
    end
    local evs = events_about(env, "broken")
    assert.equal(1, #evs, "one Event, not one per reload")
    assert.equal(3, count_of(evs[1]))
    assert.equal("luna.dev/eventful", evs[1].reportingController)
  end)
end)
