-- Scripts from a ConfigMap volume, updated the kubelet's way while the
-- container runs (--watch, as the Deployment runs it): the new code runs
-- on every object without a relist, a broken script is refused while the
-- old code keeps running (and /readyz says the running code is not the
-- directory's until a reload succeeds), keys come and go, and /readyz stays
-- ready through every good update.
local C = require("17-container.support")

local skip = C.skip_reason()

local BROKEN = [[
local luna = require "luna"
return luna.controller {
  name = "recorder",
  watch = { "v1/ConfigMap" },
  reconcile = function(req)
    return -- a script cut short: no closing brace
]]

describe("scripts from a ConfigMap volume #container", function()
  if skip then
    pending(skip)
    return
  end

  local api, cm, pod, ready
  local samples = {} -- /readyz codes while the directory held good code

  -- "reflector listed" lines of the recorder's informer (debug level).
  local function lists()
    return pod:count("^reflector listed .*informer=v1/ConfigMap ns=" .. api.ns:gsub("%-", "%%-"))
  end

  -- Changes an object so its reconcile runs, and waits for `version` on it.
  local function touch_and_expect(name, version)
    local code = api:request("PATCH", api:ns_path("configmaps", name),
      { metadata = { annotations = { ["luna-ct/version"] = "touched" } } },
      { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
    C.wait(function() return api:versions()[name] == version end, 30,
      name .. " reconciled by " .. version)
  end

  setup(function()
    api = C.apiserver()
    api:make_objects(3)
    cm = C.configmap({ ["recorder.lua"] = C.recorder(api.ns, "v1") })
    pod = C.pod(api, cm, { args = { "--log-level=debug" } })
    pod:await("caches synced", 60)
    C.wait(function() return api:all_stamped("v1", 3) end, 60, "v1 on every object")
    ready = pod:sampler(C.port("health"), "/readyz")
  end)

  teardown(function()
    if ready then ready.stop() end
    if api then api:stop() end
  end)

  it("runs the kubelet's update on every object, keeping the informer's cache", function()
    local watching = false
    for _, a in ipairs(pod.args) do watching = watching or a == "--watch" or a == "--watch=true" end
    assert.is_true(watching, "the Deployment runs luna without --watch")
    local listed = lists()
    assert.equal(1, listed)
    local before = pod:metrics()
    cm:update({ ["recorder.lua"] = C.recorder(api.ns, "v2") })
    pod:await("reload requested trigger=watch", 30)
    pod:await("reload done .*changed=1", 30)
    pod:await("controller changed controller=recorder enqueued=3", 5)
    C.wait(function() return api:all_stamped("v2", 3) end, 30, "v2 on every object")
    assert.equal(listed, lists(), "the reload relisted:\n" .. pod:dump())
    local after = pod:metrics()
    local resource = { resource = "v1/configmaps ns=" .. api.ns .. " labels=app=luna-ct" }
    assert.equal(3, C.metric(after, "luna_informer_objects", resource))
    assert.equal(0, C.metric(after, "luna_informer_relists_total", resource))
    assert.equal(C.metric(before, "luna_watch_restarts_total", { resource = resource.resource, reason = "closed" }) or 0,
      C.metric(after, "luna_watch_restarts_total", { resource = resource.resource, reason = "closed" }) or 0)
    assert.equal((C.metric(before, "luna_reloads_total", { result = "success" }) or 0) + 1,
      C.metric(after, "luna_reloads_total", { result = "success" }))
  end)

  it("refuses a broken script and keeps running the old code", function()
    for _, c in ipairs(ready.stop()) do samples[#samples + 1] = c end
    ready = nil
    local failures = C.metric(pod:metrics(), "luna_reloads_total", { result = "failure" }) or 0
    local from = #pod.lines + 1
    cm:update({ ["recorder.lua"] = BROKEN })
    local rec = pod:await("reload failed", 30, from)
    assert.matches("recorder%.lua", rec.error)
    assert.equal(failures + 1, C.metric(pod:metrics(), "luna_reloads_total", { result = "failure" }))
    -- the v2 code still reconciles what changes
    touch_and_expect("ct-1", "v2")
    assert.is_true(pod:running())
    -- not ready: the code running is not the ConfigMap's
    local code, body = pod:http(C.port("health"), "/readyz/controllers-current")
    assert.equal(500, code)
    assert.matches("[-]controllers-current failed: reload refused, the old code runs on: ", body, 1, true)
    assert.equal(1, C.metric(pod:metrics(), "luna_controllers_stale"))
  end)

  it("adds and removes controllers as keys come and go", function()
    local second = C.recorder(api.ns, "v3"):gsub('name = "recorder"', 'name = "second"')
    cm:update({ ["recorder.lua"] = C.recorder(api.ns, "v3"), ["second.lua"] = second })
    pod:await("controller added controller=second", 30)
    pod:await("reload done .*controllers=2", 10)
    C.wait(function() return pod:http(C.port("health"), "/readyz") == 200 end, 30, "ready again")
    ready = pod:sampler(C.port("health"), "/readyz")
    C.wait(function() return api:all_stamped("v3", 3) end, 30, "v3 on every object")
    local from = #pod.lines + 1
    cm:update({ ["recorder.lua"] = C.recorder(api.ns, "v4") })
    pod:await("controller removed controller=second", 30, from)
    pod:await("reload done .*controllers=1", 10, from)
    touch_and_expect("ct-2", "v4")
    -- the informer both shared was never listed again
    assert.equal(1, lists())
  end)

  it("stayed ready through every good update", function()
    local codes = samples
    for _, c in ipairs(ready.stop()) do codes[#codes + 1] = c end
    ready = nil
    assert.is_true(#codes > 10, "too few /readyz samples: " .. #codes)
    for i, c in ipairs(codes) do
      assert.equal(200, c, ("sample %d of %d was %d"):format(i, #codes, c))
    end
  end)
end)
