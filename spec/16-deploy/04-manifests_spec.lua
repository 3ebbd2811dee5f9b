-- What `kubectl apply -k deploy/` would create, read from `kubectl kustomize`
-- (offline: `kubectl apply --dry-run=client` needs an API server for
-- discovery). The tree is a copy of deploy/ with the controllers ConfigMap
-- generated from controllers/*.lua (see support.tree_with_controllers).
local helpers = require("helpers")
local support = require("16-deploy.support")

local dir = support.tree_with_controllers()
local objects = support.kustomize(dir .. "/deploy")

local NAMESPACE = "luna"
local AGGREGATE = "rbac.luna.dev/aggregate-to-luna"

local function deployment() return support.one(objects, "Deployment", "luna") end
local function container()
  local c = deployment().spec.template.spec.containers
  assert.equal(1, #c)
  return c[1]
end

local function arg_value(args, flag)
  for _, a in ipairs(args) do
    local v = a:match("^" .. flag:gsub("%-", "%%-") .. "=(.*)$")
    if v then return v end
  end
end

-- A container's effective security setting: the container's own, else the pod's.
local function effective(field)
  local csc = container().securityContext or {}
  if csc[field] ~= nil then return csc[field] end
  return (deployment().spec.template.spec.securityContext or {})[field]
end

-- The port number a probe's port refers to (a number or a port name).
local function port_number(port)
  if type(port) == "number" then return port end
  for _, p in ipairs(container().ports or {}) do
    if p.name == port then return p.containerPort end
  end
end

-- rules as { ["group/resource"] = set of verbs }
local function collect(rules, into)
  into = into or {}
  for _, r in ipairs(rules or {}) do
    for _, g in ipairs(r.apiGroups or {}) do
      for _, res in ipairs(r.resources or {}) do
        local key = (g == "" and "core" or g) .. "/" .. res
        into[key] = into[key] or {}
        for _, v in ipairs(r.verbs) do into[key][v] = true end
      end
    end
  end
  return into
end

local function verbs(into)
  local out = {}
  for key, set in pairs(into) do out[key] = support.sorted_keys(set) end
  return out
end

describe("kubectl kustomize deploy/", function()
  it("produces the namespace, service account, RBAC, CRD, Deployment, metrics and webhook Services and ConfigMap", function()
    local kinds = {}
    for _, o in ipairs(objects) do kinds[o.kind] = (kinds[o.kind] or 0) + 1 end
    assert.same({
      Namespace = 1, ServiceAccount = 1, ClusterRole = 6, ClusterRoleBinding = 1,
      Role = 2, RoleBinding = 2, CustomResourceDefinition = 1, Deployment = 1, ConfigMap = 1,
      Service = 2,
    }, kinds)
  end)

  it("puts every namespaced object in the luna namespace", function()
    local ns = support.one(objects, "Namespace", NAMESPACE)
    assert.equal("restricted", ns.metadata.labels["pod-security.kubernetes.io/enforce"])
    local cluster = { Namespace = true, ClusterRole = true, ClusterRoleBinding = true,
                      CustomResourceDefinition = true }
    for _, o in ipairs(objects) do
      if cluster[o.kind] then
        assert.is_nil(o.metadata.namespace, o.kind .. " " .. o.metadata.name)
      else
        assert.equal(NAMESPACE, o.metadata.namespace, o.kind .. " " .. o.metadata.name)
      end
    end
  end)
end)

describe("the Deployment", function()
  it("runs two replicas of the luna image tagged with the Makefile's VERSION", function()
    local d = deployment()
    assert.equal(2, d.spec.replicas)
    assert.equal("luna", d.spec.template.spec.serviceAccountName)
    local image = container().image
    assert.equal("luna:" .. support.make_var("VERSION"), image)
    assert.is_nil(image:match(":latest$"))
    -- the selector selects the pod template
    for k, v in pairs(d.spec.selector.matchLabels) do
      assert.equal(v, d.spec.template.metadata.labels[k])
    end
  end)

  it("passes the controller-runtime style flags and the downward-API environment", function()
    assert.same({
      "--leader-elect",
      "--leader-election-id=luna",
      "--leader-election-namespace=$(POD_NAMESPACE)",
      "--metrics-bind-address=:8443",
      "--health-probe-bind-address=:8081",
      "--webhook-bind-address=:9443",
      "--webhook-cert-mode=managed",
      "--watch",
      "--log-format=json",
      "/etc/luna/controllers",
    }, container().args)
    assert.is_nil(container().command, "command would replace the image's ENTRYPOINT")
    local env = {}
    for _, e in ipairs(container().env) do env[e.name] = e.valueFrom.fieldRef.fieldPath end
    assert.same({ POD_NAME = "metadata.name", POD_NAMESPACE = "metadata.namespace",
                  POD_UID = "metadata.uid" }, env)
  end)

  it("exposes secure metrics on 8443 and probes /healthz and /readyz on 8081", function()
    local ports = {}
    for _, p in ipairs(container().ports) do ports[p.name] = p.containerPort end
    assert.equal(8443, ports.metrics)
    assert.equal(9443, ports.webhooks)
    assert.equal("8443", arg_value(container().args, "--metrics-bind-address"):match(":(%d+)$"))
    -- secure is the default: no flag turns it off
    assert.is_nil(arg_value(container().args, "--metrics-secure"))
    local annotations = deployment().spec.template.metadata.annotations
    assert.equal("https", annotations["prometheus.io/scheme"])
    assert.equal(tostring(ports.metrics), annotations["prometheus.io/port"])
    local live, ready = container().livenessProbe, container().readinessProbe
    assert.equal("/healthz", live.httpGet.path)
    assert.equal(8081, port_number(live.httpGet.port))
    assert.equal("/readyz", ready.httpGet.path)
    assert.equal(8081, port_number(ready.httpGet.port))
  end)

  it("sets resource requests and a memory limit", function()
    local r = container().resources
    assert.truthy(r.requests.cpu)
    assert.truthy(r.requests.memory)
    assert.truthy(r.limits.memory)
  end)

  it("runs non-root with a read-only root filesystem, no privilege escalation, no capabilities", function()
    assert.is_true(effective("runAsNonRoot"))
    assert.equal(65532, effective("runAsUser"))
    assert.is_true(container().securityContext.readOnlyRootFilesystem)
    assert.is_false(container().securityContext.allowPrivilegeEscalation)
    assert.same({ "ALL" }, container().securityContext.capabilities.drop)
    assert.is_nil(container().securityContext.capabilities.add)
    assert.equal("RuntimeDefault", effective("seccompProfile").type)
    assert.is_nil(effective("privileged"))
  end)

  it("mounts the generated controllers ConfigMap at /etc/luna/controllers and an emptyDir at /tmp", function()
    local cm = support.one(objects, "ConfigMap")
    local volumes = {}
    for _, v in ipairs(deployment().spec.template.spec.volumes) do volumes[v.name] = v end
    local mounts = {}
    for _, m in ipairs(container().volumeMounts) do mounts[m.mountPath] = m end
    local m = assert(mounts["/etc/luna/controllers"], "nothing mounted at /etc/luna/controllers")
    assert.equal(cm.metadata.name, volumes[m.name].configMap.name)
    assert.is_true(m.readOnly)
    assert.is_nil(m.subPath, "a subPath mount never sees ConfigMap updates")
    local tmp = assert(mounts["/tmp"], "nothing mounted at /tmp")
    assert.truthy(volumes[tmp.name].emptyDir)
    assert.equal(2, #container().volumeMounts)
  end)
end)

describe("the webhook Service", function()
  it("is luna-webhooks, port 443 to the pods' 9443, where luna serves its webhooks", function()
    local svc = support.one(objects, "Service", "luna-webhooks")
    for k, v in pairs(svc.spec.selector) do
      assert.equal(v, deployment().spec.template.metadata.labels[k])
    end
    assert.equal(1, #svc.spec.ports)
    assert.equal(443, svc.spec.ports[1].port)
    assert.equal(9443, port_number(svc.spec.ports[1].targetPort))
    assert.equal("9443", arg_value(container().args, "--webhook-bind-address"):match(":(%d+)$"))
    -- the Service `luna webhooks manifest` and the managed mode name by default
    assert.is_nil(arg_value(container().args, "--webhook-service-name"))
  end)
end)

describe("the managed webhook certificate mode's RBAC", function()
  it("reads and replaces only its Secret, in the luna namespace", function()
    local role = support.one(objects, "Role", "luna-webhook-certs")
    assert.same({ ["core/secrets"] = { "create", "get", "update" } }, verbs(collect(role.rules)))
    for _, rule in ipairs(role.rules) do
      if support.set(rule.verbs).get then assert.same({ "luna-webhook-certs" }, rule.resourceNames) end
    end
  end)

  it("writes the configurations named luna and patches CRDs, aggregated into luna's role", function()
    local r = support.one(objects, "ClusterRole", "luna-webhook-configurations")
    assert.equal("true", r.metadata.labels[AGGREGATE])
    assert.same({
      ["admissionregistration.k8s.io/validatingwebhookconfigurations"] = { "create", "get", "patch", "update" },
      ["admissionregistration.k8s.io/mutatingwebhookconfigurations"] = { "create", "get", "patch", "update" },
      ["apiextensions.k8s.io/customresourcedefinitions"] = { "get", "patch" },
    }, verbs(collect(r.rules)))
    for _, rule in ipairs(r.rules) do
      if rule.apiGroups[1] == "admissionregistration.k8s.io" and support.set(rule.verbs).get then
        assert.same({ "luna" }, rule.resourceNames)
      end
    end
  end)
end)

describe("the cert-manager component", function()
  -- an overlay beside deploy/ (kustomize refuses one inside its base)
  local cm_dir = dir .. "/cert-manager"
  support.must(("mkdir -p %s"):format(support.quote(cm_dir)))
  -- the configurations as docs/deploy.md says to make them, to be annotated
  local manifest = assert(io.popen("env -u LD_PRELOAD " .. helpers.luna ..
    " webhooks manifest --only admission controllers 2>&1")):read("*a")
  helpers.write_file(cm_dir .. "/webhooks.yaml", manifest)
  helpers.write_file(cm_dir .. "/kustomization.yaml",
    "resources:\n- ../deploy\n- webhooks.yaml\ncomponents:\n- ../deploy/components/cert-manager\n")
  local cm = support.kustomize(cm_dir)
  local c = support.one(cm, "Deployment", "luna").spec.template.spec

  it("mounts the Certificate's Secret where --webhook-cert-path reads it, instead of the managed mode", function()
    local args = c.containers[1].args
    assert.equal("/etc/luna/webhook-certs", arg_value(args, "--webhook-cert-path"))
    assert.is_nil(arg_value(args, "--webhook-cert-mode"))
    local cert = support.one(cm, "Certificate", "luna-webhook-tls")
    assert.same({ "luna-webhooks.luna.svc", "luna-webhooks.luna.svc.cluster.local" }, cert.spec.dnsNames)
    assert.equal("luna-selfsigned", support.one(cm, "Issuer", cert.spec.issuerRef.name).metadata.name)
    local volume
    for _, v in ipairs(c.volumes) do if v.name == "webhook-certs" then volume = v end end
    assert.equal(cert.spec.secretName, volume.secret.secretName)
    local mounted = false
    for _, m in ipairs(c.containers[1].volumeMounts) do
      if m.name == "webhook-certs" then mounted = m.mountPath == "/etc/luna/webhook-certs" and m.readOnly end
    end
    assert.is_true(mounted)
  end)

  it("annotates the webhook configurations for cert-manager's cainjector and drops the managed RBAC", function()
    for _, kind in ipairs({ "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration" }) do
      assert.equal("luna/luna-webhook-tls",
                   support.one(cm, kind, "luna").metadata.annotations["cert-manager.io/inject-ca-from"])
    end
    assert.equal(0, #support.find(cm, "Role", "luna-webhook-certs"))
    assert.equal(0, #support.find(cm, "RoleBinding", "luna-webhook-certs"))
    assert.equal(0, #support.find(cm, "ClusterRole", "luna-webhook-configurations"))
    assert.equal(1, #support.find(cm, "Role", "luna-leader-election"))
    -- the shipped webhooks, as `luna webhooks manifest --only admission` wrote them
    local vwc = support.one(cm, "ValidatingWebhookConfiguration", "luna")
    assert.equal("widgets.validate.example.com", vwc.webhooks[1].name)
    assert.equal("luna-webhooks", vwc.webhooks[1].clientConfig.service.name)
  end)

  it("points the Widget CRD's conversion at the converter's path, its caBundle injected", function()
    local crd = support.one(cm, "CustomResourceDefinition", "widgets.example.com")
    assert.equal("luna/luna-webhook-tls", crd.metadata.annotations["cert-manager.io/inject-ca-from"])
    local conv = crd.spec.conversion
    assert.equal("Webhook", conv.strategy)
    assert.same({ "v1" }, conv.webhook.conversionReviewVersions)
    -- the same clientConfig `luna webhooks manifest --only conversion` prints
    local out = assert(io.popen("env -u LD_PRELOAD " .. helpers.luna ..
      " webhooks manifest --only conversion controllers 2>&1")):read("*a")
    local svc = conv.webhook.clientConfig.service
    for _, field in ipairs({ ('name: "%s"'):format(svc.name), ('namespace: "%s"'):format(svc.namespace),
                             ('path: "%s"'):format(svc.path), ("port: %d"):format(svc.port) }) do
      assert.truthy(out:find(field, 1, true), field .. " in " .. out)
    end
    -- both versions kept, v1 still the stored one
    assert.equal(2, #crd.spec.versions)
    assert.is_true(crd.spec.versions[1].storage)
  end)
end)

describe("the metrics Service", function()
  it("selects the Deployment's pods and targets their metrics port", function()
    local svc = support.one(objects, "Service", "luna-metrics")
    for k, v in pairs(svc.spec.selector) do
      assert.equal(v, deployment().spec.template.metadata.labels[k])
    end
    assert.equal(1, #svc.spec.ports)
    assert.equal("metrics", svc.spec.ports[1].targetPort)
    assert.equal(8443, port_number(svc.spec.ports[1].targetPort))
  end)
end)

describe("RBAC", function()
  local roles = {}
  for _, o in ipairs(objects) do
    if o.kind == "ClusterRole" or o.kind == "Role" then roles[#roles + 1] = o end
  end

  it("binds luna's service account to the aggregated ClusterRole and the leader-election Role", function()
    local crb = support.one(objects, "ClusterRoleBinding")
    assert.same({ apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = "luna" }, crb.roleRef)
    assert.same({ { kind = "ServiceAccount", name = "luna", namespace = NAMESPACE } }, crb.subjects)
    for _, name in ipairs({ "luna-leader-election", "luna-webhook-certs" }) do
      local rb = support.one(objects, "RoleBinding", name)
      assert.same({ apiGroup = "rbac.authorization.k8s.io", kind = "Role",
                    name = support.one(objects, "Role", name).metadata.name }, rb.roleRef)
      assert.same({ { kind = "ServiceAccount", name = "luna", namespace = NAMESPACE } }, rb.subjects)
    end
    local luna = support.one(objects, "ClusterRole", "luna")
    assert.is_nil(luna.rules, "the aggregated ClusterRole's rules are filled in by the cluster")
    assert.same({ { matchLabels = { [AGGREGATE] = "true" } } }, luna.aggregationRule.clusterRoleSelectors)
  end)

  -- luna-controllers is `luna rbac`'s output for controllers/
  -- (spec/19-authoring/04-rbac_spec.lua checks the file is current, and
  -- spec/16-deploy/07-rbac_kube_spec.lua that a real API server lets the
  -- controllers do their work with it and refuses them without each rule)
  it("grants the example controllers and secure metrics exactly the verbs they use", function()
    local got = {}
    for _, r in ipairs(support.find(objects, "ClusterRole")) do
      -- the managed webhook mode's role names its objects (below)
      if (r.metadata.labels or {})[AGGREGATE] == "true" and r.metadata.name ~= "luna-webhook-configurations" then
        for _, rule in ipairs(r.rules) do
          assert.is_nil(rule.resourceNames, r.metadata.name)
          assert.is_nil(rule.nonResourceURLs, r.metadata.name)
        end
        collect(r.rules, got)
      end
    end
    assert.same({
      ["core/configmaps"] = { "create", "delete", "get", "list", "patch", "update", "watch" },
      ["example.com/widgets"] = { "list", "watch" },
      ["example.com/widgets/status"] = { "patch" },
      ["example.com/widgets/finalizers"] = { "update" },
      ["apps/deployments"] = { "create", "list", "patch", "watch" },
      ["core/secrets"] = { "list", "watch" },
      ["events.k8s.io/events"] = { "create", "patch" },
      ["authentication.k8s.io/tokenreviews"] = { "create" },
      ["authorization.k8s.io/subjectaccessreviews"] = { "create" },
    }, verbs(got))
  end)

  it("offers a metrics-reader ClusterRole for scrapers, not aggregated into luna's", function()
    local reader = support.one(objects, "ClusterRole", "luna-metrics-reader")
    assert.is_nil((reader.metadata.labels or {})[AGGREGATE])
    assert.same({ { nonResourceURLs = { "/metrics" }, verbs = { "get" } } }, reader.rules)
  end)

  it("offers an admin ClusterRole for `luna trigger`, not aggregated into luna's", function()
    local admin = support.one(objects, "ClusterRole", "luna-admin")
    assert.is_nil((admin.metadata.labels or {})[AGGREGATE])
    assert.same({ { nonResourceURLs = { "/admin/controllers" }, verbs = { "get" } },
                  { nonResourceURLs = { "/admin/controllers/*" }, verbs = { "post" } } }, admin.rules)
  end)

  it("has no wildcard anywhere (but the admin role's one path prefix)", function()
    for _, r in ipairs(roles) do
      for _, rule in ipairs(r.rules or {}) do
        for _, field in ipairs({ "apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs" }) do
          for _, v in ipairs(rule[field] or {}) do
            -- a path prefix is the only way RBAC grants a family of URLs
            if r.metadata.name == "luna-admin" and field == "nonResourceURLs" then
              v = v:gsub("^/admin/controllers/%*$", "/admin/controllers/")
            end
            assert.is_nil(v:find("*", 1, true), ("%s %s: %s has %q"):format(r.kind, r.metadata.name, field, v))
          end
        end
      end
    end
  end)

  it("allows leader election on its own Lease only, with a Role in the luna namespace", function()
    local role = support.one(objects, "Role", "luna-leader-election")
    assert.equal(NAMESPACE, role.metadata.namespace)
    assert.same({ ["coordination.k8s.io/leases"] = { "create", "get", "update" } }, verbs(collect(role.rules)))
    local id = arg_value(container().args, "--leader-election-id")
    for _, rule in ipairs(role.rules) do
      local named = support.set(rule.verbs)
      if named.get or named.update then assert.same({ id }, rule.resourceNames) end
    end
    -- and no ClusterRole touches Leases
    for _, r in ipairs(support.find(objects, "ClusterRole")) do
      assert.is_nil(collect(r.rules)["coordination.k8s.io/leases"], r.metadata.name)
    end
  end)

  it("names the CRD's group and plural that the widget rules use", function()
    local crd = support.one(objects, "CustomResourceDefinition")
    local got = {}
    for _, r in ipairs(support.find(objects, "ClusterRole")) do collect(r.rules, got) end
    assert.truthy(got[crd.spec.group .. "/" .. crd.spec.names.plural])
  end)
end)

describe("the Widget CRD", function()
  local crd = support.one(objects, "CustomResourceDefinition", "widgets.example.com")
  local version = crd.spec.versions[1]
  local schema = version.schema.openAPIV3Schema

  -- The apiserver's structural-schema rules, the parts this CRD can break:
  -- every node has a type, properties only on objects, items only on arrays.
  local function structural(node, path, problems)
    if not node.type and not node["x-kubernetes-int-or-string"]
      and not node["x-kubernetes-preserve-unknown-fields"] then
      problems[#problems + 1] = path .. ": no type"
    end
    if node.properties then
      if node.type ~= "object" then problems[#problems + 1] = path .. ": properties on a non-object" end
      for name, child in pairs(node.properties) do structural(child, path .. "." .. name, problems) end
    end
    if node.items then
      if node.type ~= "array" then problems[#problems + 1] = path .. ": items on a non-array" end
      structural(node.items, path .. "[]", problems)
    end
    for _, key in ipairs(node.required or {}) do
      if not (node.properties or {})[key] then problems[#problems + 1] = path .. ": requires unknown " .. key end
    end
    return problems
  end

  it("defines a namespaced example.com/v1 Widget with a status subresource", function()
    assert.equal("example.com", crd.spec.group)
    assert.equal("Namespaced", crd.spec.scope)
    assert.same({ kind = "Widget", listKind = "WidgetList", plural = "widgets", singular = "widget" },
      crd.spec.names)
    assert.equal(crd.spec.names.plural .. "." .. crd.spec.group, crd.metadata.name)
    assert.equal(2, #crd.spec.versions)
    assert.equal("v1", version.name)
    assert.is_true(version.served and version.storage)
    assert.same({}, version.subresources.status)
  end)

  it("serves v1alpha1 (spec.size) beside v1, for widget-conversion.lua's converter", function()
    local old = crd.spec.versions[2]
    assert.equal("v1alpha1", old.name)
    assert.is_true(old.served)
    assert.is_false(old.storage)
    local s = old.schema.openAPIV3Schema
    assert.same({}, structural(s, "", {}))
    assert.equal("integer", s.properties.spec.properties.size.type)
    assert.is_nil(s.properties.spec.properties.replicas)
    -- the versions the converter declares are the CRD's
    local out = assert(io.popen("env -u LD_PRELOAD " .. helpers.luna ..
      " webhooks manifest --only conversion --service-namespace luna controllers 2>&1")):read("*a")
    assert.truthy(out:find("name: \"widgets.example.com\"", 1, true), out)
    assert.truthy(out:find("versions v1, v1alpha1", 1, true) or out:find("versions v1alpha1, v1", 1, true), out)
  end)

  it("has a structural openAPIV3Schema", function()
    assert.equal("object", schema.type)
    assert.same({}, structural(schema, "", {}))
  end)

  it("types spec.image, spec.replicas and the status fields", function()
    local spec = schema.properties.spec
    assert.equal("string", spec.properties.image.type)
    assert.same({ "image" }, spec.required)
    assert.equal("integer", spec.properties.replicas.type)
    assert.equal(0, spec.properties.replicas.minimum)
    local status = schema.properties.status.properties
    assert.equal("integer", status.readyReplicas.type)
    assert.equal("integer", status.observedGeneration.type)
  end)

  it("shapes status.conditions like metav1.Condition, one per type", function()
    local conditions = schema.properties.status.properties.conditions
    assert.equal("array", conditions.type)
    assert.equal("map", conditions["x-kubernetes-list-type"])
    assert.same({ "type" }, conditions["x-kubernetes-list-map-keys"])
    local item = conditions.items
    assert.same({ "type", "status", "lastTransitionTime", "reason", "message" }, item.required)
    assert.same({ "True", "False", "Unknown" }, item.properties.status.enum)
    assert.equal("date-time", item.properties.lastTransitionTime.format)
    assert.equal("integer", item.properties.observedGeneration.type)
  end)
end)
