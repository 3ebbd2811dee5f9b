-- luna: the Lua side of the controller API.
--
-- A controller file returns luna.controller{...}; the host validates it at
-- load time, so a typo in a field name or a wrong type is reported with the
-- file and line of the controller, not at the first reconcile.

local luna = {}

local core = require("luna.core")
local util = require("luna.util")
local webhook = require("luna.webhook")

local KIND_PATTERN = "^[%w%.%-]*/?v[%w]+/[%u][%w]*$"

local THIS_FILE = debug.getinfo(1, "S").source

-- Raises msg at the first stack frame outside this library: the controller
-- file's line.  `return luna.controller{...}` is a tail call, which drops
-- the file's frame; then no position is added and the host finds the line
-- that sets the field (and prefixes the file's path).
local function fail(msg)
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

-- Validates spec and returns the controller the host runs: the host
-- checks every field (types, ranges, kinds, selectors) and copies it, with
-- raw reads only, into memory of its own (host/controller/spec.h).
-- The value returned is read-only: c.name, c.watch, ... give copies, and
-- changing spec afterwards changes nothing.
--
-- limits = { instructions = N, seconds = S }: lower the watchdog's budgets
-- for this controller's Lua code between two yields.  Each must be > 0 and
-- at most luna run's flag (--reconcile-instruction-limit,
-- --reconcile-time-limit), a ceiling the script can neither raise nor
-- remove (0 is refused); fields left out take the flags' values.
-- limits.memory = MiB lowers the cap on what this controller may hold in
-- the Lua heap (--controller-memory-limit, never more).
--
-- webhooks = { luna.webhook{...}, luna.converter{...}, ... }: admission
-- webhooks and CRD converters declared with the controller
-- (docs/webhooks.md); luna serves them while it runs.
function luna.controller(spec)
  local whs = type(spec) == "table" and rawget(spec, "webhooks") or nil
  local decls = whs ~= nil and webhook.check_field(whs) or nil
  local c, msg = core.controller_spec(spec)
  if not c then fail(msg) end
  if decls then webhook.attach(c, decls) end
  return c
end

-- luna.webhook{name =, validate = fn | mutate = fn, rules =, ...}: one
-- admission webhook, checked at the caller's line, with Kubernetes'
-- defaults for what is left out (docs/webhooks.md).
function luna.webhook(spec)
  return webhook.declare(spec)
end

-- luna.converter{group =, kind =, plural =, hub =, versions = { V = {
-- to_hub = fn, from_hub = fn } }, timeout_seconds =}: a CRD's version
-- converter, a conversion webhook listed with the others (webhooks = {...}
-- or luna.webhooks{...}); checked at the caller's line (docs/webhooks.md).
function luna.converter(spec)
  return webhook.converter(spec)
end

-- A file of webhooks only: `return luna.webhooks{ luna.webhook{...}, ... }`.
function luna.webhooks(list)
  return webhook.set(list)
end

-- Only values luna.controller made: a script cannot forge one.
function luna.is_controller(v)
  return core.is_controller_spec(v)
end

-- The API a reconcile uses: luna.cache, luna.get/list/create/update/
-- update_status/patch/apply/delete, luna.log, luna.schedule, luna.last_warnings (see
-- lua/luna/api.lua).
do
  local api = require("luna.api")
  for _, name in ipairs({ "cache", "get", "list", "create", "update", "update_status", "patch",
                          "apply", "delete", "log", "error", "event", "equal", "schedule",
                          "last_warnings" }) do
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

-- luna.cron.next(expr [, after]): the first minute of the cron schedule
-- expr strictly after `after` (seconds since the epoch; default now, the
-- fake clock's under `luna test`), UTC; nil when there is none before the
-- end of year 9999.  The host's parser, the one `every` uses: the same
-- syntax and the same messages, raised at the caller's line.
luna.cron = {}
function luna.cron.next(expr, after)
  if after == nil then after = luna.time.now() end
  local t, why = core.cron_next(expr, after)
  if t == false then util.raise("luna.cron.next: %s", why) end
  return t
end

for name, fn in pairs(luna.errors) do
  if name:match("^is_") then luna[name] = fn end -- luna.is_not_found(err), ...
end

return luna
