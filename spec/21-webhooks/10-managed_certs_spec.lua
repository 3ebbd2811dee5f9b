-- `luna run --webhook-cert-mode managed` (docs/webhooks.md "Certificates",
-- host/serve/webhook_manager.h): luna makes its CA and serving certificate,
-- keeps them in one Secret, writes its webhook configurations with a
-- caBundle that verifies what it serves, and the API server calls it
-- through them; a rotation is served without refusing a connection; two
-- replicas starting at once end on one CA; CRDs named by
-- --webhook-conversion-crds get the caBundle in their conversion stanza;
-- a Forbidden answer (RBAC missing) is a clear log line and a failing
-- /readyz, not a crash.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local P = require("15-production.support")
local S = require("21-webhooks.support")
local cjson = require("cjson")

local HOOKS = [[
local luna = require "luna"
local RULES = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "configmaps" },
                  operations = { "CREATE", "UPDATE" }, scope = "Namespaced" } }
local ONLY = { match_labels = { ["luna-spec"] = "managed" } }
return luna.webhooks {
  luna.webhook {
    name = "cm.validate.example.com", rules = RULES, object_selector = ONLY,
    validate = function(req)
      if req.object.data and req.object.data.bad then return false, "bad data in " .. req.name end
      return true
    end,
  },
  luna.webhook {
    name = "cm.mutate.example.com", rules = RULES, object_selector = ONLY,
    mutate = function(req, obj) obj.data = obj.data or {}; obj.data["set.by"] = "luna" end,
  },
  %s
}
]]
local EXTRA = [[
  luna.webhook { name = "cm.extra.example.com", rules = RULES, object_selector = ONLY,
                 failure_policy = "Ignore", validate = function() return true end },
]]

local function sh(cmd) return helpers.run("env -u LD_PRELOAD " .. cmd) end

local function b64decode(s, file)
  local dir = helpers.tmpdir()
  helpers.write_file(dir .. "/in", s)
  local out, rc = sh(("base64 -d %s/in > %s"):format(dir, file))
  assert(rc == 0, out)
  return helpers.read_file(file)
end

-- The certificate served at addr (PEM), and whether it verifies against
-- cafile for IP 127.0.0.1 (openssl s_client, verification errors fatal).
local function served(addr, cafile)
  local dir = helpers.tmpdir()
  local out = sh(("openssl s_client -connect %s -CAfile %s -verify_return_error -verify_ip 127.0.0.1 " ..
                  "</dev/null 2>&1 | tee %s/log | openssl x509 > %s/crt 2>/dev/null; cat %s/log")
                 :format(addr, cafile, dir, dir, dir))
  return helpers.read_file(dir .. "/crt") or "", out:find("Verify return code: 0 (ok)", 1, true) ~= nil, out
end

local function pem_certs(s)
  local n = 0
  for _ in s:gmatch("BEGIN CERTIFICATE") do n = n + 1 end
  return n
end

