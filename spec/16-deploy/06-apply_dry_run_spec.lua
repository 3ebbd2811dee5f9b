-- `kubectl apply -k deploy/ --dry-run=server`: every object deploy/ makes
-- passes the API server's own checks (schemas, RBAC rules, the CRD's
-- structural schema, the Deployment's pod template) without being stored.
-- Against the dev server, or the cluster in KUBECONFIG.
local client = require("support.apiserver_client")
local support = require("16-deploy.support")
local luna_env = require("support.luna_env")

describe("kubectl apply -k deploy/ --dry-run=server", function()
  local srv, kubeconfig, created_ns

  setup(function()
    srv = client.start()
    kubeconfig = luna_env.kubeconfig_for(srv)
    -- objects in a namespace the same apply only creates in a dry run are
    -- refused by a real server (namespaces "luna" not found): it must exist
    local code = srv:request("GET", "/api/v1/namespaces/luna")
    if code == 404 then
      assert.equal(201, (srv:request("POST", "/api/v1/namespaces",
        { apiVersion = "v1", kind = "Namespace", metadata = { name = "luna" } })))
      created_ns = true
    end
  end)

  teardown(function()
    if created_ns then pcall(srv.request, srv, "DELETE", "/api/v1/namespaces/luna") end
    srv:stop()
  end)

  it("passes for every object, and stores none of them", function()
    local dir = support.tree_with_controllers()
    local objects = support.kustomize(dir .. "/deploy")
    local out, rc = support.sh(("KUBECONFIG=%s kubectl apply -k %s --dry-run=server 2>&1")
      :format(support.quote(kubeconfig), support.quote(dir .. "/deploy")))
    assert.equal(0, rc, out)
    for _, o in ipairs(objects) do
      -- "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created (server dry run)"
      local pattern = o.kind:lower() .. "[%w%.]*/" .. o.metadata.name:gsub("%p", "%%%0")
        .. " [%w ]*%(server dry run%)"
      assert.matches(pattern, out:lower(), nil,
        o.kind .. " " .. o.metadata.name .. " missing from:\n" .. out)
    end
    -- nothing was stored
    local function absent(path) return (srv:request("GET", path)) == 404 end
    assert.is_true(absent("/apis/apps/v1/namespaces/luna/deployments/luna"))
    assert.is_true(absent("/apis/rbac.authorization.k8s.io/v1/clusterroles/luna-metrics-reader"))
    assert.is_true(absent("/api/v1/namespaces/luna/configmaps/luna-controllers"))
  end)
end)
