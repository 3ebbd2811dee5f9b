-- `luna test --kube` (lua/luna/testing.lua, testing_cli.lua; docs/testing.md
-- "Against a real control plane"): the same test files against a real API
-- server, each test in a namespace of its own that is gone afterwards (a
-- failing test's too), the names a test makes outside it deleted before the
-- next test makes them again, CRDs gone at the end of the run, dev-server-
-- only features skipped or refused with the reason; and a clear error when
-- there is no cluster.
--
-- Under `make test-kube` the cluster is KUBECONFIG's; under `make test` it is
-- a standalone dev server reached through a kubeconfig, as a cluster would
-- be (the kit's --kube path is the same; the spec's checks too).
local helpers = require("helpers")
local client = require("support.apiserver_client")

local STAMP = [[
local luna = require "luna"
return luna.controller {
  name = "stamp",
  watch = { "v1/ConfigMap", labels = { sample = "true" } },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm or (cm.metadata.labels or {}).stamped then return end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name,
      { metadata = { labels = { stamped = "yes" } } })
    if err then return nil, err end
  end,
}
]]

local CRD = [[
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.sample.luna.dev
spec:
  group: sample.luna.dev
  scope: Namespaced
  names: { plural: gadgets, singular: gadget, kind: Gadget }
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
]]

