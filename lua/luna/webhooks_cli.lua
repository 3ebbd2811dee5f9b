-- `luna webhooks manifest [options] DIR`: the ValidatingWebhookConfiguration
-- and MutatingWebhookConfiguration for the webhooks DIR declares, and a
-- CRD conversion patch for each converter (docs/webhooks.md), for GitOps
-- users to apply as YAML.
--
-- DIR is loaded as `luna run` loads it (core.webhook_sources,
-- runtime/rbac_sources.h): a file that does not load is an error (exit 2).
-- Each webhook becomes one entry of its configuration, every registration
-- field written out with its value or Kubernetes' default, and a
-- clientConfig that reaches luna: the Service (--service-name, default
-- luna-webhooks; --service-namespace, default luna, deploy/'s namespace;
-- --service-port, default 443) at the webhook's path, or --url BASE
-- (BASE .. path: a luna outside the cluster).  --ca-bundle FILE puts the
-- PEM's base64 in caBundle.  A kind of configuration with no webhook is
-- left out; none at all is an error (exit 1).  Values are JSON strings,
-- valid YAML whatever they hold; the same DIR and options print the same
-- bytes.
--
-- A converter's patch is a partial CustomResourceDefinition: apiVersion,
-- kind, metadata.name and spec.conversion only.  That one document is a
-- kustomize patch (`patches:`), a merge patch (`kubectl patch crd NAME
-- --type merge --patch-file`) and a server-side apply object; plain
-- `kubectl apply` would take it for the whole CRD, so `--only admission`
-- and `--only conversion` print the two parts apart.
local core = require "luna.core"

local json = core.json

local M = {}

local function usage(to)
  to:write("usage: luna webhooks manifest [options] DIR\n" ..
    "  prints the ValidatingWebhookConfiguration and MutatingWebhookConfiguration of the\n" ..
    "  webhooks DIR declares (docs/webhooks.md)\n" ..
    "options:\n" ..
    "  --name NAME               the configurations' name (default luna)\n" ..
    "  --service-name NAME       the Service in front of luna (default luna-webhooks)\n" ..
    "  --service-namespace NS    its namespace (default luna)\n" ..
    "  --service-port PORT       its port (default 443)\n" ..
    "  --url BASE                call BASE/<path> instead of a Service\n" ..
    "  --ca-bundle FILE          PEM of the CA that signed luna's serving certificate\n" ..
    "  --only admission|conversion\n" ..
    "                            print only the webhook configurations, or only the\n" ..
    "                            CRD conversion patches\n")
end

local function q(s) return json.encode(s) end

local function list(l)
  local out = {}
  for i, s in ipairs(l) do out[i] = q(s) end
  return "[" .. table.concat(out, ", ") .. "]"
end

