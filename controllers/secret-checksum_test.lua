-- secret-checksum.lua on the real runtime: `watches` through a custom index.
local testing = require "luna.testing"
local core = require "luna.core"

local function deployment(name, annotations)
  return { apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = name, namespace = "default", annotations = annotations },
    spec = { replicas = 1, selector = { matchLabels = { app = name } },
      template = { metadata = { labels = { app = name } },
        spec = { containers = { { name = "c", image = "busybox" } } } } } }
end

local function secret(data)
  return { apiVersion = "v1", kind = "Secret", metadata = { name = "creds", namespace = "default" }, data = data }
end

describe("secret-checksum", function()
  local env
  before_each(function()
    env = testing.start{ controllers = { "secret-checksum.lua" }, objects = {
      secret{ user = "YWRtaW4=", pass = "czNjcjN0" },
      deployment("app", { ["luna.dev/secret-checksum"] = "creds" }),
      deployment("bystander"),
    } }
  end)

  local function sum_of(name)
    local d = env:get("apps/v1/Deployment", "default", name)
    local a = d and d.spec.template.metadata.annotations
    return a and a["luna.dev/secret-sha256"]
  end

  it("stamps the secret's checksum on the Deployments that name it", function()
    assert.equal(core.crypto.sha256("pass=czNjcjN0\nuser=YWRtaW4="), sum_of("app"))
    assert.is_nil(sum_of("bystander"))
    -- one patch, one Event, nothing for the bystander
    local writes = env:calls{ method = "PATCH" }
    assert.equal(1, #writes)
    assert.equal("/apis/apps/v1/namespaces/default/deployments/app", writes[1].path)
  end)

  it("rolls the Deployment when the secret changes, through the index", function()
    env:calls()
    env:patch("v1/Secret", "default", "creds", { data = { pass = "bmV3" } })
    env:wait_idle()
    assert.equal(core.crypto.sha256("pass=bmV3\nuser=YWRtaW4="), sum_of("app"))
    local rolled = env:calls{ path = "/deployments/" }
    assert.equal(1, #rolled)
    assert.equal("default/app", rolled[1].key)
    local found
    for _, e in ipairs(env:events("default")) do
      if e.reason == "SecretChanged" and e.regarding.name == "app" then found = true end
    end
    assert.is_true(found, "a SecretChanged event")
  end)

  it("reports a deleted secret as missing", function()
    env:delete("v1/Secret", "default", "creds")
    env:wait_idle()
    assert.equal("missing", sum_of("app"))
  end)

  it("does nothing when the checksum is already right", function()
    env:calls()
    env:patch("apps/v1/Deployment", "default", "app", { metadata = { labels = { touched = "yes" } } })
    env:wait_idle()
    assert.same({}, env:calls{ method = "PATCH" })
  end)
end)
