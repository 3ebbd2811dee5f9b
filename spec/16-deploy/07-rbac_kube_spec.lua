-- The shipped controllers run with exactly the role `luna rbac` generates
-- for them (deploy/rbac-controllers.yaml), against a real API server: as
-- a ServiceAccount bound to that ClusterRole and nothing else, they
-- reconcile the demo objects (deploy/demo-objects.yaml, in namespaces of
-- this spec's own) with no Forbidden in their log; and taking away one of
-- its write rules makes the call that rule allowed fail Forbidden.  The
-- dev server does not authorize requests by RBAC, so there it is pending.
local helpers = require("helpers")
local cjson = require("cjson")
local client = require("support.apiserver_client")
local support = require("16-deploy.support")

local RBAC = "/apis/rbac.authorization.k8s.io/v1/"

-- The ClusterRole of deploy/rbac-controllers.yaml as a table, renamed.
local function generated_role(name)
  local role = cjson.decode((support.must("kubectl create --dry-run=client -o json -f deploy/rbac-controllers.yaml")))
  assert(role.kind == "ClusterRole")
  role.metadata = { name = name }
  return role
end

local function lines_matching(proc, pattern)
  local n = 0
  for _, l in ipairs(proc.out) do if l:find(pattern) then n = n + 1 end end
  return n
end

describe("the generated ClusterRole on a real API server", function()
  local srv, ns_a, ns_b, role_name, sa, luna, full_role

  local function wait(fn, what, secs) return support.wait_for(luna, fn, what, secs or 30) end

  local function get(path)
    local code, obj = srv:request("GET", path)
    if code == 200 then return obj end
  end

  local function put_role(role)
    local code, body = srv:request("PUT", RBAC .. "clusterroles/" .. role_name, role)
    assert(code == 200, "replace ClusterRole: HTTP " .. tostring(code) .. " " .. cjson.encode(body or {}))
  end

  setup(function()
    if not client.real() then return end
    srv = client.start()
    ns_a, ns_b = srv.ns .. "-a", srv.ns .. "-b"
    for _, ns in ipairs({ ns_a, ns_b }) do
      assert.equal(201, (srv:request("POST", "/api/v1/namespaces",
        { apiVersion = "v1", kind = "Namespace", metadata = { name = ns } })))
    end
    support.must("kubectl apply -f deploy/crd-widgets.yaml")
    role_name, sa = srv.ns .. "-controllers", "luna-rbac"
    full_role = generated_role(role_name)
    assert.equal(201, (srv:request("POST", RBAC .. "clusterroles", full_role)))
    assert.equal(201, (srv:request("POST", "/api/v1/namespaces/" .. srv.ns .. "/serviceaccounts",
      { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = sa } })))
    assert.equal(201, (srv:request("POST", RBAC .. "clusterrolebindings", {
      apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRoleBinding",
      metadata = { name = role_name },
      roleRef = { apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = role_name },
      subjects = { { kind = "ServiceAccount", name = sa, namespace = srv.ns } } })))
    local code, tr = srv:request("POST", "/api/v1/namespaces/" .. srv.ns .. "/serviceaccounts/" .. sa .. "/token",
      { apiVersion = "authentication.k8s.io/v1", kind = "TokenRequest", spec = { expirationSeconds = 3600 } })
    assert.equal(201, code)
    -- the demo objects, in this spec's namespaces
    local demo = assert(helpers.read_file("deploy/demo-objects.yaml"))
      :gsub("demo%-a", ns_a):gsub("demo%-b", ns_b):gsub("namespace: demo\n", "namespace: " .. srv.ns .. "\n")
      :gsub("metadata: {name: hello, namespace: demo}", "metadata: {name: hello, namespace: " .. srv.ns .. "}")
      :gsub("metadata: {name: db%-creds, namespace: demo}", "metadata: {name: db-creds, namespace: " .. srv.ns .. "}")
    local docs = {}
    for doc in (demo .. "\n---\n"):gmatch("(.-)\n%-%-%-\n") do
      if not doc:find("\nkind: Namespace\n") and doc:find("kind:") then docs[#docs + 1] = doc end
    end
    local file = helpers.tmpdir() .. "/demo.yaml"
    helpers.write_file(file, table.concat(docs, "\n---\n") .. "\n")
    support.must("kubectl apply -f " .. support.quote(file))
    -- the shipped controllers, as that ServiceAccount
    local dir = helpers.tmpdir()
    local files = support.controllers("controllers")
    for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
    luna = helpers.spawn({ helpers.luna, "run", "--log-level", "debug",
      "--kubeconfig", support.kubeconfig_with_token(tr.status.token),
      "--metrics-bind-address=0", "--health-probe-bind-address=0", dir },
      { env = { POD_NAME = "luna-rbac-spec", KUBECONFIG = false } })
  end)

  teardown(function()
    if not srv then return end
    if luna then luna:kill() luna:wait(30) luna:stop() end
    for _, p in ipairs({ RBAC .. "clusterrolebindings/" .. role_name, RBAC .. "clusterroles/" .. role_name,
                         "/api/v1/namespaces/" .. ns_a, "/api/v1/namespaces/" .. ns_b }) do
      pcall(srv.request, srv, "DELETE", p)
    end
    srv:stop()
  end)

  it("lets the shipped controllers reconcile the demo objects, with no Forbidden", function()
    if not client.real() then
      return pending("real API server only: the dev server does not authorize requests by RBAC")
    end
    local ns = srv.ns
    -- configmap-mirror: copies in both target namespaces
    for _, target in ipairs({ ns_a, ns_b }) do
      wait(function() return get("/api/v1/namespaces/" .. target .. "/configmaps/settings") end,
        "the mirrored ConfigMap in " .. target)
    end
    -- widget: its Deployment, and the Widget's status
    wait(function() return get("/apis/apps/v1/namespaces/" .. ns .. "/deployments/hello") end, "the widget's Deployment")
    wait(function()
      local w = get("/apis/example.com/v1/namespaces/" .. ns .. "/widgets/hello")
      return w and w.status and w.status.observedGeneration == w.metadata.generation
    end, "the Widget's status")
    -- secret-checksum: the checksum on the pod template
    wait(function()
      local d = get("/apis/apps/v1/namespaces/" .. ns .. "/deployments/api")
      return d and ((d.spec.template.metadata or {}).annotations or {})["luna.dev/secret-sha256"]
    end, "the Secret's checksum on the Deployment")
    luna:drain(0.5)
    assert.equal(0, lines_matching(luna, "[Ff]orbidden"), table.concat(luna.out, "\n"))
  end)

  -- One rule taken away at a time; a change to the object the rule serves
  -- makes its controller make that call again, and the server refuses it.
  for _, case in ipairs({
    { resource = "widgets/status", verb = "patch", group = "example.com",
      touch = function(ns) return "/apis/example.com/v1/namespaces/" .. ns .. "/widgets/hello",
        { spec = { replicas = 3 } } end },
    { resource = "configmaps", verb = "create", group = "",
      touch = function(ns, a, b) return "/api/v1/namespaces/" .. ns .. "/configmaps/settings",
        { metadata = { annotations = { ["luna.dev/mirror-to"] = a .. "," .. b .. "," .. ns .. "-gone" } } } end,
      setup = function(ns) return ns .. "-gone" end },
  }) do
    it("refuses " .. case.verb .. " on " .. case.resource .. " once its rule is gone", function()
      if not client.real() then
        return pending("real API server only: the dev server does not authorize requests by RBAC")
      end
      local ns = srv.ns
      local role = cjson.decode(cjson.encode(full_role))
      local kept, removed = {}, false
      for _, rule in ipairs(role.rules) do
        if rule.apiGroups[1] == case.group and rule.resources[1] == case.resource then
          local verbs = {}
          for _, v in ipairs(rule.verbs) do if v ~= case.verb then verbs[#verbs + 1] = v end end
          removed = true
          if #verbs > 0 then rule.verbs = verbs kept[#kept + 1] = rule end
        else
          kept[#kept + 1] = rule
        end
      end
      assert.is_true(removed, "no rule for " .. case.resource)
      role.rules = kept
      local current = get(RBAC .. "clusterroles/" .. role_name)
      role.metadata.resourceVersion = current.metadata.resourceVersion
      put_role(role)
      local extra = case.setup and case.setup(ns)
      if extra then
        assert.equal(201, (srv:request("POST", "/api/v1/namespaces",
          { apiVersion = "v1", kind = "Namespace", metadata = { name = extra } })))
      end
      -- the authorizer sees the changed role within moments; touch the
      -- object until the controller's next call is refused
      local path, patch = case.touch(ns, ns_a, ns_b)
      local n = 0
      local ok, err = pcall(wait, function()
        n = n + 1
        if n % 20 == 1 then
          local p = cjson.decode(cjson.encode(patch))
          p.metadata = p.metadata or {}
          p.metadata.labels = { ["luna.dev/rbac-spec-touch"] = tostring(n) }
          srv:request("PATCH", path, p, { content_type = "application/merge-patch+json" })
        end
        for _, l in ipairs(luna.out) do
          if l:find("[Ff]orbidden") and l:find(case.resource:gsub("/.*", ""), 1, true) and l:find(case.verb, 1, true) then
            return true
          end
        end
      end, case.verb .. " " .. case.resource .. " refused", 40)
      -- put the whole role back for the next case
      current = get(RBAC .. "clusterroles/" .. role_name)
      local full = cjson.decode(cjson.encode(full_role))
      full.metadata.resourceVersion = current.metadata.resourceVersion
      put_role(full)
      if extra then pcall(srv.request, srv, "DELETE", "/api/v1/namespaces/" .. extra) end
      assert(ok, err)
    end)
  end
end)
