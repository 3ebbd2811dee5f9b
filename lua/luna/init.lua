-- luna: the Lua side of the controller API.
--
-- A controller file returns luna.controller{...}; the host validates it at
-- load time, so a typo in a field name or a wrong type is reported with the
-- file and line of the controller, not at the first reconcile.

local luna = {}

local Controller = {}
Controller.__index = Controller
Controller.__metatable = "luna.controller"

local KIND_PATTERN = "^[%w%.%-]*/?v[%w]+/[%u][%w]*$"

local THIS_FILE = debug.getinfo(1, "S").source

-- Raises msg at the first stack frame outside this library: the controller
-- file's line.  `return luna.controller{...}` is a tail call, which drops
-- the file's frame; then no position is added and the host prefixes the
-- file's path instead.
local function fail(msg, ...)
  msg = string.format(msg, ...)
  local level = 2
  while true do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if info.source ~= THIS_FILE and info.what ~= "C" and info.currentline > 0 then
      error(msg, level)
    end
    level = level + 1
  end
  error(msg, 0)
end

local function is_dns_name(s)
  return type(s) == "string" and #s <= 253 and s:match("^[a-z0-9][-a-z0-9.]*$") ~= nil
    and s:match("[a-z0-9]$") ~= nil
end

-- "v1/ConfigMap" → { group = "", version = "v1", kind = "ConfigMap" }
function luna.parse_kind(s)
  if type(s) ~= "string" or not s:match(KIND_PATTERN) then
    return nil, string.format("invalid kind %q: want \"v1/Kind\" or \"group/version/Kind\"", tostring(s))
  end
  local group, version, kind = s:match("^(.+)/([^/]+)/([^/]+)$")
  if not group then
    version, kind = s:match("^([^/]+)/([^/]+)$")
    group = ""
  end
  return { group = group, version = version, kind = kind,
           api_version = group == "" and version or (group .. "/" .. version) }
end

local function check_kind(field, s)
  local parsed, err = luna.parse_kind(s)
  if not parsed then fail("controller field '%s': %s", field, err) end
  return parsed
end

local function check_string_map(field, t)
  if t == nil then return end
  if type(t) ~= "table" then fail("controller field '%s' must be a table", field) end
  for k, v in pairs(t) do
    if type(k) ~= "string" or type(v) ~= "string" then
      fail("controller field '%s' must map strings to strings", field)
    end
  end
end

-- watch = "v1/ConfigMap" or { "v1/ConfigMap", namespace = "x", labels = {...}, fields = {...} }
local function check_watch(field, w)
  if type(w) == "string" then
    return { kind = w, type = check_kind(field, w) }
  end
  if type(w) ~= "table" then
    fail("controller field '%s' must be a kind string or a table", field)
  end
  local out = { kind = w[1], type = check_kind(field, w[1]) }
  for k, v in pairs(w) do
    if k == "namespace" then
      if type(v) ~= "string" then fail("controller field '%s.namespace' must be a string", field) end
      out.namespace = v
    elseif k == "labels" or k == "fields" then
      if type(v) ~= "string" then check_string_map(field .. "." .. k, v) end
      out[k] = v
    elseif k == "map" then
      if type(v) ~= "function" then fail("controller field '%s.map' must be a function", field) end
      out.map = v
    elseif k ~= 1 then
      fail("controller field '%s' has unknown key '%s'", field, tostring(k))
    end
  end
  return out
end

local function check_positive_integer(field, v)
  if v ~= nil and (type(v) ~= "number" or v < 1 or v ~= math.floor(v)) then
    fail("controller field '%s' must be a positive integer", field)
  end
end

local function check_list(field, v, each)
  if v == nil then return {} end
  if type(v) ~= "table" then fail("controller field '%s' must be a list", field) end
  local out = {}
  for i, item in ipairs(v) do out[i] = each(string.format("%s[%d]", field, i), item) end
  return out
end

-- Index functions see the object as a table (the host decodes it).
local function wrap_indexes(indexes)
  local out = {}
  for name, fn in pairs(indexes or {}) do out[name] = fn end
  return out
end

local RATE_LIMIT_FIELDS = { base_delay = true, max_delay = true, qps = true, burst = true }

-- The controllers luna.controller returned (weak keys).
local made = setmetatable({}, { __mode = "k" })

local FIELDS = {
  name = true, watch = true, owns = true, watches = true, reconcile = true,
  workers = true, resync = true, rate_limit = true, indexes = true,
  predicates = true, keep_managed_fields = true, limits = true,
}

