-- Admission webhooks, called as kube-apiserver calls them: the dev server
-- sends AdmissionReview v1 to the webhooks of the Mutating- and
-- ValidatingWebhookConfigurations it stores (docs/dev-server.md,
-- "Admission webhooks").  The webhook is spec/fixtures/admission_webhook
-- over HTTPS with a certificate made here; against a real cluster
-- (`make test-kube`) kube-apiserver calls the same fixture on loopback.
--
-- Every webhook is confined to the spec's namespace and to objects with
-- the test's own label, so the configurations of one test never touch
-- another's objects, even while a real server is still picking up a
-- deletion.  A real server applies a new configuration shortly after it
-- is created: each test first waits until the webhook visibly acts.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local cjson = require("cjson")

local ADMISSION = "/apis/admissionregistration.k8s.io/v1/"

describe("admission webhooks", function()
  local srv, hook, dir, url, ca, log
  local paths = {}
  local seq = 0

  setup(function()
    dir = helpers.tmpdir()
    local out, rc = helpers.run("env -u LD_PRELOAD openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 " ..
      "-addext subjectAltName=IP:127.0.0.1,DNS:admission.hooks.svc -keyout " .. dir ..
      "/key.pem -out " .. dir .. "/cert.pem")
    assert.equal(0, rc, out)
    -- without the ASan runtime the specs preload: under it base64 may
    -- abort at exit, and the shell's "Aborted" would end up in the bundle
    ca = (helpers.run("env -u LD_PRELOAD base64 -w0 " .. dir .. "/cert.pem"))
    assert.matches("^[A-Za-z0-9+/]+=*$", ca)
    log = dir .. "/reviews.ndjson"
    hook = helpers.spawn({ helpers.fixtures .. "/admission_webhook", "--cert", dir .. "/cert.pem",
                           "--key", dir .. "/key.pem", "--log", log })
    local _, u = hook:expect("listening on (https://%S+)", 10)
    url = u
    srv = client.start()
  end)

  teardown(function()
    for _, p in ipairs(paths) do srv:request("DELETE", p) end
    srv:stop()
    hook:stop()
  end)

  local function fresh(prefix)
    seq = seq + 1
    return prefix .. "-" .. seq
  end

  -- A webhook of the test `id` calling PATH on the fixture; over: fields
  -- to set (false removes one).
  local function webhook(id, name, path, over)
    local w = {
      name = name .. ".luna.test",
      clientConfig = { url = url .. path, caBundle = ca },
      rules = { { operations = { "CREATE" }, apiGroups = { "" }, apiVersions = { "v1" },
                  resources = { "configmaps" } } },
      namespaceSelector = { matchLabels = { ["kubernetes.io/metadata.name"] = srv.ns } },
      objectSelector = { matchLabels = { ["luna-test"] = id } },
      sideEffects = "None",
      admissionReviewVersions = { "v1" },
      timeoutSeconds = 5,
    }
    for k, v in pairs(over or {}) do
      if v == false then w[k] = nil else w[k] = v end
    end
    return w
  end

  local function configure(kind, webhooks)
    local res = kind .. "webhookconfigurations"
    local name = fresh(srv.ns)
    local code, body = srv:request("POST", ADMISSION .. res, {
      apiVersion = "admissionregistration.k8s.io/v1",
      kind = kind == "validating" and "ValidatingWebhookConfiguration" or "MutatingWebhookConfiguration",
      metadata = { name = name }, webhooks = webhooks })
    assert.equal(201, code, body and body.message)
    paths[#paths + 1] = ADMISSION .. res .. "/" .. name
    return paths[#paths]
  end

  local function create_cm(name, labels, query)
    return srv:request("POST", srv:ns_path("configmaps") .. (query or ""),
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name, labels = labels },
        data = { a = "b" } })
  end

  -- The reviews the fixture received for object `name` (in order); each
-- one's `kind` is its path's first segment ("/deny").
  local function reviews(name)
    local found = {}
    for line in (helpers.read_file(log) or ""):gmatch("[^\n]+") do
      local r = cjson.decode(line)
      local req = r.request
      local obj = req ~= cjson.null and (req.object ~= cjson.null and req.object or req.oldObject)
      if obj and obj ~= cjson.null and obj.metadata and obj.metadata.name == name then
        r.kind = r.path:match("^/[^/]*")
        found[#found + 1] = r
      end
    end
    return found
  end

  -- Creates fresh objects until check(code, body, headers, name) holds
  -- (a real server takes a moment to apply a configuration).
  local function until_create(id, check, labels, query)
    local code, body, headers, name
    helpers.eventually(function()
      name = fresh("cm")
      local l = { ["luna-test"] = id }
      for k, v in pairs(labels or {}) do l[k] = v end
      local raw
      code, body, raw, headers = create_cm(name, l, query)
      return check(code, body, headers, name)
    end, 30, "the webhook to act")
    return code, body, headers, name
  end

  it("denies with the webhook's message, worded as kube words it", function()
    configure("validating", { webhook("deny", "deny", "/deny/no%20thanks") })
    local code, st, _, name = until_create("deny", function(c) return c ~= 201 end)
    assert.equal(400, code)
    assert.equal("Status", st.kind)
    assert.equal("Failure", st.status)
    assert.equal('admission webhook "deny.luna.test" denied the request: no thanks', st.message)
    assert.equal(404, (srv:request("GET", srv:ns_path("configmaps", name))))

    configure("validating", { webhook("deny403", "deny403",
                                      "/deny/not%20here/403/Forbidden") })
    code, st = until_create("deny403", function(c) return c ~= 201 end)
    assert.equal(403, code)
    assert.equal("Forbidden", st.reason)
    assert.equal('admission webhook "deny403.luna.test" denied the request: not here', st.message)
  end)

  it("sends kube's AdmissionReview and passes warnings on as Warning headers", function()
    configure("validating", { webhook("warn", "warn", "/warn/careful%20now") })
    local code, obj, headers, name = until_create("warn", function(c, _, h)
      return c == 201 and h:find('299 - "careful now"', 1, true) ~= nil
    end)
    assert.equal(201, code)
    assert.equal(name, obj.metadata.name)
    local seen = reviews(name)
    assert.equal(1, #seen)
    assert.equal("/warn", seen[1].kind)
    local req = seen[1].request
    assert.is_string(req.uid)
    assert.same({ group = "", version = "v1", kind = "ConfigMap" }, req.kind)
    assert.same({ group = "", version = "v1", resource = "configmaps" }, req.resource)
    assert.same(req.kind, req.requestKind)
    assert.same(req.resource, req.requestResource)
    assert.equal("CREATE", req.operation)
    assert.equal(name, req.name)
    assert.equal(srv.ns, req.namespace)
    assert.is_string(req.userInfo.username)
    assert.equal(name, req.object.metadata.name)
    assert.equal(cjson.null, req.oldObject)
    assert.is_false(req.dryRun)
    assert.equal("CreateOptions", req.options.kind)
    assert.truthy(headers)
  end)

  it("stores the object as a mutating webhook changed it", function()
    configure("mutating", { webhook("mutate", "mutate", "/label/added/yes") })
    local code, obj, _, name = until_create("mutate", function(c, b)
      return c == 201 and b.metadata.labels.added == "yes"
    end)
    assert.equal(201, code)
    local gcode, stored = srv:request("GET", srv:ns_path("configmaps", name))
    assert.equal(200, gcode)
    assert.equal("yes", stored.metadata.labels.added)
    assert.equal("mutate", stored.metadata.labels["luna-test"])
    assert.equal(obj.metadata.resourceVersion, stored.metadata.resourceVersion)
  end)

  it("calls the mutating webhooks first, and validates what they made", function()
    configure("validating", { webhook("order", "require", "/require/stamped/yes") })
    configure("mutating", { webhook("order", "stamp", "/label/stamped/yes") })
    local code, obj, _, name = until_create("order", function(c) return c == 201 end)
    assert.equal("yes", obj.metadata.labels.stamped)
    local seen = reviews(name)
    assert.equal("/label", seen[1].kind)
    assert.equal("/require", seen[#seen].kind)
    -- the validating webhook got the mutated object
    assert.equal("yes", seen[#seen].request.object.metadata.labels.stamped)
    assert.equal(201, code)
  end)

  it("fails closed on a timeout, and open with failurePolicy Ignore", function()
    configure("validating", { webhook("slowfail", "slow-fail", "/slow/4000",
                                      { timeoutSeconds = 1, failurePolicy = "Fail" }) })
    local code, st = until_create("slowfail", function(c) return c ~= 201 end)
    assert.equal(500, code)
    assert.equal("InternalError", st.reason)
    assert.truthy(st.message:find('failed calling webhook "slow-fail.luna.test": failed to call webhook: Post "' ..
                                  url .. '/slow/4000?timeout=1s"', 1, true), st.message)
    assert.truthy(st.message:find("context deadline exceeded", 1, true), st.message)

    configure("validating", { webhook("slowok", "slow-ok", "/slow/4000",
                                      { timeoutSeconds = 1, failurePolicy = "Ignore" }) })
    until_create("slowok", function(c, _, _, name) return c == 201 and #reviews(name) == 1 end)
  end)

  it("fails closed on an unreachable webhook, and open with failurePolicy Ignore", function()
    configure("validating", { webhook("gonefail", "gone-fail", "", { clientConfig =
      { url = "https://127.0.0.1:1/gone", caBundle = ca } }) })
    local code, st = until_create("gonefail", function(c) return c ~= 201 end)
    assert.equal(500, code)
    assert.truthy(st.message:find('failed calling webhook "gone-fail.luna.test": failed to call webhook: ' ..
                                  'Post "https://127.0.0.1:1/gone?timeout=5s"', 1, true), st.message)
    -- with a webhook beside it that shows when the configuration acts
    configure("validating", {
      webhook("goneok", "gone-ok", "", { failurePolicy = "Ignore", clientConfig =
        { url = "https://127.0.0.1:1/gone", caBundle = ca } }),
      webhook("goneok", "witness", "/allow"),
    })
    until_create("goneok", function(c, _, _, name) return c == 201 and #reviews(name) == 1 end)
  end)

  it("fails closed on an answer kube would not take", function()
    configure("validating", { webhook("baduid", "bad-uid", "/bad-uid") })
    local code, st = until_create("baduid", function(c) return c ~= 201 end)
    assert.equal(500, code)
    assert.matches('failed calling webhook "bad-uid.luna.test": received invalid webhook response: ' ..
                   'expected response.uid="', st.message, 1, true)
    -- a patch from a validating webhook
    configure("validating", { webhook("valpatch", "val-patch", "/label/x/y") })
    code, st = until_create("valpatch", function(c) return c ~= 201 end)
    assert.equal(500, code)
    assert.matches('failed calling webhook "val-patch.luna.test": received invalid webhook response: ' ..
                   'validating webhook may not return response.patch', st.message, 1, true)
  end)

  it("skips objects outside its objectSelector", function()
    configure("validating", { webhook("objsel", "objsel", "/deny/closed", {
      objectSelector = { matchLabels = { ["luna-test"] = "objsel", gate = "closed" } } }) })
    until_create("objsel", function(c) return c == 400 end, { gate = "closed" })
    local name = fresh("open")
    assert.equal(201, (create_cm(name, { ["luna-test"] = "objsel", gate = "open" })))
    assert.equal(0, #reviews(name))
  end)

  it("skips namespaces outside its namespaceSelector", function()
    local nspath = "/api/v1/namespaces/" .. srv.ns
    configure("validating", { webhook("nssel", "nssel", "/deny/namespace%20closed", {
      namespaceSelector = { matchLabels = { ["luna-admission"] = "closed" } } }) })
    local name = fresh("before")
    assert.equal(201, (create_cm(name, { ["luna-test"] = "nssel" })))
    assert.equal(0, #reviews(name))
    assert.equal(200, (srv:request("PATCH", nspath, { metadata = { labels = { ["luna-admission"] = "closed" } } },
                                   { content_type = "application/merge-patch+json" })))
    local _, st = until_create("nssel", function(c) return c == 400 end)
    assert.matches("namespace closed", st.message, 1, true)
    assert.equal(200, (srv:request("PATCH", nspath, { metadata = { labels = { ["luna-admission"] = cjson.null } } },
                                   { content_type = "application/merge-patch+json" })))
    until_create("nssel", function(c) return c == 201 end)
  end)

  it("calls only the webhooks whose rules match the operation and resource", function()
    configure("validating", { webhook("rules", "rules", "/deny/no%20deletes", {
      rules = { { operations = { "DELETE" }, apiGroups = { "" }, apiVersions = { "v1" },
                  resources = { "configmaps" } } } }) })
    local name = fresh("kept")
    assert.equal(201, (create_cm(name, { ["luna-test"] = "rules" })))
    local code, st
    helpers.eventually(function()
      code, st = srv:request("DELETE", srv:ns_path("configmaps", name))
      return code ~= 200
    end, 30, "the DELETE webhook to act")
    assert.equal(400, code)
    assert.equal('admission webhook "rules.luna.test" denied the request: no deletes', st.message)
    local seen = reviews(name)
    local del = seen[#seen].request
    assert.equal("DELETE", del.operation)
    assert.equal(cjson.null, del.object)
    assert.equal(name, del.oldObject.metadata.name)
    assert.equal("DeleteOptions", del.options.kind)
    assert.equal(200, (srv:request("GET", srv:ns_path("configmaps", name))))
    -- no review for the CREATE: the rule names DELETE only
    assert.equal("DELETE", seen[1].request.operation)
  end)

  it("calls webhooks on subresources their rules name", function()
    configure("validating", { webhook("scale", "scale", "/deny/fixed%20size", {
      objectSelector = false,
      rules = { { operations = { "UPDATE" }, apiGroups = { "apps" }, apiVersions = { "v1" },
                  resources = { "deployments/scale" } } } }) })
    local name = fresh("web")
    local code = srv:request("POST", srv:ns_path("deployments", nil, "apps/v1"), {
      apiVersion = "apps/v1", kind = "Deployment",
      metadata = { name = name },
      spec = { replicas = 1, selector = { matchLabels = { app = name } },
               template = { metadata = { labels = { app = name } },
                            spec = { containers = { { name = "c", image = "busybox" } } } } } })
    assert.equal(201, code)
    local st
    helpers.eventually(function()
      code, st = srv:request("PATCH", srv:ns_path("deployments", name, "apps/v1") .. "/scale",
        { spec = { replicas = 3 } }, { content_type = "application/merge-patch+json" })
      return code ~= 200
    end, 30, "the scale webhook to act")
    assert.equal(400, code)
    assert.equal('admission webhook "scale.luna.test" denied the request: fixed size', st.message)
    -- the deployment itself is not the scale subresource
    assert.equal(200, (srv:request("PATCH", srv:ns_path("deployments", name, "apps/v1"),
      { metadata = { labels = { touched = "yes" } } }, { content_type = "application/merge-patch+json" })))
  end)

  it("sends dryRun, and refuses configurations kube refuses", function()
    local code, st = srv:request("POST", ADMISSION .. "validatingwebhookconfigurations", {
      apiVersion = "admissionregistration.k8s.io/v1", kind = "ValidatingWebhookConfiguration",
      metadata = { name = fresh(srv.ns) },
      webhooks = { webhook("effects", "effects", "/allow", { sideEffects = "Some" }) } })
    assert.equal(422, code)
    assert.matches('webhooks[0].sideEffects: Unsupported value: "Some"', st.message, 1, true)
    -- kube adds its own ?timeout= to the URL: a query of the webhook's is refused
    code, st = srv:request("POST", ADMISSION .. "validatingwebhookconfigurations", {
      apiVersion = "admissionregistration.k8s.io/v1", kind = "ValidatingWebhookConfiguration",
      metadata = { name = fresh(srv.ns) },
      webhooks = { webhook("query", "query", "/allow?a=b") } })
    assert.equal(422, code)
    assert.matches('webhooks[0].clientConfig.url: Invalid value: "a=b": query parameters are not ' ..
                   'permitted in the URL', st.message, 1, true)

    configure("validating", { webhook("dry", "dry", "/deny/dry%20no", { sideEffects = "NoneOnDryRun" }) })
    local _, body, _, name = until_create("dry", function(c) return c == 400 end, nil, "?dryRun=All")
    assert.matches("dry no", body.message, 1, true)
    local req = reviews(name)[1].request
    assert.is_true(req.dryRun)
    assert.same({ "All" }, req.options.dryRun)
  end)

  it("calls an IfNeeded webhook again when a later one changed the object", function()
    configure("mutating", {
      webhook("reinvoke", "again", "/allow", { reinvocationPolicy = "IfNeeded" }),
      webhook("reinvoke", "late", "/label/late/yes"),
    })
    local _, obj, _, name = until_create("reinvoke", function(c, _, _, n)
      return c == 201 and #reviews(n) >= 3
    end)
    assert.equal("yes", obj.metadata.labels.late)
    local seen = reviews(name)
    local order = {}
    for i, r in ipairs(seen) do order[i] = r.kind end
    -- "late" changed the object after "again": "again" sees it once more;
    -- "late" is not called again (reinvocationPolicy Never, the default)
    assert.same({ "/allow", "/label", "/allow" }, order)
    assert.equal("yes", seen[3].request.object.metadata.labels.late)
  end)

  it("admits every item of a deletecollection, deleting none when denied", function()
    configure("validating", { webhook("delcoll", "delcoll", "/deny/keep%20them", {
      rules = { { operations = { "DELETE" }, apiGroups = { "" }, apiVersions = { "v1" },
                  resources = { "configmaps" } } } }) })
    local a, b = fresh("keep"), fresh("keep")
    assert.equal(201, (create_cm(a, { ["luna-test"] = "delcoll" })))
    assert.equal(201, (create_cm(b, { ["luna-test"] = "delcoll" })))
    local code, st
    helpers.eventually(function()
      code, st = srv:request("DELETE", srv:ns_path("configmaps") .. "?labelSelector=luna-test%3Ddelcoll")
      return code ~= 200
    end, 30, "the DELETE webhook to act")
    assert.equal(400, code)
    assert.equal('admission webhook "delcoll.luna.test" denied the request: keep them', st.message)
    assert.equal(200, (srv:request("GET", srv:ns_path("configmaps", a))))
    assert.equal(200, (srv:request("GET", srv:ns_path("configmaps", b))))
  end)

  it("matches another served version of the resource under matchPolicy Equivalent", function()
    local group = srv.ns .. ".example.com"
    local crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos." .. group
    local schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } }
    local code = srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
      apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
      metadata = { name = "gizmos." .. group },
      spec = { group = group, scope = "Namespaced",
               names = { plural = "gizmos", singular = "gizmo", kind = "Gizmo", listKind = "GizmoList" },
               versions = { { name = "v1", served = true, storage = true, schema = schema },
                            { name = "v2", served = true, storage = false, schema = schema } } } })
    assert.equal(201, code)
    paths[#paths + 1] = crd
    local function rule(version)
      return { rules = { { operations = { "CREATE" }, apiGroups = { group }, apiVersions = { version },
                           resources = { "gizmos" } } } }
    end
    local exact = rule("v1")
    exact.matchPolicy = "Exact"
    configure("validating", {
      webhook("equiv", "equivalent", "/allow", rule("v1")),
      webhook("equiv", "exact", "/warn/exact", exact),
    })
    local v2 = "/apis/" .. group .. "/v2/namespaces/" .. srv.ns .. "/gizmos"
    local name
    helpers.eventually(function()
      name = fresh("gizmo")
      local c = srv:request("POST", v2, { apiVersion = group .. "/v2", kind = "Gizmo",
        metadata = { name = name, labels = { ["luna-test"] = "equiv" } } })
      return c == 201 and #reviews(name) == 1
    end, 30, "the webhook to act")
    local seen = reviews(name)
    assert.equal("/allow", seen[1].kind)
    local req = seen[1].request
    assert.same({ group = group, version = "v1", kind = "Gizmo" }, req.kind)
    assert.same({ group = group, version = "v1", resource = "gizmos" }, req.resource)
    assert.same({ group = group, version = "v2", kind = "Gizmo" }, req.requestKind)
    assert.same({ group = group, version = "v2", resource = "gizmos" }, req.requestResource)
    assert.equal(group .. "/v1", req.object.apiVersion)
  end)

  it("never sends webhook configurations through webhooks", function()
    -- a webhook that would refuse its own configuration's deletion
    local path = configure("validating", { webhook("exempt", "exempt", "/deny/locked%20in", {
      namespaceSelector = false,
      objectSelector = { matchLabels = { ["luna-test"] = "exempt" } },
      rules = { { operations = { "DELETE" }, apiGroups = { "admissionregistration.k8s.io" },
                  apiVersions = { "v1" }, resources = { "validatingwebhookconfigurations" } } } }) })
    local code, cfg = srv:request("GET", path)
    assert.equal(200, code)
    cfg.metadata.labels = { ["luna-test"] = "exempt" }
    assert.equal(200, (srv:request("PUT", path, cfg)))
    assert.equal(200, (srv:request("DELETE", path)))
    assert.equal(404, (srv:request("GET", path)))
  end)

  it("reaches a clientConfig.service through --webhook-service", function()
    if srv.real then return pending(client.DEV_ONLY .. "kube-apiserver reaches Services itself") end
    local port = url:match(":(%d+)$")
    local dev = client.start({ dev = true, args = { "--webhook-service", "hooks/admission=127.0.0.1:" .. port } })
    local function service_hook(name, svc_name)
      local w = webhook("svc", name, "")
      w.namespaceSelector = { matchLabels = { ["kubernetes.io/metadata.name"] = dev.ns } }
      w.clientConfig = { caBundle = ca, service = { namespace = "hooks", name = svc_name,
                                                    path = "/deny", port = 443 } }
      return w
    end
    local code = dev:request("POST", ADMISSION .. "validatingwebhookconfigurations", {
      apiVersion = "admissionregistration.k8s.io/v1", kind = "ValidatingWebhookConfiguration",
      metadata = { name = "svc" }, webhooks = { service_hook("svc", "admission") } })
    assert.equal(201, code)
    local st
    code, st = dev:request("POST", dev:ns_path("configmaps"), { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "via-service", labels = { ["luna-test"] = "svc" } } })
    assert.equal(400, code)
    assert.equal('admission webhook "svc.luna.test" denied the request without explanation', st.message)
    -- an unmapped Service is a call that fails (closed, by default)
    local cfg
    code, cfg = dev:request("GET", ADMISSION .. "validatingwebhookconfigurations/svc")
    assert.equal(200, code)
    cfg.webhooks = { service_hook("svc", "elsewhere") }
    code = dev:request("PUT", ADMISSION .. "validatingwebhookconfigurations/svc", cfg)
    assert.equal(200, code)
    code, st = dev:request("POST", dev:ns_path("configmaps"), { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "unmapped", labels = { ["luna-test"] = "svc" } } })
    assert.equal(500, code)
    assert.matches("--webhook-service hooks/elsewhere=HOST:PORT", st.message, 1, true)
    dev:stop()
  end)

  it("serves other clients while a webhook thinks", function()
    if srv.real then return pending(client.DEV_ONLY .. "a property of the dev server's loop") end
    configure("validating", { webhook("busy", "busy", "/slow/3000", { failurePolicy = "Ignore" }) })
    -- the slow create runs in the background; GETs answer meanwhile
    local name = fresh("slow")
    local body = cjson.encode({ apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = name, labels = { ["luna-test"] = "busy" } } })
    helpers.write_file(dir .. "/slow.json", body)
    local bg = helpers.spawn({ "sh", "-c", "env -u LD_PRELOAD curl -s -o /dev/null -w '%{http_code}\\n' " ..
      "-H 'Content-Type: application/json' --data-binary @" .. dir .. "/slow.json " ..
      srv.url .. srv:ns_path("configmaps") })
    helpers.eventually(function() return #reviews(name) == 1 end, 10, "the slow webhook to be called")
    local t0 = helpers.now()
    assert.equal(200, (srv:request("GET", srv:ns_path("configmaps"))))
    assert.is_true(helpers.now() - t0 < 1.5)
    bg:expect("201", 10)
    bg:stop()
  end)
end)
