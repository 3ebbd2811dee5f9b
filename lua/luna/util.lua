-- luna.util: internal helpers shared by the luna.* helper modules (not part
-- of the public API; use luna.meta, luna.finalizers, ... instead).
--
--   util.raise(fmt, ...)          raises at the caller's line: the first stack
--                                 frame outside luna's Lua library
--   util.where()                  that frame as "file:line", or nil
--   util.check_table(v, what)     raises unless v is a table
--   util.check_string(v, what)    raises unless v is a non-empty string
--   util.qualified_name(s)        true, or nil and why (k8s IsQualifiedName)
--   util.dns_subdomain(s)         true, or nil and why (IsDNS1123Subdomain)
--   util.label_value(s)           true, or nil and why (IsValidLabelValue)
--   util.metadata(obj)            obj.metadata, created when missing or null
--   util.present(v)               v is neither nil nor JSON null

local core = require("luna.core")

local util = {}

local NULL = core.json.null
-- Captured at load: a sandbox that later hides `debug` from scripts must
-- not break the helpers' error positions.
local getinfo = debug.getinfo

-- "@/path/to/lua/luna/" (or "@lua/luna/" from a relative package.path).
local LIB_PREFIX = getinfo(1, "S").source:match("^(.*/)[^/]*$")

-- The level (counted from the caller of this function's caller) and info
-- of the first stack frame outside luna's Lua library, or nil.
local function outside_frame()
  local level = 3
  while true do
    local info = getinfo(level, "Sl")
    if not info then return nil end
    local src = info.source
    local in_lib = LIB_PREFIX and src:sub(1, #LIB_PREFIX) == LIB_PREFIX
    if not in_lib and info.what ~= "C" and info.currentline > 0 then
      return level - 1, info
    end
    level = level + 1
  end
end

function util.raise(fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  local level = outside_frame()
  if level then error(msg, level) end
  error(msg, 0)
end

-- "file:line" of the script code that called into luna's library, or nil
-- (when a tail call left no such frame).
function util.where()
  local _, info = outside_frame()
  return info and (info.short_src .. ":" .. info.currentline) or nil
end

function util.check_table(v, what)
  if type(v) ~= "table" then util.raise("%s must be a table, got %s", what, type(v)) end
  return v
end

function util.check_string(v, what)
  if type(v) ~= "string" or v == "" then
    util.raise("%s must be a non-empty string, got %s", what,
               type(v) == "string" and "an empty string" or type(v))
  end
  return v
end

function util.present(v)
  return v ~= nil and v ~= NULL
end

function util.metadata(obj)
  local md = obj.metadata
  if type(md) ~= "table" then
    md = {}
    obj.metadata = md
  end
  return md
end

-- One DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?
local function dns_label(s)
  return s:match("^[a-z0-9]$") or s:match("^[a-z0-9][-a-z0-9]*[a-z0-9]$")
end

-- Lowercase labels joined by dots, no length limit (callers bound it).
local function dotted_labels(s)
  if s == "" or s:sub(-1) == "." then return false end
  for label in (s .. "."):gmatch("([^.]*)%.") do
    if not dns_label(label) then return false end
  end
  return true
end
util.dotted_labels = dotted_labels

function util.dns_subdomain(s)
  if type(s) ~= "string" or s == "" then return nil, "must be a non-empty string" end
  if #s > 253 then return nil, "must be no more than 253 characters" end
  if not dotted_labels(s) then
    return nil, "must consist of lower case alphanumeric characters, '-' or '.', " ..
      "and must start and end with an alphanumeric character"
  end
  return true
end

-- ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
local function name_part(s)
  return s:match("^[A-Za-z0-9]$") or s:match("^[A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]$")
end
util.name_part = name_part

function util.qualified_name(s)
  if type(s) ~= "string" or s == "" then return nil, "must be a non-empty string" end
  local prefix, name = s:match("^([^/]*)/([^/]*)$")
  if not prefix then
    if s:find("/", 1, true) then return nil, "must contain at most one '/'" end
    name = s
  else
    if prefix == "" then return nil, "prefix part must be non-empty" end
    local ok, why = util.dns_subdomain(prefix)
    if not ok then return nil, "prefix part " .. why end
  end
  if name == "" then return nil, "name part must be non-empty" end
  if #name > 63 then return nil, "name part must be no more than 63 characters" end
  if not name_part(name) then
    return nil, "name part must consist of alphanumeric characters, '-', '_' or '.', " ..
      "and must start and end with an alphanumeric character"
  end
  return true
end

function util.label_value(s)
  if type(s) ~= "string" then return nil, "must be a string" end
  if s == "" then return true end
  if #s > 63 then return nil, "must be no more than 63 characters" end
  if not name_part(s) then
    return nil, "must consist of alphanumeric characters, '-', '_' or '.', " ..
      "and must start and end with an alphanumeric character"
  end
  return true
end

-- Removes, in place, every element of list l for which pred(element) is
-- true; a list that changed stays marked as a JSON array (so an emptied
-- list encodes as [], which a merge patch needs).  Returns whether any was
-- removed.
function util.remove_where(l, pred)
  local changed, i = false, 1
  while i <= #l do
    if pred(l[i]) then
      table.remove(l, i)
      changed = true
    else
      i = i + 1
    end
  end
  if changed then
    if not core.json.is_array(l) then core.json.array(l) end
  end
  return changed
end

return util
