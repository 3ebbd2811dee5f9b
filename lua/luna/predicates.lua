-- luna.predicates: ready-made filters for a controller's `predicates` list
-- (controller-runtime's pkg/predicate).
--
-- A predicate gets the event of the primary kind,
-- { type = "add"|"update"|"delete", old = (update only), object = },
-- and returns true to let it reach the workqueue.  A controller's list is
-- an AND: every predicate must pass.
--
--   generation_changed        updates whose metadata.generation changed (spec
--                             changes; status-only and metadata-only writes are
--                             dropped). For kinds with a generation only: on a
--                             ConfigMap or Secret it drops every update.
--   labels_changed            updates whose metadata.labels changed
--   annotations_changed       updates whose metadata.annotations changed
--   resource_version_changed  updates whose resourceVersion changed (drops the
--                             periodic resync's no-change updates)
--   any(p1, p2, ...)          passes if one of the predicates passes
--   all(p1, p2, ...)          passes if every predicate passes
--   negate(p)                 passes if p does not
--
-- The *_changed predicates pass every add and delete event, as
-- controller-runtime's do.  List them without calling them:
--   predicates = { luna.predicates.any(luna.predicates.generation_changed,
--                                      luna.predicates.labels_changed) }

local util = require("luna.util")

local predicates = {}

local function check_event(ev, name)
  if type(ev) ~= "table" or type(ev.type) ~= "string" then
    util.raise("luna.predicates.%s is a predicate: list it in `predicates` without calling it", name)
  end
end

-- JSON-like deep equality; a missing map equals an empty one.
local function same(a, b)
  if type(a) ~= "table" then a = nil end
  if type(b) ~= "table" then b = nil end
  if a == nil and b == nil then return true end
  a, b = a or {}, b or {}
  for k, v in pairs(a) do
    local w = b[k]
    if type(v) == "table" and type(w) == "table" then
      if not same(v, w) then return false end
    elseif v ~= w then
      return false
    end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

local function metadata(obj)
  return type(obj) == "table" and type(obj.metadata) == "table" and obj.metadata or {}
end

-- A predicate passing updates where field(metadata) differs between old and new.
local function changed(name, field)
  return function(ev)
    check_event(ev, name)
    if ev.type ~= "update" then return true end
    if ev.old == nil or ev.object == nil then return false end
    local a, b = field(metadata(ev.old)), field(metadata(ev.object))
    if type(a) == "table" or type(b) == "table" then return not same(a, b) end
    return a ~= b
  end
end

predicates.generation_changed = changed("generation_changed", function(m) return m.generation end)
predicates.labels_changed = changed("labels_changed", function(m) return m.labels end)
predicates.annotations_changed = changed("annotations_changed", function(m) return m.annotations end)
predicates.resource_version_changed = changed("resource_version_changed",
  function(m) return m.resourceVersion end)

-- The arguments as a list, raising unless there is at least one and each
-- is a function.
local function functions(name, ...)
  local n = select("#", ...)
  if n == 0 then util.raise("luna.predicates.%s needs at least one predicate", name) end
  local list = { ... }
  for i = 1, n do
    if type(list[i]) ~= "function" then
      util.raise("luna.predicates.%s: argument %d must be a function, got %s", name, i,
                 type(list[i]))
    end
  end
  return list
end

function predicates.any(...)
  local list = functions("any", ...)
  return function(ev)
    for _, p in ipairs(list) do
      if p(ev) then return true end
    end
    return false
  end
end

function predicates.all(...)
  local list = functions("all", ...)
  return function(ev)
    for _, p in ipairs(list) do
      if not p(ev) then return false end
    end
    return true
  end
end

function predicates.negate(p)
  functions("negate", p)
  return function(ev) return not p(ev) end
end

return predicates
