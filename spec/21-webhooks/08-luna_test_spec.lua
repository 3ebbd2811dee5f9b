-- `luna test` calls webhooks (docs/webhooks.md, "Testing webhooks"):
-- env:admit runs one AdmissionReview through the runtime's own webhook
-- server (a request table, an AdmissionReview, or YAML/JSON files) and
-- answers allowed, code, message, warnings, the patch as RFC 6902 ops and
-- the patched object; assert.allowed/denied/patched name the difference;
-- testing.start{webhooks = true} registers the webhooks with the API
-- server, whose writes then go through them.
local helpers = require("helpers")

local function tree(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  return dir
end

local HOOKS = [[
local luna = require "luna"
local RULES = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "configmaps" },
                  operations = { "CREATE", "UPDATE" } } }
local ONLY = { match_labels = { spec = "kit" } }
return luna.webhooks {
  luna.webhook { name = "cm.validate.example.com", rules = RULES, object_selector = ONLY,
    validate = function(req)
      if req.object.data and req.object.data.bad then
        return { allowed = false, message = "bad data in " .. req.name, code = 422, reason = "Invalid" }
      end
      local seen = ("%s %s %s dry=%s user=%s res=%s old=%s"):format(req.operation, req.namespace,
        req.kind.kind, tostring(req.dry_run), req.user_info.username, req.resource.resource,
        tostring(req.old_object and req.old_object.data and req.old_object.data.v))
      return { warnings = { seen } }
    end },
  luna.webhook { name = "cm.mutate.example.com", rules = RULES, object_selector = ONLY,
    mutate = function(req, obj)
      if not obj then return end -- DELETE
      obj.data = obj.data or {}
      obj.data["set.by"] = "luna"
      obj.data.drop = nil
      obj.metadata.labels["example.com/added"] = "yes"
    end },
  luna.webhook { name = "cm.broken.example.com", rules = RULES, failure_policy = "Fail",
    object_selector = { match_labels = { spec = "broken" } },
    validate = function(req) error("boom") end },
}
]]

