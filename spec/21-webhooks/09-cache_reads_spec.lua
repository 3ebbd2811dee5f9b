-- Webhook functions read the informer caches of their file's controller
-- (docs/webhooks.md, "Reading the caches"): luna.cache(kind):get/list/
-- by_index, never yielding; not another file's controller's caches, none
-- in a file of webhooks only, and API calls still raise and answer by
-- failure_policy.  Run through `luna test` (env:admit, and the dev server
-- with start{webhooks = true}).
local helpers = require("helpers")

local function tree(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  return dir
end

-- guard.lua: a controller that watches ConfigMaps (indexed by a label)
-- and refuses a Widget whose name a cached ConfigMap has.
local GUARD = [[
local luna = require "luna"
local RULES = { { api_groups = { "example.com" }, api_versions = { "v1" }, resources = { "widgets" },
                  operations = { "CREATE", "UPDATE" } } }
return luna.controller {
  name = "guard",
  watch = "v1/ConfigMap",
  indexes = { by_team = function(cm) return cm.metadata.labels and cm.metadata.labels.team end },
  reconcile = function() end,
  webhooks = {
    luna.webhook { name = "widgets.names.example.com", rules = RULES,
      validate = function(req)
        local name = req.object.metadata.name
        if luna.cache("v1/ConfigMap"):get(req.namespace, name) then
          return false, ("ConfigMap %s/%s has that name"):format(req.namespace, name)
        end
        local team = req.object.metadata.labels and req.object.metadata.labels.team
        if not team then return end
        return { warnings = { ("team %s: %d listed, %d indexed"):format(tostring(team),
          #luna.cache("v1/ConfigMap"):list({ namespace = req.namespace, labels = { team = team } }),
          #luna.cache("v1/ConfigMap"):by_index("by_team", team)) } }
      end },
    luna.webhook { name = "widgets.api.example.com", rules = RULES, failure_policy = "Ignore",
      object_selector = { match_labels = { try = "api" } },
      validate = function(req) luna.get("v1/ConfigMap", "default", "x") end },
    luna.webhook { name = "widgets.secrets.example.com", rules = RULES,
      object_selector = { match_labels = { try = "secret" } },
      validate = function(req) luna.cache("v1/Secret"):get("default", "x") end },
  },
}
]]

-- other.lua: another controller, which watches Secrets.
local OTHER = [[
local luna = require "luna"
return luna.controller { name = "other", watch = "v1/Secret", reconcile = function() end }
]]

-- alone.lua: webhooks only.
local ALONE = [[
local luna = require "luna"
return luna.webhooks {
  luna.webhook { name = "widgets.alone.example.com",
    rules = { { api_groups = { "example.com" }, api_versions = { "v1" }, resources = { "widgets" },
                operations = { "CREATE" } } },
    object_selector = { match_labels = { try = "alone" } },
    validate = function(req) luna.cache("v1/ConfigMap"):get("default", "x") end },
}
]]

local TEST = [[
local testing = require "luna.testing"
local CRD = CRD_PATH
local function widget(name, labels)
  return { apiVersion = "example.com/v1", kind = "Widget",
           metadata = { name = name, namespace = "default", labels = labels },
           spec = { image = "nginx:1.27" } }
end
local function cm(name, team)
  return { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name, namespace = "default",
           labels = team and { team = team } or nil } }
end

describe("webhook cache reads", function()
  it("see the controller's cache as it is now", function()
    local env = testing.start{ seed = { CRD }, objects = { cm("taken", "a") } }
    assert.denied(env:admit("widgets.names.example.com", { object = widget("taken") }),
      "ConfigMap default/taken has that name")
    local res = env:admit("widgets.names.example.com", { object = widget("free", { team = "a" }) })
    assert.allowed(res)
    assert.same({ "team a: 1 listed, 1 indexed" }, res.warnings)
    env:create(cm("later", "a"))
    env:wait_idle()
    assert.denied(env:admit("widgets.names.example.com", { object = widget("later") }), "has that name")
    assert.same({ "team a: 2 listed, 2 indexed" },
      env:admit("widgets.names.example.com", { object = widget("free", { team = "a" }) }).warnings)
    env:delete("v1/ConfigMap", "default", "taken")
    env:wait_idle()
    assert.allowed(env:admit("widgets.names.example.com", { object = widget("taken") }))
  end)

  it("refuse a Widget named as a cached ConfigMap through the API server", function()
    local env = testing.start{ seed = { CRD }, webhooks = true }
    env:create(cm("clash"))
    env:wait_idle()
    assert.has_error(function() env:create(widget("clash")) end,
      'admission webhook "widgets.names.example.com" denied the request: ConfigMap default/clash has that name')
    env:create(widget("fine"))
    assert.is_not_nil(env:get("example.com/v1/Widget", "default", "fine"))
  end)

  it("cannot call the API: the failure policy answers", function()
    local env = testing.start{ seed = { CRD } }
    local res = env:admit("widgets.api.example.com", { object = widget("w", { try = "api" }) })
    assert.allowed(res) -- failure_policy Ignore
    assert.matches("webhook widgets.api.example.com failed, ignored %(failurePolicy Ignore%): .*luna.get can only be called inside reconcile",
      res.warnings[1])
  end)

  it("read only their own controller's caches", function()
    local env = testing.start{ seed = { CRD } }
    local res = env:admit("widgets.secrets.example.com", { object = widget("w", { try = "secret" }) })
    assert.denied(res, "controller guard does not watch v1/Secret: add it to watch, owns or watches")
    assert.equal(500, res.code)
  end)

  it("have no caches in a file of webhooks only", function()
    local env = testing.start{ seed = { CRD } }
    local res = env:admit("widgets.alone.example.com", { object = widget("w", { try = "alone" }) })
    assert.denied(res, "luna.cache():get in webhook widgets.alone.example.com: its file declares no controller, so it has no caches")
  end)
end)
]]

describe("webhooks reading the caches", function()
  it("read their controller's informers, and only those", function()
    local crd = helpers.run("pwd"):gsub("%s+$", "") .. "/deploy/crd-widgets.yaml"
    local dir = tree({ ["guard.lua"] = GUARD, ["other.lua"] = OTHER, ["alone.lua"] = ALONE,
                       ["guard_test.lua"] = TEST:gsub("CRD_PATH", ("%q"):format(crd)) })
    local out, rc = helpers.run(helpers.luna .. " test " .. dir)
    assert.truthy(out:find("5 passed, 0 failed, 0 pending", 1, true), out)
    assert.equal(0, rc, out)
  end)
end)
