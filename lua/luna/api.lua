-- luna.api: what a reconcile calls — cache reads (listers) and API requests.
--
-- Every function here needs the luna host (`luna run`); API requests also
-- need to run inside a reconcile, where they yield the reconcile's
-- coroutine until the server answers (other reconciles and the watches go
-- on meanwhile). Failures come back as `nil, err` with err.code (HTTP
-- status, 0 when no response), err.reason (the Kubernetes Status reason:
-- NotFound, Conflict, AlreadyExists, ... or Timeout, ConnectionFailed),
-- err.message and err.where ("luna.get at file:line", the failed call);
-- tostring(err) is "Reason: message".  The server's warnings on a call
-- are logged ("api warning") and luna.last_warnings() returns the last
-- call's.

local core = require("luna.core")
local errors = require("luna.errors")
local util = require("luna.util")
local json = core.json

local api = {}

local REASONS = {
  [400] = "BadRequest", [401] = "Unauthorized", [403] = "Forbidden", [404] = "NotFound",
  [405] = "MethodNotAllowed", [406] = "NotAcceptable", [409] = "Conflict", [410] = "Gone",
  [413] = "RequestEntityTooLarge", [415] = "UnsupportedMediaType", [422] = "Invalid",
  [429] = "TooManyRequests", [500] = "InternalError", [503] = "ServiceUnavailable",
  [504] = "Timeout",
}

local function runtime(fn)
  local rt = core.runtime
  if not rt then util.raise("%s needs the luna host (luna run)", fn) end
  return rt
end

