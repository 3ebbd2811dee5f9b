-- kubectl against the server: get, apply (client- and server-side), create,
-- delete, get --watch, api-resources, a CRD round trip.
local client = require("support.apiserver_client")
local helpers = require("helpers")

describe("kubectl", function()
  local srv, kc, dir
  setup(function()
    srv = client.start()
    dir = helpers.tmpdir()
    if srv.real then
      kc = "kubectl -n " .. srv.ns
    else
      helpers.write_file(dir .. "/kubeconfig", table.concat({
        "apiVersion: v1", "kind: Config", "clusters:", "- name: dev", "  cluster:",
        "    server: " .. srv.url, "contexts:", "- name: dev", "  context:", "    cluster: dev",
        "    user: dev", "current-context: dev", "users:", "- name: dev", "  user: {}", "" }, "\n"))
      kc = "KUBECONFIG=" .. dir .. "/kubeconfig kubectl -n " .. srv.ns
    end
  end)
  teardown(function() srv:stop() end)

  local function k(args)
    return helpers.run(kc .. " " .. args)
  end

  it("lists api-resources", function()
    local out, rc = k("api-resources")
    assert.equal(0, rc, out)
    assert.matches("configmaps%s+cm%s+v1%s+true%s+ConfigMap", out)
    assert.matches("deployments%s+deploy%s+apps/v1%s+true%s+Deployment", out)
    assert.matches("leases%s+coordination.k8s.io/v1", out)
  end)

  it("applies, re-applies, gets and deletes a manifest", function()
    local f = dir .. "/cm.yaml"
    helpers.write_file(f, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kapply\ndata:\n  x: \"1\"\n")
    local out, rc = k("apply -f " .. f)
    assert.equal(0, rc, out)
    assert.matches("configmap/kapply created", out)
    helpers.write_file(f, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kapply\ndata:\n  x: \"2\"\n")
    out, rc = k("apply -f " .. f)
    assert.equal(0, rc, out)
    assert.matches("configmap/kapply configured", out)
    out = k("get configmap kapply -o jsonpath={.data.x}")
    assert.equal("2", out)
    out, rc = k("get cm")
    assert.equal(0, rc, out)
    assert.matches("kapply", out)
    out, rc = k("delete -f " .. f)
    assert.equal(0, rc, out)
    assert.matches('configmap "kapply" deleted', out)
    out, rc = k("get cm kapply")
    assert.equal(1, rc)
    assert.matches('configmaps "kapply" not found', out)
  end)

  it("applies server-side and creates from a file", function()
    local f = dir .. "/ssa.yaml"
    helpers.write_file(f, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kssa\ndata:\n  y: \"1\"\n")
    local out, rc = k("apply --server-side -f " .. f)
    assert.equal(0, rc, out)
    assert.matches("configmap/kssa serverside%-applied", out)
    local g = dir .. "/create.yaml"
    helpers.write_file(g, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kcreate\n")
    out, rc = k("create -f " .. g)
    assert.equal(0, rc, out)
    out, rc = k("create -f " .. g)
    assert.equal(1, rc)
    assert.matches("AlreadyExists", out)
  end)

  it("streams changes with get --watch", function()
    local argv = { "kubectl", "-n", srv.ns, "get", "configmaps", "--watch", "--request-timeout=20s" }
    local env = srv.real and {} or { KUBECONFIG = dir .. "/kubeconfig" }
    -- kfirst comes in the initial list; once kubectl printed it, it
    -- watches from that list's resourceVersion, so kwatched can only come
    -- through the watch
    srv:create_cm("kfirst")
    local p = helpers.spawn(argv, { env = env })
    p:expect("kfirst", 20)
    srv:create_cm("kwatched")
    p:expect("kwatched", 20)
    p:stop()
  end)

  it("round-trips a CRD and its custom resources", function()
    local group = srv.ns .. ".kubectl.example.com"
    local f = dir .. "/crd.yaml"
    helpers.write_file(f, table.concat({
      "apiVersion: apiextensions.k8s.io/v1", "kind: CustomResourceDefinition",
      "metadata:", "  name: sprockets." .. group, "spec:", "  group: " .. group,
      "  scope: Namespaced", "  names: {plural: sprockets, singular: sprocket, kind: Sprocket}",
      "  versions:", "  - name: v1", "    served: true", "    storage: true",
      "    schema:", "      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}", "" }, "\n"))
    local out, rc = k("apply -f " .. f)
    assert.equal(0, rc, out)
    out, rc = k("wait --for condition=Established --timeout=30s crd/sprockets." .. group)
    assert.equal(0, rc, out)
    local cr = dir .. "/cr.yaml"
    helpers.write_file(cr, "apiVersion: " .. group .. "/v1\nkind: Sprocket\nmetadata:\n  name: s1\nspec:\n  teeth: 12\n")
    out, rc = k("apply -f " .. cr)
    assert.equal(0, rc, out)
    out, rc = k("get sprockets s1 -o jsonpath={.spec.teeth}")
    assert.equal(0, rc, out)
    assert.equal("12", out)
    out, rc = k("delete sprocket s1")
    assert.equal(0, rc, out)
    out, rc = k("delete -f " .. f)
    assert.equal(0, rc, out)
  end)
end)
