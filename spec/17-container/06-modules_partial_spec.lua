-- Issue 30 in the container, as the Deployment runs it: a controllers
-- directory with a module (NAME.mod.lua), turned into ConfigMap keys by
-- `make deploy-sync` and mounted as the kubelet mounts them, loads; and a
-- pod whose ConfigMap holds a broken file starts the others and reports it
-- (log, /readyz, metrics, an Event on the pod) instead of exiting.
local C = require("17-container.support")
local helpers = require("helpers")

local skip = C.skip_reason()

local BROKEN = [[
local luna = require "luna"
return luna.controller {
  name = "broken",
  -- cut short: no closing brace
]]

-- The recorder of support.lua, taking its version from a module.
local function recorder_with_module(ns)
  return 'assert(require "ct.version" == "v1", "the module was not found")\n' ..
         C.recorder(ns, "v1")
end

-- The ConfigMap's files as `make deploy-sync` lists them from a
-- controllers directory holding files (name -> content).
local function synced(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  C.must("deploy/sync-controllers.sh " .. dir)
  local out = {}
  local list = assert(helpers.read_file(dir .. "/kustomization.yaml")):match("files:\n(.*)$")
  for key in list:gmatch("  %- (%S+)") do out[key] = assert(helpers.read_file(dir .. "/" .. key)) end
  return out
end

describe("modules and partial starts in the container #container", function()
  if skip then
    pending(skip)
    return
  end

  local api

  setup(function()
    api = C.apiserver()
    api:make_objects(3)
  end)

  teardown(function()
    if api then api:stop() end
  end)

  it("runs controllers that require a module from the ConfigMap deploy-sync makes", function()
    local files = synced({ ["recorder.lua"] = recorder_with_module(api.ns),
                           ["ct.version.mod.lua"] = 'return "v1"\n',
                           ["recorder_test.lua"] = "-- a spec, not a key\n" })
    assert.same({ "ct.version.mod.lua", "recorder.lua" },
                (function() local k = {} for n in pairs(files) do k[#k + 1] = n end table.sort(k) return k end)())
    local pod = C.pod(api, C.configmap(files))
    pod:await("caches synced", 60)
    assert.equal(1, pod:await("controllers loaded", 5).count) -- a JSON number
    C.wait(function() return api:all_stamped("v1", 3) end, 60, "v1 on every object")
    C.wait(function() return pod:http(C.port("health"), "/readyz") == 200 end, 30, "ready")
    assert.equal(0, pod:count("controller load failed"))
    assert.equal(0, (pod:stop()))
  end)

  it("starts the files that load, reports a broken one and stays up", function()
    local name = "luna-ct-partial"
    local pod = C.pod(api, C.configmap(synced({ ["recorder.lua"] = recorder_with_module(api.ns),
                                                ["ct.version.mod.lua"] = 'return "v1"\n',
                                                ["broken.lua"] = BROKEN })), { name = name })
    local rec = pod:await("controllers started without some files", 60)
    assert.equal("broken.lua", rec.files)
    pod:await("caches synced", 60)
    C.wait(function() return api:all_stamped("v1", 3) end, 60, "v1 on every object")
    local code, body = pod:http(C.port("health"), "/readyz?verbose")
    assert.equal(500, code)
    assert.matches("[-]controllers-current failed: 1 of 2 controller files failed to load: broken.lua:",
                   body, 1, true)
    local m = pod:metrics()
    assert.equal(1, C.metric(m, "luna_controller_file_load_failed", { file = "broken.lua" }))
    assert.equal(1, C.metric(m, "luna_controllers_stale"))
    local ev
    local ok, why = pcall(C.wait, function()
      local _, list = api:request("GET", api:ns_path("events"))
      for _, e in ipairs(list.items or {}) do
        if e.reason == "ControllerLoadFailed" and e.involvedObject.name == name then ev = e end
      end
      return ev ~= nil
    end, 30, "the Event on the pod")
    assert(ok, tostring(why) .. "; the pod's log:\n" .. pod:dump())
    assert.equal("Pod", ev.involvedObject.kind)
    assert.matches("^%x+%-%x+%-%x+%-%x+%-%x+$", ev.involvedObject.uid)
    assert.equal("Warning", ev.type)
    assert.is_true(pod:running())
    assert.equal(0, (pod:stop()))
  end)
end)
