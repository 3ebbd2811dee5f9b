-- docs/team-controllers.md's two controllers against a real control plane
-- (issue 30: "writable, testable and deployable from the docs alone"):
-- their specs pass under `luna test --kube`, and both run as a
-- ServiceAccount holding only what the page says to grant (the role
-- `luna rbac` prints, plus the `bind` on `edit` it shows) and do their work
-- with no Forbidden: a team's namespace is onboarded and offboarded, a
-- Backup runs the Job it missed and its finalizer removes the Jobs of an
-- orphaning delete.  The dev server does not authorize by RBAC, so there
-- the run is pending; 19-authoring/12 runs the specs on it.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local support = require("16-deploy.support")
local examples = require("support.doc_examples")

local RBAC = "/apis/rbac.authorization.k8s.io/v1/"

describe("the team controllers on a real API server", function()
  local srv, dir, luna, team_ns, role_name, bind_name
  local created_crd = false

  local function wait(fn, what, secs) return support.wait_for(luna, fn, what, secs or 60) end

  local function get(path)
    local code, obj = srv:request("GET", path)
    if code == 200 then return obj end
  end

  setup(function()
    if not client.real() then return end
    srv = client.start()
    dir = examples.extract()
    team_ns = srv.ns .. "-team"
    role_name, bind_name = srv.ns .. "-team-controllers", srv.ns .. "-onboard-bind-edit"
    created_crd = not get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backups.example.com")
    support.must("kubectl apply -f " .. support.quote(dir .. "/backup/crd-backups.yaml")
      .. " && kubectl wait --for=condition=Established --timeout=60s crd/backups.example.com")
  end)

  teardown(function()
    if not srv then return end
    if luna then luna:kill() luna:wait(30) luna:stop() end
    for _, p in ipairs({ RBAC .. "clusterrolebindings/" .. role_name, RBAC .. "clusterroles/" .. role_name,
                         RBAC .. "clusterrolebindings/" .. bind_name, RBAC .. "clusterroles/" .. bind_name,
                         "/api/v1/namespaces/" .. team_ns }) do
      pcall(srv.request, srv, "DELETE", p)
    end
    if created_crd then
      pcall(srv.request, srv, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backups.example.com")
    end
    srv:stop()
  end)

  for _, sub in ipairs { "onboarding", "backup" } do
    it("passes luna test --kube " .. sub, function()
      if not client.real() then return pending("real API server only: 19-authoring/12 runs it on the dev server") end
      local out, rc = helpers.run("cd '" .. dir .. "' && env -u LD_PRELOAD " .. examples.luna()
        .. " test --kube " .. sub .. " 2>&1")
      assert.equal(0, rc, out)
      assert.matches("4 passed, 0 failed, 0 pending", out)
    end)
  end

  it("runs both as a ServiceAccount holding only the role the page gives, with no Forbidden", function()
    if not client.real() then
      return pending("real API server only: the dev server does not authorize requests by RBAC")
    end
    -- the role: `luna rbac` over both directories, and the page's bind rule
    local both = dir .. "/both"
    support.must("mkdir -p " .. support.quote(both) .. " && cp " .. support.quote(dir) .. "/onboarding/* "
      .. support.quote(dir) .. "/backup/* " .. support.quote(both))
    local role_yaml = support.must("cd " .. support.quote(both) .. " && " .. examples.luna()
      .. " rbac --name " .. role_name .. " .")
    local role_file = helpers.tmpdir() .. "/role.yaml"
    helpers.write_file(role_file, role_yaml)
    local bind_file = helpers.tmpdir() .. "/bind.yaml"
    helpers.write_file(bind_file, (assert(examples.files()["onboarding/onboard-bind-edit.yaml"])
      :gsub("name: onboard%-bind%-edit", "name: " .. bind_name)))
    support.must("kubectl apply -f " .. support.quote(role_file) .. " -f " .. support.quote(bind_file))
    local sa = "luna-team"
    assert.equal(201, (srv:request("POST", "/api/v1/namespaces/" .. srv.ns .. "/serviceaccounts",
      { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = sa } })))
    for _, role in ipairs { role_name, bind_name } do
      assert.equal(201, (srv:request("POST", RBAC .. "clusterrolebindings", {
        apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRoleBinding", metadata = { name = role },
        roleRef = { apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = role },
        subjects = { { kind = "ServiceAccount", name = sa, namespace = srv.ns } } })))
    end
    local code, tr = srv:request("POST", "/api/v1/namespaces/" .. srv.ns .. "/serviceaccounts/" .. sa .. "/token",
      { apiVersion = "authentication.k8s.io/v1", kind = "TokenRequest", spec = { expirationSeconds = 3600 } })
    assert.equal(201, code)
    luna = helpers.spawn({ helpers.luna, "run", "--log-level", "debug",
      "--kubeconfig", support.kubeconfig_with_token(tr.status.token),
      "--metrics-bind-address=0", "--health-probe-bind-address=0", both },
      { env = { POD_NAME = "luna-team-spec", KUBECONFIG = false } })

    -- onboarding: a team's namespace gets its three objects, and loses them with the label
    assert.equal(201, (srv:request("POST", "/api/v1/namespaces", { apiVersion = "v1", kind = "Namespace",
      metadata = { name = team_ns, labels = { ["example.com/team"] = "payments" } } })))
    local base = "/api/v1/namespaces/" .. team_ns
    local owned = { base .. "/resourcequotas/team-quota", base .. "/limitranges/team-limits",
                    RBAC .. "namespaces/" .. team_ns .. "/rolebindings/team-edit" }
    for _, p in ipairs(owned) do wait(function() return get(p) end, p) end
    assert.equal("team:payments", get(owned[3]).subjects[1].name)
    code = srv:request("PATCH", "/api/v1/namespaces/" .. team_ns,
      { { op = "remove", path = "/metadata/labels/example.com~1team" } },
      { content_type = "application/json-patch+json" })
    assert.equal(200, code)
    for _, p in ipairs(owned) do wait(function() return not get(p) end, p .. " gone") end

    -- backup: scheduled, then the run it missed, then its finalizer on an orphaning delete
    local bpath = "/apis/example.com/v1/namespaces/" .. srv.ns .. "/backups"
    assert.equal(201, (srv:request("POST", bpath, { apiVersion = "example.com/v1", kind = "Backup",
      metadata = { name = "db" }, spec = { schedule = "@hourly", claim = "data" } })))
    local b = wait(function()
      local o = get(bpath .. "/db")
      return o and o.status and o.status.nextScheduleTime and o.metadata.finalizers and o
    end, "the Backup's status and finalizer")
    assert.same({ "example.com/backup-jobs" }, b.metadata.finalizers)
    -- as if luna had been stopped for two hours: the last run is long past
    code = srv:request("PATCH", bpath .. "/db/status",
      { status = { lastScheduleTime = os.date("!%Y-%m-%dT%H:%M:%SZ", os.time() - 2 * 3600) } },
      { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
    local jobs = "/apis/batch/v1/namespaces/" .. srv.ns .. "/jobs?labelSelector=example.com%2Fbackup%3Ddb"
    wait(function() local l = get(jobs) return l and #l.items == 1 end, "the missed run's Job")
    code = srv:request("DELETE", bpath .. "/db", { propagationPolicy = "Orphan" })
    assert.equal(200, code)
    wait(function() return not get(bpath .. "/db") end, "the Backup gone")
    wait(function() local l = get(jobs) return l and #l.items == 0 end, "its Jobs gone")

    luna:drain(0.5)
    for _, l in ipairs(luna.out) do
      assert.is_falsy(l:find("[Ff]orbidden"), "a call was refused:\n" .. table.concat(luna.out, "\n"))
    end
  end)
end)
