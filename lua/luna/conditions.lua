-- luna.conditions: metav1.Condition entries in obj.status.conditions.
--
-- The rules are apimachinery's meta.SetStatusCondition: one condition per
-- type; setting one updates status, reason, message and observedGeneration
-- every time, and lastTransitionTime only when the status changes (or the
-- condition is new), so "how long has this been Ready=False" stays true
-- across reconciles.  status and status.conditions are created when
-- missing; the conditions list is marked with core.json.array, so removing
-- the last one encodes as "conditions":[].
--
-- A condition is validated as the API server validates metav1.Condition
-- (a CRD using it rejects anything else): type a qualified name of at most
-- 316 characters, status "True", "False" or "Unknown", reason CamelCase
-- (a letter, then letters, digits, '_', ',' or ':', not ending in ',' or
-- ':'; at most 1024), message at most 32768 characters, observedGeneration
-- an integer >= 0.  Invalid input raises.

local core = require("luna.core")
local time = require("luna.time")
local util = require("luna.util")

local json = core.json
local raise = util.raise

local conditions = {}

local STATUSES = { True = true, False = true, Unknown = true }
local FIELDS = { type = true, status = true, reason = true, message = true, observed_generation = true }

local function check_type(t)
  if type(t) ~= "string" or t == "" then
    raise("condition type must be a non-empty string, got %s", type(t) == "string" and "\"\"" or type(t))
  end
  if #t > 316 then raise("condition type %q must be no more than 316 characters", t:sub(1, 40) .. "...") end
  local prefix, name = t:match("^([^/]*)/([^/]*)$")
  if not prefix then name = t end
  local ok = not t:find("/", 1, true) or prefix ~= nil
  ok = ok and util.name_part(name) ~= nil
  ok = ok and (prefix == nil or util.dotted_labels(prefix))
  if not ok then
    raise("invalid condition type %q: want a name such as Ready or example.com/Synced " ..
          "(alphanumerics, '-', '_', '.', starting and ending with an alphanumeric, " ..
          "with an optional lowercase DNS prefix and '/')", t)
  end
end

local function check_reason(r)
  if type(r) ~= "string" or r == "" then
    raise("condition reason must be a non-empty CamelCase string, got %s",
          type(r) == "string" and "\"\"" or type(r))
  end
  if #r > 1024 then raise("condition reason must be no more than 1024 characters") end
  if not (r:match("^[A-Za-z]$") or r:match("^[A-Za-z][A-Za-z0-9_,:]*[A-Za-z0-9_]$")) then
    raise("invalid condition reason %q: must be CamelCase: start with a letter, then letters, " ..
          "digits, '_', ',' or ':', and not end with ',' or ':'", r)
  end
end

local function check_condition(c)
  util.check_table(c, "condition")
  for k in pairs(c) do
    if not FIELDS[k] then
      raise("unknown condition field '%s' (want type, status, reason, message, observed_generation)",
            tostring(k))
    end
  end
  check_type(c.type)
  if not STATUSES[c.status] then
    raise("condition %s: status must be \"True\", \"False\" or \"Unknown\", got %s", c.type,
          type(c.status) == "string" and string.format("%q", c.status) or tostring(c.status))
  end
  check_reason(c.reason)
  if c.message ~= nil then
    if type(c.message) ~= "string" then
      raise("condition %s: message must be a string, got %s", c.type, type(c.message))
    end
    if #c.message > 32768 then raise("condition %s: message must be no more than 32768 characters", c.type) end
  end
  local g = c.observed_generation
  if g ~= nil and (type(g) ~= "number" or g < 0 or g ~= math.floor(g) or g == math.huge) then
    raise("condition %s: observed_generation must be an integer >= 0, got %s", c.type, tostring(g))
  end
end

local function list_of(obj)
  local st = obj.status
  if type(st) ~= "table" then return nil end
  local l = st.conditions
  if type(l) ~= "table" then return nil end
  return l
end

local function find(l, t)
  for i, c in ipairs(l) do
    if type(c) == "table" and c.type == t then return i, c end
  end
  return nil
end

-- Sets condition c ({ type, status, reason, message, observed_generation })
-- in obj.status.conditions; now (nil, seconds or RFC 3339) stamps
-- lastTransitionTime when the condition is new or its status changed.
-- Returns true when anything changed.
function conditions.set(obj, c, now)
  util.check_table(obj, "object")
  check_condition(c)
  local stamp = time.format(now) -- first: a bad `now` raises before obj changes
  local message = c.message or ""
  local l = list_of(obj)
  if not l then
    if type(obj.status) ~= "table" then obj.status = {} end
    l = json.array()
    obj.status.conditions = l
  end
  local _, cur = find(l, c.type)
  if not cur then
    l[#l + 1] = {
      type = c.type, status = c.status, reason = c.reason, message = message,
      lastTransitionTime = stamp, observedGeneration = c.observed_generation,
    }
    return true
  end
  local changed = false
  if cur.status ~= c.status then
    cur.status = c.status
    cur.lastTransitionTime = stamp
    changed = true
  elseif type(cur.lastTransitionTime) ~= "string" or cur.lastTransitionTime == "" then
    -- lastTransitionTime is required: repair an entry written without one.
    cur.lastTransitionTime = stamp
    changed = true
  end
  if cur.reason ~= c.reason then cur.reason = c.reason; changed = true end
  if cur.message ~= message then cur.message = message; changed = true end
  if cur.observedGeneration ~= c.observed_generation then
    cur.observedGeneration = c.observed_generation
    changed = true
  end
  return changed
end

-- The condition table of type t, or nil.
function conditions.get(obj, t)
  util.check_table(obj, "object")
  check_type(t)
  local l = list_of(obj)
  if not l then return nil end
  local _, c = find(l, t)
  return c
end

-- Condition t is present with status "True".
function conditions.is_true(obj, t)
  local c = conditions.get(obj, t)
  return c ~= nil and c.status == "True"
end

-- Condition t is present with status "False".
function conditions.is_false(obj, t)
  local c = conditions.get(obj, t)
  return c ~= nil and c.status == "False"
end

-- Condition t is absent or has status "Unknown".
function conditions.is_unknown(obj, t)
  local c = conditions.get(obj, t)
  return c == nil or c.status ~= "True" and c.status ~= "False"
end

-- Removes condition t.  Returns true when it was present.
function conditions.remove(obj, t)
  util.check_table(obj, "object")
  check_type(t)
  local l = list_of(obj)
  if not l then return false end
  return util.remove_where(l, function(e) return type(e) == "table" and e.type == t end)
end

return conditions