-- Each test notes its namespace (env.namespace) in $SAMPLE_OUT/<name>.
local TESTS = [[
local testing = require "luna.testing"
local function note(name, env)
  local f = assert(io.open(os.getenv("SAMPLE_OUT") .. "/" .. name, "w"))
  f:write(env.namespace)
  f:close()
end
local function cm(who)
  return { apiVersion = "v1", kind = "ConfigMap", data = { who = who },
    metadata = { name = "same", namespace = "default", labels = { sample = "true" } } }
end
local EXTRA = { apiVersion = "v1", kind = "Namespace", metadata = { name = "luna-sample-extra" } }

describe("sample", function()
  local env
  before_each(function() env = testing.start{ controllers = { "stamp.lua" } } end)

  it("first", function()
    note("first", env)
    env:create(cm("first"))
    env:create(EXTRA)
    env:wait_idle()
    local got = env:get("v1/ConfigMap", "default", "same")
    assert.equal("first", got.data.who)
    assert.equal("yes", got.metadata.labels.stamped)
    assert.equal("default", got.metadata.namespace)
  end)

  it("second", function()
    note("second", env)
    assert.is_nil(env:get("v1/ConfigMap", "default", "same"), "the first test's ConfigMap is not here")
    env:create(cm("second"))
    env:create(EXTRA) -- the same name as the first test's: it was deleted after it
    env:wait_idle()
    local mine = {}
    for _, c in ipairs(env:list("v1/ConfigMap", { labels = { sample = "true" } })) do
      mine[#mine + 1] = c.metadata.namespace .. "/" .. c.data.who
    end
    assert.same({ "default/second" }, mine)
    local calls = env:calls{ method = "PATCH" }
    assert.equal(1, #calls)
    assert.equal("default/same", calls[1].key)
    assert.equal("/api/v1/namespaces/default/configmaps/same", calls[1].path)
  end)

  it("fails on purpose", function()
    note("failing", env)
    env:create(cm("failing"))
    env:create(EXTRA)
    env:wait_idle()
    error("deliberate failure")
  end)

  it("skips on a real server", function()
    testing.dev_only("steers the dev server's faults")
    error("not reached under --kube")
  end)

  it("asks for the dev server's faults", function()
    env:request("PUT", "/luna/v1/faults", { ["error-rate"] = 1 })
  end)
end)

describe("gadgets", function()
  local env
  before_each(function() env = testing.start{ controllers = { "stamp.lua" }, seed = { "crd.yaml" } } end)
  for _, name in ipairs { "one", "two" } do
    it("installs the CRD and makes a Gadget " .. name, function()
      note("gadget-" .. name, env)
      env:create{ apiVersion = "sample.luna.dev/v1", kind = "Gadget",
        metadata = { name = "g", namespace = "default" }, spec = { n = name } }
      assert.equal(name, env:get("sample.luna.dev/v1/Gadget", "default", "g").spec.n)
      assert.equal(1, #env:list("sample.luna.dev/v1/Gadget"))
    end)
  end
end)
]]

local function kubeconfig(dir, url)
  local path = dir .. "/kubeconfig"
  helpers.write_file(path, ([[
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
users:
- name: u
  user: {}
contexts:
- name: c
  context: { cluster: c, user: u }
current-context: c
]]):format(url))
  return path
end

describe("luna test --kube", function()
  local srv
  after_each(function() if srv then srv:stop() srv = nil end end)

  it("runs each test in a namespace of its own and cleans up after it, failing or not", function()
    srv = client.start{ no_namespace = true }
    local kc = srv.real and os.getenv("KUBECONFIG") or kubeconfig(srv.tmp, srv.url)
    local dir, notes = helpers.tmpdir(), helpers.tmpdir()
    helpers.write_file(dir .. "/stamp.lua", STAMP)
    helpers.write_file(dir .. "/crd.yaml", CRD)
    helpers.write_file(dir .. "/sample_test.lua", TESTS)
    local out, rc = helpers.run(("KUBECONFIG=%s SAMPLE_OUT=%s %s test --kube %s"):format(
      kc, notes, helpers.luna, dir))
    assert.equal(1, rc, out)
    assert.matches("ok    sample first", out)
    assert.matches("ok    sample second", out)
    assert.matches("FAIL  sample fails on purpose", out)
    assert.matches("deliberate failure", out)
    assert.matches("skip  sample skips on a real server %(dev server only: steers the dev server's faults%)", out)
    assert.matches("FAIL  sample asks for the dev server's faults", out)
    assert.matches("PUT /luna/v1/faults: a dev server endpoint", out)
    assert.matches("ok    gadgets installs the CRD and makes a Gadget one", out)
    assert.matches("ok    gadgets installs the CRD and makes a Gadget two", out)
    assert.matches("4 passed, 2 failed, 1 pending", out)
    assert.is_nil(out:find("after the run", 1, true), out)
    -- one namespace a test, each gone now (the failing test's too)
    local seen = {}
    for _, name in ipairs { "first", "second", "failing", "gadget-one", "gadget-two" } do
      local ns = helpers.read_file(notes .. "/" .. name)
      assert.is_not_nil(ns, name .. " did not note its namespace\n" .. out)
      assert.matches("^luna%-test%-", ns)
      assert.is_nil(seen[ns], name .. " shares " .. ns)
      seen[ns] = true
      assert.equal(404, (srv:request("GET", "/api/v1/namespaces/" .. ns)), ns .. " is still there")
    end
    -- what a test made outside its namespace, and the CRD, are gone too
    assert.equal(404, (srv:request("GET", "/api/v1/namespaces/luna-sample-extra")))
    assert.equal(404, (srv:request("GET",
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.sample.luna.dev")))
  end)

  it("starts the control plane `make kube` built when KUBECONFIG is not set", function()
    local bins = helpers.run("spec/kube/build.sh --print-dir 2>/dev/null"):match("[^\n]+")
    if not (bins and helpers.read_file(bins .. "/complete")) then
      return pending("no control plane built by `make kube` here (make test-kube builds it)")
    end
    local dir, notes = helpers.tmpdir(), helpers.tmpdir()
    helpers.write_file(dir .. "/stamp.lua", STAMP)
    helpers.write_file(dir .. "/crd.yaml", CRD)
    helpers.write_file(dir .. "/sample_test.lua", TESTS)
    -- (bash and the control plane must not run with the ASan runtime the
    -- specs preload; luna carries its own)
    local out, rc = helpers.run(("env -u KUBECONFIG -u LD_PRELOAD SAMPLE_OUT=%s %s test --kube --filter first %s"):format(
      notes, helpers.luna, dir))
    assert.equal(0, rc, out)
    assert.matches("no KUBECONFIG: starting the control plane `make kube` built", out)
    assert.matches("cluster.sh: control plane up: KUBECONFIG=", out)
    assert.matches("ok    sample first", out)
    assert.matches("1 passed, 0 failed, 0 pending", out)
  end)

  it("says how to get a cluster when there is none", function()
    -- no KUBECONFIG, and a `make kube` cache with nothing built in it
    local out, rc = helpers.run(("env -u KUBECONFIG LUNA_KUBE_CACHE=%s %s test --kube %s"):format(
      helpers.tmpdir(), helpers.luna, helpers.tmpdir()))
    assert.equal(2, rc, out)
    assert.matches("luna test %-%-kube: no cluster to run against: KUBECONFIG is not set", out)
    assert.matches("Set KUBECONFIG to a cluster's kubeconfig, or run `make kube`", out)
  end)

  it("says the cluster in KUBECONFIG cannot be reached", function()
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/sample_test.lua", TESTS)
    -- a port nothing listens on: the dev server's, stopped
    local ds = client.start{ dev = true, no_namespace = true }
    local url = ds.url
    ds:stop()
    local out, rc = helpers.run(("KUBECONFIG=%s %s test --kube %s"):format(
      kubeconfig(dir, url), helpers.luna, dir))
    assert.equal(2, rc, out)
    assert.matches("luna test %-%-kube: cannot reach the cluster in KUBECONFIG=" .. dir:gsub("%p", "%%%0"), out)
    assert.matches("Check KUBECONFIG, or unset it", out)
  end)
end)