local function escape(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

local function query_string(params)
  local parts = {}
  for k, v in pairs(params) do
    if v ~= nil and v ~= false then parts[#parts + 1] = escape(k) .. "=" .. escape(v) end
  end
  table.sort(parts)
  return #parts > 0 and table.concat(parts, "&") or nil
end

local function selector_text(sel)
  if sel == nil or type(sel) == "string" then return sel end
  local parts = {}
  for k, v in pairs(sel) do parts[#parts + 1] = k .. "=" .. v end
  table.sort(parts)
  return table.concat(parts, ",")
end

local function path(res, namespace, name, subresource, query)
  local p = res.group == "" and ("/api/" .. res.version) or ("/apis/" .. res.group .. "/" .. res.version)
  if res.namespaced and namespace and namespace ~= "" then p = p .. "/namespaces/" .. escape(namespace) end
  p = p .. "/" .. res.resource
  if name then p = p .. "/" .. escape(name) end
  if subresource then p = p .. "/" .. subresource end
  if query then p = p .. "?" .. query end
  return p
end

-- kind string of an object: "apps/v1/Deployment" from apiVersion and kind.
local function kind_of(obj)
  if type(obj) ~= "table" or type(obj.apiVersion) ~= "string" or type(obj.kind) ~= "string" then
    util.raise("object needs apiVersion and kind")
  end
  return obj.apiVersion .. "/" .. obj.kind
end

local function meta_of(obj)
  local m = obj.metadata
  if type(m) ~= "table" then util.raise("object needs metadata") end
  return m
end

-- Shadow mode (luna run --shadow): the host sends every write as a dry run
-- (dryRun=All); here each write is also logged with what it would have
-- changed, as a JSON merge patch (RFC 7386) from the object before to the
-- dry run's answer, fields every write touches left out.
local NOISE = { resourceVersion = true, managedFields = true, generation = true, uid = true,
  creationTimestamp = true }

local function is_array(t) return getmetatable(t) == json.array_mt end

local function clean(obj)
  if type(obj) ~= "table" or type(obj.metadata) ~= "table" then return obj end
  local copy, meta = {}, {}
  for k, v in pairs(obj) do copy[k] = v end
  for k, v in pairs(obj.metadata) do if not NOISE[k] then meta[k] = v end end
  copy.metadata = meta
  return copy
end

local equal -- api.equal, below
local function merge_diff(a, b)
  if type(a) ~= "table" or type(b) ~= "table" or is_array(a) or is_array(b) then
    if equal(a, b) then return nil end
    if b == nil then return json.null end
    return b
  end
  local out, any = {}, false
  for k in pairs(a) do
    if b[k] == nil then out[k], any = json.null, true end
  end
  for k, v in pairs(b) do
    local d = merge_diff(a[k], v)
    if d ~= nil then out[k], any = d, true end
  end
  return any and json.object(out) or nil
end

local send_now
local answer

local function shadow_send(rt, fn, method, kind, namespace, name, subresource, query, body, content_type)
  local verb = fn:gsub("^luna%.", "")
  local before
  if name and method ~= "POST" then
    before = send_now(rt, "GET", kind, namespace, name, nil, nil)
  end
  local dry = (query and query ~= "") and (query:find("dryRun=All", 1, true) and query or query .. "&dryRun=All")
    or "dryRun=All"
  -- kube-apiserver reads a DELETE's options from its body when there is
  -- one, and then ignores the query: the body must say dryRun itself
  if method == "DELETE" and type(body) == "table" then
    local copy = {}
    for k, v in pairs(body) do copy[k] = v end
    copy.dryRun = { "All" }
    body = copy
  end
  local after, err, warns = send_now(rt, method, kind, namespace, name, subresource, dry, body, content_type)
  if after == nil then return nil, err, warns end
  local diff, changed
  if method == "DELETE" then
    changed = before ~= nil
    diff = changed and json.null or nil
  else
    diff = merge_diff(clean(before), clean(after))
    changed = diff ~= nil
  end
  local encoded = diff ~= nil and json.encode(diff) or nil
  rt.shadow_report(verb, changed, ("%s %s %s%s"):format(verb, kind,
    namespace and namespace ~= "" and (namespace .. "/") or "", name or "(new)"))
  -- the host's own fields (the object written), not a script's
  rt.log("info", "shadow write", nil, { verb = verb, kind = kind, namespace = namespace,
    name = name or (type(after) == "table" and type(after.metadata) == "table" and after.metadata.name) or nil,
    subresource = subresource, changed = changed and true or false, diff = encoded })
  return after, nil, warns
end

-- Sends one request and turns the answer into (object) or (nil, err).
local function send(fn, method, kind, namespace, name, subresource, query, body, content_type)
  local rt = runtime(fn)
  local cur = rt.current()
  if not (cur and cur.key) then
    util.raise("%s can only be called inside reconcile (on its own coroutine, not one it created)", fn)
  end
  if not coroutine.isyieldable() then
    util.raise("%s cannot wait here: it is called from inside a library function (a table.sort "
      .. "comparator, a string.gsub function, an xpcall message handler, a __tostring or another "
      .. "callback); call it from reconcile's own code", fn)
  end
  if rt.shadow and method ~= "GET" then
    return shadow_send(rt, fn, method, kind, namespace, name, subresource, query, body, content_type)
  end
  return send_now(rt, method, kind, namespace, name, subresource, query, body, content_type)
end

send_now = function(rt, method, kind, namespace, name, subresource, query, body, content_type)
  local res, err = rt.resolve(kind)
  if not res then return nil, err end
  if res.namespaced and name and (not namespace or namespace == "") then
    return nil, errors.new("BadRequest", kind .. " is namespaced: a namespace is required", 400)
  end
  -- path segments as the API server validates them (client-go's
  -- IsValidPathSegmentName; escape() takes care of '/', '%' and '#'): a
  -- "." or ".." name would address another path once the URL is
  -- normalised, and a subresource is one segment
  for what, v in pairs({ name = name, namespace = namespace }) do
    if v == "." or v == ".." then
      return nil, errors.new("BadRequest", ("invalid %s %q: may not be '.' or '..'"):format(what, v), 400)
    end
  end
  if subresource ~= nil and (type(subresource) ~= "string" or not subresource:match("^[a-z][a-z0-9]*$")) then
    return nil, errors.new("BadRequest", ("invalid subresource %q: one lower-case path segment (status, scale, ...)")
      :format(tostring(subresource)), 400)
  end
  local encoded
  if body ~= nil then
    if type(body) == "string" then
      encoded = body
    else
      local e
      encoded, e = json.encode(body)
      if not encoded then return nil, errors.new("InvalidObject", e.message, 0) end
    end
  end
  local status, text, warns = rt.request(method, path(res, namespace, name, subresource, query),
    encoded, content_type)
  if not status then return nil, text end
  local obj, err = answer(method, status, text)
  return obj, err, warns
end

-- The answer to a request: (object), (true) for an empty 2xx body where
-- that is allowed, or (nil, err).
answer = function(method, status, text)
  if status >= 200 and status < 300 then
    if text == "" then
      -- a read or a write must answer with the object: an empty 2xx body
      -- (a lying server) would read as success with nothing applied
      if method == "GET" or method == "PATCH" or method == "PUT" then
        return nil, errors.new("InvalidResponse", ("the server answered %s %d with an empty body"):format(method, status), status)
      end
      return true
    end
    local obj, derr = json.decode(text)
    if obj == nil then return nil, errors.new("InvalidResponse", derr.message, status) end
    return obj
  end
  local st = json.decode(text)
  if type(st) == "table" and st.kind == "Status" then
    local reason = type(st.reason) == "string" and st.reason ~= "" and st.reason
    local message = type(st.message) == "string" and st.message ~= "" and st.message
      or ("HTTP " .. status)
    return nil, errors.new(reason or REASONS[status] or "Unknown", message, status)
  end
  -- not a Status (a proxy's page, a redirect): the code, and the start of
  -- the body, so the error names what came back
  local message = "HTTP " .. status .. (text ~= "" and (": " .. text:sub(1, 200)) or "")
  return nil, errors.new(REASONS[status] or "Unknown", message, status)
end

-- send, with err.where = "luna.get at file:line" naming the script line
-- that made the failed call (the log of a reconcile returning nil, err
-- shows it).
--
-- The server's warnings (`Warning: 299` headers: an unknown field dropped
-- from a write, a deprecated API) are logged ("api warning", with the call
-- and its line) and kept for luna.last_warnings(): the last call's, per
-- reconcile coroutine, stamped with the reconcile's id (a coroutine is
-- reused by later reconciles).
local last_warnings = setmetatable({}, { __mode = "k" })

local function call(fn, ...)
  local obj, err, warns = send(fn, ...)
  local at
  if obj == nil and type(err) == "table" then
    at = util.where()
    err.where = at and (fn .. " at " .. at) or fn
  end
  local co = coroutine.running()
  if warns then
    local rt = core.runtime
    at = at or util.where()
    local where = at and (fn .. " at " .. at) or fn
    for _, text in ipairs(warns) do
      rt.log("warn", "api warning", nil, { warning = text, where = where })
    end
    last_warnings[co] = { id = rt.current().reconcile_id, list = warns }
  elseif last_warnings[co] then
    last_warnings[co] = nil
  end
  return obj, err
end

-- luna.last_warnings(): the warnings the server sent with this reconcile's
-- last API call (a fresh list of strings, empty when it sent none).
function api.last_warnings()
  local rt = core.runtime
  local e = rt and last_warnings[coroutine.running()]
  local cur = e and rt.current()
  local out = {}
  if cur and cur.reconcile_id == e.id then
    for i, text in ipairs(e.list) do out[i] = text end
  end
  return out
end

-- luna.get(kind, namespace, name) or luna.get(kind, name) when cluster-scoped.
function api.get(kind, a, b)
  local namespace, name = a, b
  if b == nil then namespace, name = nil, a end
  return call("luna.get", "GET", kind, namespace, name)
end

-- luna.list(kind, { namespace=, labels= "a=b" | {a="b"}, fields=, limit=, continue= })
function api.list(kind, opts)
  opts = opts or {}
  local q = query_string({ labelSelector = selector_text(opts.labels),
    fieldSelector = selector_text(opts.fields), limit = opts.limit, continue = opts.continue })
  return call("luna.list", "GET", kind, opts.namespace, nil, nil, q)
end

local function write_opts(opts)
  opts = opts or {}
  return query_string({ fieldManager = opts.field_manager, dryRun = opts.dry_run and "All" or nil })
end

function api.create(obj, opts)
  local m = meta_of(obj)
  return call("luna.create", "POST", kind_of(obj), m.namespace, nil, nil, write_opts(opts), obj)
end

function api.update(obj, opts)
  local m = meta_of(obj)
  return call("luna.update", "PUT", kind_of(obj), m.namespace, m.name, nil, write_opts(opts), obj)
end

function api.update_status(obj, opts)
  local m = meta_of(obj)
  return call("luna.update_status", "PUT", kind_of(obj), m.namespace, m.name, "status",
    write_opts(opts), obj)
end

local PATCH_TYPES = {
  merge = "application/merge-patch+json",
  json = "application/json-patch+json",
  strategic = "application/strategic-merge-patch+json",
}

-- luna.patch(kind, namespace, name, patch, { type = "merge"|"json"|"strategic", subresource= })
function api.patch(kind, namespace, name, patch, opts)
  opts = opts or {}
  local ct = PATCH_TYPES[opts.type or "merge"]
  if not ct then util.raise("patch type must be merge, json or strategic") end
  return call("luna.patch", "PATCH", kind, namespace, name, opts.subresource, write_opts(opts),
    patch, ct)
end

-- Server-side apply: luna.apply(obj, { field_manager = "name", force = true, subresource= })
function api.apply(obj, opts)
  opts = opts or {}
  if type(opts.field_manager) ~= "string" or opts.field_manager == "" then
    util.raise("luna.apply needs opts.field_manager")
  end
  local m = meta_of(obj)
  local q = query_string({ fieldManager = opts.field_manager, force = opts.force and "true" or nil,
    dryRun = opts.dry_run and "All" or nil })
  -- JSON is YAML, so the apply body can be the object's JSON.
  return call("luna.apply", "PATCH", kind_of(obj), m.namespace, m.name, opts.subresource, q, obj,
    "application/apply-patch+yaml")
end

-- luna.delete(kind, namespace, name, { propagation = "Background"|"Foreground"|"Orphan",
--   preconditions = { uid=, resource_version= }, grace_period = s })
function api.delete(kind, namespace, name, opts)
  opts = opts or {}
  local body = { apiVersion = "v1", kind = "DeleteOptions",
    propagationPolicy = opts.propagation, gracePeriodSeconds = opts.grace_period }
  if opts.preconditions then
    body.preconditions = { uid = opts.preconditions.uid,
      resourceVersion = opts.preconditions.resource_version }
  end
  return call("luna.delete", "DELETE", kind, namespace, name, nil, nil, body)
end

-- Listers: luna.cache(kind) reads the controller's own informers.  The
-- methods live apart from the metatable, and the metatable is locked: with
-- `Lister.__index = Lister`, `luna.cache(k).__index` handed every script
-- the one methods table all controllers share, and one controller could
-- replace another's `get` (docs/isolation.md, "Nothing shared between
-- controllers").
local Lister = {}
local lister_mt = { __index = Lister, __metatable = false }

-- lister:get(namespace, name) or lister:get(name) when cluster-scoped.
function Lister:get(a, b)
  local rt = core.runtime
  if not rt then util.raise("%s needs the luna host (luna run)", "luna.cache") end
  -- the key "a/b" is put together in C (no Lua string made per get)
  return rt.cache_get(self.kind, a, b)
end

-- lister:list{ namespace=, labels= "a=b" | {a="b"} }
function Lister:list(opts)
  opts = opts or {}
  return runtime("luna.cache").cache_list(self.kind, opts.namespace, selector_text(opts.labels))
end

function Lister:by_index(name, value)
  return runtime("luna.cache").cache_by_index(self.kind, name, value)
end

function api.cache(kind)
  if type(kind) ~= "string" then util.raise("luna.cache takes a kind such as \"v1/ConfigMap\"") end
  return setmetatable({ kind = kind }, lister_mt)
end

-- Structured logging with controller, key and reconcile_id attached.
local function logger(level)
  return function(msg, fields)
    local rt = core.runtime
    if rt then
      rt.log(level, msg, fields)
    else
      local parts = { level:upper(), msg }
      for k, v in pairs(fields or {}) do parts[#parts + 1] = k .. "=" .. tostring(v) end
      io.stderr:write(table.concat(parts, " "), "\n")
    end
  end
end
api.log = { debug = logger("debug"), info = logger("info"), warn = logger("warn"), error = logger("error") }

-- luna.schedule(key, at): queues key, a key of the reconciling controller,
-- at `at` (seconds since the epoch) or { after = seconds }; a key already
-- waiting keeps the earlier time.  Inside a reconcile only; bad input
-- raises (api/schedule.h has the rules).
function api.schedule(key, at)
  local ok, why = runtime("luna.schedule").schedule(key, at)
  if not ok then util.raise("luna.schedule: %s", why) end
  return true
end

-- luna.event(obj, type, reason, note [, action]): records a Kubernetes
-- Event about obj (events.k8s.io/v1), deduplicated per controller: a
-- repeat within 10 minutes patches the existing Event's series count.
-- Inside a reconcile only (it calls the API). Returns true or nil, err;
-- a failure to record is worth a log line, not a failed reconcile.
local recorders = {}

-- Each controller's recorder keeps its memory in the host's store for that
-- controller (core.runtime.event_store), which outlives this Lua state:
-- a repeated Event stays one Event with a growing count across reloads.
local function recorder_for(controller)
  local rec = recorders[controller]
  if not rec then
    local events = require("luna.events")
    local rt = core.runtime
    rec = events.recorder{ controller = "luna.dev/" .. controller,
      instance = os.getenv("POD_NAME") or os.getenv("HOSTNAME") or "luna",
      store = rt and rt.event_store and rt.event_store(controller) or nil }
    recorders[controller] = rec
  end
  return rec
end

function api.event(obj, type_, reason, note, action)
  local cur = runtime("luna.event").current()
  if not (cur and cur.key) then
    util.raise("luna.event can only be called inside reconcile (on its own coroutine, not one it created)")
  end
  local rec = recorder_for(cur.controller)
  local act = rec:prepare(obj, type_, reason, note, action)
  local ok, err
  if act.create then
    local body = act.create
    ok, err = call("luna.event", "POST", body.apiVersion .. "/" .. body.kind, body.metadata.namespace,
      nil, nil, nil, body)
  else
    local kind = act.api == "v1" and "v1/Event" or "events.k8s.io/v1/Event"
    ok, err = call("luna.event", "PATCH", kind, act.patch.namespace, act.patch.name, nil, nil,
      act.patch.body, PATCH_TYPES.merge)
  end
  if not ok or runtime("luna.event").shadow then
    rec:forget(act) -- a dry run recorded nothing: the live code must not patch it
    if not ok then return nil, err end
  end
  return true
end

-- luna.equal(a, b): deep equality of JSON-like values (tables compared by
-- content, so two decoded objects with the same fields are equal).
equal = function(a, b) return api.equal(a, b) end
function api.equal(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  for k, v in pairs(a) do
    if not api.equal(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

api._path = path
return api
