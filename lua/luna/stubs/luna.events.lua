---@meta luna.events
-- luna.events: Event bodies and a recorder that turns repeats into count
-- patches (lua/luna/events.md).  Controllers usually call luna.event.
local events = {}

---@type integer longest note kept (bytes)
events.NOTE_LIMIT = 1024
---@type integer longest reason/action kept (bytes)
events.FIELD_LIMIT = 128
---@type number seconds within which a repeat patches the same Event
events.DEFAULT_WINDOW = 600
---@type integer events remembered by default
events.DEFAULT_MAX_ENTRIES = 4096
---@type string
events.DEFAULT_ACTION = "Reconcile"
---@type string "v1" (core Events)
events.API_CORE = "v1"
---@type string "events.k8s.io/v1"
events.API_V1 = "events.k8s.io/v1"

---An Event's description.
---@class luna.EventSpec
---@field type "Normal"|"Warning"
---@field reason string
---@field note string
---@field action? string
---@field controller string reportingController
---@field instance? string reportingInstance

---Cuts s to at most limit bytes on a UTF-8 boundary.
---@param s string
---@param limit integer
---@return string
function events.truncate(s, limit) end

---An events.k8s.io/v1 Event about obj.
---@param obj luna.Object
---@param e luna.EventSpec
---@param now? number|string
---@return luna.Object
function events.event(obj, e, now) end

---The same Event as a core/v1 Event.
---@param obj luna.Object
---@param e luna.EventSpec
---@param now? number|string
---@return luna.Object
function events.core_event(obj, e, now) end

---A recorder's store kept in Lua memory (the host gives luna.event a
---store that survives reloads).
---@class luna.EventStore
local Store = {}
---@param key string
---@return integer|nil count, number|nil last_us, string|nil name, string|nil namespace
function Store:get(key) end
---@param key string
---@param count integer
---@param last_us number
---@param name string
---@param namespace string
function Store:put(key, count, last_us, name, namespace) end
---@param key string
---@return boolean
function Store:forget(key) end
---@return integer
function Store:size() end

---@param max? integer
---@return luna.EventStore
function events.memory_store(max) end

---Decides how each occurrence is recorded.
---@class luna.EventRecorder
local Recorder = {}
---{ create = body, api =, key = } or { patch = { name =, namespace =, body = }, api =, key =, count = }.
---@param obj luna.Object
---@param type "Normal"|"Warning"
---@param reason string
---@param note string
---@param action? string
---@param now? number|string
---@return table
function Recorder:prepare(obj, type, reason, note, action, now) end
---Forgets the occurrence a failed send was for.
---@param result table
function Recorder:forget(result) end
---@return integer
function Recorder:size() end

---@param opts {controller: string, instance?: string, window?: number, max_entries?: integer, api?: string, store?: luna.EventStore}
---@return luna.EventRecorder
function events.recorder(opts) end

return events
