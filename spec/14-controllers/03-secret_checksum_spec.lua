-- controllers/secret-checksum.lua end to end: watches + a custom index.
local luna_env = require("support.luna_env")
local core = require("luna.core")

local function deployment(name, annotations)
  return { apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = name, annotations = annotations },
    spec = { replicas = 1, selector = { matchLabels = { app = name } },
      template = { metadata = { labels = { app = name } },
        spec = { containers = { { name = "c", image = "busybox" } } } } } }
end

describe("secret-checksum controller", function()
  local env
  before_each(function()
    env = luna_env.start{ controllers = { "controllers/secret-checksum.lua" } }
  end)
  after_each(function() env:stop() end)

  it("stamps the secret's checksum on dependent Deployments and rolls them on change", function()
    local srv = env.srv
    local spath = srv:ns_path("secrets", "creds")
    assert.equal(201, (srv:request("POST", srv:ns_path("secrets"), { apiVersion = "v1", kind = "Secret",
      metadata = { name = "creds" }, data = { user = "YWRtaW4=", pass = "czNjcjN0" } })))
    assert.equal(201, (srv:request("POST", srv:ns_path("deployments", nil, "apps/v1"),
      deployment("app", { ["luna.dev/secret-checksum"] = "creds" }))))
    assert.equal(201, (srv:request("POST", srv:ns_path("deployments", nil, "apps/v1"),
      deployment("bystander"))))

    local function sum_of(name)
      local d = env:get(srv:ns_path("deployments", name, "apps/v1"))
      local a = d and d.spec.template.metadata.annotations
      return a and a["luna.dev/secret-sha256"]
    end
    local expected = core.crypto.sha256("pass=czNjcjN0\nuser=YWRtaW4=")
    env:wait(function() return sum_of("app") == expected end, 15, "checksum")

    -- changing the secret reaches the deployment through the index
    local secret = env:get(spath)
    secret.data.pass = "bmV3"
    assert.equal(200, (srv:request("PUT", spath, secret)))
    local changed = core.crypto.sha256("pass=bmV3\nuser=YWRtaW4=")
    env:wait(function() return sum_of("app") == changed end, 15, "new checksum")
    assert.is_nil(sum_of("bystander"))

    -- a deleted secret is reported as missing
    srv:request("DELETE", spath)
    env:wait(function() return sum_of("app") == "missing" end, 15, "missing secret")
  end)

  it("computes sha256 like everyone else", function()
    assert.equal("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", core.crypto.sha256(""))
    assert.equal("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", core.crypto.sha256("abc"))
  end)
end)
