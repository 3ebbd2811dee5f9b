-- --seed manifests, the dump endpoint, --dump-on-exit, and command-line errors.
local client = require("support.apiserver_client")
local helpers = require("helpers")
local cjson = require("cjson")

if client.real() then
  describe("apiserver seeding", function()
    pending(client.DEV_ONLY .. "seeding and dumps are dev server features")
  end)
  return
end

describe("apiserver seeding and dumps", function()
  it("creates the objects of YAML and JSON seeds, namespaces included", function()
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/a.yaml", table.concat({
      "apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: seeded", "  namespace: team-a",
      "  labels: {app: x}", "data:", "  n: \"1\"", "---",
      "apiVersion: v1", "kind: List", "items:",
      "- apiVersion: v1", "  kind: Secret", "  metadata: {name: s, namespace: team-a}",
      "  stringData: {k: v}", "" }, "\n"))
    helpers.write_file(dir .. "/b.json", cjson.encode({ apiVersion = "apps/v1", kind = "Deployment",
      metadata = { name = "d", namespace = "default" }, spec = { replicas = 2,
        -- a seed is validated as a create is: selector and a container
        selector = { matchLabels = { app = "d" } }, template = { metadata = { labels = { app = "d" } },
        spec = { containers = { { name = "c", image = "c" } } } } } }))
    local dump = dir .. "/dump.json"
    local s = client.start({ no_namespace = true, args = { "--seed", dir .. "/a.yaml", "--seed",
      dir .. "/b.json", "--dump-on-exit", dump } })
    local code, cm = s:request("GET", "/api/v1/namespaces/team-a/configmaps/seeded")
    assert.equal(200, code)
    assert.equal("x", cm.metadata.labels.app)
    assert.equal(200, (s:request("GET", "/api/v1/namespaces/team-a/secrets/s")))
    assert.equal(200, (s:request("GET", "/apis/apps/v1/namespaces/default/deployments/d")))
    local dcode, all = s:request("GET", "/luna/v1/dump")
    assert.equal(200, dcode)
    assert.equal("List", all.kind)
    local kinds = {}
    for _, it in ipairs(all.items) do kinds[it.kind .. "/" .. it.metadata.name] = true end
    assert.is_true(kinds["ConfigMap/seeded"])
    assert.is_true(kinds["Namespace/team-a"])
    assert.equal(0, s:stop())
    local saved = cjson.decode(helpers.read_file(dump))
    assert.equal("List", saved.kind)
    assert.equal(#all.items, #saved.items)
  end)

  it("reads a YAML flow mapping that is not JSON, and names a broken JSON seed", function()
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/flow.yaml", "{apiVersion: v1, kind: ConfigMap, metadata: {name: flow, namespace: seeded}}\n")
    local dump = dir .. "/dump.json"
    local s = client.start({ no_namespace = true, args = { "--seed", dir .. "/flow.yaml", "--dump-on-exit", dump } })
    assert.equal(0, s:stop(), s.proc:drain(0))
    local names = {}
    for _, o in ipairs(cjson.decode(helpers.read_file(dump)).items) do names[o.metadata.name] = true end
    assert.is_true(names.flow)
    helpers.write_file(dir .. "/bad.json", '{"apiVersion": "v1", "kind": "ConfigMap",')
    local out, rc = helpers.run(helpers.luna .. " dev-server --listen 127.0.0.1:0 --seed " .. dir .. "/bad.json")
    assert.equal(1, rc)
    assert.matches("bad%.json", out)
  end)

  it("exits 1 naming the file when a seed is invalid", function()
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n")
    local out, rc = helpers.run(helpers.luna .. " dev-server --listen 127.0.0.1:0 --seed " .. dir .. "/bad.yaml")
    assert.equal(1, rc)
    assert.matches("bad%.yaml", out)
    helpers.write_file(dir .. "/unknown.yaml", "apiVersion: v9\nkind: Gizmo\nmetadata:\n  name: g\n")
    out, rc = helpers.run(helpers.luna .. " dev-server --listen 127.0.0.1:0 --seed " .. dir .. "/unknown.yaml")
    assert.equal(1, rc)
    assert.matches('seed failed seed=[^ ]*unknown%.yaml error="document 1: no resource for v9 Gizmo"', out)
  end)

  it("rejects bad command lines with exit 2", function()
    local out, rc = helpers.run(helpers.luna .. " dev-server")
    assert.equal(2, rc)
    assert.matches("%-%-listen HOST:PORT is required", out)
    out, rc = helpers.run(helpers.luna .. " dev-server --listen 127.0.0.1:0 --tls-cert x.pem")
    assert.equal(2, rc)
    assert.matches("go together", out)
    out, rc = helpers.run(helpers.luna .. " dev-server --listen nowhere:0")
    assert.equal(1, rc)
    assert.matches("not a numeric IP address", out)
  end)
end)
