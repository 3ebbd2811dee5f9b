-- The transport fields of a kubeconfig cluster (server, proxy-url,
-- tls-server-name) are checked when loaded: a bad one fails the load with
-- an error naming the file and the field, and never echoes a URL, which may
-- hold a password.  Applying them is shown end to end in
-- spec/12-isolation/21-secrets_transport_spec.lua.
local core = require("luna.core")
local S = require("03-kubeconfig.support")

local function config(cluster_yaml)
  return S.simple("    token: " .. S.TOKEN, cluster_yaml)
end

local function load(cluster_yaml)
  local dir = S.tree({ config = config(cluster_yaml) })
  return dir .. "/config", core.kubeconfig.load({ path = dir .. "/config" })
end

-- The load must fail with "PATH: clusters[0].cluster.FIELD: ..." and carry
-- none of the given strings.
local function refused(cluster_yaml, field, hidden)
  local dir = S.tree({ config = config(cluster_yaml) })
  local msg, err = S.load_error({ path = dir .. "/config" })
  assert.matches("^" .. S.lit(dir .. "/config: clusters[0].cluster." .. field .. ": "), err.message)
  for _, h in ipairs(hidden or {}) do
    assert(not msg:find(h, 1, true), ("%q in: %s"):format(h, msg))
  end
  return err.message
end

describe("kubeconfig proxy-url", function()
  it("loads http, https and socks5 proxies, userinfo included", function()
    for _, url in ipairs({ "http://127.0.0.1:3128", "https://proxy.example:8443",
                           "socks5://u:p@127.0.0.1:1080" }) do
      local _, cfg, err = load("    proxy-url: " .. url)
      assert.is_nil(err)
      assert.equal(url, cfg.proxy_url)
    end
  end)

  it("refuses another scheme, naming the field and not the URL", function()
    local msg = refused("    proxy-url: ftp://puser:ppass-SPEC@proxy.example:21", "proxy-url",
                        { "ppass-SPEC", "puser", "ftp://" })
    assert.matches("unsupported scheme", msg)
  end)

  it("refuses what is not a URL", function()
    refused("    proxy-url: 127.0.0.1:3128", "proxy-url")
    refused("    proxy-url: 'http://u:p w-SPEC@h:1'", "proxy-url", { "w-SPEC" })
  end)
end)

describe("kubeconfig tls-server-name", function()
  it("loads a DNS name or an IP address", function()
    for _, name in ipairs({ "kubernetes.default.svc", "10.0.0.1", "::1" }) do
      local _, cfg, err = load("    tls-server-name: '" .. name .. "'")
      assert.is_nil(err)
      assert.equal(name, cfg.tls_server_name)
    end
  end)

  it("refuses a port, a scheme or a path", function()
    for _, bad in ipairs({ "k.example:443", "https://k.example", "k.example/x", "[::1]" }) do
      local msg = refused("    tls-server-name: '" .. bad .. "'", "tls-server-name")
      assert.matches("not a host name or IP address", msg)
    end
  end)
end)

describe("kubeconfig server with userinfo", function()
  it("refuses a server URL that does not parse, without echoing it", function()
    local dir = S.tree({ config = S.simple("    token: " .. S.TOKEN):gsub(
      "server: https://k.example:6443", "server: https://admin:hun/ter2-SPEC@k.example") })
    local msg, err = S.load_error({ path = dir .. "/config" })
    assert.matches("clusters%[0%]%.cluster%.server: not a valid URL", err.message)
    assert.is_nil(msg:find("ter2-SPEC", 1, true))
    assert.is_nil(msg:find("admin", 1, true))
  end)

  it("keeps the userinfo out of the config's description", function()
    local dir = S.tree({ config = S.simple("    token: " .. S.TOKEN):gsub(
      "server: https://k.example:6443", "server: https://admin:hunter2-SPEC@k.example:6443") })
    local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
    local text = tostring(cfg)
    assert.is_nil(text:find("hunter2", 1, true), text)
    assert.is_nil(text:find("admin", 1, true), text)
    assert.matches("server https://k%.example:6443", text)
  end)
end)
