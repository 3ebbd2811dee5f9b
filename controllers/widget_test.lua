-- widget.lua on the real runtime, as fixture cases: objects before, the
-- objects, Events and API calls expected once the controller is idle
-- (docs/authoring.md: "Fixture files").  The CRD is deploy/crd-widgets.yaml.
local function widget(replicas)
  return { apiVersion = "example.com/v1", kind = "Widget",
    metadata = { name = "w1", namespace = "default" },
    spec = { image = "nginx:1.27", replicas = replicas } }
end

return {
  controllers = { "widget.lua" },
  seed = { "../deploy/crd-widgets.yaml" },
  cases = {
    {
      name = "a Widget gets an owned Deployment and a progress status",
      objects = { widget(2) },
      expect = {
        objects = {
          { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "w1", namespace = "default",
              ownerReferences = { { kind = "Widget", name = "w1", controller = true } } },
            spec = { replicas = 2, template = { spec = { containers = { { image = "nginx:1.27" } } } } } },
          { apiVersion = "example.com/v1", kind = "Widget", metadata = { name = "w1", namespace = "default" },
            status = { readyReplicas = 0, observedGeneration = 1,
              conditions = { { type = "Ready", status = "False", reason = "DeploymentProgressing" } } } },
        },
        events = { { reason = "DeploymentProgressing", regarding = { kind = "Widget", name = "w1" } } },
        calls = {
          { method = "PATCH", path = "^/apis/apps/v1/namespaces/default/deployments/w1%?fieldManager=luna%-widget",
            body = { spec = { replicas = 2 } } },
          { method = "PATCH", path = "^/apis/example.com/v1/namespaces/default/widgets/w1/status$" },
        },
      },
    },
    {
      name = "ready pods make the Widget Ready",
      -- under `luna test --kube` kube-controller-manager owns the status
      -- (and without nodes no pod becomes ready): skipped there, saying so
      dev_only = "it plays the Deployment controller, which a real control plane runs",
      objects = { widget(2) },
      -- play kubelet and the Deployment controller: the pods are ready
      act = function(env)
        local dep = env:get("apps/v1/Deployment", "default", "w1")
        env:request("PUT", env:path("apps/v1/Deployment", "default", "w1") .. "/status",
          { apiVersion = "apps/v1", kind = "Deployment", metadata = dep.metadata,
            spec = dep.spec, status = { replicas = 2, readyReplicas = 2 } })
      end,
      expect = {
        objects = {
          { apiVersion = "example.com/v1", kind = "Widget", metadata = { name = "w1" },
            status = { readyReplicas = 2,
              conditions = { { type = "Ready", status = "True", reason = "DeploymentReady",
                               message = "2/2 replicas ready" } } } },
        },
        events = { { reason = "DeploymentReady" } },
      },
    },
    {
      name = "a spec change is applied and observed",
      objects = { widget(2) },
      act = function(env)
        env:patch("example.com/v1/Widget", "default", "w1", { spec = { replicas = 3 } })
      end,
      expect = {
        objects = {
          { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "w1" }, spec = { replicas = 3 } },
          { apiVersion = "example.com/v1", kind = "Widget", metadata = { name = "w1" },
            status = { observedGeneration = 2 } },
        },
      },
    },
    {
      name = "deleting the Widget garbage-collects its Deployment",
      objects = { widget(1) },
      act = function(env) env:delete("example.com/v1/Widget", "default", "w1") end,
      expect = {
        absent = { { "apps/v1/Deployment", "default", "w1" }, { "example.com/v1/Widget", "default", "w1" } },
      },
    },
  },
}
