-- widget.lua on the real runtime: its two webhooks called directly and
-- through the API server (docs/webhooks.md: "Testing webhooks"), then the
-- reconcile as fixture cases: objects before, the objects, Events and API
-- calls expected once the controller is idle (docs/authoring.md: "Fixture
-- files").  The CRD is deploy/crd-widgets.yaml.
local testing = require "luna.testing"

local function widget(replicas, image, name)
  return { apiVersion = "example.com/v1", kind = "Widget",
    metadata = { name = name or "w1", namespace = "default" },
    spec = { image = image or "nginx:1.27", replicas = replicas } }
end

describe("widget webhooks", function()
  local env
  before_each(function()
    env = testing.start{ controllers = { "widget.lua" }, seed = { "../deploy/crd-widgets.yaml" } }
  end)

  it("the defaulter fills in the image and the replicas, and leaves the rest", function()
    local w = widget(nil, nil)
    w.spec = {}
    local res = env:admit("widgets.default.example.com", { operation = "CREATE", object = w })
    assert.allowed(res)
    assert.patched({ { op = "add", path = "/spec/image", value = "nginx:1.27" },
                     { op = "add", path = "/spec/replicas", value = 1 } }, res)
    assert.same({ image = "nginx:1.27", replicas = 1 }, res.object.spec)
    -- what is given is kept: no patch at all
    res = env:admit("widgets.default.example.com", { operation = "UPDATE", object = widget(3, "app:2"),
                                                     old_object = widget(2, "app:2") })
    assert.patched({}, res)
  end)

  it("the validator refuses too many replicas and unpinned images, and warns at zero", function()
    assert.allowed(env:admit("widgets.validate.example.com", { object = widget(10) }))
    assert.denied(env:admit("widgets.validate.example.com", { object = widget(11) }),
                  "spec.replicas: at most 10, got 11")
    for _, image in ipairs { "nginx", "nginx:latest", "registry:5000/app" } do
      assert.denied(env:admit("widgets.validate.example.com", { object = widget(1, image) }),
                    "has no pinned tag or digest")
    end
    assert.allowed(env:admit("widgets.validate.example.com", { object = widget(1, "registry:5000/app@sha256:0123") }))
    local res = env:admit("widgets.validate.example.com", { operation = "UPDATE", object = widget(0),
                                                            old_object = widget(2) })
    assert.allowed(res)
    assert.same({ "spec.replicas is 0: the Widget runs no pods" }, res.warnings)
    assert.equal(403, env:admit("widgets.validate.example.com", { object = widget(11) }).code)
  end)

  it("the validator refuses a name whose Deployment is not the Widget's, from the cache", function()
    env:create{ apiVersion = "apps/v1", kind = "Deployment",
      metadata = { name = "taken", namespace = "default" },
      spec = { selector = { matchLabels = { app = "taken" } },
        template = { metadata = { labels = { app = "taken" } },
                     spec = { containers = { { name = "main", image = "nginx:1.27" } } } } } }
    env:wait_idle()
    assert.denied(env:admit("widgets.validate.example.com", { object = widget(1, nil, "taken") }),
                  "Deployment default/taken exists and is not this Widget's")
    assert.allowed(env:admit("widgets.validate.example.com", { object = widget(1, nil, "free") }))
  end)

  it("the API server calls both: kubectl-like writes are defaulted, or refused with the message", function()
    env:stop()
    env = testing.start{ controllers = { "widget.lua" }, seed = { "../deploy/crd-widgets.yaml" }, webhooks = true }
    local w = widget(nil, nil)
    w.spec = {}
    local stored = env:create(w)
    assert.same({ image = "nginx:1.27", replicas = 1 }, stored.spec)
    assert.has_error(function() env:create(widget(11, "nginx:1.27", "big")) end,
      'admission webhook "widgets.validate.example.com" denied the request: spec.replicas: at most 10, got 11')
    assert.is_nil(env:get("example.com/v1/Widget", "default", "big"))
    env:wait_idle()
    assert.equal(1, env:get("apps/v1/Deployment", "default", "w1").spec.replicas)
    -- the Widget's own Deployment does not count as taken on UPDATE
    env:patch("example.com/v1/Widget", "default", "w1", { spec = { replicas = 0 } })
    assert.same({ "spec.replicas is 0: the Widget runs no pods" }, env.last_warnings)
  end)
end)

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
