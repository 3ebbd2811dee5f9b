-- Every built-in kind of the pinned release is served (issue #29): a sample
-- of the kinds the dev server once lacked, created, read, listed, watched
-- and updated as kube-apiserver serves them, with kube's short names in
-- both discovery forms, their status and scale subresources, and the two
-- served versions of HorizontalPodAutoscaler on one storage.
local client = require("support.apiserver_client")
local helpers = require("helpers")

local AGGREGATED = "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

-- A PEM certificate request (CertificateSigningRequest.spec.request must
-- parse as one on kube-apiserver).
local function csr_pem(dir)
  local out, rc = helpers.run(string.format(
    "{ env -u LD_PRELOAD openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes " ..
    "-keyout %s/k.pem -subj /CN=luna-spec -out %s/r.pem; } >/dev/null 2>&1; env -u LD_PRELOAD base64 -w0 %s/r.pem",
    dir, dir, dir))
  assert(rc == 0 and #out > 100, "openssl: " .. out)
  return out
end

describe("built-in kinds", function()
  local srv, suffix, dir
  local made = {}   -- cluster-scoped objects to delete (paths)
  setup(function()
    srv = client.start()
    dir = helpers.tmpdir()
    suffix = tostring(math.random(100000, 999999))
  end)
  teardown(function()
    for _, p in ipairs(made) do srv:request("DELETE", p) end
    srv:stop()
  end)

  local template = { metadata = { labels = { app = "x" } },
                     spec = { containers = { { name = "c", image = "example/app:1" } } } }

  -- gv, resource, namespaced, short name (or false), the object's body
  local function samples()
    return {
      { "v1", "resourcequotas", true, "quota", { kind = "ResourceQuota",
        spec = { hard = { pods = "10" } } } },
      { "v1", "limitranges", true, "limits", { kind = "LimitRange",
        spec = { limits = { { type = "Container", default = { cpu = "100m" } } } } } },
      { "v1", "persistentvolumeclaims", true, "pvc", { kind = "PersistentVolumeClaim",
        spec = { accessModes = { "ReadWriteOnce" },
                 resources = { requests = { storage = "1Gi" } } } } },
      { "apps/v1", "daemonsets", true, "ds", { kind = "DaemonSet",
        spec = { selector = { matchLabels = { app = "x" } }, template = template } } },
      { "networking.k8s.io/v1", "ingresses", true, "ing", { kind = "Ingress",
        spec = { defaultBackend = { service = { name = "s", port = { number = 80 } } } } } },
      { "networking.k8s.io/v1", "networkpolicies", true, "netpol", { kind = "NetworkPolicy",
        spec = { podSelector = {} } } },
      { "policy/v1", "poddisruptionbudgets", true, "pdb", { kind = "PodDisruptionBudget",
        spec = { minAvailable = 1, selector = { matchLabels = { app = "x" } } } } },
      { "autoscaling/v2", "horizontalpodautoscalers", true, "hpa", {
        kind = "HorizontalPodAutoscaler",
        spec = { scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "x" },
                 minReplicas = 1, maxReplicas = 3 } } },
      { "storage.k8s.io/v1", "storageclasses", false, "sc", { kind = "StorageClass",
        provisioner = "example.com/none" } },
      { "discovery.k8s.io/v1", "endpointslices", true, false, { kind = "EndpointSlice",
        addressType = "IPv4", endpoints = { { addresses = { "10.1.2.3" } } },
        ports = { { name = "http", port = 80, protocol = "TCP" } } } },
      { "scheduling.k8s.io/v1", "priorityclasses", false, "pc", { kind = "PriorityClass",
        value = 1000 } },
      { "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", false, false, {
        kind = "ValidatingWebhookConfiguration" } },
      { "certificates.k8s.io/v1", "certificatesigningrequests", false, "csr", {
        kind = "CertificateSigningRequest",
        spec = { request = csr_pem(dir), signerName = "example.com/luna-spec",
                 usages = { "digital signature" } } } },
      { "v1", "nodes", false, "no", { kind = "Node", spec = {} } },
    }
  end

  local function base(gv) return gv == "v1" and "/api/v1" or "/apis/" .. gv end
  local function collection(s)
    return base(s[1]) .. (s[3] and ("/namespaces/" .. srv.ns) or "") .. "/" .. s[2]
  end

  it("creates, gets, lists, watches and updates each sample kind", function()
    for _, s in ipairs(samples()) do
      local gv, res = s[1], s[2]
      local name = "luna-" .. res:sub(1, 8) .. "-" .. suffix
      local body = s[5]
      body.apiVersion = gv
      body.metadata = { name = name, labels = { spec = "kinds" } }
      local coll = collection(s)
      local code, obj, raw = srv:request("POST", coll, body)
      assert.equal(201, code, res .. ": " .. raw)
      if not s[3] then made[#made + 1] = coll .. "/" .. name end
      assert.equal(body.kind, obj.kind, res)
      assert.equal(gv, obj.apiVersion, res)
      assert.is_string(obj.metadata.uid, res)
      local got
      code, got = srv:request("GET", coll .. "/" .. name)
      assert.equal(200, code, res)
      assert.equal(obj.metadata.uid, got.metadata.uid, res)
      local list
      code, list = srv:request("GET", coll .. "?labelSelector=spec%3Dkinds")
      assert.equal(200, code, res)
      assert.equal(body.kind .. "List", list.kind, res)
      local found = false
      for _, it in ipairs(list.items) do found = found or it.metadata.name == name end
      assert.is_true(found, res .. " not listed")
      local w = srv:watch(coll .. "?watch=true&resourceVersion=" .. list.metadata.resourceVersion)
      -- (on a cluster a controller may write the status meanwhile: read, write, retry)
      local upd
      helpers.eventually(function()
        code, got = srv:request("GET", coll .. "/" .. name)
        got.metadata.labels.touched = "yes"
        code, upd, raw = srv:request("PUT", coll .. "/" .. name, got)
        return code ~= 409
      end, 20, res .. ": an update without a conflict")
      assert.equal(200, code, res .. ": " .. raw)
      assert.equal("yes", upd.metadata.labels.touched, res)
      assert.are_not.equal(got.metadata.resourceVersion, upd.metadata.resourceVersion, res)
      local ev = w:until_event(function(e)
        return e.type == "MODIFIED" and e.object.metadata.name == name and
               e.object.metadata.labels.touched == "yes"
      end, 10)
      w:stop()
      assert.is_table(ev, res .. ": no MODIFIED event")
    end
  end)

  it("lists them in discovery with kube's scope, verbs and short names", function()
    local _, agg = srv:request("GET", "/apis", nil, { headers = { AGGREGATED } })
    local _, core = srv:request("GET", "/api", nil, { headers = { AGGREGATED } })
    assert.equal("APIGroupDiscoveryList", agg.kind)
    assert.equal("APIGroupDiscoveryList", core.kind)
    local aggregated = {}
    for _, doc in ipairs({ core, agg }) do
      for _, g in ipairs(doc.items) do
        for _, v in ipairs(g.versions) do
          local gv = (g.metadata.name and g.metadata.name ~= "") and
                     (g.metadata.name .. "/" .. v.version) or v.version
          for _, r in ipairs(v.resources) do aggregated[gv .. " " .. r.resource] = r end
        end
      end
    end
    for _, s in ipairs(samples()) do
      local gv, res = s[1], s[2]
      local code, list = srv:request("GET", base(gv))
      assert.equal(200, code, gv)
      local r
      for _, e in ipairs(list.resources) do if e.name == res then r = e end end
      assert.is_table(r, gv .. " " .. res)
      assert.equal(s[3], r.namespaced, res)
      assert.equal(s[5].kind, r.kind, res)
      local a = aggregated[gv .. " " .. res]
      assert.is_table(a, "aggregated " .. gv .. " " .. res)
      assert.equal(s[3] and "Namespaced" or "Cluster", a.scope, res)
      assert.same(r.verbs, a.verbs, res)
      assert.same({ "create", "delete", "deletecollection", "get", "list", "patch", "update",
                    "watch" }, r.verbs, res)
      if s[4] then
        assert.same({ s[4] }, r.shortNames, res)
        assert.same({ s[4] }, a.shortNames, res)
      else
        assert.is_nil(r.shortNames, res)
      end
    end
    -- a create-only kind: verbs as kube lists them
    local _, authz = srv:request("GET", "/apis/authorization.k8s.io/v1")
    for _, e in ipairs(authz.resources) do
      if e.name == "selfsubjectaccessreviews" then assert.same({ "create" }, e.verbs) end
    end
  end)

  it("writes an Ingress's status only through /status, and counts spec changes", function()
    local coll = "/apis/networking.k8s.io/v1/namespaces/" .. srv.ns .. "/ingresses"
    local code, ing, raw = srv:request("POST", coll, { apiVersion = "networking.k8s.io/v1",
      kind = "Ingress", metadata = { name = "st" },
      spec = { defaultBackend = { service = { name = "s", port = { number = 80 } } } } })
    assert.equal(201, code, raw)
    assert.equal(1, ing.metadata.generation)
    -- status through the main resource: ignored
    ing.status = { loadBalancer = { ingress = { { ip = "10.9.9.9" } } } }
    code, ing, raw = srv:request("PUT", coll .. "/st", ing)
    assert.equal(200, code, raw)
    -- (kube writes the empty status it keeps, the dev server none)
    assert.is_nil(((ing.status or {}).loadBalancer or {}).ingress)
    -- /status: status changes, spec does not
    ing.status = { loadBalancer = { ingress = { { ip = "10.1.1.1" } } } }
    ing.spec.defaultBackend.service.name = "changed"
    code, ing, raw = srv:request("PUT", coll .. "/st/status", ing)
    assert.equal(200, code, raw)
    assert.equal("10.1.1.1", ing.status.loadBalancer.ingress[1].ip)
    assert.equal("s", ing.spec.defaultBackend.service.name)
    assert.equal(1, ing.metadata.generation)
    code, ing = srv:request("PATCH", coll .. "/st/status",
      { status = { loadBalancer = { ingress = { { ip = "10.2.2.2" } } } } },
      { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
    assert.equal("10.2.2.2", ing.status.loadBalancer.ingress[1].ip)
    -- a spec change bumps generation, keeps status
    ing.spec.defaultBackend.service.name = "other"
    code, ing, raw = srv:request("PUT", coll .. "/st", ing)
    assert.equal(200, code, raw)
    assert.equal(2, ing.metadata.generation)
    assert.equal("10.2.2.2", ing.status.loadBalancer.ingress[1].ip)
  end)

  it("serves autoscaling/v1 Scale for Deployments and StatefulSets", function()
    for _, r in ipairs({ "deployments", "statefulsets" }) do
      local coll = "/apis/apps/v1/namespaces/" .. srv.ns .. "/" .. r
      local body = { apiVersion = "apps/v1", kind = r == "deployments" and "Deployment" or "StatefulSet",
                     metadata = { name = "sc" },
                     spec = { replicas = 2, selector = { matchLabels = { app = "x" } },
                              template = template } }
      local code, obj, raw = srv:request("POST", coll, body)
      assert.equal(201, code, raw)
      local sc
      code, sc, raw = srv:request("GET", coll .. "/sc/scale")
      assert.equal(200, code, raw)
      assert.equal("Scale", sc.kind)
      assert.equal("autoscaling/v1", sc.apiVersion)
      assert.equal(2, sc.spec.replicas)
      assert.equal("app=x", sc.status.selector)
      assert.equal(obj.metadata.uid, sc.metadata.uid)
      code, sc, raw = srv:request("PATCH", coll .. "/sc/scale", { spec = { replicas = 4 } },
                                  { content_type = "application/merge-patch+json" })
      assert.equal(200, code, raw)
      assert.equal(4, sc.spec.replicas)
      local cur
      code, cur = srv:request("GET", coll .. "/sc")
      assert.equal(4, cur.spec.replicas)
      assert.equal(obj.metadata.generation + 1, cur.metadata.generation)
      -- PUT with a stale resourceVersion: Conflict; with the current: done
      code = srv:request("PUT", coll .. "/sc/scale", { apiVersion = "autoscaling/v1",
        kind = "Scale", metadata = { name = "sc", namespace = srv.ns,
        resourceVersion = obj.metadata.resourceVersion }, spec = { replicas = 1 } })
      assert.equal(409, code)
      -- (on a cluster the controllers write the status meanwhile: read, write, retry)
      helpers.eventually(function()
        local got
        code, got = srv:request("GET", coll .. "/sc/scale")
        got.spec.replicas = 1
        code, sc, raw = srv:request("PUT", coll .. "/sc/scale", got)
        return code ~= 409
      end, 20, "a Scale PUT without a conflict")
      assert.equal(200, code, raw)
      assert.equal(1, sc.spec.replicas)
    end
    -- no scale where kube has none
    assert.equal(404, (srv:request("GET", srv:ns_path("configmaps", "nope") .. "/scale")))
  end)

  it("serves one HorizontalPodAutoscaler through autoscaling v2 and v1", function()
    local v2 = "/apis/autoscaling/v2/namespaces/" .. srv.ns .. "/horizontalpodautoscalers"
    local v1 = "/apis/autoscaling/v1/namespaces/" .. srv.ns .. "/horizontalpodautoscalers"
    local code, h, raw = srv:request("POST", v2, { apiVersion = "autoscaling/v2",
      kind = "HorizontalPodAutoscaler", metadata = { name = "both" },
      spec = { scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "x" },
               minReplicas = 1, maxReplicas = 5 } })
    assert.equal(201, code, raw)
    local old
    code, old = srv:request("GET", v1 .. "/both")
    assert.equal(200, code)
    assert.equal("autoscaling/v1", old.apiVersion)
    assert.equal(h.metadata.uid, old.metadata.uid)
    assert.equal(5, old.spec.maxReplicas)
    local list
    code, list = srv:request("GET", v1)
    assert.equal(200, code)
    local seen
    for _, it in ipairs(list.items) do
      if it.metadata.name == "both" then seen = it end
    end
    assert.is_table(seen)
    assert.equal(h.metadata.uid, seen.metadata.uid)
    assert.equal("autoscaling/v1", list.apiVersion)
    -- the preferred version is v2, as kube prefers it
    local _, g = srv:request("GET", "/apis/autoscaling")
    assert.equal("autoscaling/v2", g.preferredVersion.groupVersion)
  end)
  it("merges a ValidatingWebhookConfiguration's webhooks by name under server-side apply", function()
    local name = "luna-apply-" .. suffix
    local path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" .. name
    made[#made + 1] = path
    local function apply(manager, hook)
      -- (YAML by hand: lua-cjson writes "\/", which YAML does not read)
      return srv:request("PATCH", path .. "?fieldManager=" .. manager, table.concat({
        "apiVersion: admissionregistration.k8s.io/v1", "kind: ValidatingWebhookConfiguration",
        "metadata:", "  name: " .. name, "webhooks:", "- name: " .. hook,
        "  admissionReviewVersions: [v1]", "  sideEffects: None", "  clientConfig:",
        "    url: https://example.com/" .. hook, "" }, "\n"),
        { content_type = "application/apply-patch+yaml" })
    end
    local code, _, raw = apply("team-a", "a.luna.example.com")
    assert.equal(201, code, raw)
    local obj
    code, obj, raw = apply("team-b", "b.luna.example.com")
    -- a list-map keyed by name: each manager owns its own entry, no conflict
    assert.equal(200, code, raw)
    local names = {}
    for _, h in ipairs(obj.webhooks) do names[#names + 1] = h.name end
    table.sort(names)
    assert.same({ "a.luna.example.com", "b.luna.example.com" }, names)
  end)
end)