local function selector(lines, field, s)
  local keys = {}
  for k in pairs(s.match_labels or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  local exprs = s.match_expressions or {}
  if #keys == 0 and #exprs == 0 then
    lines[#lines + 1] = ("  %s: {}"):format(field)
    return
  end
  lines[#lines + 1] = ("  %s:"):format(field)
  if #keys > 0 then
    lines[#lines + 1] = "    matchLabels:"
    for _, k in ipairs(keys) do
      lines[#lines + 1] = ("      %s: %s"):format(q(k), q(s.match_labels[k]))
    end
  end
  if #exprs > 0 then
    lines[#lines + 1] = "    matchExpressions:"
    for _, e in ipairs(exprs) do
      lines[#lines + 1] = ("    - key: %s"):format(q(e.key))
      lines[#lines + 1] = ("      operator: %s"):format(e.operator)
      if e.values then lines[#lines + 1] = ("      values: %s"):format(list(e.values)) end
    end
  end
end

-- clientConfig of w, indented by pad.
local function client_config(lines, w, o, pad)
  lines[#lines + 1] = pad .. "clientConfig:"
  if o.url then
    lines[#lines + 1] = ("%s  url: %s"):format(pad, q(o.url:gsub("/+$", "") .. w.path))
  else
    lines[#lines + 1] = pad .. "  service:"
    lines[#lines + 1] = ("%s    name: %s"):format(pad, q(o.service_name))
    lines[#lines + 1] = ("%s    namespace: %s"):format(pad, q(o.service_namespace))
    lines[#lines + 1] = ("%s    path: %s"):format(pad, q(w.path))
    lines[#lines + 1] = ("%s    port: %d"):format(pad, o.service_port)
  end
  if o.ca_bundle then lines[#lines + 1] = ("%s  caBundle: %s"):format(pad, o.ca_bundle) end
end

local function entry(lines, w, o)
  lines[#lines + 1] = ("- name: %s"):format(q(w.name))
  lines[#lines + 1] = "  admissionReviewVersions: [\"v1\"]"
  client_config(lines, w, o, "  ")
  lines[#lines + 1] = "  rules:"
  for _, r in ipairs(w.rules) do
    lines[#lines + 1] = ("  - apiGroups: %s"):format(list(r.api_groups))
    lines[#lines + 1] = ("    apiVersions: %s"):format(list(r.api_versions))
    lines[#lines + 1] = ("    resources: %s"):format(list(r.resources))
    lines[#lines + 1] = ("    operations: %s"):format(list(r.operations))
    lines[#lines + 1] = ("    scope: %s"):format(q(r.scope))
  end
  selector(lines, "namespaceSelector", w.namespace_selector)
  selector(lines, "objectSelector", w.object_selector)
  lines[#lines + 1] = ("  failurePolicy: %s"):format(w.failure_policy)
  lines[#lines + 1] = ("  matchPolicy: %s"):format(w.match_policy)
  lines[#lines + 1] = ("  sideEffects: %s"):format(w.side_effects)
  lines[#lines + 1] = ("  timeoutSeconds: %d"):format(w.timeout_seconds)
  if w.type == "mutating" then
    lines[#lines + 1] = ("  reinvocationPolicy: %s"):format(w.reinvocation_policy)
  end
end

-- The conversion patch of converter w's CRD.
local function conversion_patch(w, o)
  local lines = {
    ("# the conversion of CRD %s (converter hub %s; versions %s): a patch, applied"):format(
      w.name, w.hub, table.concat(w.versions, ", ")),
    "# with kustomize patches:, kubectl patch --type merge or kubectl apply --server-side",
    "apiVersion: apiextensions.k8s.io/v1",
    "kind: CustomResourceDefinition",
    "metadata:",
    "  name: " .. q(w.name),
    "spec:",
    "  conversion:",
    "    strategy: Webhook",
    "    webhook:",
    "      conversionReviewVersions: [\"v1\"]",
  }
  client_config(lines, w, o, "      ")
  return table.concat(lines, "\n") .. "\n"
end

-- The two configurations' YAML and the converters' CRD patches (nil when
-- there is none); o.only: "admission" or "conversion" keeps one part.
function M.render(webhooks, o)
  local docs = {}
  local kinds = { { "validating", "ValidatingWebhookConfiguration" },
                  { "mutating", "MutatingWebhookConfiguration" } }
  if o.only == "conversion" then kinds = {} end
  for _, kind in ipairs(kinds) do
    local lines = {}
    for _, w in ipairs(webhooks) do
      if w.type == kind[1] then entry(lines, w, o) end
    end
    if #lines > 0 then
      docs[#docs + 1] = table.concat({
        "apiVersion: admissionregistration.k8s.io/v1",
        "kind: " .. kind[2],
        "metadata:",
        "  name: " .. q(o.name),
        "webhooks:",
        table.concat(lines, "\n"),
      }, "\n") .. "\n"
    end
  end
  if o.only ~= "admission" then
    local converters = {}
    for _, w in ipairs(webhooks) do
      if w.type == "conversion" then converters[#converters + 1] = w end
    end
    table.sort(converters, function(a, b) return a.name < b.name end)
    for _, w in ipairs(converters) do docs[#docs + 1] = conversion_patch(w, o) end
  end
  if #docs == 0 then return nil end
  return "# luna webhooks manifest: generated from the controllers directory\n" ..
         table.concat(docs, "---\n")
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local q = {}
    for k = 3, 0, -1 do
      local v = math.floor(n / 64 ^ k) % 64
      q[#q + 1] = B64:sub(v + 1, v + 1)
    end
    if not b then q[3], q[4] = "=", "="
    elseif not c then q[4] = "=" end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

-- The base64 of a PEM file holding a certificate, or nil and why.
local function ca_bundle(path)
  local f = io.open(path, "rb")
  if not f then return nil, "cannot read it" end
  local s = f:read("*a")
  f:close()
  if not s:find("-----BEGIN CERTIFICATE-----", 1, true) then
    return nil, "no PEM certificate in it"
  end
  return base64(s)
end

function M.main(cli, lib, args)
  if args[1] ~= "manifest" then
    usage(io.stderr)
    return 2
  end
  local o = { name = "luna", service_name = "luna-webhooks", service_namespace = "luna",
              service_port = 443 }
  local dir
  local i = 2
  while i <= #args do
    local a = args[i]
    local flag, inline = a:match("^(%-%-[%w-]+)=(.*)$")
    flag = flag or a
    local function value()
      if inline then return inline end
      i = i + 1
      return args[i]
    end
    if flag == "--help" or flag == "-h" then
      usage(io.stdout)
      return 0
    elseif flag == "--name" or flag == "--service-name" or flag == "--service-namespace" then
      local v = value()
      if not v or not v:match("^[a-z0-9][%-a-z0-9.]*$") or not v:match("[a-z0-9]$") or #v > 253 then
        io.stderr:write("luna webhooks: ", flag, " ", tostring(v), ": not a valid name\n")
        return 2
      end
      local key = flag:sub(3):gsub("%-", "_")
      o[key] = v
    elseif flag == "--service-port" then
      local v = tonumber(value())
      if not v or v % 1 ~= 0 or v < 1 or v > 65535 then
        io.stderr:write("luna webhooks: --service-port: want 1 to 65535\n")
        return 2
      end
      o.service_port = v
    elseif flag == "--url" then
      local v = value()
      if not v or not v:match("^https://[^/]+") then
        io.stderr:write("luna webhooks: --url ", tostring(v), ": want https://HOST[:PORT]\n")
        return 2
      end
      o.url = v
    elseif flag == "--ca-bundle" then
      local v = value()
      local why
      if v then o.ca_bundle, why = ca_bundle(v) end
      if not o.ca_bundle then
        io.stderr:write("luna webhooks: --ca-bundle ", tostring(v), ": ", why or "needs a file",
                        "\n")
        return 2
      end
    elseif flag == "--only" then
      local v = value()
      if v ~= "admission" and v ~= "conversion" then
        io.stderr:write("luna webhooks: --only ", tostring(v), ": want admission or conversion\n")
        return 2
      end
      o.only = v
    elseif flag:sub(1, 1) == "-" then
      io.stderr:write("luna webhooks: unknown option ", flag, "\n")
      usage(io.stderr)
      return 2
    elseif dir then
      io.stderr:write("luna webhooks: one DIR only\n")
      return 2
    else
      dir = a
    end
    i = i + 1
  end
  if not dir then
    usage(io.stderr)
    return 2
  end
  local webhooks, err = core.webhook_sources(lib, dir)
  if not webhooks then
    io.stderr:write("luna webhooks: ", err, "\n")
    return 2
  end
  local text = M.render(webhooks, o)
  if not text then
    io.stderr:write("luna webhooks: ", dir, " declares no webhook",
                    o.only and (" (" .. o.only .. ")") or "", "\n")
    return 1
  end
  io.stdout:write(text)
  return 0
end

return M
