-- dryRun=All: a write is checked and defaulted as a real one, answered with
-- the state it would store, and stores nothing (what `kubectl apply
-- --dry-run=server` and luna.apply{dry_run = true} rely on).
local client = require("support.apiserver_client")

describe("apiserver dryRun", function()
  local srv
  setup(function() srv = client.start() end)
  teardown(function() srv:stop() end)

  local function get(name) return srv:request("GET", srv:ns_path("configmaps", name)) end

  it("answers a create with the object it would make, and makes none", function()
    local code, cm = srv:request("POST", srv:ns_path("configmaps") .. "?dryRun=All",
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "dry" }, data = { a = "b" } })
    assert.equal(201, code)
    assert.equal("dry", cm.metadata.name)
    assert.equal(srv.ns, cm.metadata.namespace)
    assert.truthy(cm.metadata.uid)
    assert.truthy(cm.metadata.creationTimestamp)
    assert.equal("b", cm.data.a)
    assert.equal(404, (get("dry")))
  end)

  it("checks a dry-run write as a real one", function()
    srv:create_cm("taken")
    local code, st = srv:request("POST", srv:ns_path("configmaps") .. "?dryRun=All",
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "taken" } })
    assert.equal(409, code)
    assert.equal("AlreadyExists", st.reason)
    code, st = srv:request("POST", srv:ns_path("configmaps") .. "?dryRun=Sometimes",
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "other" } })
    assert.equal(422, code)
    assert.equal("Invalid", st.reason)
    assert.equal("dryRun", st.details.causes[1].field)
    assert.equal(404, (get("other")))
  end)

  it("answers updates, patches and deletes without changing what is stored", function()
    local orig = srv:create_cm("kept", { a = "1" })
    local code, patched = srv:request("PATCH", srv:ns_path("configmaps", "kept") .. "?dryRun=All",
      { data = { a = "2" } }, { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
    assert.equal("2", patched.data.a)
    orig.data.a = "3"
    local ucode, updated = srv:request("PUT", srv:ns_path("configmaps", "kept") .. "?dryRun=All", orig)
    assert.equal(200, ucode)
    assert.equal("3", updated.data.a)
    assert.equal(200, (srv:request("DELETE", srv:ns_path("configmaps", "kept") .. "?dryRun=All")))
    local gcode, now = get("kept")
    assert.equal(200, gcode)
    assert.equal("1", now.data.a)
    assert.equal(orig.metadata.resourceVersion, now.metadata.resourceVersion)
  end)
  -- kube-apiserver decodes a DELETE's options from its body when it has one
  -- and then ignores the query: a dryRun in the query of a DELETE with a
  -- body deletes for real (why luna's shadow mode puts dryRun in the body).
  it("takes a DELETE's options from its body and then ignores the query", function()
    srv:create_cm("body-dry")
    local code = srv:request("DELETE", srv:ns_path("configmaps", "body-dry"),
      { apiVersion = "v1", kind = "DeleteOptions", dryRun = { "All" } })
    assert.equal(200, code)
    assert.equal(200, (get("body-dry")))

    code = srv:request("DELETE", srv:ns_path("configmaps", "body-dry") .. "?propagationPolicy=Sideways",
      { apiVersion = "v1", kind = "DeleteOptions", dryRun = { "All" } })
    assert.equal(200, code)
    assert.equal(200, (get("body-dry")))

    local st
    code, st = srv:request("DELETE", srv:ns_path("configmaps", "body-dry") .. "?dryRun=All",
      { apiVersion = "v1", kind = "DeleteOptions", dryRun = { "All", "Sometimes" } })
    assert.equal(422, code)
    assert.equal("dryRun", st.details.causes[1].field)
    assert.matches('Unsupported value: ["All","Sometimes"]', st.message, 1, true)
    assert.equal(200, (get("body-dry")))

    code = srv:request("DELETE", srv:ns_path("configmaps", "body-dry") .. "?dryRun=All",
      { apiVersion = "v1", kind = "DeleteOptions", propagationPolicy = "Background" })
    assert.equal(200, code)
    assert.equal(404, (get("body-dry")))
  end)
end)
