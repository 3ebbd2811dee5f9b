-- luna.meta: owner references, labels and annotations on object tables.
--
-- Objects are the plain tables API calls and the cache return (private
-- copies: helpers change them in place; send the result with luna.update or
-- a patch).  Lists these helpers create are marked with core.json.array, so
-- removing the last owner reference encodes as "ownerReferences":[].
--
-- Owner references follow controller-runtime's controllerutil:
--   * a dependent has at most one controller owner (controller = true);
--     claiming an object another controller owns fails with AlreadyOwned;
--   * a namespaced dependent may only be owned by a cluster-scoped object or
--     an object in its own namespace; a cluster-scoped dependent only by a
--     cluster-scoped object (the garbage collector ignores anything else);
--   * a reference to the same owner (same uid, or same group, kind and
--     name: an owner deleted and recreated) is replaced, never duplicated.
-- These data-dependent refusals return nil, err (err.reason "AlreadyOwned"
-- or "InvalidOwnerReference", err.code 0).  Wrong argument types and an
-- owner without apiVersion/kind/name/uid raise.

local core = require("luna.core")
local errors = require("luna.errors")
local util = require("luna.util")

local json = core.json
local raise = util.raise

local meta = {}

local function group_of(api_version)
  if type(api_version) ~= "string" then return nil end
  return api_version:match("^(.*)/[^/]*$") or ""
end

local function nonempty(v)
  return type(v) == "string" and v ~= ""
end

local OWNER_OPTS = { controller = true, block_owner_deletion = true }

-- A new ownerReference for owner (an object with apiVersion, kind,
-- metadata.name and metadata.uid).  opts.controller and
-- opts.block_owner_deletion (booleans) set controller/blockOwnerDeletion.
function meta.owner_reference(owner, opts)
  util.check_table(owner, "owner")
  local md = type(owner.metadata) == "table" and owner.metadata or {}
  if not nonempty(owner.apiVersion) then raise("owner has no apiVersion") end
  if not nonempty(owner.kind) then raise("owner has no kind") end
  if not nonempty(md.name) then raise("owner has no metadata.name") end
  if not nonempty(md.uid) then
    raise("owner %s %s has no metadata.uid (use the object as the API server returned it)",
          owner.kind, md.name)
  end
  local ref = { apiVersion = owner.apiVersion, kind = owner.kind, name = md.name, uid = md.uid }
  if opts ~= nil then
    util.check_table(opts, "owner reference options")
    for k, v in pairs(opts) do
      if not OWNER_OPTS[k] then raise("unknown owner reference option '%s'", tostring(k)) end
      if type(v) ~= "boolean" then raise("owner reference option '%s' must be a boolean", k) end
    end
    if opts.controller ~= nil then ref.controller = opts.controller end
    if opts.block_owner_deletion ~= nil then ref.blockOwnerDeletion = opts.block_owner_deletion end
  end
  return ref
end

-- The object's ownerReferences list when it is one, else nil.
local function refs_of(obj)
  local md = obj.metadata
  if type(md) ~= "table" then return nil end
  local refs = md.ownerReferences
  if type(refs) ~= "table" then return nil end
  return refs
end

-- ref and other name the same owner: equal uids, or (for an owner deleted
-- and recreated under the same name) the same group, kind and name.
local function same_owner(ref, other)
  if type(ref) ~= "table" then return false end
  if nonempty(ref.uid) and ref.uid == other.uid then return true end
  return ref.kind == other.kind and ref.name == other.name
    and group_of(ref.apiVersion) == group_of(other.apiVersion)
end

local REF_FIELDS = { "apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion" }

local function same_ref(a, b)
  for _, f in ipairs(REF_FIELDS) do
    if a[f] ~= b[f] then return false end
  end
  return true
end

local function describe(obj)
  local md = type(obj.metadata) == "table" and obj.metadata or {}
  local name = tostring(md.name or "")
  if nonempty(md.namespace) then name = md.namespace .. "/" .. name end
  return name
end

