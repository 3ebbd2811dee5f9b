-- Rotating bearer tokens: kubeconfig tokenFile and the in-cluster service
-- account (token re-read when the file changes).
local helpers = require("helpers")
local core = require("luna.core")
local S = require("03-kubeconfig.support")

local function token_of(cfg, now)
  local creds, err = cfg:credentials(now)
  assert(creds, err and tostring(err))
  return creds.token, creds
end

describe("tokenFile", function()
  it("reads the token (trimmed) and re-reads it after the file is rewritten", function()
    local dir = S.tree({ config = S.simple("    tokenFile: token"), token = "first-token\n" })
    local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
    assert.equal("token-file", cfg.auth)
    assert.equal("first-token", token_of(cfg))
    assert.equal("first-token", token_of(cfg))
    helpers.write_file(dir .. "/token", "  second-token-rotated  \n")
    assert.equal("second-token-rotated", token_of(cfg))
  end)

  it("sees a same-length token swapped in by rename, as kubelet rotates", function()
    local dir = S.tree({ config = S.simple("    tokenFile: token"), token = "AAAAAAAA" })
    local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
    assert.equal("AAAAAAAA", token_of(cfg))
    helpers.write_file(dir .. "/token.new", "BBBBBBBB")
    assert(os.rename(dir .. "/token.new", dir .. "/token"))
    assert.equal("BBBBBBBB", token_of(cfg))
  end)

  it("keeps the last good token while the file is gone, and picks up its return", function()
    local dir = S.tree({ config = S.simple("    tokenFile: token"), token = "kept" })
    local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
    local now = os.time()
    assert.equal("kept", token_of(cfg, now))
    os.remove(dir .. "/token")
    assert.equal("kept", token_of(cfg, now))
    helpers.write_file(dir .. "/token", "back")
    -- a failed re-read is retried a second later, not on every call
    assert.equal("kept", token_of(cfg, now))
    assert.equal("back", token_of(cfg, now + 2))
  end)

  it("prefers the file over a static token and falls back to the token when the file is unreadable", function()
    local dir = S.tree({ config = S.simple("    token: static\n    tokenFile: token"), token = "from-file" })
    local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
    assert.equal("from-file", token_of(cfg))
    os.remove(dir .. "/token")
    local fresh = assert(core.kubeconfig.load({ path = dir .. "/config" }))
    assert.equal("static", token_of(fresh))
  end)

  it("moves to a new generation on invalidate, once per generation", function()
    local dir = S.tree({ config = S.simple("    tokenFile: token"), token = "t" })
    local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
    local _, c1 = token_of(cfg)
    assert.equal(1, c1.generation)
    cfg:invalidate(1)
    local _, c2 = token_of(cfg)
    assert.equal(2, c2.generation)
    cfg:invalidate(1)                       -- a late 401 from the old token
    assert.equal(2, select(2, token_of(cfg)).generation)
  end)

  it("gives static tokens a fixed generation that invalidate does not change", function()
    local cfg = assert(core.kubeconfig.load({ path = S.tree({ config = S.simple("    token: t") }) .. "/config" }))
    assert.equal(1, select(2, token_of(cfg)).generation)
    cfg:invalidate(1)
    assert.equal(1, select(2, token_of(cfg)).generation)
  end)
end)

