-- luna.finalizers: finalizers on object tables, and the deletion pattern.
--
-- A finalizer keeps a deleted object around (metadata.deletionTimestamp set)
-- until whoever put it there has cleaned up and removed it.  add/remove
-- change obj.metadata.finalizers in place; the list they leave is marked
-- with core.json.array, so removing the last one encodes as
-- "finalizers":[] (what a merge patch needs to clear the list).
--
-- finalizers.handle(obj, name, { cleanup = fn }) is the whole pattern in
-- one call: it decides from obj alone what the reconcile must do, runs the
-- cleanup when it is time, edits obj, and returns an action table with a
-- merge patch ready for luna.patch (or send obj with luna.update).  It calls
-- no API itself, so it behaves the same in specs and in the host.
--
-- Finalizer names are Kubernetes qualified names ("example.com/cleanup");
-- an invalid name or a wrong argument type raises.

local core = require("luna.core")
local util = require("luna.util")

local json = core.json
local raise = util.raise

local finalizers = {}

local function check_name(name)
  if type(name) ~= "string" then raise("finalizer name must be a string, got %s", type(name)) end
  local ok, why = util.qualified_name(name)
  if not ok then raise("invalid finalizer name %q: %s", name, why) end
end

local function list_of(obj)
  local md = obj.metadata
  if type(md) ~= "table" then return nil end
  local l = md.finalizers
  if type(l) ~= "table" then return nil end
  return l
end

-- obj carries finalizer name.
function finalizers.has(obj, name)
  util.check_table(obj, "object")
  check_name(name)
  local l = list_of(obj)
  if not l then return false end
  for _, f in ipairs(l) do
    if f == name then return true end
  end
  return false
end

-- Appends name unless present.  Returns true when the list changed.
function finalizers.add(obj, name)
  if finalizers.has(obj, name) then return false end
  local l = list_of(obj)
  if not l then
    util.metadata(obj).finalizers = json.array({ name })
  else
    l[#l + 1] = name
  end
  return true
end

-- Removes every occurrence of name.  Returns true when the list changed;
-- the list stays (possibly empty, encoding as []).
function finalizers.remove(obj, name)
  util.check_table(obj, "object")
  check_name(name)
  local l = list_of(obj)
  if not l then return false end
  return util.remove_where(l, function(e) return e == name end)
end

-- obj is being deleted: metadata.deletionTimestamp is set.
function finalizers.is_deleting(obj)
  util.check_table(obj, "object")
  local md = obj.metadata
  return type(md) == "table" and util.present(md.deletionTimestamp) and md.deletionTimestamp ~= ""
end

-- A JSON merge patch that writes obj's current finalizer list:
-- { metadata = { finalizers = [...], resourceVersion = rv } }.
-- A merge patch replaces the whole list, so the patch carries obj's
-- resourceVersion: if anyone changed the object since it was read (another
-- controller adding its own finalizer), the server answers 409 Conflict
-- instead of silently dropping their change.  The list is a copy.
function finalizers.patch(obj)
  util.check_table(obj, "object")
  local copy = json.array()
  local l = list_of(obj)
  if l then
    for i, f in ipairs(l) do copy[i] = f end
  end
  local md = { finalizers = copy }
  local rv = type(obj.metadata) == "table" and obj.metadata.resourceVersion
  if type(rv) == "string" and rv ~= "" then md.resourceVersion = rv end
  return { metadata = md }
end

local HANDLE_OPTS = { cleanup = true }

local function count_results(...)
  return select("#", ...), ...
end

-- Decides what the reconcile does about finalizer name on obj:
--
--   live, finalizer missing   → adds it to obj;
--                               { state = "add", add = true, patch = P }
--   live, finalizer present   → { state = "ready" }: reconcile as usual
--   deleting, finalizer held  → runs cleanup(obj):
--       returns true          → removes it from obj;
--                               { state = "remove", deleting = true,
--                                 cleanup_done = true, remove = true, patch = P }
--       returns false         → { state = "pending", deleting = true,
--                                 pending = true }: not finished, look again later
--       returns nil/false, err → { state = "error", deleting = true, error = err }
--   deleting, finalizer gone  → { state = "deleting", deleting = true }:
--                               nothing left for this controller to do
--
-- P is finalizers.patch(obj) after the change.  cleanup may call the API
-- (it runs inside the reconcile); an error it raises propagates, which
-- fails the reconcile like any other Lua error.  A cleanup that returns
-- nothing at all raises: it must say whether it finished.
function finalizers.handle(obj, name, opts)
  util.check_table(obj, "object")
  check_name(name)
  util.check_table(opts, "finalizers.handle options")
  for k in pairs(opts) do
    if not HANDLE_OPTS[k] then raise("unknown finalizers.handle option '%s'", tostring(k)) end
  end
  if type(opts.cleanup) ~= "function" then
    raise("finalizers.handle needs a 'cleanup' function, got %s", type(opts.cleanup))
  end

  if not finalizers.is_deleting(obj) then
    if finalizers.add(obj, name) then
      return { state = "add", add = true, patch = finalizers.patch(obj) }
    end
    return { state = "ready" }
  end
  if not finalizers.has(obj, name) then
    return { state = "deleting", deleting = true }
  end

  local n, ok, err = count_results(opts.cleanup(obj))
  if ok == true then
    finalizers.remove(obj, name)
    return { state = "remove", deleting = true, cleanup_done = true, remove = true,
             patch = finalizers.patch(obj) }
  end
  if err ~= nil then
    return { state = "error", deleting = true, error = err }
  end
  if ok == false then
    return { state = "pending", deleting = true, pending = true }
  end
  if n == 0 then
    raise("finalizer %s: cleanup returned nothing; return true when done, " ..
          "false while still in progress, or nil, err", name)
  end
  raise("finalizer %s: cleanup returned %s without an error; return true when done, " ..
        "false while still in progress, or nil, err", name, tostring(ok))
end

return finalizers
