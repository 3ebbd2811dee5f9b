-- widget: runs a Deployment for each example.com/v1 Widget and reports it in
-- the Widget's status (readyReplicas, observedGeneration, a Ready condition).
--
-- The Deployment is written with server-side apply, owned by the Widget
-- (so deleting the Widget garbage-collects it), and watched through `owns`:
-- a change to the Deployment, such as pods becoming ready, reconciles its
-- Widget again. The CRD is deploy/crd-widgets.yaml.
local luna = require "luna"

local MANAGER = "luna-widget"

local function desired_deployment(w)
  local app = "widget-" .. w.metadata.name
  local dep = {
    apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = w.metadata.name, namespace = w.metadata.namespace,
      labels = { ["app.kubernetes.io/name"] = app, ["app.kubernetes.io/managed-by"] = "luna" } },
    spec = {
      replicas = (w.spec and w.spec.replicas) or 1,
      selector = { matchLabels = { ["app.kubernetes.io/name"] = app } },
      template = {
        metadata = { labels = { ["app.kubernetes.io/name"] = app } },
        spec = { containers = { { name = "main", image = w.spec and w.spec.image or "nginx:1.27" } } },
      },
    },
  }
  assert(luna.meta.set_owner(dep, w, { controller = true, block_owner_deletion = true }))
  return dep
end

return luna.controller {
  name = "widget",
  watch = "example.com/v1/Widget",
  owns = { "apps/v1/Deployment" },
  workers = 4,

  reconcile = function(req)
    local w = luna.cache("example.com/v1/Widget"):get(req.namespace, req.name)
    if not w or (w.metadata.deletionTimestamp ~= nil) then return end

    local want = desired_deployment(w)
    local applied, err = luna.apply(want, { field_manager = MANAGER, force = true })
    if not applied then
      luna.event(w, "Warning", "ApplyFailed", tostring(err))
      return nil, err
    end

    local replicas = want.spec.replicas
    local ready = (applied.status and applied.status.readyReplicas) or 0
    local status = w.status or {}
    w.status = status
    local changed = status.readyReplicas ~= ready or status.observedGeneration ~= w.metadata.generation
    status.readyReplicas = ready
    status.observedGeneration = w.metadata.generation
    local cond = ready >= replicas
      and { type = "Ready", status = "True", reason = "DeploymentReady",
            message = ("%d/%d replicas ready"):format(ready, replicas) }
      or  { type = "Ready", status = "False", reason = "DeploymentProgressing",
            message = ("%d/%d replicas ready"):format(ready, replicas) }
    cond.observed_generation = w.metadata.generation
    if luna.conditions.set(w, cond) then
      changed = true
      luna.event(w, "Normal", cond.reason, cond.message)
    end
    if changed then
      local _, serr = luna.patch("example.com/v1/Widget", req.namespace, req.name,
        { status = w.status }, { type = "merge", subresource = "status" })
      if luna.is_not_found(serr) then return end -- deleted meanwhile
      if serr then return nil, serr end
    end
  end,
}
