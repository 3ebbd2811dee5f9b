-- generation, the status subresource, finalizers, deletion propagation and GC.
--
-- Written as for a real cluster, where the spec is not the only writer: the
-- Deployment controller updates a Deployment (its status, an annotation)
-- right after it is created, so every read-modify-write retries on 409
-- Conflict, and status assertions read the write's own answer.
local client = require("support.apiserver_client")
local json = require("luna.core").json

local function deployment(name)
  return {
    apiVersion = "apps/v1", kind = "Deployment", metadata = { name = name },
    spec = { replicas = 1, selector = { matchLabels = { app = name } },
             template = { metadata = { labels = { app = name } },
                          spec = { containers = { { name = "c", image = "busybox" } } } } },
  }
end

describe("apiserver object lifecycle", function()
  local srv
  setup(function() srv = client.start() end)
  teardown(function() srv:stop() end)

  -- GET, change, PUT; again from a fresh GET on 409 Conflict (another
  -- writer was first), as client-go's retry.RetryOnConflict does.
  local function update(path, change, put_path)
    for _ = 1, 10 do
      local gcode, obj = srv:request("GET", path)
      assert.equal(200, gcode, path)
      change(obj)
      local code, res, raw = srv:request("PUT", put_path or path, obj)
      if code ~= 409 then return code, res, raw end
    end
    error("still conflicting after 10 tries: " .. path)
  end

  it("bumps generation on spec changes only", function()
    local path = srv:ns_path("deployments", nil, "apps/v1")
    local code, d = srv:request("POST", path, deployment("gen"))
    assert.equal(201, code)
    assert.equal(1, d.metadata.generation)
    local c2, d2 = update(path .. "/gen", function(o) o.metadata.labels = { touched = "yes" } end)
    assert.equal(200, c2)
    assert.equal(1, d2.metadata.generation)
    local c3, d3 = update(path .. "/gen", function(o) o.spec.replicas = 3 end)
    assert.equal(200, c3)
    assert.equal(2, d3.metadata.generation)
    local scode, d4 = update(path .. "/gen", function(o)
      o.status = { replicas = 3, observedGeneration = 2 }
    end, path .. "/gen/status")
    assert.equal(200, scode)
    assert.equal(2, d4.metadata.generation)
    assert.equal(3, d4.status.replicas)
  end)

  it("ignores status on the main resource and spec on /status", function()
    local path = srv:ns_path("deployments", nil, "apps/v1")
    assert.equal(201, (srv:request("POST", path, deployment("st"))))
    local c2, d2 = update(path .. "/st", function(o) o.status = { replicas = 7 } end)
    assert.equal(200, c2)
    assert.is_true(d2.status == nil or d2.status.replicas ~= 7, "status.replicas taken from PUT")
    local c3, d3 = update(path .. "/st", function(o)
      o.spec.replicas = 5
      o.status = { replicas = 2 }
    end, path .. "/st/status")
    assert.equal(200, c3)
    assert.equal(2, d3.status.replicas)
    assert.equal(1, d3.spec.replicas)
    local gcode, got = srv:request("GET", path .. "/st/status")
    assert.equal(200, gcode)
    assert.equal("Deployment", got.kind)
    assert.equal(1, got.spec.replicas)
  end)

  it("answers /status of a type without it with 404", function()
    srv:create_cm("nostatus")
    local code = srv:request("GET", srv:ns_path("configmaps", "nostatus") .. "/status")
    assert.equal(404, code)
  end)

  it("keeps an object with finalizers until they are removed", function()
    local code, cm = srv:request("POST", srv:ns_path("configmaps"), { apiVersion = "v1",
      kind = "ConfigMap", metadata = { name = "fin", finalizers = { "example.com/hold" } } })
    assert.equal(201, code)
    local dcode, deleting = srv:request("DELETE", srv:ns_path("configmaps", "fin"))
    assert.equal(200, dcode)
    assert.equal("ConfigMap", deleting.kind)
    assert.is_string(deleting.metadata.deletionTimestamp)
    assert.equal(0, deleting.metadata.deletionGracePeriodSeconds)
    local gcode, still = srv:request("GET", srv:ns_path("configmaps", "fin"))
    assert.equal(200, gcode)
    assert.is_string(still.metadata.deletionTimestamp)
    -- no new finalizers while deleting
    still.metadata.finalizers = { "example.com/hold", "example.com/more" }
    local icode, st = srv:request("PUT", srv:ns_path("configmaps", "fin"), still)
    assert.equal(422, icode)
    assert.equal("Invalid", st.reason)
    -- finalizers is a list: an empty Lua table would go out as {} (an
    -- object), which both servers refuse with 400
    still.metadata.finalizers = {}
    local bcode, bad = srv:request("PUT", srv:ns_path("configmaps", "fin"), still)
    assert.equal(400, bcode)
    assert.equal("BadRequest", bad.reason)
    assert.matches("cannot unmarshal object into Go struct field ObjectMeta%.metadata%.finalizers",
      bad.message)
    still.metadata.finalizers = setmetatable({}, json.array_mt)
    local ucode = srv:request("PUT", srv:ns_path("configmaps", "fin"), json.encode(still))
    assert.equal(200, ucode)
    assert.equal(404, (srv:request("GET", srv:ns_path("configmaps", "fin"))))
    assert.is_string(cm.metadata.uid)
  end)

  local function owned_cm(name, owner)
    local code = srv:request("POST", srv:ns_path("configmaps"), { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = name, ownerReferences = { { apiVersion = "v1", kind = "ConfigMap",
        name = owner.metadata.name, uid = owner.metadata.uid } } } })
    assert.equal(201, code)
  end

  local function gone(name)
    local deadline = require("helpers").now() + 10
    repeat
      if srv:request("GET", srv:ns_path("configmaps", name)) == 404 then return true end
      os.execute("sleep 0.1")
    until require("helpers").now() > deadline
    return false
  end

  it("garbage-collects dependents in the background", function()
    local owner = srv:create_cm("owner-bg")
    owned_cm("dep-bg", owner)
    assert.equal(200, (srv:request("DELETE", srv:ns_path("configmaps", "owner-bg"))))
    assert.is_true(gone("dep-bg"))
  end)

  it("collects a dependent written after its owner was deleted", function()
    -- a controller racing the deletion re-creates a dependent of an owner
    -- that is gone: the garbage collector removes it shortly after
    local owner = srv:create_cm("owner-late")
    assert.equal(200, (srv:request("DELETE", srv:ns_path("configmaps", "owner-late"))))
    owned_cm("dep-late", owner)
    assert.is_true(gone("dep-late"))
  end)

  it("deletes dependents first with propagationPolicy=Foreground", function()
    local owner = srv:create_cm("owner-fg")
    owned_cm("dep-fg", owner)
    local code = srv:request("DELETE", srv:ns_path("configmaps", "owner-fg"),
      { kind = "DeleteOptions", apiVersion = "v1", propagationPolicy = "Foreground" })
    assert.equal(200, code)
    assert.is_true(gone("dep-fg"))
    assert.is_true(gone("owner-fg"))
  end)

  it("orphans dependents with propagationPolicy=Orphan", function()
    local owner = srv:create_cm("owner-or")
    owned_cm("dep-or", owner)
    local code = srv:request("DELETE", srv:ns_path("configmaps", "owner-or") .. "?propagationPolicy=Orphan")
    assert.equal(200, code)
    assert.is_true(gone("owner-or"))
    local gcode, dep = srv:request("GET", srv:ns_path("configmaps", "dep-or"))
    assert.equal(200, gcode)
    assert.is_nil(dep.metadata.ownerReferences)
  end)

  it("answers an unsupported propagationPolicy with 422 naming it, from the body and the query", function()
    srv:create_cm("bad-policy")
    -- the body's policy is quoted in the message after the body is parsed
    -- (it was read after being freed)
    local code, st = srv:request("DELETE", srv:ns_path("configmaps", "bad-policy"),
      { kind = "DeleteOptions", apiVersion = "v1", propagationPolicy = "Sideways-" .. ("x"):rep(40) })
    assert.equal(422, code)
    assert.equal("Invalid", st.reason)
    assert.matches('Unsupported value: "Sideways-' .. ("x"):rep(40) .. '"', st.message, 1, true)
    local qcode, qst = srv:request("DELETE", srv:ns_path("configmaps", "bad-policy") .. "?propagationPolicy=Up")
    assert.equal(422, qcode)
    assert.matches('Unsupported value: "Up"', qst.message, 1, true)
    assert.equal(200, (srv:request("GET", srv:ns_path("configmaps", "bad-policy"))))
  end)

  it("checks delete preconditions", function()
    local cm = srv:create_cm("pre")
    local code, st = srv:request("DELETE", srv:ns_path("configmaps", "pre"),
      { kind = "DeleteOptions", apiVersion = "v1", preconditions = { uid = "00000000-0000-4000-8000-000000000000" } })
    assert.equal(409, code)
    assert.equal("Conflict", st.reason)
    local ok = srv:request("DELETE", srv:ns_path("configmaps", "pre"),
      { kind = "DeleteOptions", apiVersion = "v1", preconditions = { uid = cm.metadata.uid } })
    assert.equal(200, ok)
  end)

  it("deletes a namespace with its contents", function()
    local ns = srv.ns .. "-x"
    assert.equal(201, (srv:request("POST", "/api/v1/namespaces",
      { apiVersion = "v1", kind = "Namespace", metadata = { name = ns } })))
    assert.equal(201, (srv:request("POST", "/api/v1/namespaces/" .. ns .. "/configmaps",
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "inside" } })))
    local code, n = srv:request("DELETE", "/api/v1/namespaces/" .. ns)
    assert.equal(200, code)
    assert.equal("Terminating", n.status.phase)
    local deadline = require("helpers").now() + 60
    local status
    repeat
      status = srv:request("GET", "/api/v1/namespaces/" .. ns)
      if status ~= 404 then os.execute("sleep 0.2") end
    until status == 404 or require("helpers").now() > deadline
    assert.equal(404, status)
  end)
end)
