-- Shared by the webhook specs: an RFC 6902 applier written apart from
-- lua/luna/webhook.lua's diff (so a spec checks one against the other),
-- and deep equality over decoded JSON.
local helpers = require("helpers")
local core = require("luna.core")
local json = core.json

local S = {}

local function copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x) end
  if json.is_array(v) then json.array(out) end
  return out
end

local function unescape(s) return (s:gsub("~1", "/"):gsub("~0", "~")) end

-- Applies ops (decoded JSON Patch) to a copy of doc; raises on a bad op.
function S.apply(doc, ops)
  doc = copy(doc)
  for _, op in ipairs(ops) do
    local parts = {}
    for p in op.path:gmatch("/([^/]*)") do parts[#parts + 1] = unescape(p) end
    local parent = doc
    for i = 1, #parts - 1 do
      local k = parts[i]
      if json.is_array(parent) then k = tonumber(k) + 1 end
      parent = parent[k]
      assert(type(parent) == "table", "no parent for " .. op.path)
    end
    local last = parts[#parts]
    if json.is_array(parent) then
      local i = last == "-" and #parent + 1 or tonumber(last) + 1
      if op.op == "add" then table.insert(parent, i, copy(op.value))
      elseif op.op == "remove" then assert(parent[i] ~= nil, op.path); table.remove(parent, i)
      elseif op.op == "replace" then assert(parent[i] ~= nil, op.path); parent[i] = copy(op.value)
      else error("op " .. op.op) end
    else
      if op.op == "add" then parent[last] = copy(op.value)
      elseif op.op == "remove" then assert(parent[last] ~= nil, op.path); parent[last] = nil
      elseif op.op == "replace" then assert(parent[last] ~= nil, op.path); parent[last] = copy(op.value)
      else error("op " .. op.op) end
    end
  end
  return doc
end

-- Equal as JSON (canonical encoding with sorted keys).
function S.canon(v)
  if type(v) ~= "table" then return json.encode(v) end
  if json.is_array(v) or (#v > 0) then
    local out = {}
    for i = 1, #v do out[i] = S.canon(v[i]) end
    return "[" .. table.concat(out, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for i, k in ipairs(keys) do out[i] = json.encode(k) .. ":" .. S.canon(v[k]) end
  return "{" .. table.concat(out, ",") .. "}"
end

-- An AdmissionReview v1 of a ConfigMap request (object: nil for DELETE,
-- old: the old object).
function S.review(uid, object, op, old)
  return json.encode({
    apiVersion = "admission.k8s.io/v1", kind = "AdmissionReview",
    request = {
      uid = uid, operation = op or "CREATE", name = (object or old).metadata.name, namespace = "default",
      kind = { group = "", version = "v1", kind = "ConfigMap" },
      resource = { group = "", version = "v1", resource = "configmaps" },
      userInfo = { username = "alice", groups = json.array({ "system:authenticated" }) },
      object = object, oldObject = old, dryRun = false,
    },
  })
end

-- POSTs body (a string, or @file) to path of the server at addr, checking
-- its certificate against cacert (nil: not checked, a self-signed one);
-- returns the status and the body.
function S.post(addr, cacert, path, body, method)
  local dir = helpers.tmpdir()
  local file = body
  if body:sub(1, 1) ~= "@" then
    helpers.write_file(dir .. "/body", body)
    file = "@" .. dir .. "/body"
  end
  local out = helpers.run(("env -u LD_PRELOAD curl -s --max-time 20 %s -X %s "
    .. "-H 'Content-Type: application/json' --data-binary %s -o %s/out -w '%%{http_code}' "
    .. "https://localhost:%s%s"):format(cacert and "--cacert " .. cacert or "-k", method or "POST", file, dir, addr:match(":(%d+)$"),
    path))
  return tonumber(out), helpers.read_file(dir .. "/out") or ""
end

-- A CA and a serving certificate (spec/support/certs.lua).
S.make_cert = require("support.certs").make_cert

return S
