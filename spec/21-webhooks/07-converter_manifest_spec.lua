-- luna.converter declarations are checked when a file loads (a bad value
-- is a load error naming the field, at the declaring line), and `luna
-- webhooks manifest` prints, for each converter, the CRD's conversion
-- patch: a partial CustomResourceDefinition (strategy Webhook,
-- conversionReviewVersions [v1], the same clientConfig flags as the
-- admission configurations) that kustomize applies as a patch, and
-- kubectl patch --type merge and kubectl apply --server-side apply to a
-- live CRD, leaving the rest of it as it was.
local helpers = require("helpers")
local json = require("luna.core").json

local HEAD = 'local luna = require "luna"\n'

-- A file of one converter: its fields' Lua text, each replaced by over's
-- (a field over names and the default lacks is added).
local FIELDS = {
  { "group", '"example.com"' }, { "kind", '"Gizmo"' }, { "hub", '"v1"' },
  { "versions", "{ v1beta1 = { to_hub = function(o) return o end, from_hub = function(o) return o end } }" },
}
local function converter_file(over)
  over = over or {}
  local lines, seen = {}, {}
  for _, f in ipairs(FIELDS) do
    lines[#lines + 1] = ("    %s = %s,"):format(f[1], over[f[1]] or f[2])
    seen[f[1]] = true
  end
  for k, v in pairs(over) do
    if not seen[k] then lines[#lines + 1] = ("    %s = %s,"):format(k, v) end
  end
  return HEAD .. "return luna.webhooks {\n  luna.converter {\n" .. table.concat(lines, "\n") ..
         "\n  },\n}\n"
end

local function manifest(files, flags)
  local dir = helpers.tmpdir()
  for name, text in pairs(files) do helpers.write_file(dir .. "/" .. name, text) end
  local out, rc = helpers.run(("%s webhooks manifest %s %s 2>&1"):format(helpers.luna, flags or "", dir))
  return out, rc, dir
end

-- A two-version CRD for the gizmos the converter above serves.
local CRD = [[
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  names: { kind: Gizmo, listKind: GizmoList, plural: gizmos, singular: gizmo }
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: { openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true } }
  - name: v1beta1
    served: true
    storage: false
    schema: { openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true } }
]]