describe("in-cluster", function()
  local function sa(files)
    local f = { token = "sa-token-1\n", ["ca.crt"] = S.pki("ca").cert, namespace = "kube-app\n" }
    for k, v in pairs(files or {}) do f[k] = v or nil end
    return S.tree(f)
  end
  local function env(extra)
    local e = { HOME = helpers.tmpdir(), KUBERNETES_SERVICE_HOST = "10.96.0.1", KUBERNETES_SERVICE_PORT = "443" }
    for k, v in pairs(extra or {}) do e[k] = v end
    return e
  end

  it("builds the config from the service account and KUBERNETES_SERVICE_*", function()
    local dir = sa()
    local cfg = assert(core.kubeconfig.load({ env = env(), serviceaccount_dir = dir }))
    assert.equal("in-cluster", cfg.source)
    assert.equal("https://10.96.0.1:443", cfg.server)
    assert.equal(dir .. "/ca.crt", cfg.ca_file)
    assert.equal("kube-app", cfg.namespace)
    assert.equal("token-file", cfg.auth)
    assert.is_nil(cfg.context)
    assert.is_false(cfg.insecure)
    assert.equal("sa-token-1", token_of(cfg))
  end)

  it("takes the directory from LUNA_SERVICEACCOUNT_DIR", function()
    local dir = sa()
    local cfg = assert(core.kubeconfig.load({ env = env({ LUNA_SERVICEACCOUNT_DIR = dir }) }))
    assert.equal(dir .. "/ca.crt", cfg.ca_file)
  end)

  it("brackets an IPv6 service host", function()
    local cfg = assert(core.kubeconfig.load({
      env = env({ KUBERNETES_SERVICE_HOST = "fd00:10:96::1", KUBERNETES_SERVICE_PORT = "6443" }),
      serviceaccount_dir = sa() }))
    assert.equal("https://[fd00:10:96::1]:6443", cfg.server)
  end)

  it("re-reads the rotated service-account token", function()
    local dir = sa()
    local cfg = assert(core.kubeconfig.load({ env = env(), serviceaccount_dir = dir }))
    assert.equal("sa-token-1", token_of(cfg))
    helpers.write_file(dir .. "/token.tmp", "sa-token-2-longer")
    assert(os.rename(dir .. "/token.tmp", dir .. "/token"))
    assert.equal("sa-token-2-longer", token_of(cfg))
  end)

  it("uses POD_NAMESPACE over the namespace file, and default without either", function()
    local cfg = assert(core.kubeconfig.load({ env = env({ POD_NAMESPACE = "from-env" }), serviceaccount_dir = sa() }))
    assert.equal("from-env", cfg.namespace)
    cfg = assert(core.kubeconfig.load({ env = env(), serviceaccount_dir = sa({ namespace = false }) }))
    assert.equal("default", cfg.namespace)
  end)

  it("goes on without a CA when ca.crt is missing or not a certificate (client-go)", function()
    local cfg = assert(core.kubeconfig.load({ env = env(), serviceaccount_dir = sa({ ["ca.crt"] = false }) }))
    assert.is_nil(cfg.ca_file)
    cfg = assert(core.kubeconfig.load({ env = env(), serviceaccount_dir = sa({ ["ca.crt"] = "garbage" }) }))
    assert.is_nil(cfg.ca_file)
  end)

  it("fails without a token", function()
    local dir = sa({ token = false })
    local msg = S.load_error({ env = env(), serviceaccount_dir = dir })
    assert.matches("in%-cluster: " .. S.lit(dir) .. "/token: cannot read token file: No such file", msg)
  end)

  it("is not used when ~/.kube/config exists", function()
    local home = S.tree({ [".kube/config"] = S.simple("    token: x") })
    local cfg = assert(core.kubeconfig.load({ env = env({ HOME = home }), serviceaccount_dir = sa() }))
    assert.equal(home .. "/.kube/config", cfg.source)
  end)

  it("rejects an explicit context (there is no kubeconfig to take it from)", function()
    local msg = S.load_error({ context = "prod", env = env(), serviceaccount_dir = sa() })
    assert.matches('in%-cluster: contexts: context "prod" not found', msg)
  end)

  it("explains that no configuration was found outside a pod", function()
    local home = helpers.tmpdir()
    local msg = S.load_error({ env = { HOME = home, KUBERNETES_SERVICE_HOST = "10.0.0.1" } })
    assert.matches("no configuration: " .. S.lit(home) .. "/%.kube/config does not exist, KUBECONFIG " ..
                   "and %-%-kubeconfig are not set, and this is not a pod", msg)
  end)
end)
