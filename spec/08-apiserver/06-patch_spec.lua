-- PATCH: JSON merge, JSON patch, strategic merge, server-side apply.
local client = require("support.apiserver_client")

describe("apiserver PATCH", function()
  local srv
  setup(function() srv = client.start() end)
  teardown(function() srv:stop() end)

  local function patch(path, body, ctype, query)
    return srv:request("PATCH", path .. (query or ""), body, { content_type = ctype })
  end

  it("applies a JSON merge patch (null deletes)", function()
    srv:create_cm("m", { a = "1", b = "2" })
    local code, cm = patch(srv:ns_path("configmaps", "m"), { data = { a = "x", c = "3" } },
      "application/merge-patch+json")
    assert.equal(200, code)
    assert.equal("x", cm.data.a)
    assert.equal("3", cm.data.c)
    local _, cm2 = patch(srv:ns_path("configmaps", "m"), '{"data":{"b":null}}', "application/merge-patch+json")
    assert.is_nil(cm2.data.b)
  end)

  it("applies a JSON patch and answers a failed test with 422", function()
    srv:create_cm("j", { a = "1" })
    local code, cm = patch(srv:ns_path("configmaps", "j"),
      '[{"op":"add","path":"/data/b","value":"2"},{"op":"replace","path":"/data/a","value":"9"},' ..
      '{"op":"copy","from":"/data/a","path":"/data/c"},{"op":"remove","path":"/data/b"}]',
      "application/json-patch+json")
    assert.equal(200, code)
    assert.same({ a = "9", c = "9" }, cm.data)
    local tcode, st = patch(srv:ns_path("configmaps", "j"), '[{"op":"test","path":"/data/a","value":"1"}]',
      "application/json-patch+json")
    assert.equal(422, tcode)
    assert.equal("Invalid", st.reason)
    local rcode = patch(srv:ns_path("configmaps", "j"), '[{"op":"remove","path":"/data/zzz"}]',
      "application/json-patch+json")
    assert.equal(422, rcode)
  end)

  it("merges containers by name with a strategic merge patch", function()
    local path = srv:ns_path("deployments", nil, "apps/v1")
    assert.equal(201, (srv:request("POST", path, { apiVersion = "apps/v1", kind = "Deployment",
      metadata = { name = "smp" }, spec = { selector = { matchLabels = { app = "s" } },
      template = { metadata = { labels = { app = "s" } }, spec = { containers = {
        { name = "a", image = "a:1" }, { name = "b", image = "b:1" } } } } } })))
    local code, d = patch(path .. "/smp", { spec = { template = { spec = { containers = {
      { name = "b", image = "b:2" }, { name = "c", image = "c:1" } } } } } },
      "application/strategic-merge-patch+json")
    assert.equal(200, code)
    local images = {}
    for _, c in ipairs(d.spec.template.spec.containers) do images[c.name] = c.image end
    assert.same({ a = "a:1", b = "b:2", c = "c:1" }, images)
    local _, d2 = patch(path .. "/smp", { spec = { template = { spec = { containers = {
      { name = "a", ["$patch"] = "delete" } } } } } }, "application/strategic-merge-patch+json")
    assert.equal(2, #d2.spec.template.spec.containers)
    assert.equal(3, d2.metadata.generation)
  end)

  it("answers an unknown patch type with 415", function()
    srv:create_cm("u")
    local code, st = patch(srv:ns_path("configmaps", "u"), "{}", "text/plain")
    assert.equal(415, code)
    assert.equal("UnsupportedMediaType", st.reason)
  end)

  it("answers a patch of a missing object with 404 and malformed patch JSON with 400", function()
    assert.equal(404, (patch(srv:ns_path("configmaps", "missing"), "{}", "application/merge-patch+json")))
    srv:create_cm("bad")
    local code, st = patch(srv:ns_path("configmaps", "bad"), "{nope", "application/merge-patch+json")
    assert.equal(400, code)
    assert.equal("BadRequest", st.reason)
  end)

  it("creates and updates with server-side apply, tracking managedFields", function()
    local body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: one\n"
    local code, cm = patch(srv:ns_path("configmaps", "ssa"), body, "application/apply-patch+yaml",
      "?fieldManager=alice")
    assert.equal(201, code)
    assert.equal("one", cm.data.a)
    local mf = cm.metadata.managedFields[1]
    assert.equal("alice", mf.manager)
    assert.equal("Apply", mf.operation)
    assert.is_table(mf.fieldsV1["f:data"]["f:a"])
    -- alice stops applying a: it is removed; b is added
    local body2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  b: two\n"
    local code2, cm2 = patch(srv:ns_path("configmaps", "ssa"), body2, "application/apply-patch+yaml",
      "?fieldManager=alice")
    assert.equal(200, code2)
    assert.same({ b = "two" }, cm2.data)
  end)

  it("refuses to take another manager's field without force (409), and takes it with force", function()
    local body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: own\ndata:\n  k: alice\n"
    assert.equal(201, (patch(srv:ns_path("configmaps", "own"), body, "application/apply-patch+yaml",
      "?fieldManager=alice")))
    local bob = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: own\ndata:\n  k: bob\n"
    local code, st = patch(srv:ns_path("configmaps", "own"), bob, "application/apply-patch+yaml",
      "?fieldManager=bob")
    assert.equal(409, code)
    assert.equal("Conflict", st.reason)
    assert.matches('conflict with "alice"', st.message)
    assert.equal(".data.k", st.details.causes[1].field)
    local fcode, cm = patch(srv:ns_path("configmaps", "own"), bob, "application/apply-patch+yaml",
      "?fieldManager=bob&force=true")
    assert.equal(200, fcode)
    assert.equal("bob", cm.data.k)
  end)

  it("requires a fieldManager for apply", function()
    local code = patch(srv:ns_path("configmaps", "nofm"),
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nofm\n", "application/apply-patch+yaml")
    assert.is_true(code == 400 or code == 422)
  end)
  it("refuses an apply body whose aliases expand past the bounds (400), and still serves", function()
    -- nine levels of ten aliases each: 10^9 values from a few hundred bytes
    local lines = { 'apiVersion: v1', 'kind: ConfigMap', 'metadata: {name: laughs}',
                    'x0: &a0 ["x","x","x","x","x","x","x","x","x","x"]' }
    for i = 1, 8 do
      local refs = {}
      for j = 1, 10 do refs[j] = "*a" .. (i - 1) end
      lines[#lines + 1] = ("x%d: &a%d [%s]"):format(i, i, table.concat(refs, ","))
    end
    local code, st = patch(srv:ns_path("configmaps", "laughs"), table.concat(lines, "\n") .. "\n",
      "application/apply-patch+yaml", "?fieldManager=alice")
    assert.equal(400, code)
    assert.matches("excessive aliasing", st.message, 1, true)
    -- an alias cannot nest a document deeper than a plain one may be
    local deep = "a: &d " .. ("["):rep(150) .. ("]"):rep(150) .. "\nb: " .. ("["):rep(100) .. "*d" ..
      ("]"):rep(100) .. "\n"
    local dcode, dst = patch(srv:ns_path("configmaps", "laughs"), deep,
      "application/apply-patch+yaml", "?fieldManager=alice")
    assert.equal(400, dcode)
    -- the reason's wording is each server's own (kube-apiserver: "invalid
    -- object type"); the dev server names the depth bound
    if not srv.real then assert.matches("nested too deeply", dst.message, 1, true) end
    -- a few aliases of a small anchor are fine
    local ok = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: laughs, labels: &l {a: b}, " ..
      "annotations: *l}\ndata: {k: v}\n"
    local okcode, cm = patch(srv:ns_path("configmaps", "laughs"), ok, "application/apply-patch+yaml",
      "?fieldManager=alice")
    assert.equal(201, okcode)
    assert.same({ a = "b" }, cm.metadata.annotations)
  end)
end)