describe("converter declarations", function()
  it("print the CRD conversion patch with the Service", function()
    local out, rc = manifest({ ["c.lua"] = converter_file() },
                             "--service-name hooks --service-namespace ops --service-port 8443")
    assert.equal(0, rc, out)
    local want = table.concat({
      "apiVersion: apiextensions.k8s.io/v1",
      "kind: CustomResourceDefinition",
      "metadata:",
      '  name: "gizmos.example.com"',
      "spec:",
      "  conversion:",
      "    strategy: Webhook",
      "    webhook:",
      '      conversionReviewVersions: ["v1"]',
      "      clientConfig:",
      "        service:",
      '          name: "hooks"',
      '          namespace: "ops"',
      '          path: "/convert/gizmos.example.com"',
      "          port: 8443",
    }, "\n") .. "\n"
    assert.truthy(out:find(want, 1, true), out)
    -- converters only: no admission configuration
    assert.falsy(out:find("WebhookConfiguration", 1, true), out)
  end)

  it("point at a URL with a CA bundle, and print one part with --only", function()
    local ca = helpers.tmpdir() .. "/ca.crt"
    helpers.write_file(ca, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    local files = {
      ["c.lua"] = converter_file(),
      ["v.lua"] = HEAD .. [[
return luna.webhooks { luna.webhook { name = "cm.check.example.com",
  rules = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "configmaps" },
              operations = { "CREATE" } } },
  validate = function() end } }
]],
    }
    local out, rc = manifest(files, "--url https://127.0.0.1:9443/ --ca-bundle " .. ca)
    assert.equal(0, rc, out)
    assert.truthy(out:find('        url: "https://127.0.0.1:9443/convert/gizmos.example.com"\n        caBundle: ', 1, true), out)
    assert.truthy(out:find("kind: ValidatingWebhookConfiguration", 1, true), out)
    local conv = manifest(files, "--only conversion")
    assert.truthy(conv:find("kind: CustomResourceDefinition", 1, true), conv)
    assert.falsy(conv:find("WebhookConfiguration", 1, true), conv)
    local adm = manifest(files, "--only admission")
    assert.truthy(adm:find("kind: ValidatingWebhookConfiguration", 1, true), adm)
    assert.falsy(adm:find("CustomResourceDefinition", 1, true), adm)
    local _, brc = manifest(files, "--only everything")
    assert.equal(2, brc)
    local none, nrc = manifest({ ["c.lua"] = converter_file() }, "--only admission")
    assert.equal(1, nrc, none)
    assert.truthy(none:find("declares no webhook (admission)", 1, true), none)
  end)

  it("make a kustomize patch of the CRD", function()
    local out, rc, dir = manifest({ ["c.lua"] = converter_file() }, "--only conversion")
    assert.equal(0, rc, out)
    local k = helpers.tmpdir()
    helpers.write_file(k .. "/crd.yaml", CRD)
    helpers.write_file(k .. "/conversion.yaml", out)
    helpers.write_file(k .. "/kustomization.yaml",
      "resources: [crd.yaml]\npatches:\n- path: conversion.yaml\n")
    local built, krc = helpers.run(("env -u LD_PRELOAD kubectl kustomize %s 2>&1"):format(k))
    assert.equal(0, krc, built)
    for _, line in ipairs({ "strategy: Webhook", "path: /convert/gizmos.example.com",
                            "name: luna-webhooks", "conversionReviewVersions:",
                            "name: v1beta1", "kind: Gizmo" }) do
      assert.truthy(built:find(line, 1, true), line .. " in\n" .. built)
    end
    assert.truthy(dir)
  end)

  local bad = {
    { "group", '"example"', "converter field 'group' must be the CRD's API group" },
    { "kind", '"a widget"', "converter field 'kind'" },
    { "plural", '"Gizmos"', "converter field 'plural'" },
    { "hub", '"V1"', "converter field 'hub'" },
    { "hub", "nil", "converter field 'hub' must be a version name" },
    { "timeout_seconds", "0", "converter field 'timeout_seconds' must be an integer from 1 to 30" },
    { "colour", "1", "converter has unknown field 'colour'" },
    { "versions", "{ v1beta1 = { to_hub = function(o) return o end } }",
      "converter field 'versions.v1beta1.from_hub' must be a function (converting v1 to v1beta1)" },
    { "versions", "{ v1 = { to_hub = print, from_hub = print } }",
      "converter field 'versions.v1': the hub version converts to nothing" },
    { "versions", "{ v1beta1 = { to_hub = print, from_hub = print, back = print } }",
      "converter field 'versions.v1beta1' has unknown key 'back'" },
    { "versions", "{}", "converter field 'versions' must name 1 to" },
    { "versions", "{ V2 = { to_hub = print, from_hub = print } }",
      "converter field 'versions' has key \"V2\": want a version name" },
  }
  for _, case in ipairs(bad) do
    it("refuse " .. case[1] .. " = " .. case[2], function()
      local out, rc, dir = manifest({ ["c.lua"] = converter_file({ [case[1]] = case[2] }) })
      assert.equal(2, rc, out)
      assert.truthy(out:find(case[3], 1, true), case[3] .. " in " .. out)
      assert.truthy(out:find(dir .. "/c.lua:", 1, true), out)
    end)
  end

  it("refuse a CRD two files convert, and take a converter in a controller's webhooks", function()
    local out, rc = manifest({ ["a.lua"] = converter_file(), ["b.lua"] = converter_file() })
    assert.equal(2, rc, out)
    assert.truthy(out:find("webhook /convert/gizmos.example.com is already declared in", 1, true), out)
    out, rc = manifest({ ["c.lua"] = HEAD .. [[
return luna.controller {
  name = "gizmo", watch = { "example.com/v1/Gizmo" }, reconcile = function() end,
  webhooks = { luna.converter { group = "example.com", kind = "Gizmo", plural = "gizmoes", hub = "v2",
                                versions = { v1 = { to_hub = print, from_hub = print } } } },
}
]] })
    assert.equal(0, rc, out)
    assert.truthy(out:find('name: "gizmoes.example.com"', 1, true), out)
    assert.truthy(out:find("converter hub v2; versions v2, v1", 1, true), out)
  end)

  it("patch a live CRD with kubectl patch --type merge", function()
    local dir, work = helpers.tmpdir(), helpers.tmpdir()
    helpers.write_file(dir .. "/c.lua", converter_file())
    local proc = helpers.spawn({ helpers.luna, "run", "--dev-server", dir })
    finally(function() proc:stop() end)
    local _, kubeconfig = proc:expect("dev server listening url=%S+ kubeconfig=(%S+)", 20)
    local _, addr = proc:expect("webhook server listening address=(%S+)", 20)
    local function kubectl(args)
      return helpers.run(("env -u LD_PRELOAD kubectl --kubeconfig %s %s 2>&1"):format(kubeconfig, args))
    end
    helpers.write_file(work .. "/crd.yaml", CRD)
    local out = kubectl("create -f " .. work .. "/crd.yaml")
    assert.truthy(out:find("gizmos.example.com created", 1, true), out)
    local rc
    out, rc = helpers.run(("%s webhooks manifest --only conversion --url https://%s %s > %s/conv.yaml")
      :format(helpers.luna, addr, dir, work))
    assert.equal(0, rc, out)
    out = kubectl("patch crd gizmos.example.com --type merge --patch-file " .. work .. "/conv.yaml")
    assert.truthy(out:find("gizmos.example.com patched", 1, true), out)
    local text = kubectl("get crd gizmos.example.com -o json")
    local crd = json.decode(text)
    assert.is_table(crd, text)
    local conv = crd.spec.conversion
    assert.equal("Webhook", conv.strategy)
    assert.same({ "v1" }, conv.webhook.conversionReviewVersions)
    assert.equal("https://" .. addr .. "/convert/gizmos.example.com", conv.webhook.clientConfig.url)
    -- the rest of the CRD is as it was
    assert.equal(2, #crd.spec.versions)
    assert.equal("Gizmo", crd.spec.names.kind)

    -- the same document, server-side applied, moves the URL (taking the
    -- field from kubectl patch's manager: --force-conflicts)
    out, rc = helpers.run(("%s webhooks manifest --only conversion --url https://127.0.0.1:1 %s > %s/conv2.yaml")
      :format(helpers.luna, dir, work))
    assert.equal(0, rc, out)
    out = kubectl("apply --server-side --force-conflicts --field-manager luna-webhooks -f " .. work .. "/conv2.yaml")
    assert.truthy(out:find("gizmos.example.com serverside-applied", 1, true), out)
    text = kubectl("get crd gizmos.example.com -o json")
    crd = json.decode(text)
    assert.is_table(crd, text)
    assert.equal("https://127.0.0.1:1/convert/gizmos.example.com", crd.spec.conversion.webhook.clientConfig.url)
    assert.equal(2, #crd.spec.versions)
  end)
end)
