-- Startup is not all or nothing (issue 30.2): `luna run` starts the files
-- that load and reports the others in the log, /readyz (the
-- "controllers-current" check), metrics and an Event on its pod;
-- --require-all keeps the old exit 1; a refused reload turns the check red
-- until a reload succeeds, while the old code keeps running.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local S = require("15-production.support")

local SIGHUP = 1

-- Stamps `version` into the annotation "stamp" of the ConfigMaps of ns.
local function stamper(name, version, ns)
  return ([[
local luna = require "luna"
return luna.controller {
  name = %q,
  watch = { "v1/ConfigMap", namespace = %q },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm or luna.meta.annotation(cm, %q) == %q then return end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name,
      { metadata = { annotations = { [%q] = %q } } })
    if err then return nil, err end
  end,
}
]]):format(name, ns, name, version, name, version)
end

local BROKEN = [[
local luna = require "luna"
return luna.controller {
  name = "broken",
  -- cut short: no closing brace
]]

local function stamp(srv, cm, name)
  local code, obj = srv:request("GET", srv:ns_path("configmaps", cm))
  if code ~= 200 then return nil end
  return (obj.metadata.annotations or {})[name]
end

local function ready(luna, path)
  return S.get(luna.health .. (path or "/readyz"))
end

describe("a start with files that fail to load", function()
  local srv, luna
  before_each(function() srv = client.start() end)
  after_each(function()
    if luna then luna:stop() end
    luna = nil
    srv:stop()
  end)

  it("runs the files that load and reports the others everywhere", function()
    local dir = S.controllers({ ["good.lua"] = stamper("good", "v1", srv.ns), ["bad.lua"] = BROKEN })
    srv:create_cm("cm-1")
    luna = S.start(srv, dir, { name = "luna-pod-1", pod_namespace = srv.ns })
    luna:await("controller load failed file=[^ ]*/bad%.lua", 10)
    local line = luna:await("controllers started without some files", 10)
    assert.matches("failed=1", line)
    assert.matches("files=bad%.lua", line)
    luna:await("controllers loaded[^\n]*count=1", 10)
    helpers.eventually(function() return stamp(srv, "cm-1", "good") == "v1" end, 20, "good runs")
    -- the informers are synced, yet not ready: the code on disk is not running
    helpers.eventually(function() return ready(luna, "/readyz/informers-synced") == 200 end, 20, "synced")
    local code, body = ready(luna, "/readyz?verbose")
    assert.equal(500, code)
    assert.matches("[-]controllers-current failed: 1 of 2 controller files failed to load: " ..
                   "bad.lua:5: unexpected symbol near '<eof>'\n", body, 1, true)
    assert.equal(500, (ready(luna, "/readyz/controllers-current")))
    local m = S.scrape(luna)
    assert.equal(1, S.value(m, "luna_controller_file_load_failed", { file = "bad.lua" }))
    assert.is_nil(S.value(m, "luna_controller_file_load_failed", { file = "good.lua" }))
    assert.equal(1, S.value(m, "luna_controllers_stale"))
    -- a Warning Event on the pod (core/v1, what `kubectl describe pod` lists)
    local ev
    helpers.eventually(function()
      local _, list = srv:request("GET", srv:ns_path("events"))
      for _, e in ipairs(list.items or {}) do
        if e.reason == "ControllerLoadFailed" then ev = e end
      end
      return ev ~= nil
    end, 10, "the Event")
    assert.same({ kind = "Pod", name = "luna-pod-1", namespace = srv.ns, apiVersion = "v1" },
                { kind = ev.involvedObject.kind, name = ev.involvedObject.name,
                  namespace = ev.involvedObject.namespace, apiVersion = ev.involvedObject.apiVersion })
    assert.equal("Warning", ev.type)
    assert.matches("bad%.lua", ev.message)
    assert.equal(1, ev.count)
    local TIME = "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$"
    assert.matches(TIME, ev.firstTimestamp)
    assert.matches(TIME, ev.lastTimestamp)

    -- fixed: the reload takes every file, the check and metrics clear
    helpers.write_file(dir .. "/bad.lua", stamper("bad", "v1", srv.ns))
    luna:kill(SIGHUP)
    luna:await("reload done", 20)
    helpers.eventually(function() return stamp(srv, "cm-1", "bad") == "v1" end, 20, "bad runs")
    helpers.eventually(function() return ready(luna) == 200 end, 20, "ready")
    m = S.scrape(luna)
    assert.is_nil(S.value(m, "luna_controller_file_load_failed", { file = "bad.lua" }))
    assert.equal(0, S.value(m, "luna_controllers_stale"))
  end)

  it("takes updates to the files that run while a failing one still fails", function()
    local dir = S.controllers({ ["good.lua"] = stamper("good", "v1", srv.ns), ["bad.lua"] = BROKEN })
    srv:create_cm("cm-1")
    luna = S.start(srv, dir)
    helpers.eventually(function() return stamp(srv, "cm-1", "good") == "v1" end, 20, "v1")
    helpers.write_file(dir .. "/good.lua", stamper("good", "v2", srv.ns))
    luna:kill(SIGHUP)
    luna:await("reload done", 20)
    helpers.eventually(function() return stamp(srv, "cm-1", "good") == "v2" end, 20, "v2")
    local code, body = ready(luna, "/readyz/controllers-current")
    assert.equal(500, code)
    assert.matches("bad.lua", body, 1, true)
    -- a file that fails now and ran before (or never ran) is refused
    helpers.write_file(dir .. "/good.lua", BROKEN)
    luna:kill(SIGHUP)
    luna:await("reload failed", 20)
    assert.equal(1, S.value(S.scrape(luna), "luna_reloads_total", { result = "failure" }))
  end)

  it("says there is no Event when the pod is not known (no POD_NAME/POD_NAMESPACE)", function()
    local dir = S.controllers({ ["good.lua"] = stamper("good", "v1", srv.ns), ["bad.lua"] = BROKEN })
    luna = S.start(srv, dir)
    luna:await("no Event for the load failures: POD_NAME and POD_NAMESPACE are not both set", 10)
  end)

  it("exits 1 with --require-all, as when every file fails", function()
    local dir = S.controllers({ ["good.lua"] = stamper("good", "v1", srv.ns), ["bad.lua"] = BROKEN })
    local argv = { helpers.luna, "run", "--require-all", "--kubeconfig", S.kubeconfig_for(srv),
                   "--metrics-bind-address=0", "--health-probe-bind-address=0", dir }
    local p = helpers.spawn(argv, { env = { KUBECONFIG = false } })
    p:expect("controllers failed to load[^\n]*1 of 2 controller files failed to load", 10)
    assert.equal(1, p:wait(20))
    local all_bad = S.controllers({ ["bad.lua"] = BROKEN })
    argv[3] = "--log-level=info"
    argv[#argv] = all_bad
    p = helpers.spawn(argv, { env = { KUBECONFIG = false } })
    p:expect("controllers failed to load[^\n]*1 of 1 controller files failed to load", 10)
    assert.equal(1, p:wait(20))
  end)
end)

describe("a refused reload", function()
  local srv, luna
  before_each(function() srv = client.start() end)
  after_each(function()
    if luna then luna:stop() end
    luna = nil
    srv:stop()
  end)

  it("turns controllers-current red while the old code runs, until a reload succeeds", function()
    local dir = S.controllers({ ["good.lua"] = stamper("good", "v1", srv.ns) })
    srv:create_cm("cm-1")
    luna = S.start(srv, dir)
    helpers.eventually(function() return ready(luna) == 200 end, 20, "ready")
    local code, body = ready(luna, "/readyz?verbose")
    assert.matches("[+]controllers-current ok", body, 1, true)
    helpers.write_file(dir .. "/good.lua", BROKEN)
    luna:kill(SIGHUP)
    luna:await("reload failed", 20)
    code, body = ready(luna, "/readyz/controllers-current")
    assert.equal(500, code)
    assert.matches("[-]controllers-current failed: reload refused, the old code runs on: ", body, 1, true)
    assert.matches("good.lua", body, 1, true)
    assert.equal(1, S.value(S.scrape(luna), "luna_controllers_stale"))
    -- the old code still runs
    srv:create_cm("cm-2")
    helpers.eventually(function() return stamp(srv, "cm-2", "good") == "v1" end, 20, "old code runs")
    helpers.write_file(dir .. "/good.lua", stamper("good", "v2", srv.ns))
    luna:kill(SIGHUP)
    luna:await("reload done", 20)
    helpers.eventually(function() return ready(luna) == 200 end, 20, "ready again")
    assert.equal(0, S.value(S.scrape(luna), "luna_controllers_stale"))
  end)
end)
