-- luna.events: Kubernetes Event bodies and a deduplicating recorder.
--
-- The runtime-independent half of event recording: this module builds the
-- object to POST (events.k8s.io/v1, or core/v1 for clusters without the
-- events API) and decides, from a bounded cache of recent events, whether
-- a new Event is needed or an existing one's count must go up.  The
-- runtime only sends what prepare returns.
--
-- Deduplication: the same (regarding uid, type, reason, action, note) seen
-- again within `window` seconds of its last occurrence becomes a merge patch
-- of the existing Event's series (events.k8s.io/v1: series.count and
-- series.lastObservedTime) or count and lastTimestamp (core/v1).  After
-- the window, a new Event.  The cache holds at most max_entries keys and
-- evicts the least recently used.
--
-- Names follow client-go: "<regarding name>.<hex nanoseconds of eventTime>";
-- a recorder never hands out the same name twice (two events in the same
-- nanosecond get consecutive suffixes).  Events about a cluster-scoped
-- object go to namespace "default", as client-go does.  The note is cut at
-- 1024 bytes (the API's limit) on a UTF-8 character boundary.

local bit = require("bit")
local ffi = require("ffi")
local time = require("luna.time")
local util = require("luna.util")

local raise = util.raise

local events = {}

events.NOTE_LIMIT = 1024
events.FIELD_LIMIT = 128
events.DEFAULT_WINDOW = 600
events.DEFAULT_MAX_ENTRIES = 4096
events.DEFAULT_ACTION = "Reconcile"
events.API_V1 = "events.k8s.io/v1"
events.API_CORE = "v1"

local TYPES = { Normal = true, Warning = true }

-- s cut to at most limit bytes without splitting a UTF-8 sequence.
local function truncate(s, limit)
  if #s <= limit then return s end
  -- Step back over continuation bytes (10xxxxxx) to the lead byte of the
  -- character that straddles the limit, and drop that character whole (a
  -- UTF-8 character has at most three continuation bytes).
  local i = limit + 1
  local lowest = math.max(1, limit - 2)
  while i > lowest and bit.band(s:byte(i), 0xC0) == 0x80 do i = i - 1 end
  return s:sub(1, i - 1)
end
events.truncate = truncate

local function check_field(v, what, limit)
  if type(v) ~= "string" or v == "" then
    raise("event %s must be a non-empty string, got %s", what,
          type(v) == "string" and "\"\"" or type(v))
  end
  if #v > limit then raise("event %s must be no more than %d characters", what, limit) end
end

local function check_controller(c)
  check_field(c, "controller", events.FIELD_LIMIT)
  local ok, why = util.qualified_name(c)
  if not ok then raise("event controller %q: %s (e.g. example.com/my-controller)", c, why) end
end

-- The regarding/involvedObject reference of obj.
local function reference(obj)
  util.check_table(obj, "regarding object")
  local md = type(obj.metadata) == "table" and obj.metadata or {}
  if type(obj.apiVersion) ~= "string" or obj.apiVersion == "" then raise("regarding object has no apiVersion") end
  if type(obj.kind) ~= "string" or obj.kind == "" then raise("regarding object has no kind") end
  if type(md.name) ~= "string" or md.name == "" then raise("regarding object has no metadata.name") end
  local ref = { apiVersion = obj.apiVersion, kind = obj.kind, name = md.name }
  for _, f in ipairs({ "namespace", "uid", "resourceVersion" }) do
    if type(md[f]) == "string" and md[f] ~= "" then ref[f] = md[f] end
  end
  return ref
end

local E_FIELDS = { type = true, reason = true, note = true, action = true,
                   controller = true, instance = true }

-- Validated copy of an event description.
local function check_event(e)
  util.check_table(e, "event")
  for k in pairs(e) do
    if not E_FIELDS[k] then raise("unknown event field '%s'", tostring(k)) end
  end
  if not TYPES[e.type] then
    raise("event type must be \"Normal\" or \"Warning\", got %s",
          type(e.type) == "string" and string.format("%q", e.type) or tostring(e.type))
  end
  check_field(e.reason, "reason", events.FIELD_LIMIT)
  local action = e.action
  if action == nil then action = events.DEFAULT_ACTION end
  check_field(action, "action", events.FIELD_LIMIT)
  check_controller(e.controller)
  check_field(e.instance, "instance", events.FIELD_LIMIT)
  local note = e.note
  if note == nil then note = "" end
  if type(note) ~= "string" then raise("event note must be a string, got %s", type(note)) end
  return { type = e.type, reason = e.reason, action = action, controller = e.controller,
           instance = e.instance, note = truncate(note, events.NOTE_LIMIT) }
end

-- "<name>.<hex nanoseconds>" (as client-go: Go's %x of UnixNano).  A
-- name too long for the 253-character limit is cut, and the cut part
-- loses trailing characters a DNS label may not end with.
local function event_name(name, ns)
  local suffix = "." .. string.format("%x", ns)
  if #name + #suffix > 253 then
    name = name:sub(1, 253 - #suffix):gsub("[^%w]+$", "")
  end
  return name .. suffix
end

local function nanos(us)
  return ffi.new("int64_t", us) * 1000LL
end

local function build_v1(ref, e, us, ns)
  return {
    apiVersion = "events.k8s.io/v1",
    kind = "Event",
    metadata = { name = event_name(ref.name, ns), namespace = ref.namespace or "default" },
    eventTime = time.format_micro(us / 1e6),
    reportingController = e.controller,
    reportingInstance = e.instance,
    action = e.action,
    reason = e.reason,
    note = e.note,
    type = e.type,
    regarding = ref,
  }
end

local function build_core(ref, e, us, ns)
  local ts = time.format(math.floor(us / 1e6))
  return {
    apiVersion = "v1",
    kind = "Event",
    metadata = { name = event_name(ref.name, ns), namespace = ref.namespace or "default" },
    involvedObject = ref,
    reason = e.reason,
    message = e.note,
    type = e.type,
    action = e.action,
    count = 1,
    firstTimestamp = ts,
    lastTimestamp = ts,
    source = { component = e.controller, host = e.instance },
    reportingComponent = e.controller,
    reportingInstance = e.instance,
  }
end

-- An events.k8s.io/v1 Event about obj.  e = { type, reason, note, action,
-- controller, instance }; now: nil, seconds or RFC 3339.
function events.event(obj, e, now)
  local ref = reference(obj)
  e = check_event(e)
  local us = time.micros(now)
  return build_v1(ref, e, us, nanos(us))
end

-- The same Event as a core/v1 Event (involvedObject, count, timestamps,
-- source.component).
function events.core_event(obj, e, now)
  local ref = reference(obj)
  e = check_event(e)
  local us = time.micros(now)
  return build_core(ref, e, us, nanos(us))
end

-- The recorder's memory -------------------------------------------------------

-- A store remembers, per deduplication key, the Event recorded for it:
--   store:get(key) -> count, last_us, name, namespace (nil if unknown), and
--       makes key the most recently used;
--   store:put(key, count, last_us, name, namespace): adds or replaces it as
--       the most recently used, forgetting the least recently used keys
--       beyond the store's bound;
--   store:forget(key) -> true if key was remembered;
--   store:size() -> number of keys;
--   store:last_name_ns() -> hex nanoseconds of the last name handed out, or
--       nil; store:set_last_name_ns(hex).
-- events.memory_store(max_entries) is the recorder's own, in this Lua state;
-- the luna runtime passes one that outlives the state, so the memory
-- survives a reload as the caches do.
-- (Methods apart from a locked metatable: `store.__index` must not hand a
-- script the methods table every controller's stores share.)
local MemoryStore = {}
local memory_store_mt = { __index = MemoryStore, __metatable = false }

-- entries: key → entry; entries form a doubly linked list from head (most
-- recently used) to tail (least).  A key is in `entries` if and only if its
-- entry is on the list; count is the list's length (<= max).
function events.memory_store(max)
  if type(max) ~= "number" or max < 1 or max ~= math.floor(max) or max == math.huge then
    raise("events.memory_store: max_entries must be a positive integer")
  end
  return setmetatable({ max = max, entries = {}, head = nil, tail = nil, count = 0 }, memory_store_mt)
end

local function unlink(r, en)
  if en.prev then en.prev.next = en.next else r.head = en.next end
  if en.next then en.next.prev = en.prev else r.tail = en.prev end
  en.prev, en.next = nil, nil
  r.count = r.count - 1
end

local function push_front(r, en)
  en.prev, en.next = nil, r.head
  if r.head then r.head.prev = en end
  r.head = en
  if not r.tail then r.tail = en end
  r.count = r.count + 1
end

function MemoryStore:get(key)
  local en = self.entries[key]
  if not en then return nil end
  unlink(self, en)
  push_front(self, en)
  return en.count, en.last_us, en.name, en.namespace
end

function MemoryStore:put(key, count, last_us, name, namespace)
  local en = self.entries[key]
  if en then
    unlink(self, en)
  else
    en = { key = key }
    self.entries[key] = en
  end
  en.count, en.last_us, en.name, en.namespace = count, last_us, name, namespace
  push_front(self, en)
  while self.count > self.max do
    local old = self.tail
    unlink(self, old)
    self.entries[old.key] = nil
  end
end

function MemoryStore:forget(key)
  local en = self.entries[key]
  if not en then return false end
  self.entries[key] = nil
  unlink(self, en)
  return true
end

function MemoryStore:size() return self.count end
function MemoryStore:last_name_ns() return self.last_ns end
function MemoryStore:set_last_name_ns(hex) self.last_ns = hex end

-- int64 nanoseconds from their hex form (names carry them in hex; a double
-- would lose the low digits).
local function from_hex(hex)
  local v = 0LL
  for i = 1, #hex do v = v * 16 + tonumber(hex:sub(i, i), 16) end
  return v
end

-- The recorder ---------------------------------------------------------------

-- (Methods apart from a locked metatable, as MemoryStore's: luna.event's
-- recorders of every controller use these methods.)
local Recorder = {}
local recorder_mt = { __index = Recorder, __metatable = false }

local R_OPTS = { controller = true, instance = true, window = true, max_entries = true, api = true,
                 store = true }

-- events.recorder{ controller = "example.com/widgets", instance = pod name
-- (default $HOSTNAME), window = seconds (600), max_entries = n (4096),
-- api = "events.k8s.io/v1" (default) or "v1", store = a store (default:
-- events.memory_store(max_entries)) }.
function events.recorder(opts)
  util.check_table(opts, "events.recorder options")
  for k in pairs(opts) do
    if not R_OPTS[k] then raise("unknown events.recorder option '%s'", tostring(k)) end
  end
  check_controller(opts.controller)
  local instance = opts.instance
  if instance == nil then instance = os.getenv("HOSTNAME") end
  if instance == nil or instance == "" then
    raise("events.recorder needs an 'instance' (no HOSTNAME in the environment)")
  end
  check_field(instance, "instance", events.FIELD_LIMIT)
  local window = opts.window
  if window == nil then window = events.DEFAULT_WINDOW end
  if type(window) ~= "number" or window < 0 or window ~= window or window == math.huge then
    raise("events.recorder option 'window' must be a number of seconds >= 0")
  end
  local max = opts.max_entries
  if max == nil then max = events.DEFAULT_MAX_ENTRIES end
  if type(max) ~= "number" or max < 1 or max ~= math.floor(max) or max == math.huge then
    raise("events.recorder option 'max_entries' must be a positive integer")
  end
  local api = opts.api
  if api == nil then api = events.API_V1 end
  if api ~= events.API_V1 and api ~= events.API_CORE then
    raise("events.recorder option 'api' must be %q or %q", events.API_V1, events.API_CORE)
  end
  local store = opts.store
  if store == nil then
    store = events.memory_store(max)
  elseif type(store) ~= "table" and type(store) ~= "userdata" then
    raise("events.recorder option 'store' must be a store (see events.memory_store)")
  end
  return setmetatable({
    controller = opts.controller, instance = instance, window = window,
    max_entries = max, api = api, store = store,
  }, recorder_mt)
end

local function dedupe_key(ref, e)
  local who = ref.uid or (ref.apiVersion .. "/" .. ref.kind .. "/" .. (ref.namespace or "") .. "/" .. ref.name)
  return table.concat({ who, e.type, e.reason, e.action, e.note }, "\0")
end

-- Decides what recording this event takes.  Returns one of
--   { create = body, api = ..., key = k }
--       POST body to the namespace body.metadata.namespace;
--   { patch = { name = ..., namespace = ..., body = merge patch },
--     api = ..., key = k, count = n }
--       merge-patch the existing Event (the n-th occurrence).
-- action defaults to "Reconcile"; now to the wall clock.  If sending fails
-- (for a patch: NotFound, the Event expired), call r:forget(result) so the
-- next occurrence creates a new Event.
function Recorder:prepare(obj, type_, reason, note, action, now)
  if debug.getmetatable(self) ~= recorder_mt then raise("use recorder:prepare(...), not recorder.prepare(...)") end
  local ref = reference(obj)
  local e = check_event({ type = type_, reason = reason, note = note, action = action,
                          controller = self.controller, instance = self.instance })
  local us = time.micros(now)
  local key = dedupe_key(ref, e)
  local store = self.store
  local count, last_us, name, namespace = store:get(key)
  if count and us - last_us <= self.window * 1e6 then
    count = count + 1
    us = math.max(last_us, us)
    store:put(key, count, us, name, namespace)
    local body
    if self.api == events.API_V1 then
      body = { series = { count = count, lastObservedTime = time.format_micro(us / 1e6) } }
    else
      body = { count = count, lastTimestamp = time.format(math.floor(us / 1e6)) }
    end
    return { patch = { name = name, namespace = namespace, body = body },
             api = self.api, key = key, count = count }
  end

  local ns = nanos(us)
  local last = store:last_name_ns()
  if last then
    local last_ns = from_hex(last)
    if ns <= last_ns then ns = last_ns + 1 end
  end
  store:set_last_name_ns(string.format("%x", ns))
  local body = (self.api == events.API_V1 and build_v1 or build_core)(ref, e, us, ns)
  store:put(key, 1, us, body.metadata.name, body.metadata.namespace)
  return { create = body, api = self.api, key = key }
end

-- Drops what the recorder remembers for a prepare result (or its key).
-- Returns true when there was an entry.
function Recorder:forget(result)
  local key = result
  if type(result) == "table" then key = result.key end
  if type(key) ~= "string" then raise("recorder:forget takes a prepare result or its key") end
  return self.store:forget(key) == true
end

-- Number of remembered events.
function Recorder:size()
  return self.store:size()
end

return events
