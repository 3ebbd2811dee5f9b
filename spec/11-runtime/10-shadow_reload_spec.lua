-- --shadow-reload: a reload first runs the new code in shadow (every write
-- a dry run, every cached key reconciled) beside the live code for the
-- given time, reports the keys where the new code would change what the
-- live code keeps, then goes live as a plain reload.
local helpers = require("helpers")
local rt = require("11-runtime.support")

local OWNER = [[
local luna = require "luna"
return luna.controller {
  name = "owner",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm then return end
    local want = "v1"
    if "@VERSION@" == "v2" and req.name:match("^x%-") then want = "v2" end
    if (cm.data or {}).owner == want then return end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name, { data = { owner = want } })
    if err then return nil, err end
  end,
}
]]

describe("luna run --shadow-reload", function()
  local env
  after_each(function()
    if env then env:stop() end
    env = nil
  end)

  it("tries the new code in shadow, reports where it disagrees, then swaps", function()
    local token = rt.token()
    env = rt.start{ args = { "--shadow-reload=6" },
      sources = { ["owner.lua"] = rt.source(OWNER, { TOKEN = token, VERSION = "v1" }) } }
    for _, name in ipairs({ "x-1", "keep-1" }) do rt.cm(env, name, { k = "v" }, { [rt.LABEL] = token }) end
    local function owner(name)
      local cm = env:get(env.srv:ns_path("configmaps", name))
      return cm and cm.data and cm.data.owner
    end
    env:wait(function() return owner("x-1") == "v1" and owner("keep-1") == "v1" end, 15, "v1 owning both")

    helpers.write_file(env.dir .. "/owner.lua", rt.source(OWNER, { TOKEN = token, VERSION = "v2" }))
    env.luna:kill(1)
    rt.wait(env, rt.msg("reload shadow started", { seconds = 6 }), 15, "the shadow window")
    local key = env.srv.ns .. "/x-1"
    -- within the window: the new code's write was a dry run
    local w = rt.wait(env, rt.msg("shadow write", { controller = "owner", key = key }), 15, "the dry run")
    assert.same({ "patch", true, '{"data":{"owner":"v2"}}' }, { w.verb, w.changed, w.diff })
    assert.equal("v1", owner("x-1"), "the shadow wrote")
    assert.is_nil(rt.find(env, rt.msg("reload shadow report")), "the window ended before the check")
    local d = rt.wait(env, rt.msg("reload shadow disagreement", { controller = "owner", key = key }), 15,
      "the disagreement")
    assert.equal("patch v1/ConfigMap " .. key, d.write)
    local report = rt.wait(env, rt.msg("reload shadow report", { controller = "owner" }), 15, "the report")
    assert.same({ 1, 0, key, "warn" }, { report.disagreeing, report.errors, report.keys, report.level })
    assert.is_nil(rt.find(env, rt.msg("reload shadow disagreement", { key = env.srv.ns .. "/keep-1" })))
    rt.wait(env, rt.msg("reload done", { result = "success" }), 15, "the swap")
    env:wait(function() return owner("x-1") == "v2" end, 15, "v2 live")
    assert.equal("v1", owner("keep-1"))
  end)

  -- The candidate's recorder must not share the live controller's Event
  -- memory: it used to bump the live entry's count and then forget it
  -- (a dry run records nothing), so the next live Event for that object
  -- was created anew instead of counted on the existing one.
  local GREETER = [[
local luna = require "luna"
return luna.controller {
  name = "greeter",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm then return end
    local ok, err = luna.event(cm, "Normal", "Hello", "hello from the greeter")
    luna.log.info("evented", { version = "@VERSION@", error = ok and "none" or tostring(err) })
  end,
}
]]

  it("keeps the live code's Event memory out of the candidate's reach", function()
    local token = rt.token()
    env = rt.start{ args = { "--shadow-reload=3" },
      sources = { ["greeter.lua"] = rt.source(GREETER, { TOKEN = token, VERSION = "v1" }) } }
    rt.cm(env, "hello-1", { k = "v" }, { [rt.LABEL] = token })
    local first = rt.wait(env, rt.msg("evented", { version = "v1" }), 15, "the live Event")
    assert.equal("none", first.error)
    helpers.write_file(env.dir .. "/greeter.lua", rt.source(GREETER, { TOKEN = token, VERSION = "v2" }))
    env.luna:kill(1)
    rt.wait(env, rt.msg("shadow write", { controller = "greeter", verb = "event" }), 15, "the candidate's Event")
    rt.wait(env, rt.msg("reload done", { result = "success" }), 15, "the swap")
    -- the candidate's dry run, then the new live code's Event
    local v2 = rt.wait_count(env, rt.msg("evented", { version = "v2" }), 2, 15, "the new live Event")
    for _, r in ipairs(v2) do assert.equal("none", r.error) end
    local _, list = env.srv:request("GET", "/apis/events.k8s.io/v1/namespaces/" .. env.srv.ns .. "/events")
    local hello = {}
    for _, e in ipairs(list and list.items or {}) do
      if e.reason == "Hello" then hello[#hello + 1] = e end
    end
    assert.equal(1, #hello, "the live Event was recorded twice")
    assert.equal(2, hello[1].series and hello[1].series.count)
  end)

  it("refuses --shadow with --shadow-reload, and a bad duration", function()
    local out, rc = helpers.run(helpers.luna .. " run --shadow --shadow-reload=5 /nonexistent")
    assert.equal(2, rc, out)
    assert.matches("with --shadow nothing goes live", out, 1, true)
    out, rc = helpers.run(helpers.luna .. " run --shadow-reload=soon /nonexistent")
    assert.equal(2, rc, out)
    assert.matches("--shadow-reload=soon: want a duration", out, 1, true)
  end)
end)
