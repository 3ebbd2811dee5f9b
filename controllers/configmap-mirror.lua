-- configmap-mirror: copies ConfigMaps labelled luna.dev/mirror=true into the
-- namespaces named in their luna.dev/mirror-to annotation ("a,b,c").
--
-- Owner references cannot cross namespaces, so copies are tied to their
-- source by the annotation luna.dev/mirrored-from=<namespace>/<name>, and a
-- finalizer on the source deletes every copy when the source is deleted.
-- A copy that is edited or deleted by hand is put back (the controller
-- watches copies and maps them to their source). A target namespace that
-- does not exist yet is looked at again every RECHECK seconds (namespaces
-- are not watched).
local luna = require "luna"

local FINALIZER = "luna.dev/mirror"
local COPY_LABEL = "luna.dev/mirror-copy"
local FROM = "luna.dev/mirrored-from"
local TO = "luna.dev/mirror-to"
local RECHECK = 30

local function wanted_namespaces(src)
  local out, own = {}, src.metadata.namespace
  for ns in (luna.meta.annotation(src, TO) or ""):gmatch("[^,%s]+") do
    if ns ~= own then out[ns] = true end
  end
  return out
end

local function copy_of(src, ns)
  local labels = {}
  for k, v in pairs(src.metadata.labels or {}) do
    if k ~= "luna.dev/mirror" then labels[k] = v end
  end
  labels[COPY_LABEL] = "true"
  return {
    apiVersion = "v1", kind = "ConfigMap",
    metadata = { name = src.metadata.name, namespace = ns, labels = labels,
      annotations = { [FROM] = src.metadata.namespace .. "/" .. src.metadata.name } },
    data = src.data, binaryData = src.binaryData,
  }
end

-- Every copy of src that exists, by namespace (read from the server: copies
-- live in namespaces this controller's cache does not cover).
local function existing_copies(src)
  local list, err = luna.list("v1/ConfigMap", { labels = { [COPY_LABEL] = "true" } })
  if not list then return nil, err end
  local from, out = src.metadata.namespace .. "/" .. src.metadata.name, {}
  for _, cm in ipairs(list.items) do
    if luna.meta.annotation(cm, FROM) == from then out[cm.metadata.namespace] = cm end
  end
  return out
end

local function delete_copies(src, keep)
  local copies, err = existing_copies(src)
  if not copies then return nil, err end
  for ns, cm in pairs(copies) do
    if not keep[ns] then
      local _, derr = luna.delete("v1/ConfigMap", ns, cm.metadata.name)
      if derr and not luna.is_not_found(derr) then return nil, derr end
      luna.log.info("deleted copy", { target_namespace = ns })
    end
  end
  return true
end

local function same_content(a, b)
  return luna.equal(a.data, b.data) and luna.equal(a.binaryData, b.binaryData)
    and luna.meta.annotation(a, FROM) == luna.meta.annotation(b, FROM)
end

return luna.controller {
  name = "configmap-mirror",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/mirror"] = "true" } },
  watches = {
    { "v1/ConfigMap", labels = { [COPY_LABEL] = "true" },
      map = function(copy) return luna.meta.annotation(copy, FROM) end },
  },
  workers = 2,

  reconcile = function(req)
    local src = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not src then return end
    if luna.finalizers.is_deleting(src) and luna.finalizers.has(src, FINALIZER) then
      -- the cache may not show our last write yet: decide on the server's
      -- object, so the copies are not cleaned up twice (lua/luna/finalizers.md)
      local live, err = luna.get("v1/ConfigMap", req.namespace, req.name)
      if luna.is_not_found(err) then return end
      if not live then return nil, err end
      src = live
    end

    local act = luna.finalizers.handle(src, FINALIZER, {
      cleanup = function(obj) return delete_copies(obj, {}) end,
    })
    if act.error then return nil, act.error end
    if act.pending then return { requeue_after = 5 } end
    if act.patch then
      local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name, act.patch)
      if luna.is_conflict(err) then return { requeue = true } end -- changed meanwhile: look again
      if luna.is_not_found(err) then return end                  -- gone meanwhile
      if err then return nil, err end
      if act.remove then return end
    end
    if act.deleting then return end

    local wanted = wanted_namespaces(src)
    local copies, err = existing_copies(src)
    if not copies then return nil, err end
    local changed, missing = 0, 0
    for ns in pairs(wanted) do
      local want, have = copy_of(src, ns), copies[ns]
      local ok, werr
      if not have then
        ok, werr = luna.create(want)
      elseif not same_content(want, have) then
        want.metadata.resourceVersion = have.metadata.resourceVersion
        ok, werr = luna.update(want)
      end
      if werr then
        if luna.is_not_found(werr) then
          luna.log.warn("target namespace missing", { target_namespace = ns })
          missing = missing + 1
        elseif luna.is_conflict(werr) or luna.is_already_exists(werr) then
          return { requeue = true }  -- the copy changed meanwhile: look again
        else
          return nil, werr
        end
      elseif ok then
        changed = changed + 1
        luna.log.info("mirrored", { target_namespace = ns })
      end
    end
    local ok, derr = delete_copies(src, wanted)
    if not ok then return nil, derr end
    if changed > 0 then
      luna.event(src, "Normal", "Mirrored", ("updated %d copies"):format(changed))
    end
    if missing > 0 then return { requeue_after = RECHECK } end
  end,
}
