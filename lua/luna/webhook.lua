-- luna.webhook: admission and conversion webhooks written in Lua
-- (docs/webhooks.md).
--
--   luna.webhook{...}        validates a declaration at the caller's line and
--                            returns a read-only handle to it
--   luna.converter{...}      the same for a CRD's version converter (a
--                            conversion webhook: listed with the others)
--   luna.webhooks{w, ...}    a file of webhooks only (no controller)
--   webhook.diff(a, b)       the RFC 6902 operations that turn a into b
--   webhook.pointer(parts)   an RFC 6901 pointer ("~" → "~0", "/" → "~1")
--
-- Host side (host/controller/webhook.c; not for scripts):
--   webhook.collect(v)       the declarations of a controller or webhook set
--   webhook.registration(decl, client)  the declaration's entry of its
--                            Validating/MutatingWebhookConfiguration as
--                            JSON text (the managed mode writes it:
--                            host/serve/webhook_manager.h)
--   webhook.serve(decl, body) runs one AdmissionReview (or, for a converter,
--                            ConversionReview) request's body through the
--                            declaration's functions and returns what to
--                            answer (see serve below)
--
-- Declarations are copied once, checked field by field (a bad value is an
-- error naming the field, raised at the caller's line), and filled with
-- Kubernetes' defaults (admissionregistration.k8s.io/v1): failure_policy
-- "Fail", match_policy "Equivalent", side_effects "None" (v1 requires the
-- field; None is what kubebuilder markers write), timeout_seconds 10,
-- reinvocation_policy "Never", empty selectors (everything), scope "*".

local core = require("luna.core")
local util = require("luna.util")

local json = core.json
local NULL = json.null

local M = {}

-- handle → private declaration; set → list of private declarations.  Weak
-- keys: a handle the script drops goes with its declaration.
local private = setmetatable({}, { __mode = "k" })
local sets = setmetatable({}, { __mode = "k" })
-- controller userdata → its declarations (luna.controller{webhooks = ...}).
local attached = setmetatable({}, { __mode = "k" })

local FIELDS = {
  name = true, validate = true, mutate = true, rules = true, namespace_selector = true,
  object_selector = true, failure_policy = true, side_effects = true, timeout_seconds = true,
  match_policy = true, reinvocation_policy = true,
}
local RULE_FIELDS = { api_groups = true, api_versions = true, resources = true,
                      operations = true, scope = true }
local SELECTOR_FIELDS = { match_labels = true, match_expressions = true }
local EXPRESSION_FIELDS = { key = true, operator = true, values = true }
local OPERATIONS = { CREATE = true, UPDATE = true, DELETE = true, CONNECT = true, ["*"] = true }
local MAX_LIST = 64

local function sorted_keys(t)
  local keys = {}
  for k in next, t do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

local function check_keys(t, known, where)
  for _, k in ipairs(sorted_keys(t)) do
    if type(k) ~= "string" or not known[k] then
      util.raise("webhook field '%s' has unknown key '%s'", where, tostring(k))
    end
  end
end

local function one_of(v, field, allowed, default)
  if v == nil then return default end
  for _, a in ipairs(allowed) do
    if v == a then return v end
  end
  local quoted = {}
  for i, a in ipairs(allowed) do quoted[i] = string.format("%q", a) end
  util.raise("webhook field '%s' must be %s, got %s", field, table.concat(quoted, " or "),
             type(v) == "string" and string.format("%q", v) or tostring(v))
end

-- A non-empty list (at most MAX_LIST) of strings each passing ok(s).
local function string_list(v, field, ok, what)
  if type(v) ~= "table" then
    util.raise("webhook field '%s' must be a list of %s, got %s", field, what, type(v))
  end
  local n = #v
  if n == 0 or n > MAX_LIST then
    util.raise("webhook field '%s' must list 1 to %d %s", field, MAX_LIST, what)
  end
  for k in next, v do
    if type(k) ~= "number" or k < 1 or k > n or k % 1 ~= 0 then
      util.raise("webhook field '%s' must be a list (keys 1..n)", field)
    end
  end
  local out = {}
  for i = 1, n do
    local s = rawget(v, i)
    if type(s) ~= "string" or not ok(s) then
      util.raise("webhook field '%s[%d]' must be %s, got %s", field, i, what,
                 type(s) == "string" and string.format("%q", s) or type(s))
    end
    out[i] = s
  end
  return out
end

local function any_string() return true end
local function non_empty(s) return s ~= "" end

local function read_rule(r, field)
  if type(r) ~= "table" then util.raise("webhook field '%s' must be a table", field) end
  check_keys(r, RULE_FIELDS, field)
  local out = {}
  for _, f in ipairs({ "api_groups", "api_versions", "resources", "operations" }) do
    if rawget(r, f) == nil then
      util.raise("webhook field '%s.%s' is required", field, f)
    end
  end
  out.api_groups = string_list(rawget(r, "api_groups"), field .. ".api_groups", any_string,
                               "API groups (\"\" is the core group)")
  out.api_versions = string_list(rawget(r, "api_versions"), field .. ".api_versions", non_empty,
                                 "API versions")
  out.resources = string_list(rawget(r, "resources"), field .. ".resources", non_empty,
                              "resources (\"widgets\", \"pods/status\", \"*\")")
  out.operations = string_list(rawget(r, "operations"), field .. ".operations",
                               function(s) return OPERATIONS[s] end,
                               "operations (CREATE, UPDATE, DELETE, CONNECT or *)")
  out.scope = one_of(rawget(r, "scope"), field .. ".scope", { "*", "Cluster", "Namespaced" }, "*")
  return out
end

local function read_selector(s, field)
  if s == nil then return { match_labels = {}, match_expressions = {} } end
  if type(s) ~= "table" then util.raise("webhook field '%s' must be a table", field) end
  check_keys(s, SELECTOR_FIELDS, field)
  local out = { match_labels = {}, match_expressions = {} }
  local ml = rawget(s, "match_labels")
  if ml ~= nil then
    if type(ml) ~= "table" then
      util.raise("webhook field '%s.match_labels' must be a table of label = value", field)
    end
    for _, k in ipairs(sorted_keys(ml)) do
      local v = rawget(ml, k)
      local ok, why = true, nil
      if type(k) ~= "string" then ok, why = false, "keys must be strings"
      else ok, why = util.qualified_name(k:match("[^/]*$")) end
      if ok and type(v) ~= "string" then ok, why = false, "values must be strings" end
      if ok then ok, why = util.label_value(v) end
      if not ok then
        util.raise("webhook field '%s.match_labels.%s': %s", field, tostring(k), why)
      end
      out.match_labels[k] = v
    end
  end
  local me = rawget(s, "match_expressions")
  if me ~= nil then
    if type(me) ~= "table" then
      util.raise("webhook field '%s.match_expressions' must be a list", field)
    end
    for i = 1, #me do
      local e, where = rawget(me, i), string.format("%s.match_expressions[%d]", field, i)
      if type(e) ~= "table" then util.raise("webhook field '%s' must be a table", where) end
      check_keys(e, EXPRESSION_FIELDS, where)
      local key = rawget(e, "key")
      if type(key) ~= "string" or key == "" then
        util.raise("webhook field '%s.key' must be a label key", where)
      end
      local op = one_of(rawget(e, "operator"), where .. ".operator",
                        { "In", "NotIn", "Exists", "DoesNotExist" }, nil)
      if op == nil then util.raise("webhook field '%s.operator' is required", where) end
      local values = rawget(e, "values")
      if op == "In" or op == "NotIn" then
        values = string_list(values, where .. ".values", any_string, "label values")
      elseif values ~= nil and (type(values) ~= "table" or #values > 0) then
        util.raise("webhook field '%s.values' must be empty with operator %s", where, op)
      else
        values = nil
      end
      out.match_expressions[i] = { key = key, operator = op, values = values }
    end
  end
  return out
end

-- The declaration at t, checked and copied (raw reads: no metamethod runs).
local function read(t)
  if type(t) ~= "table" then util.raise("luna.webhook takes a table, got %s", type(t)) end
  check_keys(t, FIELDS, "webhook")
  local d = {}
  local name = rawget(t, "name")
  local ok, why = false, "it is not a string"
  if type(name) == "string" then ok, why = util.dns_subdomain(name) end
  if ok and not name:match("^[^.]+%.[^.]+%.[^.]+") then
    ok, why = false, "Kubernetes wants a name with at least three segments, as " ..
                     "\"widgets.validate.example.com\""
  end
  if not ok then
    util.raise("webhook field 'name' must be a DNS subdomain of three or more segments, got %s (%s)",
               type(name) == "string" and string.format("%q", name) or tostring(name), why)
  end
  d.name = name
  local v, m = rawget(t, "validate"), rawget(t, "mutate")
  if (v == nil) == (m == nil) then
    util.raise("webhook '%s' needs exactly one of 'validate' and 'mutate' (a function)", name)
  end
  if v ~= nil and type(v) ~= "function" then
    util.raise("webhook field 'validate' must be a function, got %s", type(v))
  end
  if m ~= nil and type(m) ~= "function" then
    util.raise("webhook field 'mutate' must be a function, got %s", type(m))
  end
  d.type = v and "validating" or "mutating"
  d.fn = v or m
  d.path = (v and "/validate/" or "/mutate/") .. name
  local rules = rawget(t, "rules")
  if rules == nil then
    util.raise("webhook '%s' needs 'rules' (which requests it sees)", name)
  end
  if type(rules) ~= "table" or #rules == 0 or #rules > MAX_LIST then
    util.raise("webhook field 'rules' must list 1 to %d rules", MAX_LIST)
  end
  d.rules = {}
  for i = 1, #rules do d.rules[i] = read_rule(rawget(rules, i), string.format("rules[%d]", i)) end
  d.namespace_selector = read_selector(rawget(t, "namespace_selector"), "namespace_selector")
  d.object_selector = read_selector(rawget(t, "object_selector"), "object_selector")
  d.failure_policy = one_of(rawget(t, "failure_policy"), "failure_policy", { "Fail", "Ignore" },
                            "Fail")
  d.side_effects = one_of(rawget(t, "side_effects"), "side_effects", { "None", "NoneOnDryRun" },
                          "None")
  d.match_policy = one_of(rawget(t, "match_policy"), "match_policy", { "Equivalent", "Exact" },
                          "Equivalent")
  local to = rawget(t, "timeout_seconds")
  if to == nil then to = 10 end
  if type(to) ~= "number" or to % 1 ~= 0 or to < 1 or to > 30 then
    util.raise("webhook field 'timeout_seconds' must be an integer from 1 to 30, got %s",
               tostring(to))
  end
  d.timeout_seconds = to
  local rp = rawget(t, "reinvocation_policy")
  if rp ~= nil and d.type ~= "mutating" then
    util.raise("webhook field 'reinvocation_policy' is for mutating webhooks only")
  end
  if d.type == "mutating" then
    d.reinvocation_policy = one_of(rp, "reinvocation_policy", { "Never", "IfNeeded" }, "Never")
  end
  return d
end

-- A read-only view of a private declaration: reading gives copies of the
-- plain fields, writing raises.
local function deep_copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in next, v do out[k] = deep_copy(x) end
  if json.is_array(v) then json.array(out) end
  return out
end

local handle_mt = {
  __index = function(h, k)
    local d = private[h]
    if k == "fn" then return nil end
    return deep_copy(d[k])
  end,
  __newindex = function() util.raise("a webhook is read-only") end,
  __metatable = false,
  __tostring = function(h)
    local d = private[h]
    return (d.type == "conversion" and "converter " or "webhook ") .. d.path
  end,
}

function M.declare(t)
  local d = read(t)
  local h = setmetatable({}, handle_mt)
  private[h] = d
  return h
end

function M.is_webhook(v) return private[v] ~= nil end

-- ---- converters (CustomResourceDefinition conversion) ----------------------
--
-- luna.converter{ group =, kind =, plural =, hub =, versions = { V = {
-- to_hub = fn, from_hub = fn }, ... }, timeout_seconds = }: a hub and
-- spokes, as controller-runtime's Hub/Convertible.  Every version other
-- than the hub converts to the hub and back, both required, so any version
-- reaches any other through the hub (at most two calls) and no pair can be
-- forgotten.  The declaration is a conversion webhook: type "conversion",
-- name the CRD's (plural.group), path "/convert/" .. name.

local CONVERTER_FIELDS = { group = true, kind = true, plural = true, hub = true, versions = true,
                           timeout_seconds = true }
local SPOKE_FIELDS = { to_hub = true, from_hub = true }

local function converter_raise(fmt, ...)
  util.raise("converter " .. fmt, ...)
end

-- A CRD version name: a DNS-1035 label ("v1", "v1alpha1", "v2beta3").
local function version_name(v)
  return type(v) == "string" and #v <= 63 and
         (v:match("^[a-z]$") or v:match("^[a-z][-a-z0-9]*[a-z0-9]$")) ~= nil
end

local function quote(v)
  return type(v) == "string" and string.format("%q", v) or tostring(v)
end

local function read_converter(t)
  if type(t) ~= "table" then util.raise("luna.converter takes a table, got %s", type(t)) end
  for _, k in ipairs(sorted_keys(t)) do
    if type(k) ~= "string" or not CONVERTER_FIELDS[k] then
      converter_raise("has unknown field '%s' (group, kind, plural, hub, versions, " ..
                      "timeout_seconds)", tostring(k))
    end
  end
  local d = { type = "conversion", failure_policy = "Fail" }
  local group = rawget(t, "group")
  local ok, why = false, "it is not a string"
  if type(group) == "string" then ok, why = util.dns_subdomain(group) end
  if ok and not group:find(".", 1, true) then
    ok, why = false, "a CRD's group has a dot, as \"example.com\""
  end
  if not ok then
    converter_raise("field 'group' must be the CRD's API group, got %s (%s)", quote(group), why)
  end
  d.group = group
  local kind = rawget(t, "kind")
  if type(kind) ~= "string" or #kind > 63 or not kind:match("^[A-Za-z][A-Za-z0-9]*$") then
    converter_raise("field 'kind' must be the CRD's kind, as \"Widget\", got %s", quote(kind))
  end
  d.kind = kind
  local plural = rawget(t, "plural")
  if plural == nil then plural = kind:lower() .. "s" end
  if type(plural) ~= "string" or #plural > 63 or
     not (plural:match("^[a-z]$") or plural:match("^[a-z][-a-z0-9]*[a-z0-9]$")) then
    converter_raise("field 'plural' must be the CRD's plural resource name, as \"widgets\", " ..
                    "got %s", quote(plural))
  end
  d.plural = plural
  d.name = plural .. "." .. group
  ok = util.dns_subdomain(d.name)
  if not ok then
    converter_raise("field 'plural': the CRD name %q is longer than 253 characters", d.name)
  end
  d.path = "/convert/" .. d.name
  local hub = rawget(t, "hub")
  if not version_name(hub) then
    converter_raise("field 'hub' must be a version name of the CRD, as \"v1\", got %s",
                    quote(hub))
  end
  d.hub = hub
  local versions = rawget(t, "versions")
  if type(versions) ~= "table" then
    converter_raise("field 'versions' must be a table { VERSION = { to_hub = fn, " ..
                    "from_hub = fn }, ... }, got %s", type(versions))
  end
  d.fn = {}
  d.versions = { hub }
  local spokes = sorted_keys(versions)
  if #spokes == 0 or #spokes > MAX_LIST then
    converter_raise("field 'versions' must name 1 to %d versions other than the hub", MAX_LIST)
  end
  for _, v in ipairs(spokes) do
    local where = "versions." .. tostring(v)
    if not version_name(v) then
      converter_raise("field 'versions' has key %s: want a version name, as \"v1alpha1\"",
                      quote(v))
    end
    if v == hub then
      converter_raise("field '%s': the hub version converts to nothing (list the other " ..
                      "versions, each with to_hub and from_hub)", where)
    end
    local spoke = rawget(versions, v)
    if type(spoke) ~= "table" then
      converter_raise("field '%s' must be a table { to_hub = fn, from_hub = fn }, got %s",
                      where, type(spoke))
    end
    for _, k in ipairs(sorted_keys(spoke)) do
      if type(k) ~= "string" or not SPOKE_FIELDS[k] then
        converter_raise("field '%s' has unknown key '%s' (to_hub, from_hub)", where,
                        tostring(k))
      end
    end
    for _, k in ipairs({ "to_hub", "from_hub" }) do
      local f = rawget(spoke, k)
      if type(f) ~= "function" then
        converter_raise("field '%s.%s' must be a function (%s), got %s", where, k,
                        k == "to_hub" and ("converting " .. v .. " to " .. hub)
                                      or ("converting " .. hub .. " to " .. v), type(f))
      end
    end
    d.fn[v] = { to_hub = rawget(spoke, "to_hub"), from_hub = rawget(spoke, "from_hub") }
    d.versions[#d.versions + 1] = v
  end
  local to = rawget(t, "timeout_seconds")
  if to == nil then to = 10 end
  if type(to) ~= "number" or to % 1 ~= 0 or to < 1 or to > 30 then
    converter_raise("field 'timeout_seconds' must be an integer from 1 to 30, got %s",
                    tostring(to))
  end
  d.timeout_seconds = to
  return d
end

function M.converter(t)
  local d = read_converter(t)
  local h = setmetatable({}, handle_mt)
  private[h] = d
  return h
end

-- The private declarations of the list l (of handles); raises naming
-- field[i] for anything else.
local function declarations(l, field)
  if type(l) ~= "table" then
    util.raise("%s must be a list of luna.webhook{...}, got %s", field, type(l))
  end
  local out, seen = {}, {}
  for i = 1, #l do
    local d = private[rawget(l, i)]
    if not d then
      util.raise("%s[%d] must be a value of luna.webhook{...} or luna.converter{...}", field, i)
    end
    if seen[d.path] then util.raise("%s[%d]: webhook '%s' is listed twice", field, i, d.name) end
    seen[d.path] = true
    out[i] = d
  end
  return out
end

function M.set(l)
  local ds = declarations(l, "luna.webhooks")
  if #ds == 0 then util.raise("luna.webhooks needs at least one luna.webhook{...}") end
  local s = setmetatable({}, { __metatable = false,
                               __newindex = function() util.raise("read-only") end })
  sets[s] = ds
  return s
end

function M.is_set(v) return sets[v] ~= nil end

-- luna.controller{webhooks = ...}: checked before the host reads the rest.
function M.check_field(l) return declarations(l, "controller field 'webhooks'") end
function M.attach(c, ds) attached[c] = ds end

-- The declarations a file's value carries (host: the loader), or nil.
function M.collect(v)
  return sets[v] or attached[v]
end

-- ---- RFC 6901 / 6902 -------------------------------------------------------

local function escape(p)
  p = tostring(p)
  if not p:find("[~/]") then return p end
  return (p:gsub("~", "~0"):gsub("/", "~1"))
end

function M.pointer(parts)
  local out = {}
  for i, p in ipairs(parts) do out[i] = "/" .. escape(p) end
  return table.concat(out)
end

-- "array", "object" or "scalar", as the JSON encoder reads the value.
local function shape(v)
  if type(v) ~= "table" then return "scalar" end
  if json.is_array(v) then return "array" end
  if json.is_object(v) then return "object" end
  local n = #v
  if n == 0 then return "object" end
  for k in next, v do
    if type(k) ~= "number" then return "object" end
  end
  return "array"
end

local function equal(a, b)
  local sa, sb = shape(a), shape(b)
  if sa ~= sb then return false end
  if sa == "scalar" then return a == b end
  if sa == "array" then
    if #a ~= #b then return false end
    for i = 1, #a do
      if not equal(a[i], b[i]) then return false end
    end
    return true
  end
  for k, x in next, a do
    if b[k] == nil or not equal(x, b[k]) then return false end
  end
  for k in next, b do
    if a[k] == nil then return false end
  end
  return true
end
M.equal = equal

-- The diff walks both trees on every mutating call, and most of them are
-- unchanged: a path (parts[1..depth]) is only joined into text when an
-- operation is emitted, and an object's keys are only sorted (the patch's
-- order: removals by key, then additions and changes by key) among those
-- that produced operations, not for every object walked.
local function text_order(x, y) return tostring(x) < tostring(y) end
local function segment_order(x, y) return tostring(x[1]) < tostring(y[1]) end

local function path_of(parts, depth)
  local out = {}
  for i = 1, depth do out[i] = "/" .. escape(parts[i]) end
  return table.concat(out)
end

local function diff(a, b, parts, depth, ops)
  local sa, sb = shape(a), shape(b)
  if sa ~= sb or sa == "scalar" then
    if sa ~= sb or a ~= b then ops[#ops + 1] = { op = "replace", path = path_of(parts, depth), value = b } end
    return
  end
  local d = depth + 1
  if sa == "object" then
    local removed
    for k in next, a do
      if b[k] == nil then removed = removed or {}; removed[#removed + 1] = k end
    end
    if removed then
      table.sort(removed, text_order)
      for _, k in ipairs(removed) do
        parts[d] = k
        ops[#ops + 1] = { op = "remove", path = path_of(parts, d) }
      end
    end
    local base, segments = #ops, nil
    for k, y in next, b do
      local first = #ops + 1
      local x = a[k]
      parts[d] = k
      if x == nil then
        ops[first] = { op = "add", path = path_of(parts, d), value = y }
      else
        diff(x, y, parts, d, ops)
      end
      if #ops >= first then
        segments = segments or {}
        segments[#segments + 1] = { k, first, #ops }
      end
    end
    if segments and #segments > 1 then
      table.sort(segments, segment_order)
      local moved = {}
      for _, seg in ipairs(segments) do
        for i = seg[2], seg[3] do moved[#moved + 1] = ops[i] end
      end
      for i = 1, #moved do ops[base + i] = moved[i] end
    end
    parts[d] = nil
    return
  end
  local n, m = #a, #b
  for i = 1, math.min(n, m) do
    parts[d] = i - 1
    diff(a[i], b[i], parts, d, ops)
  end
  for i = n + 1, m do
    parts[d] = i - 1
    ops[#ops + 1] = { op = "add", path = path_of(parts, d), value = b[i] }
  end
  -- from the end, so each index is still the element it names
  for i = n, m + 1, -1 do
    parts[d] = i - 1
    ops[#ops + 1] = { op = "remove", path = path_of(parts, d) }
  end
  parts[d] = nil
end

-- The operations turning a into b (a list; empty when they are equal).
function M.diff(a, b)
  local ops = json.array()
  diff(a, b, {}, 0, ops)
  return ops
end

-- ---- serving (host) ----------------------------------------------------------

local function present(v)
  if v == NULL then return nil end
  return v
end

local RESULT_FIELDS = { allowed = true, message = true, code = true, reason = true,
                        warnings = true }

-- The request table a webhook function gets, from AdmissionReview.request.
local function request_of(r)
  return {
    uid = present(r.uid),
    kind = present(r.kind),
    resource = present(r.resource),
    sub_resource = present(r.subResource),
    request_kind = present(r.requestKind),
    request_resource = present(r.requestResource),
    request_sub_resource = present(r.requestSubResource),
    name = present(r.name),
    namespace = present(r.namespace),
    operation = present(r.operation),
    user_info = present(r.userInfo),
    object = present(r.object),
    old_object = present(r.oldObject),
    dry_run = r.dryRun == true,
    options = present(r.options),
  }
end

local function answer_of(d, a, b)
  local out = { allowed = true }
  if a == nil and b == nil or a == true then return out end
  if a == false or (a == nil and b ~= nil) then
    out.allowed = false
    out.message = b ~= nil and tostring(b) or nil
    out.code = 403
    return out
  end
  if type(a) ~= "table" then
    error(string.format("webhook %s returned a %s: want nothing, true, false and a message, " ..
                        "or a table {allowed=, message=, code=, reason=, warnings=}",
                        d.name, type(a)), 0)
  end
  for k in next, a do
    if not RESULT_FIELDS[k] then
      error(string.format("webhook %s returned a table with unknown key '%s'", d.name,
                          tostring(k)), 0)
    end
  end
  local allowed = rawget(a, "allowed")
  if allowed ~= nil and type(allowed) ~= "boolean" then
    error(string.format("webhook %s: 'allowed' must be a boolean", d.name), 0)
  end
  out.allowed = allowed ~= false
  local msg = rawget(a, "message")
  if msg ~= nil then out.message = tostring(msg) end
  local code = rawget(a, "code")
  if code ~= nil and (type(code) ~= "number" or code % 1 ~= 0 or code < 100 or code > 599) then
    error(string.format("webhook %s: 'code' must be an HTTP status (100 to 599)", d.name), 0)
  end
  out.code = code or (not out.allowed and 403 or nil)
  local reason = rawget(a, "reason")
  if reason ~= nil then out.reason = tostring(reason) end
  local w = rawget(a, "warnings")
  if w ~= nil then
    if type(w) ~= "table" then
      error(string.format("webhook %s: 'warnings' must be a list of strings", d.name), 0)
    end
    out.warnings = {}
    for i = 1, #w do out.warnings[i] = tostring(w[i]) end
  end
  return out
end

-- ---- conversion ------------------------------------------------------------

-- The fields of metadata a converter may change: kube-apiserver
-- (apiextensions-apiserver's webhook converter) refuses a converted object
-- whose kind, name, namespace or uid differ, and puts every other field of
-- metadata back from the original except labels and annotations, which it
-- keeps once they pass its validation.  luna refuses all of it first, so
-- the converter's author hears it at once, with the field, instead of
-- seeing a change silently dropped.
local CONVERTIBLE_METADATA = { labels = true, annotations = true }
local MAX_ANNOTATIONS = 256 * 1024 -- kube's TotalAnnotationSizeLimitB

local function describe(obj, i)
  local md = type(obj) == "table" and obj.metadata
  local name = type(md) == "table" and present(md.name)
  local ns = type(md) == "table" and present(md.namespace)
  if type(name) ~= "string" then return string.format("objects[%d]", i - 1) end
  if type(ns) == "string" and ns ~= "" then name = ns .. "/" .. name end
  return string.format("objects[%d] (%s)", i - 1, name)
end

-- labels or annotations of a converted object, as kube-apiserver checks
-- them when they changed: a map of strings, labels' keys and values as
-- ValidateLabels wants them, annotations' keys qualified names and their
-- total size bounded.
local function check_string_map(m, field)
  if m == nil or m == NULL then return end
  if type(m) ~= "table" or (json.is_array(m) and next(m) ~= nil) then
    error(string.format("metadata.%s must be a map of strings", field), 0)
  end
  local size = 0
  for _, k in ipairs(sorted_keys(m)) do
    local v = m[k]
    if type(k) ~= "string" or type(v) ~= "string" then
      error(string.format("metadata.%s[%s] must be a string", field, tostring(k)), 0)
    end
    local ok, why = util.qualified_name(k)
    if not ok then error(string.format("metadata.%s key %q: %s", field, k, why), 0) end
    if field == "labels" then
      ok, why = util.label_value(v)
      if not ok then error(string.format("metadata.labels[%s] value: %s", k, why), 0) end
    end
    size = size + #k + #v
  end
  if field == "annotations" and size > MAX_ANNOTATIONS then
    error(string.format("metadata.annotations: %d bytes, more than kube-apiserver's %d",
                        size, MAX_ANNOTATIONS), 0)
  end
end

-- Raises unless converted keeps original's kind and metadata (but labels
-- and annotations).
local function check_converted(original, converted)
  if converted.kind ~= original.kind then
    error(string.format("changed kind from %s to %s (a conversion keeps the kind)",
                        quote(original.kind), quote(converted.kind)), 0)
  end
  local om, cm = original.metadata, converted.metadata
  if type(cm) ~= "table" or json.is_array(cm) and next(cm) ~= nil then
    error("the converted object has no metadata (keep the object's metadata)", 0)
  end
  if type(om) ~= "table" then om = {} end
  local keys = {}
  for k in next, om do keys[k] = true end
  for k in next, cm do keys[k] = true end
  for _, k in ipairs(sorted_keys(keys)) do
    if not CONVERTIBLE_METADATA[k] and not equal(om[k], cm[k]) then
      error(string.format("changed metadata.%s: a conversion may change only " ..
                          "metadata.labels and metadata.annotations (kube-apiserver refuses a " ..
                          "changed name, namespace or uid and drops other changes)",
                          tostring(k)), 0)
    end
  end
  for f in next, CONVERTIBLE_METADATA do
    if not equal(om[f], cm[f]) then check_string_map(cm[f], f) end
  end
end

-- Calls fn (a converter's to_hub or from_hub) on a copy of obj, and returns
-- what it returned (or the copy it changed, when it returned nothing),
-- with apiVersion group/to.  Raises naming the step.
local function step(d, obj, fn, from, to, what)
  local copy = deep_copy(obj)
  local ok, out = pcall(fn, copy)
  local where = string.format("%s (%s to %s)", what, from, to)
  if not ok then error(where .. ": " .. tostring(out), 0) end
  if out == nil then out = copy end
  if type(out) ~= "table" then
    error(string.format("%s: returned a %s (want the converted object, or nothing to " ..
                        "return the object it changed)", where, type(out)), 0)
  end
  out.apiVersion = d.group .. "/" .. to
  local cok, why = pcall(check_converted, obj, out)
  if not cok then error(where .. ": " .. tostring(why), 0) end
  return out
end

local function version_of(d, api_version)
  if type(api_version) ~= "string" then return nil end
  local g, v = api_version:match("^(.*)/([^/]*)$")
  if g ~= d.group then return nil end
  if v == d.hub or d.fn[v] then return v end
  return nil
end

-- The ConversionReview (checked by the host: apiVersion, kind,
-- request.uid, request.desiredAPIVersion, request.objects a list) through
-- the converter d: { allowed = true, converted = JSON text of the list },
-- or raises naming the converter, the object and the reason.
local function convert(d, review)
  local req = review.request
  local desired = req.desiredAPIVersion
  local to = version_of(d, desired)
  if not to then
    error(string.format("desiredAPIVersion %s is not one of %s/{%s}", quote(desired), d.group,
                        table.concat(d.versions, ",")), 0)
  end
  local objects = req.objects
  local out = json.array()
  for i = 1, #objects do
    local obj = objects[i]
    local what = describe(obj, i)
    if type(obj) ~= "table" or json.is_array(obj) and next(obj) ~= nil then
      error(string.format("%s is not an object", what), 0)
    end
    local from = version_of(d, obj.apiVersion)
    if not from then
      error(string.format("%s has apiVersion %s, not one of %s/{%s}", what,
                          quote(present(obj.apiVersion)), d.group,
                          table.concat(d.versions, ",")), 0)
    end
    if obj.kind ~= d.kind then
      error(string.format("%s has kind %s, not %s", what, quote(present(obj.kind)), d.kind), 0)
    end
    local ok, res = pcall(function()
      local o = obj
      if from ~= to and from ~= d.hub then
        o = step(d, o, d.fn[from].to_hub, from, d.hub, "to_hub")
      end
      if from ~= to and to ~= d.hub then
        o = step(d, o, d.fn[to].from_hub, d.hub, to, "from_hub")
      end
      return o
    end)
    if not ok then error(string.format("%s: %s", what, tostring(res)), 0) end
    out[i] = res
  end
  local text, err = json.encode(out)
  if not text then
    error("the converted objects cannot be encoded: " .. tostring(err), 0)
  end
  return { allowed = true, converted = text, ops = #objects }
end

local function list_of(l)
  local out = json.array()
  for i, v in ipairs(l) do out[i] = v end
  return out
end

local function selector_of(s)
  local out = json.object()
  if next(s.match_labels) ~= nil then
    out.matchLabels = json.object()
    for k, v in pairs(s.match_labels) do out.matchLabels[k] = v end
  end
  if #s.match_expressions > 0 then
    out.matchExpressions = json.array()
    for i, e in ipairs(s.match_expressions) do
      out.matchExpressions[i] = { key = e.key, operator = e.operator,
                                  values = e.values and list_of(e.values) or nil }
    end
  end
  return out
end

-- The admissionregistration.k8s.io/v1 entry of d, every field written with
-- its value or default as `luna webhooks manifest` writes it, reached
-- through client: { url = BASE } or { service_name, service_namespace,
-- service_port }, with ca_bundle (base64) when given.  JSON text.
-- For a converter, the CRD's spec.conversion (strategy Webhook) as a JSON
-- merge patch writes it: the clientConfig's other form (url or service)
-- is null, so a stanza written earlier the other way does not keep both.
function M.registration(d, client)
  local cc = json.object()
  if client.url then
    cc.url = client.url:gsub("/+$", "") .. d.path
  else
    cc.service = { name = client.service_name, namespace = client.service_namespace,
                   path = d.path, port = client.service_port }
  end
  if client.ca_bundle then cc.caBundle = client.ca_bundle end
  if d.type == "conversion" then
    if client.url then cc.service = NULL else cc.url = NULL end
    return assert(json.encode { strategy = "Webhook", webhook = {
      conversionReviewVersions = json.array({ "v1" }), clientConfig = cc } })
  end
  local rules = json.array()
  for i, r in ipairs(d.rules) do
    rules[i] = { apiGroups = list_of(r.api_groups), apiVersions = list_of(r.api_versions),
                 resources = list_of(r.resources), operations = list_of(r.operations),
                 scope = r.scope }
  end
  local e = {
    name = d.name, admissionReviewVersions = json.array({ "v1" }), clientConfig = cc,
    rules = rules, namespaceSelector = selector_of(d.namespace_selector),
    objectSelector = selector_of(d.object_selector), failurePolicy = d.failure_policy,
    matchPolicy = d.match_policy, sideEffects = d.side_effects,
    timeoutSeconds = d.timeout_seconds, reinvocationPolicy = d.reinvocation_policy,
  }
  return assert(json.encode(e))
end

-- Runs the AdmissionReview (body, checked by the host: apiVersion, kind,
-- request.uid) through d's function.  Returns { allowed, message, code,
-- reason, warnings, patch (JSON text of the operations, or nil), ops }.
-- Raises (the host answers by failure_policy) when the function does or
-- returns something that is not an answer.
function M.serve(d, body)
  local review, err = json.decode(body)
  if not review then error(tostring(err), 0) end
  if d.type == "conversion" then return convert(d, review) end
  local req = request_of(review.request)
  if d.type == "validating" then
    return answer_of(d, d.fn(req))
  end
  local copy = req.object ~= nil and deep_copy(req.object) or nil
  local out = answer_of(d, d.fn(req, copy))
  if out.allowed and req.object ~= nil and copy ~= nil then
    local ops = M.diff(req.object, copy)
    out.ops = #ops
    if #ops > 0 then
      local text, eerr = json.encode(ops)
      if not text then error("the mutated object cannot be encoded: " .. tostring(eerr), 0) end
      out.patch = text
    end
  end
  return out
end

return M
