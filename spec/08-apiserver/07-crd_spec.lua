-- CustomResourceDefinitions: creating one serves its resource.
local client = require("support.apiserver_client")
local helpers = require("helpers")

local function crd(group, scope, status)
  local v = { name = "v1", served = true, storage = true,
    schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } }
  if status then v.subresources = { status = {} } end
  return { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
    metadata = { name = "gadgets." .. group },
    spec = { group = group, scope = scope, versions = { v },
      names = { plural = "gadgets", singular = "gadget", kind = "Gadget", listKind = "GadgetList" } } }
end

describe("apiserver CRDs", function()
  local srv, group
  setup(function()
    srv = client.start()
    group = srv.ns .. ".example.com"
  end)
  teardown(function()
    srv:request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets." .. group)
    srv:request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.c" .. group)
    srv:stop()
  end)

  local function established(name)
    local deadline = helpers.now() + 30
    repeat
      local _, c = srv:request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" .. name)
      for _, cond in ipairs(c and c.status and c.status.conditions or {}) do
        if cond.type == "Established" and cond.status == "True" then return true end
      end
      os.execute("sleep 0.2")
    until helpers.now() > deadline
    return false
  end

  it("serves a namespaced custom resource with a status subresource", function()
    local code = srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
      crd(group, "Namespaced", true))
    assert.equal(201, code)
    assert.is_true(established("gadgets." .. group))
    local _, rl = srv:request("GET", "/apis/" .. group .. "/v1")
    local names = {}
    for _, r in ipairs(rl.resources) do names[r.name] = r end
    assert.equal("Gadget", names.gadgets.kind)
    assert.is_true(names.gadgets.namespaced)
    assert.is_table(names["gadgets/status"])
    local path = "/apis/" .. group .. "/v1/namespaces/" .. srv.ns .. "/gadgets"
    local ccode, g = srv:request("POST", path, { apiVersion = group .. "/v1", kind = "Gadget",
      metadata = { name = "g1" }, spec = { size = 1 }, status = { ready = true } })
    assert.equal(201, ccode)
    assert.equal(1, g.metadata.generation)
    assert.is_nil(g.status)
    g.status = { ready = true }
    local scode, g2 = srv:request("PUT", path .. "/g1/status", g)
    assert.equal(200, scode)
    assert.is_true(g2.status.ready)
    assert.equal(1, g2.metadata.generation)
    local _, list = srv:request("GET", path)
    assert.equal("GadgetList", list.kind)
    assert.equal(1, #list.items)
    local scode2, st = srv:request("PATCH", path .. "/g1", '{"spec":{"size":2}}',
      { content_type = "application/strategic-merge-patch+json" })
    assert.equal(415, scode2)
    assert.equal("UnsupportedMediaType", st.reason)
    local mcode, g3 = srv:request("PATCH", path .. "/g1", '{"spec":{"size":2}}',
      { content_type = "application/merge-patch+json" })
    assert.equal(200, mcode)
    assert.equal(2, g3.metadata.generation)
  end)

  -- kubernetes#3030: a LIST of a built-in kind leaves apiVersion and kind
  -- out of its items (a GET or a watch event has them); custom resources'
  -- items keep theirs.  Clients that cache listed items must fill them in
  -- (spec/07-informer/12-list_item_type_spec.lua).
  it("lists custom resources with apiVersion and kind on each item, built-in kinds without", function()
    local path = "/apis/" .. group .. "/v1/namespaces/" .. srv.ns .. "/gadgets"
    local _, gl = srv:request("GET", path)
    assert.equal("GadgetList", gl.kind)
    assert.is_true(#gl.items >= 1)
    for _, item in ipairs(gl.items) do
      assert.equal(group .. "/v1", item.apiVersion)
      assert.equal("Gadget", item.kind)
    end
    srv:create_cm("typed")
    local _, cl = srv:request("GET", srv:ns_path("configmaps"))
    assert.equal("ConfigMapList", cl.kind)
    assert.equal("v1", cl.apiVersion)
    assert.is_true(#cl.items >= 1)
    for _, item in ipairs(cl.items) do
      assert.is_nil(item.apiVersion)
      assert.is_nil(item.kind)
      assert.is_string(item.metadata.name)
    end
    -- paged, and with a label selector: the same
    local _, pl = srv:request("GET", srv:ns_path("configmaps") .. "?limit=1")
    assert.is_nil(pl.items[1].kind)
    -- a GET has them
    local _, one = srv:request("GET", srv:ns_path("configmaps", "typed"))
    assert.equal("ConfigMap", one.kind)
    assert.equal("v1", one.apiVersion)
  end)

  it("serves a cluster-scoped custom resource and stops serving it when the CRD goes", function()
    local cgroup = "c" .. group
    assert.equal(201, (srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
      crd(cgroup, "Cluster", false))))
    assert.is_true(established("gadgets." .. cgroup))
    local path = "/apis/" .. cgroup .. "/v1/gadgets"
    local code = srv:request("POST", path, { apiVersion = cgroup .. "/v1", kind = "Gadget",
      metadata = { name = "top" } })
    assert.equal(201, code)
    assert.equal(200, (srv:request("GET", path .. "/top")))
    assert.equal(200, (srv:request("DELETE",
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets." .. cgroup)))
    local deadline = helpers.now() + 30
    local gcode
    repeat
      gcode = srv:request("GET", path)
      if gcode ~= 404 then os.execute("sleep 0.2") end
    until gcode == 404 or helpers.now() > deadline
    assert.equal(404, gcode)
  end)

  it("rejects an invalid CRD with 422", function()
    local bad = crd(group, "Namespaced", false)
    bad.metadata.name = "wrong.name"
    local code, st = srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", bad)
    assert.equal(422, code)
    assert.equal("Invalid", st.reason)
  end)
end)