local TEST = [[
local testing = require "luna.testing"
local function cm(name, data, labels)
  return { apiVersion = "v1", kind = "ConfigMap",
           metadata = { name = name, namespace = "default", labels = labels or { spec = "kit" } },
           data = data }
end
local function failure(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "the assertion should have failed")
  return tostring(err)
end

describe("admit", function()
  local env
  before_each(function() env = testing.start{} end)

  it("answers a validating webhook's request table", function()
    local res = env:admit("cm.validate.example.com", { object = cm("a", { v = "1" }) })
    assert.allowed(res)
    assert.same({ "CREATE default ConfigMap dry=false user=luna-test res=configmaps old=nil" }, res.warnings)
    res = env:admit("cm.validate.example.com", { operation = "UPDATE", object = cm("a", { v = "2" }),
      old_object = cm("a", { v = "1" }), dry_run = true, user_info = { username = "bob" } })
    assert.same({ "UPDATE default ConfigMap dry=true user=bob res=configmaps old=1" }, res.warnings)
    res = env:admit("cm.validate.example.com", { object = cm("b", { bad = "1" }) })
    assert.denied(res, "bad data in b")
    assert.equal(422, res.code)
    assert.equal("Invalid", res.reason)
    assert.equal("CREATE", res.operation)
  end)

  it("gives a mutating webhook's patch as operations and the patched object", function()
    local res = env:admit("cm.mutate.example.com", { object = cm("a", { keep = "k", drop = "d" }) })
    assert.allowed(res)
    assert.patched({ { op = "remove", path = "/data/drop" },
                     { op = "add", path = "/data/set.by", value = "luna" },
                     { op = "add", path = "/metadata/labels/example.com~1added", value = "yes" } }, res)
    assert.same({ keep = "k", ["set.by"] = "luna" }, res.object.data)
    assert.equal("yes", res.object.metadata.labels["example.com/added"])
    -- by path too
    assert.equal(3, #env:admit("/mutate/cm.mutate.example.com", { object = cm("a", { drop = "d" }) }).patch)
  end)

  it("takes YAML and JSON files, and an AdmissionReview", function()
    testing.write_file(testing._dir .. "/new.yaml",
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: f, namespace: default, labels: {spec: kit}}\ndata: {bad: x}\n")
    testing.write_file(testing._dir .. "/old.json",
      '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"f","namespace":"default"},"data":{"v":"0"}}')
    assert.denied(env:admit("cm.validate.example.com", "new.yaml"), "bad data in f")
    assert.denied(env:admit("cm.validate.example.com", { operation = "UPDATE", object = "new.yaml", old_object = "old.json" }),
      "bad data in f")
    testing.write_file(testing._dir .. "/review.yaml", [=[
apiVersion: admission.k8s.io/v1
kind: AdmissionReview
request:
  uid: "1234"
  operation: DELETE
  name: gone
  namespace: default
  kind: {group: "", version: v1, kind: ConfigMap}
  resource: {group: "", version: v1, resource: configmaps}
  userInfo: {username: carol}
  oldObject: {apiVersion: v1, kind: ConfigMap, metadata: {name: gone, namespace: default}}
]=])
    local res = env:admit("cm.mutate.example.com", "review.yaml")
    assert.allowed(res)
    assert.equal("1234", res.uid)
    assert.equal("DELETE", res.operation)
    assert.patched({}, res)
  end)

  it("answers a failing webhook by its failure policy", function()
    local res = env:admit("cm.broken.example.com", { object = cm("a", nil, { spec = "broken" }) })
    assert.denied(res, "webhook cm.broken.example.com failed (failurePolicy Fail)")
    assert.equal(500, res.code)
  end)

  it("names what differs when an assertion fails", function()
    local denied = env:admit("cm.validate.example.com", { object = cm("b", { bad = "1" }) })
    local allowed = env:admit("cm.validate.example.com", { object = cm("a") })
    local mutated = env:admit("cm.mutate.example.com", { object = cm("a", { drop = "d" }) })
    assert.matches("webhook cm.validate.example.com on CREATE default/b: expected allowed, was denied %(code 422%): bad data in b",
      failure(function() assert.allowed(denied) end))
    assert.matches("on CREATE default/a: expected denied, was allowed", failure(function() assert.denied(allowed) end))
    assert.matches('denied with message "bad data in b", expected it to contain "other"',
      failure(function() assert.denied(denied, "other") end))
    local msg = failure(function() assert.patched({}, mutated) end)
    assert.matches("the patch differs\nexpected:\nsent:\n", msg)
    assert.matches('"op":"remove"', msg)
    assert.matches('  .data.set.by: want "x", have "luna"',
      failure(function() assert.same({ data = { ["set.by"] = "x" } }, { data = mutated.object.data }) end))
  end)

  it("refuses bad requests with a clear error", function()
    assert.matches('admit: unknown request field "objekt"',
      failure(function() env:admit("cm.validate.example.com", { objekt = cm("a") }) end))
    assert.matches("admit: no webhook nope.example.com is loaded %(loaded: cm.broken.example.com, cm.mutate.example.com, cm.validate.example.com%)",
      failure(function() env:admit("nope.example.com", { object = cm("a") }) end))
    assert.matches("admit: the request needs object",
      failure(function() env:admit("cm.validate.example.com", { operation = "CREATE" }) end))
    assert.matches("object: cannot read",
      failure(function() env:admit("cm.validate.example.com", { object = "missing.yaml" }) end))
    assert.matches("HTTP 400: AdmissionReview has no request.uid",
      failure(function() env:admit("cm.validate.example.com",
        { apiVersion = "admission.k8s.io/v1", kind = "AdmissionReview", request = { operation = "CREATE" } }) end))
  end)
end)

describe("through the API server", function()
  it("writes go through the registered webhooks", function()
    local env = testing.start{ webhooks = true }
    local stored = env:create(cm("fine", { keep = "k", drop = "d" }))
    assert.same({ keep = "k", ["set.by"] = "luna" }, stored.data)
    assert.equal("yes", stored.metadata.labels["example.com/added"])
    assert.same({ "CREATE default ConfigMap dry=false user=admin res=configmaps old=nil" }, env.last_warnings)
    assert.has_error(function() env:create(cm("nope", { bad = "1" })) end,
      'admission webhook "cm.validate.example.com" denied the request: bad data in nope')
    assert.is_nil(env:get("v1/ConfigMap", "default", "nope"))
    -- outside the selector: untouched
    assert.is_nil(env:create(cm("other", { drop = "d" }, { spec = "no" })).data["set.by"])
  end)
end)
]]

describe("luna test with webhooks", function()
  it("calls them directly and through the dev server", function()
    local dir = tree({ ["hooks.lua"] = HOOKS, ["hooks_test.lua"] = TEST })
    local out, rc = helpers.run(helpers.luna .. " test " .. dir)
    assert.truthy(out:find("7 passed, 0 failed, 0 pending", 1, true), out)
    assert.equal(0, rc, out)
  end)

  it("says why when start{webhooks = true} has none to register", function()
    local dir = tree({
      ["c.lua"] = 'local luna = require "luna"\nreturn luna.controller{ name = "c", watch = "v1/ConfigMap", reconcile = function() end }\n',
      ["c_test.lua"] = 'local testing = require "luna.testing"\ndescribe("x", function() it("y", function() testing.start{ webhooks = true } end) end)\n',
    })
    local out = helpers.run(helpers.luna .. " test " .. dir)
    assert.truthy(out:find("the webhook server does not serve (no file declares a webhook", 1, true), out)
    assert.truthy(out:find("0 passed, 1 failed", 1, true), out)
  end)
end)
