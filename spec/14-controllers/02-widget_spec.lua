-- controllers/widget.lua end to end (the CRD is deploy/crd-widgets.yaml).
local luna_env = require("support.luna_env")

describe("widget controller", function()
  local env
  before_each(function()
    env = luna_env.start{ controllers = { "controllers/widget.lua" }, seed = { "deploy/crd-widgets.yaml" } }
  end)
  after_each(function() env:stop() end)

  it("runs a Deployment per Widget and reports readiness in the status", function()
    local srv = env.srv
    local wpath = srv:ns_path("widgets", nil, "example.com/v1")
    local code = srv:request("POST", wpath, { apiVersion = "example.com/v1", kind = "Widget",
      metadata = { name = "w1" }, spec = { image = "nginx:1.27", replicas = 2 } })
    assert.equal(201, code)
    local w1 = srv:ns_path("widgets", "w1", "example.com/v1")
    local dpath = srv:ns_path("deployments", "w1", "apps/v1")

    local dep = env:wait(function() return env:get(dpath) end, 15, "deployment")
    assert.equal(2, dep.spec.replicas)
    assert.equal("nginx:1.27", dep.spec.template.spec.containers[1].image)
    local owner = dep.metadata.ownerReferences[1]
    assert.equal("Widget", owner.kind)
    assert.equal("w1", owner.name)
    assert.is_true(owner.controller)

    local w = env:wait(function()
      local o = env:get(w1)
      return o.status and o.status.conditions and o
    end, 15, "status")
    assert.equal(0, w.status.readyReplicas)
    assert.equal(1, w.status.observedGeneration)
    assert.equal("False", w.status.conditions[1].status)
    assert.equal("DeploymentProgressing", w.status.conditions[1].reason)
    local first_transition = w.status.conditions[1].lastTransitionTime

    -- pods become ready: the owned Deployment's change reconciles the Widget
    dep = env:get(dpath)
    dep.status = { replicas = 2, readyReplicas = 2 }
    assert.equal(200, (srv:request("PUT", dpath .. "/status", dep)))
    w = env:wait(function()
      local o = env:get(w1)
      return o.status.conditions[1].status == "True" and o
    end, 15, "Ready=True")
    assert.equal(2, w.status.readyReplicas)
    assert.equal("DeploymentReady", w.status.conditions[1].reason)
    assert.is_string(first_transition)

    -- a spec change is applied and observed
    w.spec.replicas = 3
    assert.equal(200, (srv:request("PUT", w1, w)))
    env:wait(function()
      local o, d = env:get(w1), env:get(dpath)
      return d.spec.replicas == 3 and o.status.observedGeneration == 2
    end, 15, "replicas 3 observed")

    -- deleting the Widget garbage-collects its Deployment
    srv:request("DELETE", w1)
    env:wait(function() return env:get(dpath) == nil end, 15, "garbage collection")
  end)
end)