-- Adds (or replaces) owner's reference on obj.  Returns true when
-- obj.metadata.ownerReferences changed, false when it already held exactly
-- this reference, or nil, err when the reference is not allowed.
function meta.set_owner(obj, owner, opts)
  util.check_table(obj, "object")
  local ref = meta.owner_reference(owner, opts)
  local owner_ns = owner.metadata.namespace
  local obj_md = type(obj.metadata) == "table" and obj.metadata or {}
  local obj_ns = obj_md.namespace
  if nonempty(owner_ns) then
    if not nonempty(obj_ns) then
      return nil, errors.new("InvalidOwnerReference", string.format(
        "cluster-scoped %s %s must not have a namespace-scoped owner (%s %s/%s)",
        tostring(obj.kind or "object"), describe(obj), ref.kind, owner_ns, ref.name))
    end
    if obj_ns ~= owner_ns then
      return nil, errors.new("InvalidOwnerReference", string.format(
        "cross-namespace owner references are disallowed: owner %s %s/%s, object %s %s",
        ref.kind, owner_ns, ref.name, tostring(obj.kind or "object"), describe(obj)))
    end
  end

  local refs = refs_of(obj)
  if ref.controller then
    local current = refs and meta.controller_of(obj)
    if current and not same_owner(current, ref) then
      return nil, errors.new("AlreadyOwned", string.format(
        "%s %s is already owned by another %s controller %s",
        tostring(obj.kind or "object"), describe(obj), tostring(current.kind), tostring(current.name)))
    end
  end

  if not refs then
    util.metadata(obj).ownerReferences = json.array({ ref })
    return true
  end
  local found, changed = false, false
  local i = 1
  while i <= #refs do
    if same_owner(refs[i], ref) then
      if found then
        table.remove(refs, i) -- a second reference to the same owner
        changed = true
      else
        found = true
        if not same_ref(refs[i], ref) then
          refs[i] = ref
          changed = true
        end
        i = i + 1
      end
    else
      i = i + 1
    end
  end
  if not found then
    refs[#refs + 1] = ref
    changed = true
  end
  return changed
end

-- Removes every reference to owner (matched by uid, or by group, kind and
-- name when owner has no uid).  Returns true when one was removed.
function meta.remove_owner(obj, owner)
  util.check_table(obj, "object")
  util.check_table(owner, "owner")
  local refs = refs_of(obj)
  if not refs then return false end
  local target = meta.owner_of_object(owner)
  return util.remove_where(refs, function(ref) return meta.refers_to(ref, target) end)
end

-- { apiVersion, kind, name, uid } of an object (fields may be nil).
function meta.owner_of_object(owner)
  local md = type(owner.metadata) == "table" and owner.metadata or {}
  return { apiVersion = owner.apiVersion, kind = owner.kind, name = md.name, uid = md.uid }
end

-- ref (an ownerReference) points at target ({apiVersion, kind, name, uid}):
-- by uid when target has one, else by group, kind and name.
function meta.refers_to(ref, target)
  if type(ref) ~= "table" then return false end
  if nonempty(target.uid) then return ref.uid == target.uid end
  return nonempty(target.name) and ref.name == target.name and ref.kind == target.kind
    and group_of(ref.apiVersion) == group_of(target.apiVersion)
end

-- The ownerReference with controller = true, or nil.
function meta.controller_of(obj)
  util.check_table(obj, "object")
  local refs = refs_of(obj)
  if not refs then return nil end
  for _, ref in ipairs(refs) do
    if type(ref) == "table" and ref.controller == true then return ref end
  end
  return nil
end

-- obj has an owner reference to owner (an object).
function meta.is_owned_by(obj, owner)
  util.check_table(obj, "object")
  util.check_table(owner, "owner")
  local refs = refs_of(obj)
  if not refs then return false end
  local target = meta.owner_of_object(owner)
  for _, ref in ipairs(refs) do
    if meta.refers_to(ref, target) then return true end
  end
  return false
end

-- owner is obj's controller.
function meta.is_controlled_by(obj, owner)
  util.check_table(owner, "owner")
  local ref = meta.controller_of(obj)
  return ref ~= nil and meta.refers_to(ref, meta.owner_of_object(owner))
end

-- Labels and annotations ----------------------------------------------------

local function check_key(key, what)
  if type(key) ~= "string" then raise("%s key must be a string, got %s", what, type(key)) end
  local ok, why = util.qualified_name(key)
  if not ok then raise("invalid %s key %q: %s", what, key, why) end
end

local function get_map(obj, field, what, key)
  util.check_table(obj, "object")
  if type(key) ~= "string" then raise("%s key must be a string, got %s", what, type(key)) end
  local md = obj.metadata
  if type(md) ~= "table" then return nil end
  local m = md[field]
  if type(m) ~= "table" then return nil end
  local v = m[key]
  if type(v) ~= "string" then return nil end
  return v
end

local function set_map(obj, field, key, value)
  local md = util.metadata(obj)
  local m = md[field]
  if value == nil then
    if type(m) ~= "table" or m[key] == nil then return false end
    m[key] = nil
    return true
  end
  if type(m) ~= "table" then
    m = json.object()
    md[field] = m
  end
  if m[key] == value then return false end
  m[key] = value
  return true
end

-- The value of label key, or nil.
function meta.label(obj, key)
  return get_map(obj, "labels", "label", key)
end

-- Sets label key to value (nil removes it); creates metadata.labels.
-- Returns true when the labels changed.  Raises on an invalid key or value.
function meta.set_label(obj, key, value)
  util.check_table(obj, "object")
  check_key(key, "label")
  if value ~= nil then
    local ok, why = util.label_value(value)
    if not ok then
      raise("invalid value for label %q: %s", key,
            type(value) == "string" and string.format("%q %s", value, why) or why)
    end
  end
  return set_map(obj, "labels", key, value)
end

-- The value of annotation key, or nil.
function meta.annotation(obj, key)
  return get_map(obj, "annotations", "annotation", key)
end

-- Sets annotation key to value (any string; nil removes it); creates
-- metadata.annotations.  Returns true when the annotations changed.
function meta.set_annotation(obj, key, value)
  util.check_table(obj, "object")
  check_key(key, "annotation")
  if value ~= nil and type(value) ~= "string" then
    raise("value for annotation %q must be a string, got %s", key, type(value))
  end
  return set_map(obj, "annotations", key, value)
end

return meta
