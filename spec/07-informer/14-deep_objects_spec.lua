-- Issue 24, class 1, against a server: a custom resource nested 1,100
-- deep (its CRD keeps unknown fields; kube-apiserver v1.37 takes nesting up
-- to 10000, docs/informers.md) once stopped every LIST and WATCH of its
-- kind.  Now the informer syncs, caches it beside the others, and the
-- cache matches the server; a script's read of the deep object fails
-- clearly (the script decoder's bound is 1000).  Both servers refuse an
-- object nested past 10000.  Runs against the dev server, or the cluster
-- in KUBECONFIG (it needs the right to create CRDs there).
local helpers = require("helpers")
local client = require("support.apiserver_client")
local core = require("luna.core")
local S = require("07-informer.support")

local function crd(group)
  return { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
    metadata = { name = "deeps." .. group },
    spec = { group = group, scope = "Namespaced",
      versions = { { name = "v1", served = true, storage = true,
        schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } } },
      names = { plural = "deeps", singular = "deep", kind = "Deep", listKind = "DeepList" } } }
end

-- The object's nesting, itself counted, is `depth`.
local function deep(group, name, depth)
  local n = depth - 1
  return '{"apiVersion":"' .. group .. '/v1","kind":"Deep","metadata":{"name":"' .. name ..
    '"},"spec":' .. ('{"a":'):rep(n) .. "1" .. ("}"):rep(n) .. "}"
end

describe("informer with deeply nested objects", function()
  local srv, env, group, path
  before_each(function()
    srv = client.start()
    group = srv.ns .. ".luna.example.com"
    env = assert(core.informer.env{ kubeconfig = S.kubeconfig_for(srv) })
    assert.equal(201, (srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
      crd(group))))
    path = "/apis/" .. group .. "/v1/namespaces/" .. srv.ns .. "/deeps"
  end)
  after_each(function()
    collectgarbage()
    srv:request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/deeps." .. group)
    srv:stop()
  end)

  local function create(name, depth)
    local code, _, raw
    helpers.eventually(function() -- a real server takes a moment to serve a new CRD
      code, _, raw = srv:request("POST", path, deep(group, name, depth))
      return code ~= 404
    end, 30, "the new CRD served")
    return code, raw
  end

  it("lists and watches them, and the cache matches the server", function()
    assert.equal(201, (create("good-1", 3)))
    assert.equal(201, (create("deep-1100", 1100)))
    local inf = env:informer{ kind = group .. "/v1/Deep", namespace = srv.ns }
    helpers.eventually(function() return inf:has_synced() end, 20, "sync with a deep object listed")
    assert.equal(201, (create("deep-2000", 2000)))
    assert.equal(201, (create("good-2", 3)))
    local want = {}
    for _, n in ipairs({ "good-1", "deep-1100", "deep-2000", "good-2" }) do
      local code, _, raw = srv:request("GET", path .. "/" .. n) -- cjson stops at 1000 levels
      assert.equal(200, code, n)
      want[srv.ns .. "/" .. n] = assert(raw:match('"resourceVersion":%s*"(%d+)"'), n)
    end
    S.converge(inf, want, 20)
    assert.equal(0, inf:stats().bad_objects)
    -- The cached bytes are whole; a script's decoder stops at 1000 levels,
    -- with a clear error.
    local obj = assert(inf:get(srv.ns .. "/deep-1100"))
    local ok, v, err = pcall(core.json.decode, obj:json())
    assert.is_nil(ok and v or nil)
    assert.matches("nesting deeper than 1000", tostring(ok and (err and err.message or err) or v))
    inf:release()
  end)

  it("is refused by the server past 10000 levels", function()
    assert.equal(201, (create("good-1", 3)))
    local code = create("deep-10001", 10001)
    assert.is_true(code == 400 or code == 413 or code == 422, "code " .. tostring(code))
  end)
end)
