-- `luna rbac [options] DIR`: the ClusterRole the controllers in DIR need
-- (docs/deploy.md, "RBAC from the controllers"), as controller-gen's
-- +kubebuilder:rbac markers give controller-runtime users theirs.
--
-- Two halves, merged into one rule per (API group, resource):
--   static    every controller's watch, owns and watches, read by loading
--             DIR as `luna run` does, without connecting
--             (core.controller_sources, runtime/rbac_sources.h): an
--             informer lists and watches, so each source kind gets list
--             and watch.  Not get: luna's cache answers reads; a script
--             that calls luna.get shows it in the calls below.
--   recorded  every API call the controllers' reconciles make while DIR's
--             *_test.lua specs run (`luna test`, through the runtime's
--             call observer, test_control.h): the method and path give
--             the verb and resource (GET a name: get, GET a collection:
--             list, ?watch: watch, POST: create, PUT: update, PATCH
--             (server-side apply too): patch, DELETE: delete or
--             deletecollection), subresources (status, scale) included.
--             Three additions follow from what a call implies rather than
--             from the call itself: a server-side apply also gets create
--             (applying an object that does not exist creates it, and the
--             API server then checks create too, whether or not the
--             object existed in the spec); an Event created also gets patch (the
--             recorder PATCHes the series of a repeated Event); and a
--             write whose ownerReferences set blockOwnerDeletion gets
--             update on the owner's finalizers subresource (the API
--             server's OwnerReferencesPermissionEnforcement asks for it).
-- A path the specs never take is a call the role does not grant: write
-- specs that reach every write (docs/authoring.md), or add the rule by hand
-- in a role of your own.
--
-- Kinds become resources through discovery against the dev server the
-- specs ran (it serves the built-in kinds and the CRDs the specs seed);
-- with --static, or for a kind no spec's server knew, through a dev server
-- started with the --seed manifests.
--
-- Output: a ClusterRole (--name, default luna-controllers; --label K=V adds
-- labels), rules sorted by group then resource, verbs in the order get,
-- list, watch, create, update, patch, delete, deletecollection, each rule
-- preceded by a comment per origin ("widget: owns apps/v1/Deployment ->
-- list, watch").  The same DIR, specs and options print the same bytes.
-- With --check FILE nothing is printed: exit 0 if FILE holds exactly that
-- text, 1 with a diff otherwise.  Exit 1 when a spec failed (the recording
-- would be incomplete), 2 on a usage error or a directory that does not
-- load.
local core = require "luna.core"
local testing = require "luna.testing"

local M = {}

local VERB_ORDER = { "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection" }
local VERB_RANK = {}
for i, v in ipairs(VERB_ORDER) do VERB_RANK[v] = i end

local function usage(to)
  to:write("usage: luna rbac [options] DIR\n" ..
    "  prints the ClusterRole the controllers in DIR need: list and watch for what they\n" ..
    "  watch, own and map (watch, owns, watches), and the calls DIR/*_test.lua make them\n" ..
    "  do (docs/deploy.md)\n" ..
    "options:\n" ..
    "  --name NAME        the ClusterRole's name (default luna-controllers)\n" ..
    "  --label KEY=VALUE  a label on the ClusterRole (repeatable)\n" ..
    "  --seed FILE        manifests (CRDs) to resolve kinds no spec seeded (repeatable)\n" ..
    "  --static           do not run the specs: sources only\n" ..
    "  --check FILE       print nothing; exit 1 with a diff if FILE differs from the output\n" ..
    "  --verbose          the specs' report on stderr\n")
end

-- "/apis/apps/v1/namespaces/ns/deployments/x/status?y" -> "apps",
-- "deployments/status", name "x" (nil for a collection); nil if the path
-- is not a resource path (/version, /api, discovery).
local function parse_path(path)
  local p = path:gsub("[?#].*$", "")
  local segs = {}
  for s in p:gmatch("[^/]+") do segs[#segs + 1] = s end
  local group, rest
  if segs[1] == "api" and segs[2] then
    group, rest = "", 3
  elseif segs[1] == "apis" and segs[3] then
    group, rest = segs[2], 4
  else
    return nil
  end
  local r = {}
  for i = rest, #segs do r[#r + 1] = segs[i] end
  -- namespaces/NS/<resource>...: but namespaces, namespaces/NS and
  -- namespaces/NS/{status,finalize} are the Namespace resource itself
  if r[1] == "namespaces" and #r >= 3 and not (#r == 3 and (r[3] == "status" or r[3] == "finalize")) then
    table.remove(r, 1)
    table.remove(r, 1)
  end
  if not r[1] then return nil end
  local resource, name = r[1], r[2]
  if r[3] then resource = resource .. "/" .. r[3] end
  return group, resource, name
end

local function query_has_watch(path)
  local q = path:match("%?(.*)$")
  if not q then return false end
  for k, v in q:gmatch("([^&=]+)=?([^&]*)") do
    if k == "watch" and (v == "true" or v == "1" or v == "") then return true end
  end
  return false
end

local function verb_of(method, path, name)
  method = method:upper()
  if method == "GET" or method == "HEAD" then
    if query_has_watch(path) then return "watch" end
    return name and "get" or "list"
  end
  if method == "POST" then return "create" end
  if method == "PUT" then return "update" end
  if method == "PATCH" then return "patch" end
  if method == "DELETE" then return name and "delete" or "deletecollection" end
  return nil
end

local function yaml_str(s) return '"' .. s:gsub('[\\"]', "\\%0") .. '"' end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

local function sorted_verbs(set)
  local vs = sorted_keys(set)
  table.sort(vs, function(a, b) return (VERB_RANK[a] or 99) < (VERB_RANK[b] or 99) end)
  return vs
end

-- The role being built: rules[group .. "\0" .. resource] = { group,
-- resource, verbs = set, origins = { [text] = set of verbs } }.
local Role = {}
Role.__index = Role

local function new_role() return setmetatable({ rules = {} }, Role) end

function Role:grant(group, resource, verb, origin)
  local key = group .. "\0" .. resource
  local r = self.rules[key]
  if not r then
    r = { group = group, resource = resource, verbs = {}, origins = {} }
    self.rules[key] = r
  end
  r.verbs[verb] = true
  r.origins[origin] = r.origins[origin] or {}
  r.origins[origin][verb] = true
end

function Role:render(name, labels, header)
  local out = {}
  local function add(s) out[#out + 1] = s end
  for _, h in ipairs(header) do add("# " .. h) end
  add("apiVersion: rbac.authorization.k8s.io/v1")
  add("kind: ClusterRole")
  add("metadata:")
  add("  name: " .. name)
  local lks = sorted_keys(labels)
  if #lks > 0 then
    add("  labels:")
    for _, k in ipairs(lks) do add("    " .. k .. ": " .. yaml_str(labels[k])) end
  end
  local keys = sorted_keys(self.rules)
  if #keys == 0 then
    add("rules: []")
  else
    add("rules:")
  end
  for _, key in ipairs(keys) do
    local r = self.rules[key]
    for _, o in ipairs(sorted_keys(r.origins)) do
      add("# " .. o .. " -> " .. table.concat(sorted_verbs(r.origins[o]), ", "))
    end
    add("- apiGroups: [" .. yaml_str(r.group) .. "]")
    add("  resources: [" .. yaml_str(r.resource) .. "]")
    local vs = {}
    for _, v in ipairs(sorted_verbs(r.verbs)) do vs[#vs + 1] = yaml_str(v) end
    add("  verbs: [" .. table.concat(vs, ", ") .. "]")
  end
  return table.concat(out, "\n") .. "\n"
end

-- "example.com/v1/Widget" -> { group, resource } through a runtime's
-- discovery (env:resource), memoized in resolved; false if not served.
local function resolve_with(env, kind, resolved)
  if resolved[kind] then return resolved[kind] end
  local ok, r = pcall(env.resource, env, kind)
  if not ok then return false end
  resolved[kind] = { group = kind:match("^(.-)/[^/]+/[^/]+$") or "", resource = r.name }
  return resolved[kind]
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function diff(want_text, file)
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "wb"))
  f:write(want_text)
  f:close()
  local q = function(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
  local p = io.popen("diff -u " .. q(file) .. " " .. q(tmp) .. " 2>&1")
  local d = p:read("*a")
  p:close()
  os.remove(tmp)
  return d
end

function M.main(cli, lib, args)
  local name, labels, seeds, static, check, verbose, dir = "luna-controllers", {}, {}, false, nil, false, nil
  local i = 1
  local function value(flag)
    i = i + 1
    local v = args[i]
    if not v then
      io.stderr:write("luna rbac: ", flag, " needs a value\n")
      usage(io.stderr)
    end
    return v
  end
  while i <= #args do
    local a = args[i]
    local flag, inline = a:match("^(%-%-[%w-]+)=(.*)$")
    flag = flag or a
    local function arg_value()
      if inline then return inline end
      return value(flag)
    end
    if flag == "--name" then
      name = arg_value()
      if not name then return 2 end
      if not (name:match("^[a-z0-9][%-a-z0-9.]*$") and name:match("[a-z0-9]$")) or #name > 253 then
        io.stderr:write("luna rbac: --name ", name, ": not a valid ClusterRole name\n")
        return 2
      end
    elseif flag == "--label" then
      local v = arg_value()
      if not v then return 2 end
      local k, val = v:match("^([%w%.%-/_]+)=([%w%.%-_]*)$")
      if not k then
        io.stderr:write("luna rbac: --label ", v, ": want KEY=VALUE\n")
        return 2
      end
      labels[k] = val
    elseif flag == "--seed" then
      local v = arg_value()
      if not v then return 2 end
      if not read_file(v) then
        io.stderr:write("luna rbac: --seed ", v, ": cannot read it\n")
        return 2
      end
      seeds[#seeds + 1] = v
    elseif flag == "--check" then
      check = arg_value()
      if not check then return 2 end
    elseif a == "--static" then
      static = true
    elseif a == "--verbose" or a == "-v" then
      verbose = true
    elseif a == "--help" or a == "-h" then
      usage(io.stdout)
      return 0
    elseif a:sub(1, 1) == "-" then
      io.stderr:write("luna rbac: unknown option ", a, "\n")
      usage(io.stderr)
      return 2
    elseif dir then
      io.stderr:write("luna rbac: one directory only (", dir, ", ", a, ")\n")
      return 2
    else
      dir = (a:gsub("(.)/+$", "%1"))
    end
    i = i + 1
  end
  if not dir then
    usage(io.stderr)
    return 2
  end
  local d = io.open(dir .. "/.", "rb")
  if d then d:close() else
    io.stderr:write("luna rbac: ", dir, ": not a directory\n")
    return 2
  end

  -- static: the controllers' sources
  local controllers, err = core.controller_sources(lib, dir)
  if not controllers then
    io.stderr:write("luna rbac: ", dir, ": ", tostring(err), "\n")
    return 2
  end
  local kinds, resolved = {}, {}
  for _, c in ipairs(controllers) do
    for _, s in ipairs(c.sources) do kinds[s.kind] = true end
  end

  -- recorded: the calls the specs make the controllers do
  local calls, dropped = {}, 0
  local function resolve_all(env)
    for _, k in ipairs(sorted_keys(kinds)) do resolve_with(env, k, resolved) end
  end
  local function take(env)
    env:calls() -- the calls the spec did not read are kept in env.all_calls too
    dropped = dropped + (env.dropped or 0)
    for _, c in ipairs(env.all_calls or {}) do
      calls[#calls + 1] = c
      -- an owner the write blocks deletion of: its kind needs resolving
      local refs = type(c.body) == "table" and type(c.body.metadata) == "table" and c.body.metadata.ownerReferences
      if type(refs) == "table" then
        for _, ref in ipairs(refs) do
          if type(ref) == "table" and ref.blockOwnerDeletion == true and type(ref.apiVersion) == "string"
              and type(ref.kind) == "string" then
            kinds[ref.apiVersion .. "/" .. ref.kind] = true
          end
        end
      end
    end
    resolve_all(env)
  end
  if not static then
    local specs = 0
    local p = io.popen("ls -1 '" .. dir:gsub("'", "'\\''") .. "' 2>/dev/null")
    for line in p:lines() do if line:match("_test%.lua$") then specs = specs + 1 end end
    p:close()
    if specs == 0 then
      io.stderr:write("luna rbac: no *_test.lua in ", dir,
        ": the calls the controllers make are recorded from their specs (or pass --static)\n")
      return 2
    end
    cli.report = verbose and io.stderr or assert(io.open("/dev/null", "wb"))
    testing._on_stop = take
    local rc = cli.run_paths({ dir }, nil, false)
    testing._on_stop = nil
    if not verbose then cli.report:close() end
    cli.report = io.stdout
    if rc == 0 and dropped > 0 then
      io.stderr:write(("luna rbac: %d calls were dropped before they were recorded (a runtime keeps "):format(dropped),
        "10,000 between two env:calls()): call env:calls() in the specs that make that many\n")
      return 1
    end
    if rc ~= 0 then
      io.stderr:write("luna rbac: the specs in ", dir, " did not all pass, so the calls recorded may be ",
        "incomplete: run `luna test ", dir, "`\n")
      return 1
    end
  end

  -- kinds no spec's server served: a dev server of our own, with --seed
  local missing = false
  for k in pairs(kinds) do if not resolved[k] then missing = true end end
  if missing then
    testing._dir = "."
    local ok, env = pcall(testing.start, { dir = dir, seed = seeds, log_level = "warn" })
    if not ok then
      io.stderr:write("luna rbac: cannot start a dev server to resolve kinds: ", tostring(env), "\n")
      testing._stop_all()
      return 2
    end
    resolve_all(env)
    testing._stop_all()
    local unknown = {}
    for k in pairs(kinds) do if not resolved[k] then unknown[#unknown + 1] = k end end
    table.sort(unknown)
    if #unknown > 0 then
      io.stderr:write("luna rbac: kind ", table.concat(unknown, ", "), ": not served by the dev server; ",
        "pass the manifest of its CustomResourceDefinition with --seed\n")
      return 2
    end
  end

  local role = new_role()
  for _, c in ipairs(controllers) do
    for _, s in ipairs(c.sources) do
      local r = resolved[s.kind]
      local origin = ("%s: %s %s"):format(c.name, s.role, s.kind)
      role:grant(r.group, r.resource, "list", origin)
      role:grant(r.group, r.resource, "watch", origin)
    end
  end
  for _, c in ipairs(calls) do
    local group, resource, obj_name = parse_path(c.path or "")
    local verb = group and verb_of(c.method or "", c.path, obj_name)
    if verb then
      local who = (c.controller and c.controller ~= "") and c.controller or "luna"
      local origin = who .. ": calls"
      role:grant(group, resource, verb, origin)
      -- an apply to an object that is not there creates it, and the API
      -- server asks for create as well as patch then
      if verb == "patch" and type(c.content_type) == "string" and c.content_type:find("apply%-patch") then
        role:grant(group, resource, "create", who .. ": server-side apply (creates the object when absent)")
      end
      if resource == "events" and (group == "" or group == "events.k8s.io") and verb == "create" then
        role:grant(group, resource, "patch", who .. ": Event series (a repeated Event is patched)")
      end
      local refs = (verb == "create" or verb == "update" or verb == "patch") and type(c.body) == "table"
        and type(c.body.metadata) == "table" and c.body.metadata.ownerReferences
      if type(refs) == "table" then
        for _, ref in ipairs(refs) do
          if type(ref) == "table" and ref.blockOwnerDeletion == true and type(ref.kind) == "string" then
            local o = resolved[tostring(ref.apiVersion) .. "/" .. ref.kind]
            if o then
              role:grant(o.group, o.resource .. "/finalizers", "update",
                who .. ": blockOwnerDeletion on " .. ref.kind .. " owner references")
            end
          end
        end
      end
    end
  end

  local text = role:render(name, labels, {
    ("Generated by `luna rbac` from %s/%s (docs/deploy.md): do not edit."):format(
      dir, static and " (static: sources only)" or ""),
    "The ClusterRole the controllers there need: list and watch for every",
    "watch, owns and watches kind, and the calls their *_test.lua specs make.",
  })
  if check then
    local have = read_file(check)
    if have == text then return 0 end
    io.stderr:write("luna rbac: ", check, " differs from what `luna rbac` prints for ", dir,
      have and (":\n" .. diff(text, check)) or ": cannot read it\n")
    return 1
  end
  io.stdout:write(text)
  io.stdout:flush()
  return 0
end

M._parse_path, M._verb_of = parse_path, verb_of
return M
