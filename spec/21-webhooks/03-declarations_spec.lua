-- Webhook declarations are checked when a file loads: a bad value is a
-- load error naming the field (at the line that declares it), and what is
-- left out gets Kubernetes' default, as `luna webhooks manifest` prints it
-- in the ValidatingWebhookConfiguration and MutatingWebhookConfiguration.
local helpers = require("helpers")

local HEAD = [[
local luna = require "luna"
local RULES = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "configmaps" },
                  operations = { "CREATE" } } }
]]

local function manifest(files, flags)
  local dir = helpers.tmpdir()
  for name, text in pairs(files) do helpers.write_file(dir .. "/" .. name, text) end
  local out, rc = helpers.run(("%s webhooks manifest %s %s 2>&1"):format(helpers.luna, flags or "", dir))
  return out, rc, dir
end

local function webhook_file(fields)
  return HEAD .. ([[
return luna.webhooks {
  luna.webhook {
    name = "cm.check.example.com",
    rules = RULES,
    validate = function() end,
%s
  },
}
]]):format(fields)
end

describe("webhook declarations", function()
  it("fill in Kubernetes' defaults", function()
    local out, rc = manifest({ ["w.lua"] = webhook_file("") })
    assert.equal(0, rc, out)
    for _, line in ipairs({
      "kind: ValidatingWebhookConfiguration", '- name: "cm.check.example.com"',
      'admissionReviewVersions: ["v1"]', 'name: "luna-webhooks"', 'namespace: "luna"',
      'path: "/validate/cm.check.example.com"', "port: 443", 'scope: "*"',
      "namespaceSelector: {}", "objectSelector: {}", "failurePolicy: Fail",
      "matchPolicy: Equivalent", "sideEffects: None", "timeoutSeconds: 10" }) do
      assert.truthy(out:find(line, 1, true), line .. " in\n" .. out)
    end
    assert.falsy(out:find("MutatingWebhookConfiguration", 1, true))
  end)

  it("carry every field a file sets, mutating ones with their reinvocation policy", function()
    local out, rc = manifest({ ["a.lua"] = HEAD .. [[
return luna.controller {
  name = "quiet",
  watch = { "v1/ConfigMap" },
  reconcile = function() end,
  webhooks = {
    luna.webhook {
      name = "cm.default.example.com",
      rules = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "configmaps" },
                  operations = { "CREATE", "UPDATE" }, scope = "Namespaced" } },
      namespace_selector = { match_labels = { ["example.com/webhooks"] = "on" } },
      object_selector = { match_expressions = { { key = "skip", operator = "DoesNotExist" },
                                                { key = "tier", operator = "In", values = { "a", "b" } } } },
      failure_policy = "Ignore", side_effects = "NoneOnDryRun", timeout_seconds = 3,
      match_policy = "Exact", reinvocation_policy = "IfNeeded",
      mutate = function() end,
    },
  },
}
]] }, "--service-name hooks --service-namespace ops --service-port 8443 --name widgets")
    assert.equal(0, rc, out)
    for _, line in ipairs({
      "kind: MutatingWebhookConfiguration", '  name: "widgets"', 'name: "hooks"',
      'namespace: "ops"', "port: 8443", 'path: "/mutate/cm.default.example.com"',
      'operations: ["CREATE", "UPDATE"]', 'scope: "Namespaced"',
      '"example.com/webhooks": "on"', '- key: "skip"', "operator: DoesNotExist",
      'values: ["a", "b"]', "failurePolicy: Ignore", "sideEffects: NoneOnDryRun",
      "timeoutSeconds: 3", "matchPolicy: Exact", "reinvocationPolicy: IfNeeded" }) do
      assert.truthy(out:find(line, 1, true), line .. " in\n" .. out)
    end
    assert.falsy(out:find("ValidatingWebhookConfiguration", 1, true))
  end)

  it("point at a URL when asked", function()
    local out, rc = manifest({ ["w.lua"] = webhook_file("") }, "--url https://127.0.0.1:9443")
    assert.equal(0, rc, out)
    assert.truthy(out:find('url: "https://127.0.0.1:9443/validate/cm.check.example.com"', 1, true), out)
    assert.falsy(out:find("service:", 1, true))
  end)

  local bad = {
    { 'failure_policy = "Sometimes",', "webhook field 'failure_policy' must be \"Fail\" or \"Ignore\"" },
    { 'side_effects = "Some",', "webhook field 'side_effects' must be \"None\" or \"NoneOnDryRun\"" },
    { "timeout_seconds = 31,", "webhook field 'timeout_seconds' must be an integer from 1 to 30" },
    { 'match_policy = "Loose",', "webhook field 'match_policy'" },
    { 'reinvocation_policy = "IfNeeded",', "'reinvocation_policy' is for mutating webhooks only" },
    { "colour = 1,", "unknown key 'colour'" },
    { 'namespace_selector = { match_expressions = { { key = "k", operator = "In" } } },',
      "namespace_selector.match_expressions[1].values" },
    { 'object_selector = { match_labels = { ["a b"] = "x" } },', "object_selector.match_labels.a b" },
  }
  for _, case in ipairs(bad) do
    it("refuse " .. case[1], function()
      local out, rc, dir = manifest({ ["w.lua"] = webhook_file("    " .. case[1]) })
      assert.equal(2, rc, out)
      assert.truthy(out:find(case[2], 1, true), out)
      assert.truthy(out:find(dir .. "/w.lua:", 1, true), out)
    end)
  end

  it("refuse bad rules, names and shapes", function()
    for _, case in ipairs({
      { HEAD .. 'return luna.webhooks { luna.webhook { name = "short.name", rules = RULES, validate = function() end } }',
        "at least three segments" },
      { HEAD .. 'return luna.webhooks { luna.webhook { name = "a.b.c", rules = RULES } }',
        "needs exactly one of 'validate' and 'mutate'" },
      { HEAD .. 'return luna.webhooks { luna.webhook { name = "a.b.c", validate = function() end } }',
        "needs 'rules'" },
      { HEAD .. 'return luna.webhooks { luna.webhook { name = "a.b.c", validate = function() end, '
          .. 'rules = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "x" }, operations = { "PATCH" } } } } }',
        "rules[1].operations[1]" },
      { HEAD .. 'return luna.webhooks { luna.webhook { name = "a.b.c", validate = function() end, '
          .. 'rules = { { api_groups = { "" }, resources = { "x" }, operations = { "CREATE" } } } } }',
        "rules[1].api_versions' is required" },
      { HEAD .. 'return luna.webhooks { {} }', "luna.webhooks[1] must be a value of luna.webhook" },
      { HEAD .. 'return luna.controller { name = "c", watch = { "v1/ConfigMap" }, reconcile = function() end, webhooks = { 1 } }',
        "controller field 'webhooks'[1] must be a value of luna.webhook" },
    }) do
      local out, rc = manifest({ ["w.lua"] = case[1] })
      assert.equal(2, rc, out)
      assert.truthy(out:find(case[2], 1, true), case[2] .. " in " .. out)
    end
  end)

  it("refuse a path two files declare", function()
    local out, rc = manifest({ ["a.lua"] = webhook_file(""), ["b.lua"] = webhook_file("") })
    assert.equal(2, rc, out)
    assert.truthy(out:find("webhook /validate/cm.check.example.com is already declared in", 1, true), out)
  end)

  -- luna run loads each file into a state of its own: the reload, not
  -- the loader, sees the two files
  it("refuse, in luna run, a path two files declare", function()
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/a.lua", webhook_file(""))
    helpers.write_file(dir .. "/b.lua", webhook_file(""))
    local out, rc = helpers.run(("timeout 60 %s run --dev-server %s 2>&1"):format(helpers.luna, dir))
    assert.not_equal(0, rc, out)
    assert.truthy(out:find("b.lua: webhook /validate/cm.check.example.com is already declared in " ..
      dir .. "/a.lua", 1, true), out)
  end)

  it("say so when a directory declares none", function()
    local out, rc = manifest({ ["c.lua"] = HEAD .. 'return luna.controller { name = "c", watch = { "v1/ConfigMap" }, reconcile = function() end }' })
    assert.equal(1, rc, out)
    assert.truthy(out:find("declares no webhook", 1, true), out)
  end)
end)
