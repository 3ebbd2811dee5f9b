-- Field validation of writes (?fieldValidation=): an unknown field in a
-- create, update or patch body is dropped and, by default (Warn, the
-- server's default since Kubernetes 1.27), named in a `Warning: 299 - "..."`
-- response header; Strict refuses the write, Ignore drops it silently.
-- The same as kube-apiserver answers, so every test runs against both.
local client = require("support.apiserver_client")
local helpers = require("helpers")

-- The texts of the 299 warnings in raw response headers, in order.
local function warnings(headers)
  local out = {}
  for value in (headers or ""):gmatch("\n[Ww]arning: ([^\r\n]*)") do
    local text = value:match('^299 %- "(.*)"$')
    assert(text, "a Warning header not of the form 299 - \"text\": " .. value)
    out[#out + 1] = text:gsub('\\(.)', "%1")
  end
  return out
end

describe("apiserver field validation", function()
  local srv, group
  setup(function()
    srv = client.start()
    group = srv.ns .. ".example.com"
  end)
  teardown(function()
    srv:request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets." .. group)
    srv:stop()
  end)

  local MERGE = { content_type = "application/merge-patch+json" }

  it("warns of an unknown field in a merge patch, drops it and applies the rest", function()
    srv:create_cm("typo", { a = "1" })
    local code, cm, _, headers = srv:request("PATCH", srv:ns_path("configmaps", "typo"),
      '{"dta":{"b":"2"},"data":{"c":"3"}}', MERGE)
    assert.equal(200, code)
    assert.same({ 'unknown field "dta"' }, warnings(headers))
    assert.is_nil(cm.dta)
    assert.same({ a = "1", c = "3" }, cm.data)
    local _, again = srv:request("GET", srv:ns_path("configmaps", "typo"))
    assert.is_nil(again.dta)
  end)

  it("sends no warning for a write whose fields are all known", function()
    srv:create_cm("clean", { a = "1" })
    local code, _, _, headers = srv:request("PATCH", srv:ns_path("configmaps", "clean"),
      { data = { a = "2" }, metadata = { labels = { x = "y" } } }, MERGE)
    assert.equal(200, code)
    assert.same({}, warnings(headers))
  end)

  it("names nested unknown fields by their path, on create and update", function()
    local code, cm, _, headers = srv:request("POST", srv:ns_path("configmaps"),
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "nested", lables = { a = "b" } },
        data = { k = "v" } })
    assert.equal(201, code)
    assert.same({ 'unknown field "metadata.lables"' }, warnings(headers))
    assert.is_nil(cm.metadata.lables)
    cm.extra = 1
    local ucode, _, _, uheaders = srv:request("PUT", srv:ns_path("configmaps", "nested"), cm)
    assert.equal(200, ucode)
    assert.same({ 'unknown field "extra"' }, warnings(uheaders))
  end)

  it("names a field inside a list element with its index", function()
    local path = srv:ns_path("deployments", nil, "apps/v1")
    local code, _, _, headers = srv:request("POST", path, { apiVersion = "apps/v1", kind = "Deployment",
      metadata = { name = "fv" }, spec = { selector = { matchLabels = { app = "fv" } },
      template = { metadata = { labels = { app = "fv" } }, spec = { containers = {
        { name = "a", image = "a:1" }, { name = "b", image = "b:1", imagee = "b:2" } } } } } })
    assert.equal(201, code)
    assert.same({ 'unknown field "spec.template.spec.containers[1].imagee"' }, warnings(headers))
  end)

  it("refuses the write with fieldValidation=Strict and stays silent with Ignore", function()
    srv:create_cm("strict", { a = "1" })
    -- a patch: kube's patcher answers 422 Invalid, field "patch"
    local code, st = srv:request("PATCH", srv:ns_path("configmaps", "strict") .. "?fieldValidation=Strict",
      '{"dta":{"b":"2"}}', MERGE)
    assert.equal(422, code)
    assert.equal("Invalid", st.reason)
    assert.matches('strict decoding error: unknown field "dta"', st.message, 1, true)
    -- a create: the decoder's 400 BadRequest
    local ccode, cst = srv:request("POST", srv:ns_path("configmaps") .. "?fieldValidation=Strict",
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "strict2" }, dta = { b = "2" } })
    assert.equal(400, ccode)
    assert.equal("BadRequest", cst.reason)
    assert.matches('strict decoding error: unknown field "dta"', cst.message, 1, true)
    assert.equal(404, (srv:request("GET", srv:ns_path("configmaps", "strict2"))))
    local icode, cm, _, headers = srv:request("PATCH",
      srv:ns_path("configmaps", "strict") .. "?fieldValidation=Ignore", '{"dta":{"b":"2"}}', MERGE)
    assert.equal(200, icode)
    assert.same({}, warnings(headers))
    assert.is_nil(cm.dta)
  end)

  it("refuses a fieldValidation value it does not know with 422, naming the supported ones", function()
    local code, st = srv:request("POST", srv:ns_path("configmaps") .. "?fieldValidation=Loose",
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "loose" } })
    assert.equal(422, code)
    assert.equal("Invalid", st.reason)
    assert.matches('fieldValidation: Unsupported value: "Loose"', st.message, 1, true)
    assert.equal(404, (srv:request("GET", srv:ns_path("configmaps", "loose"))))
  end)

  -- A custom resource by its CRD's structural schema, as apiextensions
  -- prunes: properties, items, additionalProperties, preserved subtrees,
  -- metadata as ObjectMeta.  (kube does not promise an order: compared
  -- sorted.)
  it("warns of unknown fields of a custom resource by its schema", function()
    local str = { type = "string" }
    local schema = { type = "object", properties = {
      spec = { type = "object", properties = {
        replicas = { type = "integer" },
        items = { type = "array", items = { type = "object", properties = { name = str } } },
        labels = { type = "object", additionalProperties = str },
        free = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } },
      status = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } }
    local crd = { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
      metadata = { name = "widgets." .. group },
      spec = { group = group, scope = "Namespaced",
        versions = { { name = "v1", served = true, storage = true, schema = { openAPIV3Schema = schema } } },
        names = { plural = "widgets", singular = "widget", kind = "Widget", listKind = "WidgetList" } } }
    assert.equal(201, (srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)))
    local path = "/apis/" .. group .. "/v1/namespaces/" .. srv.ns .. "/widgets"
    local code, w, headers
    local deadline = helpers.now() + 30
    repeat -- until the new resource is served
      code, w, _, headers = srv:request("POST", path, { apiVersion = group .. "/v1", kind = "Widget",
        metadata = { name = "w1", lables = { a = "b" } },
        spec = { replicass = 2, replicas = 1, items = { { name = "a", nmae = "b" } },
                 labels = { any = "x" }, free = { anything = { goes = true } } } })
      if code ~= 201 then os.execute("sleep 0.2") end
    until code == 201 or helpers.now() > deadline
    assert.equal(201, code)
    local got = warnings(headers)
    table.sort(got)
    assert.same({ 'unknown field "metadata.lables"', 'unknown field "spec.items[0].nmae"',
                  'unknown field "spec.replicass"' }, got)
    assert.is_nil(w.spec.replicass)
    assert.is_nil(w.spec.items[1].nmae)
    assert.same({ any = "x" }, w.spec.labels)
    assert.same({ anything = { goes = true } }, w.spec.free)
  end)
end)