-- limits = { instructions = N, seconds = S }: the watchdog's budgets for
-- this controller's Lua code between two yields (0: unlimited); fields left
-- out take luna run's defaults (--reconcile-instruction-limit,
-- --reconcile-time-limit).
local function check_limits(v)
  if v == nil then return {} end
  if type(v) ~= "table" then fail("controller field 'limits' must be a table") end
  local out = {}
  for k, n in pairs(v) do
    if k ~= "instructions" and k ~= "seconds" then
      fail("controller field 'limits' has unknown key '%s'", tostring(k))
    end
    if type(n) ~= "number" or n < 0 or n ~= n then
      fail("controller field 'limits.%s' must be a number >= 0", k)
    end
    out[k] = n
  end
  return out
end

-- Validates spec and returns the controller description the host runs.
function luna.controller(spec)
  if type(spec) ~= "table" then fail("luna.controller takes a table, got %s", type(spec)) end
  for k in pairs(spec) do
    if not FIELDS[k] then fail("controller has unknown field '%s'", tostring(k)) end
  end
  if not is_dns_name(spec.name) then
    fail("controller field 'name' must be a lowercase DNS-style name, got %s", tostring(spec.name))
  end
  if spec.watch == nil then fail("controller '%s' needs a 'watch' field", spec.name) end
  if type(spec.reconcile) ~= "function" then
    fail("controller '%s' needs a 'reconcile' function", spec.name)
  end
  check_positive_integer("workers", spec.workers)
  if spec.resync ~= nil and (type(spec.resync) ~= "number" or spec.resync < 0) then
    fail("controller field 'resync' must be a number of seconds >= 0")
  end
  if spec.indexes ~= nil then
    if type(spec.indexes) ~= "table" then fail("controller field 'indexes' must be a table") end
    for k, v in pairs(spec.indexes) do
      if type(k) ~= "string" or type(v) ~= "function" then
        fail("controller field 'indexes' must map index names to functions")
      end
    end
  end
  local rate_limit = {}
  if spec.rate_limit ~= nil then
    if type(spec.rate_limit) ~= "table" then fail("controller field 'rate_limit' must be a table") end
    -- copied: the host reads the copy, never a table the script can give metamethods
    for k, v in pairs(spec.rate_limit) do
      if not RATE_LIMIT_FIELDS[k] then
        fail("controller field 'rate_limit' has unknown key '%s'", tostring(k))
      end
      if type(v) ~= "number" or v < 0 or v ~= v then
        fail("controller field 'rate_limit.%s' must be a number >= 0", k)
      end
      rate_limit[k] = v
    end
  end
  if spec.predicates ~= nil then
    if type(spec.predicates) ~= "table" then fail("controller field 'predicates' must be a list") end
    for k, p in pairs(spec.predicates) do
      if type(k) ~= "number" or type(p) ~= "function" then
        fail("controller field 'predicates' must be a list of functions (predicates[%s] is a %s)",
          tostring(k), type(p))
      end
    end
  end

  local c = setmetatable({
    name = spec.name,
    watch = check_watch("watch", spec.watch),
    owns = check_list("owns", spec.owns, check_watch),
    watches = check_list("watches", spec.watches, function(field, w)
      local out = check_watch(field, w)
      if not out.map then fail("controller field '%s' needs a 'map' function", field) end
      return out
    end),
    reconcile = spec.reconcile,
    workers = spec.workers or 1,
    resync = spec.resync or 0,
    rate_limit = rate_limit,
    indexes = wrap_indexes(spec.indexes),
    predicates = spec.predicates or {},
    keep_managed_fields = spec.keep_managed_fields and true or false,
    limits = check_limits(spec.limits),
  }, Controller)
  made[c] = true
  return c
end

-- Only values luna.controller made: a script cannot forge one (the host
-- reads the fields of what it accepts, and must not run script code there).
function luna.is_controller(v)
  return made[v] == true
end

-- The API a reconcile uses: luna.cache, luna.get/list/create/update/
-- update_status/patch/apply/delete, luna.log (see lua/luna/api.lua).
do
  local api = require("luna.api")
  for _, name in ipairs({ "cache", "get", "list", "create", "update", "update_status", "patch",
                          "apply", "delete", "log", "error", "event", "equal" }) do
    luna[name] = api[name]
  end
end

-- Helper libraries (lua/luna/<name>.lua, documented in lua/luna/<name>.md).
luna.meta = require("luna.meta")
luna.finalizers = require("luna.finalizers")
luna.conditions = require("luna.conditions")
luna.events = require("luna.events")
luna.time = require("luna.time")
luna.errors = require("luna.errors")
luna.predicates = require("luna.predicates")
for name, fn in pairs(luna.errors) do
  if name:match("^is_") then luna[name] = fn end -- luna.is_not_found(err), ...
end

return luna
