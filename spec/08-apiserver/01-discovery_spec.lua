-- Discovery and error shapes: what kubectl and client-go read first.
local client = require("support.apiserver_client")

describe("apiserver discovery", function()
  local srv
  setup(function() srv = client.start({ no_namespace = true }) end)
  teardown(function() srv:stop() end)

  it("serves /version with major and minor", function()
    local code, v = srv:request("GET", "/version")
    assert.equal(200, code)
    assert.is_string(v.major)
    assert.is_string(v.gitVersion)
  end)

  it("serves /api with v1", function()
    local code, v = srv:request("GET", "/api")
    assert.equal(200, code)
    assert.equal("APIVersions", v.kind)
    assert.same({ "v1" }, v.versions)
  end)

  it("lists the built-in groups in /apis", function()
    local code, v = srv:request("GET", "/apis")
    assert.equal(200, code)
    assert.equal("APIGroupList", v.kind)
    local names = {}
    for _, g in ipairs(v.groups) do names[g.name] = g end
    for _, g in ipairs({ "apps", "coordination.k8s.io", "apiextensions.k8s.io", "events.k8s.io" }) do
      assert.is_table(names[g], g)
      assert.is_string(names[g].preferredVersion.groupVersion)
    end
  end)

  it("describes core resources with kind, scope, verbs and subresources", function()
    local code, v = srv:request("GET", "/api/v1")
    assert.equal(200, code)
    assert.equal("APIResourceList", v.kind)
    assert.equal("v1", v.groupVersion)
    local res = {}
    for _, r in ipairs(v.resources) do res[r.name] = r end
    assert.equal("ConfigMap", res.configmaps.kind)
    assert.is_true(res.configmaps.namespaced)
    assert.is_false(res.namespaces.namespaced)
    local verbs = {}
    for _, verb in ipairs(res.configmaps.verbs) do verbs[verb] = true end
    for _, verb in ipairs({ "create", "delete", "get", "list", "patch", "update", "watch" }) do
      assert.is_true(verbs[verb], verb)
    end
    assert.is_table(res["pods/status"])
    assert.is_table(res.secrets)
    assert.is_table(res.services)
    assert.is_table(res.events)
  end)

  it("describes apps/v1 and coordination.k8s.io/v1", function()
    local _, v = srv:request("GET", "/apis/apps/v1")
    local res = {}
    for _, r in ipairs(v.resources) do res[r.name] = r end
    assert.equal("Deployment", res.deployments.kind)
    assert.is_table(res["deployments/status"])
    assert.equal("StatefulSet", res.statefulsets.kind)
    assert.equal("ReplicaSet", res.replicasets.kind)
    local _, c = srv:request("GET", "/apis/coordination.k8s.io/v1")
    assert.equal("leases", c.resources[1].name)
    local code, g = srv:request("GET", "/apis/apps")
    assert.equal(200, code)
    assert.equal("APIGroup", g.kind)
  end)

  it("answers an unknown resource or version of a served group with a 404 Status", function()
    for _, path in ipairs({ "/api/v1/frobnicators", "/api/v1/namespaces/default/frobs/x",
                            "/apis/apps/v1/nope", "/apis/apps/v9", "/api/v9/pods" }) do
      local code, st, raw, headers = srv:request("GET", path)
      assert.equal(404, code, path)
      assert.matches("[Cc]ontent%-[Tt]ype: application/json", headers, 1, false, path)
      assert.is_table(st, path .. ": " .. raw)
      assert.equal("Status", st.kind)
      assert.equal("Failure", st.status)
      assert.equal("NotFound", st.reason)
      assert.equal(404, st.code)
      assert.equal("the server could not find the requested resource", st.message)
    end
  end)

  it("answers a path outside every served group with a plain-text 404, not a Status", function()
    -- kube-apiserver's routes end at its groups: the HTTP mux answers the rest
    for _, path in ipairs({ "/apis/nope.example.com/v1", "/apis/nope.example.com",
                            "/apis/nope.example.com/v1/namespaces/x/things", "/nope" }) do
      local code, st, raw, headers = srv:request("GET", path)
      assert.equal(404, code, path)
      assert.is_nil(st, path)
      assert.equal("404 page not found\n", raw, path)
      assert.matches("[Cc]ontent%-[Tt]ype: text/plain; charset=utf%-8", headers, 1, false, path)
    end
  end)
end)
