-- controllers/widget.lua end to end (the CRD is deploy/crd-widgets.yaml).
local client = require("support.apiserver_client")
local luna_env = require("support.luna_env")

describe("widget controller", function()
  local env
  before_each(function()
    env = luna_env.start{ controllers = { "controllers/widget.lua" }, seed = { "deploy/crd-widgets.yaml" } }
  end)
  after_each(function() env:stop() end)

  -- Creates Widget w1 and waits for its Deployment and first status.
  local function widget()
    local srv = env.srv
    local wpath = srv:ns_path("widgets", nil, "example.com/v1")
    local code = srv:request("POST", wpath, { apiVersion = "example.com/v1", kind = "Widget",
      metadata = { name = "w1" }, spec = { image = "nginx:1.27", replicas = 2 } })
    assert.equal(201, code)
    local w1 = srv:ns_path("widgets", "w1", "example.com/v1")
    local dpath = srv:ns_path("deployments", "w1", "apps/v1")
    local dep = env:wait(function() return env:get(dpath) end, 15, "deployment")
    local w = env:wait(function()
      local o = env:get(w1)
      return o.status and o.status.conditions and o
    end, 15, "status")
    return w1, dpath, dep, w
  end

  it("runs a Deployment per Widget, reports progress, applies spec changes, is collected", function()
    local srv = env.srv
    local w1, dpath, dep, w = widget()
    assert.equal(2, dep.spec.replicas)
    assert.equal("nginx:1.27", dep.spec.template.spec.containers[1].image)
    local owner = dep.metadata.ownerReferences[1]
    assert.equal("Widget", owner.kind)
    assert.equal("w1", owner.name)
    assert.is_true(owner.controller)
    assert.equal(0, w.status.readyReplicas)
    assert.equal(1, w.status.observedGeneration)
    assert.equal("False", w.status.conditions[1].status)
    assert.equal("DeploymentProgressing", w.status.conditions[1].reason)

    -- a spec change is applied and observed (a merge patch: the controller
    -- writes the Widget's status meanwhile, so a GET-then-PUT could conflict)
    assert.equal(200, (srv:request("PATCH", w1, '{"spec":{"replicas":3}}',
      { content_type = "application/merge-patch+json" })))
    env:wait(function()
      local o, d = env:get(w1), env:get(dpath)
      return d.spec.replicas == 3 and o.status.observedGeneration == 2
    end, 15, "replicas 3 observed")

    -- deleting the Widget garbage-collects its Deployment (a cluster's
    -- garbage collector learns of a new CRD's kind on its 30 s discovery
    -- resync, so allow for that)
    srv:request("DELETE", w1)
    env:wait(function() return env:get(dpath) == nil end, 90, "garbage collection")
  end)

  it("reports Ready when its Deployment's pods are ready #devonly", function()
    if env.srv.real then
      return pending(client.DEV_ONLY .. "a cluster without nodes never runs the pods; on the " ..
                     "dev server the spec plays kubelet and Deployment controller by writing " ..
                     "the Deployment's status")
    end
    local srv = env.srv
    local w1, dpath, _, w = widget()
    local first_transition = w.status.conditions[1].lastTransitionTime
    -- pods become ready: the owned Deployment's change reconciles the Widget
    local dep = env:get(dpath)
    dep.status = { replicas = 2, readyReplicas = 2 }
    assert.equal(200, (srv:request("PUT", dpath .. "/status", dep)))
    w = env:wait(function()
      local o = env:get(w1)
      return o.status.conditions[1].status == "True" and o
    end, 15, "Ready=True")
    assert.equal(2, w.status.readyReplicas)
    assert.equal("DeploymentReady", w.status.conditions[1].reason)
    assert.is_string(first_transition)
    assert.is_true(w.status.conditions[1].lastTransitionTime >= first_transition)
  end)
end)