describe("managed webhook certificates, with the embedded dev server", function()
  local proc, kubeconfig, addr, health, dir, work

  local function kubectl(args)
    return sh(("kubectl --kubeconfig %s %s 2>&1"):format(kubeconfig, args))
  end
  local function get_json(args)
    local out = kubectl("get " .. args .. " -o json")
    local ok, v = pcall(cjson.decode, out)
    return ok and v or nil, out
  end
  local function count(pattern)
    while proc:read_line(0.01) do end
    local n = 0
    for _, l in ipairs(proc.out) do if l:find(pattern) then n = n + 1 end end
    return n
  end

  setup(function()
    dir, work = helpers.tmpdir(), helpers.tmpdir()
    helpers.write_file(dir .. "/hooks.lua", HOOKS:format(""))
    proc = helpers.spawn({ helpers.luna, "run", "--dev-server", "--webhook-cert-mode", "managed",
                           "--webhook-cert-validity", "6s", dir })
    local _
    _, kubeconfig = proc:expect("dev server listening url=%S+ kubeconfig=(%S+)", 20)
    _, health = proc:expect("health probe server listening address=(%S+)", 20)
    _, addr = proc:expect("webhook server listening address=(%S+)", 20)
    proc:expect("managed webhook certificate served", 20)
  end)

  teardown(function()
    if proc then proc:stop() end
  end)

  -- The caBundle of the validating configuration, written to a file.
  local function ca_bundle()
    local vwc, out = get_json("validatingwebhookconfiguration luna")
    assert(vwc, out)
    return b64decode(vwc.webhooks[1].clientConfig.caBundle, work .. "/bundle.pem"), vwc
  end

  it("keeps the CA and the serving pair in one kubernetes.io/tls Secret", function()
    local secret, out = get_json("secret luna-webhook-certs -n default")
    assert(secret, out)
    assert.equal("kubernetes.io/tls", secret.type)
    for _, k in ipairs({ "tls.crt", "tls.key", "ca.crt", "ca.key" }) do
      assert.is_string(secret.data[k], k)
    end
    local ca = b64decode(secret.data["ca.crt"], work .. "/secret-ca.pem")
    assert.equal(1, pem_certs(ca))
    local crt = b64decode(secret.data["tls.crt"], work .. "/secret-tls.pem")
    out = sh(("openssl verify -CAfile %s/secret-ca.pem %s/secret-tls.pem 2>&1"):format(work, work))
    assert.truthy(out:find(": OK", 1, true), out)
    out = sh(("openssl x509 -noout -ext subjectAltName -in %s/secret-tls.pem 2>&1"):format(work))
    for _, name in ipairs({ "IP Address:127.0.0.1", "DNS:luna-webhooks.default.svc",
                            "DNS:luna-webhooks.default.svc.cluster.local" }) do
      assert.truthy(out:find(name, 1, true), name .. " in " .. out)
    end
    assert.truthy(crt:find("BEGIN CERTIFICATE", 1, true))
  end)

  it("writes both configurations, whose caBundle verifies the served certificate", function()
    local bundle, vwc = ca_bundle()
    assert.equal(1, pem_certs(bundle))
    local _, ok, log = served(addr, work .. "/bundle.pem")
    assert(ok, log)
    local mwc, out = get_json("mutatingwebhookconfiguration luna")
    assert(mwc, out)
    assert.equal(vwc.webhooks[1].clientConfig.caBundle, mwc.webhooks[1].clientConfig.caBundle)
    assert.equal("https://" .. addr .. "/mutate/cm.mutate.example.com", mwc.webhooks[1].clientConfig.url)
    -- the same entries `luna webhooks manifest` prints for that url and CA
    out = helpers.run(("%s webhooks manifest --name copy --url https://%s --ca-bundle %s/bundle.pem %s > %s/copy.yaml")
      :format(helpers.luna, addr, work, dir, work))
    out = kubectl("create -f " .. work .. "/copy.yaml")
    assert.truthy(out:find("validatingwebhookconfiguration.admissionregistration.k8s.io/copy created", 1, true), out)
    for _, kind in ipairs({ "validatingwebhookconfiguration", "mutatingwebhookconfiguration" }) do
      local managed, copy = get_json(kind .. " luna"), get_json(kind .. " copy")
      assert.equal(S.canon(copy.webhooks), S.canon(managed.webhooks))
    end
    kubectl("delete -f " .. work .. "/copy.yaml")
  end)

  it("passes /readyz webhook-server once the managed certificate is served", function()
    local code, body = P.get("http://" .. health .. "/readyz/webhook-server")
    assert.same({ 200, "ok" }, { code, body })
  end)

  it("is called by the API server through the managed configurations", function()
    local file = work .. "/cm.yaml"
    helpers.write_file(file, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nope\n  namespace: default\n" ..
                             "  labels: {luna-spec: managed}\ndata: {bad: \"1\"}\n")
    local out = kubectl("create -f " .. file)
    assert.truthy(out:find('admission webhook "cm.validate.example.com" denied the request: bad data in nope', 1, true), out)
    helpers.write_file(file, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n  namespace: default\n" ..
                             "  labels: {luna-spec: managed}\ndata: {k: v}\n")
    out = kubectl("create -f " .. file)
    assert.truthy(out:find("configmap/fine created", 1, true), out)
    local cm = get_json("configmap fine -n default")
    assert.equal("luna", cm.data["set.by"])
  end)

  it("serves renewed certificates without refusing a connection", function()
    ca_bundle()
    local first = served(addr, work .. "/bundle.pem")
    local before = count("managed webhook certificate served")
    local calls = 0
    helpers.write_file(work .. "/review.json",
                       S.review("u1", { metadata = { name = "x", namespace = "default" } }))
    -- 6 s certificates are renewed every 4 s: call until two renewals were served
    helpers.eventually(function()
      local out = sh(("curl -s -o /dev/null -w '%%{http_code}' --max-time 5 --cacert %s/bundle.pem " ..
                      "-X POST -H 'Content-Type: application/json' --data-binary @%s/review.json " ..
                      "https://127.0.0.1:%s/validate/cm.validate.example.com")
                     :format(work, work, addr:match(":(%d+)$")))
      calls = calls + 1
      assert.equal("200", out, "call " .. calls .. " refused or failed")
      return count("managed webhook certificate served") >= before + 2
    end, 30, "two renewals served")
    assert(calls > 5, "only " .. calls .. " calls")
    local now, ok, log = served(addr, work .. "/bundle.pem")
    assert(ok, log)
    assert.are_not.equal(first, now)
    -- one CA through it all
    assert.equal(0, count("managed webhook certificate: new CA why=\"2/3"))
  end)

  it("rewrites the configurations when a reload changes the webhooks", function()
    helpers.write_file(dir .. "/hooks.lua", HOOKS:format(EXTRA))
    proc:kill(1) -- SIGHUP
    helpers.eventually(function()
      local vwc = get_json("validatingwebhookconfiguration luna")
      return vwc and #vwc.webhooks == 2 and vwc.webhooks[2].name == "cm.extra.example.com"
             and vwc.webhooks[2].failurePolicy == "Ignore"
    end, 20, "the new webhook registered")
  end)
end)

