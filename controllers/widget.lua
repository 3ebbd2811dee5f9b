-- widget: runs a Deployment for each example.com/v1 Widget and reports it in
-- the Widget's status (readyReplicas, observedGeneration, a Ready condition).
--
-- The Deployment is written with server-side apply, owned by the Widget
-- (so deleting the Widget garbage-collects it), and watched through `owns`:
-- a change to the Deployment, such as pods becoming ready, reconciles its
-- Widget again. The CRD is deploy/crd-widgets.yaml.
--
-- Two admission webhooks come with it (docs/webhooks.md): a defaulter fills
-- in spec.image and spec.replicas, and a validator refuses what the
-- reconcile could not run well: more than MAX_REPLICAS pods, an image
-- without a pinned tag or digest, and a name whose Deployment already
-- exists without this Widget as its controller (server-side apply with
-- force would take it over). It reads that from the Deployment cache the
-- controller has through `owns`: a webhook reads its controller's caches.
local luna = require "luna"

local MANAGER = "luna-widget"
local DEFAULT_IMAGE = "nginx:1.27"
local MAX_REPLICAS = 10

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
        spec = { containers = { { name = "main", image = w.spec and w.spec.image or DEFAULT_IMAGE } } },
      },
    },
  }
  assert(luna.meta.set_owner(dep, w, { controller = true, block_owner_deletion = true }))
  return dep
end

local WIDGETS = { { api_groups = { "example.com" }, api_versions = { "v1" }, resources = { "widgets" },
                    operations = { "CREATE", "UPDATE" }, scope = "Namespaced" } }

-- "nginx:1.27" and "reg:5000/app@sha256:..." are pinned; "nginx",
-- "nginx:latest" and "reg:5000/app" are not (a port is not a tag).
local function pinned(image)
  if image:find("@sha256:", 1, true) then return true end
  local tag = image:match(":([^:/]+)$")
  return tag ~= nil and tag ~= "latest"
end

local function validate(req)
  local w = req.object
  local spec = w.spec or {}
  local problems = {}
  local replicas = spec.replicas or 1
  if replicas > MAX_REPLICAS then
    problems[#problems + 1] = ("spec.replicas: at most %d, got %d"):format(MAX_REPLICAS, replicas)
  end
  if type(spec.image) == "string" and not pinned(spec.image) then
    problems[#problems + 1] = ("spec.image: %q has no pinned tag or digest (not :latest)"):format(spec.image)
  end
  if req.operation == "CREATE" then
    local dep = luna.cache("apps/v1/Deployment"):get(req.namespace, w.metadata.name)
    local owner = dep and luna.meta.controller_of(dep)
    if dep and not (owner and owner.kind == "Widget" and owner.name == w.metadata.name) then
      problems[#problems + 1] = ("metadata.name: Deployment %s/%s exists and is not this Widget's")
        :format(req.namespace, w.metadata.name)
    end
  end
  if #problems > 0 then return false, table.concat(problems, "; ") end
  if replicas == 0 then return { warnings = { "spec.replicas is 0: the Widget runs no pods" } } end
end

local function default(_, w)
  w.spec = w.spec or {}
  if w.spec.image == nil or w.spec.image == "" then w.spec.image = DEFAULT_IMAGE end
  if w.spec.replicas == nil then w.spec.replicas = 1 end
end

return luna.controller {
  name = "widget",
  watch = "example.com/v1/Widget",
  owns = { "apps/v1/Deployment" },
  workers = 4,

  webhooks = {
    luna.webhook { name = "widgets.validate.example.com", rules = WIDGETS, validate = validate },
    luna.webhook { name = "widgets.default.example.com", rules = WIDGETS, mutate = default },
  },

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
