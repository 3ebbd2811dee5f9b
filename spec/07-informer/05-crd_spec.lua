-- An informer for a custom resource whose CRD is created after the informer
-- started: discovery keeps retrying, then the informer lists and watches.
-- Runs against the dev server, or the cluster in KUBECONFIG (it needs the
-- right to create CustomResourceDefinitions there).
local helpers = require("helpers")
local client = require("support.apiserver_client")
local core = require("luna.core")
local S = require("07-informer.support")

local function crd(group)
  return { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
    metadata = { name = "widgets." .. group },
    spec = { group = group, scope = "Namespaced",
      versions = { { name = "v1", served = true, storage = true,
        schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } } },
      names = { plural = "widgets", singular = "widget", kind = "Widget", listKind = "WidgetList" } } }
end

describe("informer for a CRD created after start", function()
  local srv, env, group
  before_each(function()
    srv = client.start()
    group = srv.ns .. ".luna.example.com"
    env = assert(core.informer.env{ kubeconfig = S.kubeconfig_for(srv) })
  end)
  after_each(function()
    collectgarbage()
    srv:request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets." .. group)
    srv:stop()
  end)

  it("retries discovery until the kind is served, then syncs and watches", function()
    local added = {}
    local inf = env:informer{ kind = group .. "/v1/Widget", namespace = srv.ns,
      backoff_base = 0.05, backoff_max = 0.2,
      on_add = function(o) added[#added + 1] = o:name() end }
    assert.is_false(core.loop.run_until(function() return inf:has_synced() end, 0.3))
    assert.is_nil(inf:resource())

    assert.equal(201, (srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
      crd(group))))
    local path = "/apis/" .. group .. "/v1/namespaces/" .. srv.ns .. "/widgets"
    -- A real server takes a moment to serve a new CRD.
    local code
    helpers.eventually(function()
      code = srv:request("POST", path, { apiVersion = group .. "/v1", kind = "Widget",
        metadata = { name = "w1" }, spec = { size = 1 } })
      return code == 201
    end, 30, "the new CRD served")

    helpers.eventually(function() return inf:has_synced() end, 20, "sync after the CRD appeared")
    local res = inf:resource()
    assert.equal("widgets", res.resource)
    assert.is_true(res.namespaced)
    helpers.eventually(function() return inf:get(srv.ns .. "/w1") ~= nil end, 10, "w1 in the cache")

    assert.equal(201, (srv:request("POST", path, { apiVersion = group .. "/v1", kind = "Widget",
      metadata = { name = "w2" }, spec = { size = 2 } })))
    helpers.eventually(function() return inf:get(srv.ns .. "/w2") ~= nil end, 10, "w2 from the watch")
    assert.same({ "w1", "w2" }, added)
    assert.equal(2, core.json.decode(inf:get(srv.ns .. "/w2"):json()).spec.size)
    inf:release()
  end)
end)