describe("managed webhook certificates, replicas and CRDs", function()
  local srv, running = nil, {}

  before_each(function() srv = client.start({ args = { "--admin" } }) end)
  after_each(function()
    for _, l in ipairs(running) do l:stop() end
    running = {}
    srv:stop()
  end)

  local function faults(spec)
    local code = srv:request("PUT", "/luna/v1/faults", spec, { content_type = "text/plain" })
    assert.equal(200, code)
  end

  local function start(extra)
    local args = { "--webhook-cert-mode=managed", "--webhook-url=https://127.0.0.1:1",
                   "--webhook-bind-address=127.0.0.1:0", "--webhook-service-namespace=" .. srv.ns,
                   "--webhook-configuration-name=" .. srv.ns }
    for _, a in ipairs(extra or {}) do args[#args + 1] = a end
    local dir = P.controllers({ ["hooks.lua"] = HOOKS:format("") })
    local l = P.start(srv, dir, { args = args })
    running[#running + 1] = l
    l.webhook = select(2, l:expect("webhook server listening address=(%S+)", 15))
    return l
  end

  local function secret()
    local code, obj = srv:request("GET", srv:ns_path("secrets", "luna-webhook-certs"))
    return code == 200 and obj or nil
  end

  it("two replicas starting at once end with one CA, and serve its certificate", function()
    if client.dev_only("the held creates are the dev server's delay fault") then return end
    -- both replicas' reads of the Secret held, then answered together: both
    -- find none and both create; one gets AlreadyExists
    faults("delay=120,delay-on=read,delay-path=/secrets/luna-webhook-certs")
    local a, b = start(), start()
    helpers.eventually(function()
      local _, f = srv:request("GET", "/luna/v1/faults")
      return f.waiting == 2
    end, 30, "both replicas' reads to be held")
    faults("")
    a:await("managed webhook certificate served", 20)
    b:await("managed webhook certificate served", 20)
    local s = secret()
    assert(s, "no Secret")
    assert.equal(1, a:count("Secret written .*verb=create") + b:count("Secret written .*verb=create"))
    -- the loser read the winner's Secret, and made nothing of its own
    assert.equal(1, a:count("conflict, reading again") + b:count("conflict, reading again"))
    local work = helpers.tmpdir()
    local ca = b64decode(s.data["ca.crt"], work .. "/ca.pem")
    assert.equal(1, pem_certs(ca))
    local tls = b64decode(s.data["tls.crt"], work .. "/tls.pem")
    for _, l in ipairs({ a, b }) do
      local crt, ok, log = served(l.webhook, work .. "/ca.pem")
      assert(ok, log)
      assert.equal(tls, crt)
    end
    local code, vwc = srv:request("GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" .. srv.ns)
    assert.equal(200, code)
    assert.equal(s.data["ca.crt"], vwc.webhooks[1].clientConfig.caBundle)
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" .. srv.ns)
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" .. srv.ns)
  end)

  it("rotates the CA with an overlap: the caBundle holds the old and the new CA", function()
    -- a 6 s CA is replaced after 4 s and kept in the bundle until it expires
    local l = start({ "--webhook-ca-validity=6s", "--webhook-cert-validity=3s" })
    l:await("managed webhook certificate served", 20)
    local work = helpers.tmpdir()
    local cas, log
    helpers.eventually(function()
      local code, vwc = srv:request("GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" .. srv.ns)
      if code ~= 200 then return false end
      cas = pem_certs(b64decode(vwc.webhooks[1].clientConfig.caBundle, work .. "/bundle.pem"))
      -- the bundle read may be one write older than the pair served next
      -- (the manager writes a bundle, then serves what its new CA signed):
      -- read both again until they agree
      local ok
      ok, log = select(2, served(l.webhook, work .. "/bundle.pem"))
      return ok and cas == 2
    end, 20, "two CAs in the caBundle, verifying the served certificate")
    assert.equal(2, cas, log)
    assert.truthy(l:await("new CA why=\"2/3 of its life passed\"", 1))
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" .. srv.ns)
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" .. srv.ns)
  end)

  it("keeps the conversion caBundle of the CRDs it is given", function()
    local group = srv.ns .. ".example.com"
    local crd_name = "gizmos." .. group
    local crd = {
      apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
      metadata = { name = crd_name },
      spec = {
        group = group, scope = "Namespaced",
        names = { plural = "gizmos", singular = "gizmo", kind = "Gizmo", listKind = "GizmoList" },
        versions = {
          { name = "v1", served = true, storage = true,
            schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } },
          { name = "v2", served = true, storage = false,
            schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } },
        },
        conversion = { strategy = "Webhook", webhook = { conversionReviewVersions = { "v1" },
          clientConfig = { url = "https://127.0.0.1:1/convert" } } },
      },
    }
    local code, body = srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert(code == 201, tostring(code) .. " " .. cjson.encode(body or {}))
    local l = start({ "--webhook-conversion-crds=" .. crd_name })
    l:await("managed webhook certificate served", 20)
    local s = secret()
    local got
    helpers.eventually(function()
      local c, obj = srv:request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" .. crd_name)
      got = c == 200 and obj.spec.conversion.webhook.clientConfig.caBundle
      return got == s.data["ca.crt"]
    end, 20, "the CRD's caBundle")
    assert.equal("https://127.0.0.1:1/convert", select(2, srv:request("GET",
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" .. crd_name)).spec.conversion.webhook.clientConfig.url)
    srv:request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" .. crd_name)
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" .. srv.ns)
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" .. srv.ns)
  end)
  it("repairs a caBundle changed by hand, reading the Secret again first when it lists a CA the bundle lacks", function()
    local l = start()
    l:await("managed webhook certificate served", 20)
    local path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" .. srv.ns
    local code, vwc = srv:request("GET", path)
    assert.equal(200, code)
    -- a CA this luna never made (as a replica's newer one would be), in front
    local work = helpers.tmpdir()
    local other = require("support.certs").make_cert(work, "other")
    local own = b64decode(vwc.webhooks[1].clientConfig.caBundle, work .. "/own.pem")
    helpers.write_file(work .. "/both.pem", assert(helpers.read_file(other)) .. own)
    local b64 = sh("openssl base64 -A -in " .. work .. "/both.pem"):gsub("%s+$", "")
    vwc.webhooks[1].clientConfig.caBundle = b64
    code = srv:request("PUT", path, vwc)
    assert.equal(200, code)
    l:kill(1) -- SIGHUP: a reload syncs at once
    l:await("a newer CA is registered, reading the Secret again", 20)
    local s = secret()
    helpers.eventually(function()
      local c, now = srv:request("GET", path)
      return c == 200 and now.webhooks[1].clientConfig.caBundle == s.data["ca.crt"]
    end, 20, "the configuration's caBundle written back from the Secret")
    srv:request("DELETE", path)
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" .. srv.ns)
  end)

  it("refuses --shadow with the managed mode, which would write", function()
    local out, rc = helpers.run("env -u LD_PRELOAD " .. helpers.luna ..
      " run --shadow --webhook-cert-mode managed --dev-server " .. helpers.tmpdir() .. " 2>&1")
    assert.equal(2, rc, out)
    assert.truthy(out:find("--shadow writes nothing to the cluster", 1, true), out)
  end)
end)

describe("managed webhook certificates with a CRD it may not patch", function()
  if client.dev_only("the 403 is the dev server's injected fault") then return end
  local srv, l

  setup(function()
    srv = client.start({ args = { "--admin", "--faults",
                                  "error-rate=1,error-code=403,error-path=/customresourcedefinitions" } })
  end)
  teardown(function()
    if l then l:stop() end
    srv:stop()
  end)

  it("skips that CRD with the reason and still serves, ready", function()
    l = P.start(srv, P.controllers({ ["hooks.lua"] = HOOKS:format("") }),
                { args = { "--webhook-cert-mode=managed", "--webhook-url=https://127.0.0.1:1",
                           "--webhook-bind-address=127.0.0.1:0",
                           "--webhook-service-namespace=" .. srv.ns,
                           "--webhook-conversion-crds=gizmos.example.com" } })
    local line = l:await("CRD skipped", 20)
    assert.truthy(line:find("get CustomResourceDefinition gizmos.example.com: HTTP 403 Forbidden", 1, true), line)
    l:await("managed webhook certificate served", 20)
    helpers.eventually(function()
      return P.get(l.health .. "/readyz/webhook-server") == 200
    end, 10, "ready")
    assert.equal(0, l:count("managed webhook certificate failed"))
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/luna")
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/luna")
  end)
end)

describe("managed webhook certificates without the RBAC for Secrets", function()
  if client.dev_only("the 403 is the dev server's injected fault") then return end
  local srv, l

  setup(function()
    srv = client.start({ args = { "--admin", "--faults", "error-rate=1,error-code=403,error-path=/secrets" } })
  end)
  teardown(function()
    if l then l:stop() end
    srv:stop()
  end)

  it("logs the refusal, fails /readyz and recovers once allowed", function()
    l = P.start(srv, P.controllers({ ["hooks.lua"] = HOOKS:format("") }),
                { args = { "--webhook-cert-mode=managed", "--webhook-url=https://127.0.0.1:1",
                           "--webhook-bind-address=127.0.0.1:0",
                           "--webhook-service-namespace=" .. srv.ns } })
    local line = l:await("managed webhook certificate failed", 20)
    assert.truthy(line:find("get Secret " .. srv.ns .. "/luna-webhook-certs: HTTP 403 Forbidden", 1, true), line)
    local code, body = P.get(l.health .. "/readyz/webhook-server")
    assert.equal(500, code)
    assert.truthy(body:find("managed certificate not served yet: get Secret", 1, true), body)
    code, body = P.get(l.health .. "/healthz")
    assert.same({ 200, "ok" }, { code, body })
    -- the role granted: served and ready, with no restart
    code = srv:request("PUT", "/luna/v1/faults", "", { content_type = "text/plain" })
    assert.equal(200, code)
    l:await("managed webhook certificate served", 30)
    helpers.eventually(function()
      return P.get(l.health .. "/readyz/webhook-server") == 200
    end, 10, "ready")
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/luna")
    srv:request("DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/luna")
  end)
end)

-- A converter in the loaded code: the managed mode writes its CRD's whole
-- conversion stanza (strategy Webhook, the clientConfig, the caBundle),
-- and the API server then converts through luna.
describe("managed webhook certificates and a converter, with the embedded dev server", function()
  local CRD = {
    apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
    metadata = { name = "gadgets.example.com" },
    spec = { group = "example.com", scope = "Namespaced",
      names = { plural = "gadgets", singular = "gadget", kind = "Gadget", listKind = "GadgetList" },
      versions = {
        { name = "v1", served = true, storage = true,
          schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } },
        { name = "v1alpha1", served = true, storage = false,
          schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } },
      } },
  }
  local CONVERTER = [[
local luna = require "luna"
return luna.webhooks {
  luna.converter { group = "example.com", kind = "Gadget", hub = "v1", versions = {
    v1alpha1 = {
      to_hub = function(g) g.spec.count = g.spec.size; g.spec.size = nil end,
      from_hub = function(g) g.spec.size = g.spec.count; g.spec.count = nil end,
    } } },
}
]]
  local proc, kubeconfig, addr

  local function kubectl(args)
    return sh(("kubectl --kubeconfig %s %s 2>&1"):format(kubeconfig, args))
  end

  setup(function()
    local dir, work = helpers.tmpdir(), helpers.tmpdir()
    helpers.write_file(dir .. "/gadgets.lua", CONVERTER)
    helpers.write_file(work .. "/crd.json", cjson.encode(CRD))
    proc = helpers.spawn({ helpers.luna, "run", "--dev-server", "--seed", work .. "/crd.json",
                           "--webhook-cert-mode", "managed", dir })
    local _
    _, kubeconfig = proc:expect("dev server listening url=%S+ kubeconfig=(%S+)", 20)
    _, addr = proc:expect("webhook server listening address=(%S+)", 20)
    proc:expect("managed webhook conversion written crd=gadgets.example.com", 20)
    proc:expect("managed webhook certificate served", 20)
  end)

  teardown(function()
    if proc then proc:stop() end
  end)

  it("writes the CRD's conversion stanza, whose caBundle verifies the served certificate", function()
    local crd = cjson.decode((kubectl("get crd gadgets.example.com -o json")))
    local conv = crd.spec.conversion
    assert.equal("Webhook", conv.strategy)
    assert.same({ "v1" }, conv.webhook.conversionReviewVersions)
    assert.equal("https://" .. addr .. "/convert/gadgets.example.com", conv.webhook.clientConfig.url)
    assert.is_nil(conv.webhook.clientConfig.service)
    local work = helpers.tmpdir()
    b64decode(conv.webhook.clientConfig.caBundle, work .. "/bundle.pem")
    local _, ok, log = served(addr, work .. "/bundle.pem")
    assert(ok, log)
    assert.truthy(crd.metadata.annotations["luna.dev/conversion-sha256"])
  end)

  it("is called by the API server: a Gadget written in v1alpha1 is read as v1", function()
    local work = helpers.tmpdir()
    helpers.write_file(work .. "/g.yaml", "apiVersion: example.com/v1alpha1\nkind: Gadget\n" ..
      "metadata:\n  name: g1\n  namespace: default\nspec:\n  size: 4\n")
    local out = kubectl("create -f " .. work .. "/g.yaml")
    assert.truthy(out:find("gadget.example.com/g1 created", 1, true), out)
    local v1 = cjson.decode((kubectl("get gadgets.v1.example.com g1 -n default -o json")))
    assert.equal("example.com/v1", v1.apiVersion)
    assert.same({ count = 4 }, v1.spec)
    local old = cjson.decode((kubectl("get gadgets.v1alpha1.example.com g1 -n default -o json")))
    assert.same({ size = 4 }, old.spec)
  end)
end)
