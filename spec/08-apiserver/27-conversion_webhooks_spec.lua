-- Conversion webhooks, called as kube-apiserver calls them: for a CRD
-- with spec.conversion.strategy Webhook, an object read or written in a
-- version other than the one it is stored in goes through a
-- ConversionReview v1 to the webhook (docs/dev-server.md, "Conversion
-- webhooks").  The webhook is spec/fixtures/admission_webhook over HTTPS
-- with a certificate made here; it renames spec.size (v1alpha1) to
-- spec.replicas (v1) and labels what it converted converted-to=VERSION.
-- Against a real cluster (`make test-kube`) kube-apiserver calls the same
-- fixture on loopback.
--
-- Each test has its own CRD (its own group), so a webhook that fails
-- touches no other test's objects.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local cjson = require("cjson")

local CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

describe("conversion webhooks", function()
  local srv, hook, dir, url, ca, log
  local crds = {}
  local seq = 0

  setup(function()
    dir = helpers.tmpdir()
    local out, rc = helpers.run("env -u LD_PRELOAD openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 " ..
      "-addext subjectAltName=IP:127.0.0.1 -keyout " .. dir .. "/key.pem -out " .. dir .. "/cert.pem")
    assert.equal(0, rc, out)
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
    for _, name in ipairs(crds) do srv:request("DELETE", CRDS .. "/" .. name) end
    srv:stop()
    hook:stop()
  end)

  local function crd_doc(group, conversion)
    local schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } }
    return { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
      metadata = { name = "widgets." .. group },
      spec = { group = group, scope = "Namespaced",
        names = { plural = "widgets", singular = "widget", kind = "Widget", listKind = "WidgetList" },
        versions = { { name = "v1alpha1", served = true, storage = false, schema = schema },
                     { name = "v1", served = true, storage = true, schema = schema } },
        conversion = conversion } }
  end

  local function webhook_conversion(hook_url)
    return { strategy = "Webhook", webhook = { conversionReviewVersions = { "v1" },
             clientConfig = { url = hook_url, caBundle = ca } } }
  end

  -- A fresh CRD converting through the fixture's PATH (or hook_url);
  -- returns the paths of its two versions in the spec's namespace.
  local function define(path, hook_url, conversion)
    seq = seq + 1
    local group = "c" .. seq .. "." .. srv.ns .. ".example.com"
    local code, body = srv:request("POST", CRDS,
      crd_doc(group, conversion or webhook_conversion(hook_url or (url .. path))))
    assert.equal(201, code, body and body.message)
    crds[#crds + 1] = "widgets." .. group
    helpers.eventually(function()
      local _, c = srv:request("GET", CRDS .. "/widgets." .. group)
      for _, cond in ipairs(c and c.status and c.status.conditions or {}) do
        if cond.type == "Established" and cond.status == "True" then return true end
      end
    end, 30, "the CRD to be established")
    local base = "/apis/" .. group .. "/%s/namespaces/" .. srv.ns .. "/widgets"
    helpers.eventually(function()
      return srv:request("GET", base:format("v1alpha1")) ~= 404 and
             srv:request("GET", base:format("v1")) ~= 404
    end, 30, "both versions to be served")
    return group, base:format("v1alpha1"), base:format("v1")
  end

  local function widget(group, version, name, spec)
    return { apiVersion = group .. "/" .. version, kind = "Widget", metadata = { name = name },
             spec = spec }
  end

  -- The ConversionReviews the fixture received for group's objects.
  local function reviews(group)
    local found = {}
    for line in (helpers.read_file(log) or ""):gmatch("[^\n]+") do
      local r = cjson.decode(line)
      local req = r.request
      if req ~= cjson.null and req.desiredAPIVersion and
         req.desiredAPIVersion:sub(1, #group + 1) == group .. "/" then
        found[#found + 1] = req
      end
    end
    return found
  end

  it("stores an object created in v1alpha1 as v1, and reads it back in both", function()
    local group, alpha, v1 = define("/convert")
    -- a real server takes a moment to reach a new webhook
    local code, body
    helpers.eventually(function()
      code, body = srv:request("POST", alpha, widget(group, "v1alpha1", "w1", { size = 3 }))
      return code == 201
    end, 30, "the create to go through the webhook")
    assert.equal(group .. "/v1alpha1", body.apiVersion)
    assert.equal(3, body.spec.size)
    assert.is_nil(body.spec.replicas)
    local gcode, got = srv:request("GET", v1 .. "/w1")
    assert.equal(200, gcode)
    assert.equal(group .. "/v1", got.apiVersion)
    assert.equal(3, got.spec.replicas)
    assert.is_nil(got.spec.size)
    -- stored as the webhook converted it: its labels too
    assert.equal("v1", got.metadata.labels["converted-to"])
    gcode, got = srv:request("GET", alpha .. "/w1")
    assert.equal(200, gcode)
    assert.equal(group .. "/v1alpha1", got.apiVersion)
    assert.equal(3, got.spec.size)
    assert.equal("v1alpha1", got.metadata.labels["converted-to"])
    -- an update in v1alpha1 converts again, keeping uid and name
    got.spec.size = 4
    local ucode, updated = srv:request("PUT", alpha .. "/w1", got)
    assert.equal(200, ucode, updated and updated.message)
    assert.equal(4, updated.spec.size)
    local _, back = srv:request("GET", v1 .. "/w1")
    assert.equal(4, back.spec.replicas)
    assert.equal(got.metadata.uid, back.metadata.uid)
    -- what kube sends: request.uid, desiredAPIVersion, the objects
    local rs = reviews(group)
    assert.is_true(#rs >= 2)
    local to_v1
    for _, r in ipairs(rs) do
      assert.matches("^%x+%-%x+%-%x+%-%x+%-%x+$", r.uid)
      if r.desiredAPIVersion == group .. "/v1" and r.objects[1].spec.size == 3 then to_v1 = r end
    end
    assert.is_table(to_v1)
    assert.equal(group .. "/v1alpha1", to_v1.objects[1].apiVersion)
    assert.equal("w1", to_v1.objects[1].metadata.name)
  end)

  it("lists in the other version, every item converted", function()
    local group, alpha, v1 = define("/convert")
    for i = 1, 3 do
      local code, body = srv:request("POST", v1, widget(group, "v1", "l" .. i, { replicas = i }))
      assert.equal(201, code, body and body.message)
    end
    -- two objects equal but for their names: each converted as itself
    for _, name in ipairs { "twin-a", "twin-b" } do
      local code, body = srv:request("POST", v1, widget(group, "v1", name, { replicas = 7 }))
      assert.equal(201, code, body and body.message)
    end
    local list
    helpers.eventually(function()
      local code
      code, list = srv:request("GET", alpha)
      return code == 200 and #list.items == 5 and list.items[1].spec.size ~= nil
    end, 30, "the list to be converted")
    assert.equal(group .. "/v1alpha1", list.apiVersion)
    assert.equal("WidgetList", list.kind)
    for _, item in ipairs(list.items) do
      assert.equal(group .. "/v1alpha1", item.apiVersion)
      local n = item.metadata.name
      assert.equal(n:find("^twin") and 7 or tonumber(n:sub(2)), item.spec.size)
      assert.is_nil(item.spec.replicas)
      assert.equal("v1alpha1", item.metadata.labels["converted-to"])
      assert.equal(n, item.metadata.labels["name-seen"])
    end
  end)

  it("watches in the other version, each event converted", function()
    local group, alpha, v1 = define("/convert")
    local code = srv:request("POST", v1, widget(group, "v1", "before", { replicas = 1 }))
    assert.equal(201, code)
    local w = srv:watch(alpha .. "?watch=true")
    local ev = w:until_event(function(e)
      return e.type == "ADDED" and e.object.metadata.name == "before"
    end, 30)
    assert.is_table(ev)
    assert.equal(group .. "/v1alpha1", ev.object.apiVersion)
    assert.equal(1, ev.object.spec.size)
    code = srv:request("POST", v1, widget(group, "v1", "after", { replicas = 2 }))
    assert.equal(201, code)
    ev = w:until_event(function(e)
      return e.type == "ADDED" and e.object.metadata.name == "after"
    end, 30)
    w:stop()
    assert.is_table(ev)
    assert.equal(group .. "/v1alpha1", ev.object.apiVersion)
    assert.equal(2, ev.object.spec.size)
    assert.equal("v1alpha1", ev.object.metadata.labels["converted-to"])
  end)

  -- kube answers a conversion error as a 500 Status with the error's text
  local function conversion_error(path, hook_url)
    local group, alpha, v1 = define(path, hook_url)
    local code, body = srv:request("POST", v1, widget(group, "v1", "w1", { replicas = 1 }))
    assert.equal(201, code, body and body.message)
    local st
    helpers.eventually(function()
      code, st = srv:request("GET", alpha .. "/w1")
      return code ~= 200
    end, 30, "the webhook to be called")
    assert.equal(500, code)
    assert.equal("Status", st.kind)
    assert.equal("Failure", st.status)
    assert.equal(500, st.code)
    -- read from storage: the storage layer's "corrupt object", naming the
    -- key and the revision, as an InternalError
    local prefix = ("Internal error occurred: StorageError: corrupt object, Code: 7, Key: " ..
                    "/%s/widgets/%s/w1, ResourceVersion: 0, AdditionalErrorMsg: object not " ..
                    "decodable revision=%s: "):format(group, srv.ns, body.metadata.resourceVersion)
    assert.equal("InternalError", st.reason)
    assert.equal(prefix, st.message:sub(1, #prefix))
    assert.equal(st.message:sub(#"Internal error occurred: " + 1), st.details.causes[1].message)
    return group, alpha, v1, st.message:sub(#prefix + 1)
  end

  it("answers the webhook's Failure as kube does, storing nothing", function()
    local group, alpha, v1, message = conversion_error("/convert-fail/no%20way")
    assert.equal("conversion webhook for " .. group .. "/v1, Kind=Widget failed: no way", message)
    local code, st = srv:request("POST", alpha, widget(group, "v1alpha1", "w2", { size = 2 }))
    assert.equal(500, code)
    assert.equal("conversion webhook for " .. group .. "/v1alpha1, Kind=Widget failed: no way",
                 st.message)
    assert.equal(404, (srv:request("GET", v1 .. "/w2")))
  end)

  it("answers an unreachable webhook as kube does", function()
    local group, _, _, message = conversion_error(nil, "https://127.0.0.1:1/convert")
    assert.equal("conversion webhook for " .. group .. "/v1, Kind=Widget failed: Post " ..
                 "\"https://127.0.0.1:1/convert?timeout=30s\": dial tcp 127.0.0.1:1: connect: " ..
                 "connection refused", message)
  end)

  it("refuses a bad answer (uid, count, a changed name) as kube does", function()
    local group, _, _, message = conversion_error("/convert-bad-uid")
    assert.matches("^conversion webhook for " .. group:gsub("%p", "%%%0") ..
                   "/v1, Kind=Widget failed: expected response%.uid=\"%x+%-%x+%-%x+%-%x+%-%x+\", " ..
                   "got \"not%-the%-uid\"$", message)
    group, _, _, message = conversion_error("/convert-none")
    assert.equal("conversion webhook for " .. group .. "/v1, Kind=Widget returned 0 objects, " ..
                 "expected 1", message)
    group, _, _, message = conversion_error("/convert-rename")
    assert.equal("conversion webhook for " .. group .. "/v1, Kind=Widget returned invalid " ..
                 "object: must have the same name: w1 != w1-renamed", message)
  end)

  it("keeps strategy None (apiVersion only), and checks a Webhook stanza as kube does", function()
    local before = #reviews("")
    local group, alpha, v1 = define(nil, nil, { strategy = "None" })
    local code, body = srv:request("POST", alpha, widget(group, "v1alpha1", "n1", { size = 3 }))
    assert.equal(201, code, body and body.message)
    local _, got = srv:request("GET", v1 .. "/n1")
    assert.equal(group .. "/v1", got.apiVersion)
    assert.equal(3, got.spec.size)
    assert.is_nil(got.metadata.labels)
    assert.equal(before, #reviews(""))

    seq = seq + 1
    local g = "c" .. seq .. "." .. srv.ns .. ".example.com"
    local st
    code, st = srv:request("POST", CRDS, crd_doc(g, { strategy = "Webhook" }))
    assert.equal(422, code)
    assert.equal("Invalid", st.reason)
    assert.equal('CustomResourceDefinition.apiextensions.k8s.io "widgets.' .. g .. '" is invalid: ' ..
                 "[spec.conversion.webhookClientConfig: Required value: required when strategy " ..
                 "is set to Webhook, spec.conversion.conversionReviewVersions: Required value]",
                 st.message)
    local conv = webhook_conversion(url .. "/convert")
    conv.webhook.conversionReviewVersions = { "v2" }
    code, st = srv:request("POST", CRDS, crd_doc(g, conv))
    assert.equal(422, code)
    assert.equal('CustomResourceDefinition.apiextensions.k8s.io "widgets.' .. g .. '" is invalid: ' ..
                 'spec.conversion.conversionReviewVersions: Invalid value: ["v2"]: must ' ..
                 "include at least one of v1, v1beta1", st.message)
    code, st = srv:request("POST", CRDS, crd_doc(g, { strategy = "Sideways" }))
    assert.equal(422, code)
    assert.matches('spec.conversion.strategy: Unsupported value: "Sideways": supported values: ' ..
                   '"None", "Webhook"', st.message, 1, true)
  end)
end)
