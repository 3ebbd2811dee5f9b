-- core.kubeconfig.load: sources, fields, path resolution, merging, contexts.
local helpers = require("helpers")
local core = require("luna.core")
local S = require("03-kubeconfig.support")

local function load_one(yaml, extra)
  local dir = S.tree({ config = yaml })
  local opts = { path = dir .. "/config" }
  for k, v in pairs(extra or {}) do opts[k] = v end
  local cfg, err = core.kubeconfig.load(opts)
  assert(cfg, err and tostring(err))
  return cfg, dir
end

describe("core.kubeconfig.load", function()
  describe("fields", function()
    it("reads server, context, namespace and a static token", function()
      local cfg = load_one(S.simple("    token: " .. S.TOKEN, nil, "team-a"))
      assert.equal("https://k.example:6443", cfg.server)
      assert.equal("main", cfg.context)
      assert.equal("c", cfg.cluster)
      assert.equal("u", cfg.user)
      assert.equal("team-a", cfg.namespace)
      assert.equal("token", cfg.auth)
      assert.is_false(cfg.insecure)
      assert.is_nil(cfg.ca_file)
      assert.is_nil(cfg.ca_data)
      local creds = assert(cfg:credentials())
      assert.equal(S.TOKEN, creds.token)
      assert.is_nil(creds.username)
      assert.is_nil(creds.client_cert_data)
    end)

    it("defaults the namespace to default", function()
      local cfg = load_one(S.simple("    token: x"))
      assert.equal("default", cfg.namespace)
    end)

    it("names the file it read as the source", function()
      local cfg, dir = load_one(S.simple())
      assert.equal(dir .. "/config", cfg.source)
      assert.matches("auth none", tostring(cfg), 1, true)
    end)

    it("is anonymous when the context names no user", function()
      local cfg = load_one([[
current-context: x
clusters: [{name: c, cluster: {server: "https://a:1"}}]
contexts: [{name: x, context: {cluster: c}}]
]])
      assert.equal("none", cfg.auth)
      assert.is_nil(cfg.user)
      local creds = assert(cfg:credentials())
      assert.is_nil(creds.token)
    end)

    it("resolves a relative certificate-authority against the kubeconfig's directory", function()
      local pem = S.pki("ca").cert
      local dir = S.tree({ ["sub/config"] = S.simple(nil, "    certificate-authority: ca.crt"),
                           ["sub/ca.crt"] = pem,
                           ["up.crt"] = pem })
      local cfg = assert(core.kubeconfig.load({ path = dir .. "/sub/config" }))
      assert.equal(dir .. "/sub/ca.crt", cfg.ca_file)
      assert.is_nil(cfg.ca_data)
      -- "../" is cleaned the way client-go's filepath.Join cleans it
      helpers.write_file(dir .. "/sub/config", S.simple(nil, "    certificate-authority: ./../up.crt"))
      cfg = assert(core.kubeconfig.load({ path = dir .. "/sub/config" }))
      assert.equal(dir .. "/up.crt", cfg.ca_file)
    end)

    it("resolves relative paths against an absolute directory when the kubeconfig path is relative", function()
      local pem = S.pki("ca").cert
      local dir = S.tree({ config = S.simple(nil, "    certificate-authority: ca.crt"), ["ca.crt"] = pem })
      local rel = "../../../../../../../../../../.." .. dir .. "/config"
      local cfg = assert(core.kubeconfig.load({ path = rel }))
      assert.equal(dir .. "/ca.crt", cfg.ca_file)
    end)

    it("keeps an absolute certificate-authority as it is", function()
      local pem = S.pki("ca").cert
      local other = S.tree({ ["ca.pem"] = pem })
      local cfg = load_one(S.simple(nil, "    certificate-authority: " .. other .. "/ca.pem"))
      assert.equal(other .. "/ca.pem", cfg.ca_file)
    end)

    it("decodes certificate-authority-data into PEM bytes", function()
      local pem = S.pki("ca").cert
      local cfg = load_one(S.simple(nil, "    certificate-authority-data: " .. S.b64(pem)))
      assert.equal(pem, cfg.ca_data)
      assert.is_nil(cfg.ca_file)
    end)

    it("accepts base64 folded over several lines", function()
      local pem = S.pki("ca").cert
      local b = S.b64(pem)
      local folded = "|\n      " .. b:sub(1, 64) .. "\n      " .. b:sub(65)
      local cfg = load_one(S.simple(nil, "    certificate-authority-data: " .. folded))
      assert.equal(pem, cfg.ca_data)
    end)

    it("reads client-certificate and client-key files, relative to the kubeconfig", function()
      local p = S.pki("client")
      local dir = S.tree({
        config = S.simple("    client-certificate: pki/tls.crt\n    client-key: pki/tls.key"),
        ["pki/tls.crt"] = p.cert, ["pki/tls.key"] = p.key })
      local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
      assert.equal(dir .. "/pki/tls.crt", cfg.client_cert_file)
      assert.equal(dir .. "/pki/tls.key", cfg.client_key_file)
      assert.is_nil(cfg.client_cert_data)
      assert.equal("client-certificate", cfg.auth)
      local creds = assert(cfg:credentials())
      assert.equal(dir .. "/pki/tls.crt", creds.client_cert_file)
      assert.equal(dir .. "/pki/tls.key", creds.client_key_file)
      assert.is_nil(creds.token)
    end)

    it("decodes client-certificate-data and client-key-data", function()
      local p = S.pki("client")
      local cfg = load_one(S.simple("    client-certificate-data: " .. S.b64(p.cert) ..
                                    "\n    client-key-data: " .. S.b64(p.key)))
      assert.equal(p.cert, cfg.client_cert_data)
      assert.equal(p.key, cfg.client_key_data)
      assert.is_nil(cfg.client_cert_file)
      local creds = assert(cfg:credentials())
      assert.equal(p.cert, creds.client_cert_data)
      assert.equal(p.key, creds.client_key_data)
    end)

    it("allows a client certificate together with a token", function()
      local p = S.pki("client")
      local cfg = load_one(S.simple("    token: t1\n    client-certificate-data: " .. S.b64(p.cert) ..
                                    "\n    client-key-data: " .. S.b64(p.key)))
      assert.equal("token", cfg.auth)
      local creds = assert(cfg:credentials())
      assert.equal("t1", creds.token)
      assert.equal(p.cert, creds.client_cert_data)
    end)

    it("reads insecure-skip-tls-verify, tls-server-name and proxy-url", function()
      local cfg = load_one(S.simple(nil,
        "    insecure-skip-tls-verify: true\n    tls-server-name: api.internal\n" ..
        "    proxy-url: socks5://proxy:1080\n    disable-compression: true"))
      assert.is_true(cfg.insecure)
      assert.equal("api.internal", cfg.tls_server_name)
      assert.equal("socks5://proxy:1080", cfg.proxy_url)
    end)

    it("reads username and password as basic auth", function()
      local cfg = load_one(S.simple("    username: admin\n    password: " .. S.PASSWORD))
      assert.equal("basic", cfg.auth)
      local creds = assert(cfg:credentials())
      assert.equal("admin", creds.username)
      assert.equal(S.PASSWORD, creds.password)
      assert.is_nil(creds.token)
    end)

    it("ignores unknown fields and preferences like kubectl", function()
      local cfg = load_one(S.simple("    token: x\n    something-new: 1", "    future-field: [1, 2]") ..
                           "preferences: {colors: true}\nextensions: []\n")
      assert.equal("https://k.example:6443", cfg.server)
    end)

    it("accepts YAML anchors and flow style", function()
      local cfg = load_one([[
current-context: x
clusters: [{name: c, cluster: &cl {server: "https://anchored:1"}}, {name: d, cluster: *cl}]
contexts: [{name: x, context: {cluster: d, namespace: "ns1"}}]
]])
      assert.equal("https://anchored:1", cfg.server)
      assert.equal("ns1", cfg.namespace)
    end)

    it("treats an empty user as anonymous", function()
      local cfg = load_one(S.simple("    null"))
      assert.equal("none", cfg.auth)
    end)
  end)

  describe("server URL", function()
    local function server(value, cluster_extra, user)
      local cfg = load_one(([[
current-context: x
clusters: [{name: c, cluster: {server: "%s"%s}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: %s}]
]]):format(value, cluster_extra or "", user or "{}"))
      return cfg.server
    end

    it("drops trailing slashes and keeps a path prefix", function()
      assert.equal("https://h:1/k8s/clusters/c-1", server("https://h:1/k8s/clusters/c-1/"))
    end)

    it("defaults the scheme to https when TLS is configured, http otherwise (client-go)", function()
      assert.equal("http://h:6443", server("h:6443"))
      assert.equal("https://h:6443", server("h:6443", ", insecure-skip-tls-verify: true"))
      local p = S.pki("client")
      assert.equal("https://h:6443", server("h:6443", nil,
        ("{client-certificate-data: %s, client-key-data: %s}"):format(S.b64(p.cert), S.b64(p.key))))
    end)

    it("rejects other schemes and an empty host", function()
      local dir = S.tree({ config = [[
current-context: x
clusters: [{name: c, cluster: {server: "ftp://h"}}]
contexts: [{name: x, context: {cluster: c}}]
]] })
      local msg = S.load_error({ path = dir .. "/config" })
      assert.matches("config: clusters%[0%]%.cluster%.server: unsupported URL scheme", msg)
      helpers.write_file(dir .. "/config", [[
current-context: x
clusters: [{name: c, cluster: {server: "https:///api"}}]
contexts: [{name: x, context: {cluster: c}}]
]])
      msg = S.load_error({ path = dir .. "/config" })
      assert.matches("clusters%[0%]%.cluster%.server: URL has no host", msg)
      -- a scheme and nothing after it, with or without more slashes (the
      -- slashes cut from the end used to eat the scheme's: a read before
      -- the string, found by fuzzing, regress_server_scheme_only)
      for _, server in ipairs({ "https://", "http://", "HTTPS:////", "/", "//" }) do
        helpers.write_file(dir .. "/config", ([[
current-context: x
clusters: [{name: c, cluster: {server: "%s"}}]
contexts: [{name: x, context: {cluster: c}}]
]]):format(server))
        msg = S.load_error({ path = dir .. "/config" })
        assert.matches("clusters%[0%]%.cluster%.server: URL has no host", msg, 1, false)
      end
    end)
  end)

  describe("sources", function()
    local A = [[
current-context: ctx-a
clusters:
- name: shared
  cluster: {server: "https://from-a:1", certificate-authority: ca.crt}
contexts:
- name: ctx-a
  context: {cluster: shared, user: shared-user, namespace: ns-a}
- name: both
  context: {cluster: shared, namespace: from-a}
]]
    local B = [[
current-context: ctx-b
clusters:
- name: shared
  cluster: {server: "https://from-b:1"}
- name: only-b
  cluster: {server: "https://only-b:1"}
contexts:
- name: both
  context: {cluster: only-b, namespace: from-b}
- name: ctx-b
  context: {cluster: only-b, namespace: ns-b}
users:
- name: shared-user
  user: {tokenFile: token}
]]
    local C = [[
contexts:
- name: ctx-c
  context: {cluster: only-b, user: shared-user, namespace: ns-c}
users:
- name: shared-user
  user: {token: from-c}
]]
    local function three()
      local pem = S.pki("ca").cert
      return S.tree({ ["a/config"] = A, ["a/ca.crt"] = pem, ["b/config"] = B,
                      ["b/token"] = "token-of-b\n", ["c/config"] = C })
    end

    it("merges KUBECONFIG: first file wins per name, current-context from the first that sets it", function()
      local dir = three()
      local list = dir .. "/a/config:" .. dir .. "/b/config:" .. dir .. "/c/config"
      local cfg = assert(core.kubeconfig.load({ env = { KUBECONFIG = list } }))
      assert.equal("ctx-a", cfg.context)
      assert.equal("https://from-a:1", cfg.server)     -- cluster "shared" from a, not b
      assert.equal(dir .. "/a/ca.crt", cfg.ca_file)     -- resolved against a/
      assert.equal("ns-a", cfg.namespace)
      assert.equal("token-file", cfg.auth)              -- user from b, not c
      assert.equal("token-of-b", assert(cfg:credentials()).token)
      assert.equal(list, cfg.source)
    end)

    it("takes a context from a later file and entries by name across files", function()
      local dir = three()
      local list = dir .. "/a/config:" .. dir .. "/b/config:" .. dir .. "/c/config"
      local cfg = assert(core.kubeconfig.load({ context = "ctx-c", env = { KUBECONFIG = list } }))
      assert.equal("https://only-b:1", cfg.server)
      assert.equal("ns-c", cfg.namespace)
      assert.equal("token-of-b", assert(cfg:credentials()).token)
      -- a context defined in two files: the first file's wins whole
      cfg = assert(core.kubeconfig.load({ context = "both", env = { KUBECONFIG = list } }))
      assert.equal("from-a", cfg.namespace)
      assert.equal("https://from-a:1", cfg.server)
    end)

    it("respects the order of the list", function()
      local dir = three()
      local cfg = assert(core.kubeconfig.load({
        env = { KUBECONFIG = dir .. "/c/config:" .. dir .. "/b/config:" .. dir .. "/a/config" } }))
      assert.equal("ctx-b", cfg.context)                -- c sets none, b is next
      assert.equal("https://only-b:1", cfg.server)
      assert.equal("ns-b", cfg.namespace)
      cfg = assert(core.kubeconfig.load({ context = "ctx-c",
        env = { KUBECONFIG = dir .. "/c/config:" .. dir .. "/b/config" } }))
      assert.equal("from-c", assert(cfg:credentials()).token)
    end)

    it("skips empty entries and missing files in KUBECONFIG", function()
      local dir = three()
      local cfg = assert(core.kubeconfig.load({ env = {
        KUBECONFIG = "::" .. dir .. "/missing:" .. dir .. "/b/config::" .. dir .. "/b/config" } }))
      assert.equal("ctx-b", cfg.context)
      assert.equal(dir .. "/b/config", cfg.source)
    end)

    it("fails when no file in KUBECONFIG exists", function()
      local dir = helpers.tmpdir()
      local msg = S.load_error({ env = { KUBECONFIG = dir .. "/x:" .. dir .. "/y" } })
      assert.matches("KUBECONFIG=" .. S.lit(dir) .. "/x:.*none of the listed kubeconfig files exists", msg)
    end)

    it("prefers the explicit path over KUBECONFIG and HOME", function()
      local dir = three()
      local home = S.tree({ [".kube/config"] = A })
      local cfg = assert(core.kubeconfig.load({ path = dir .. "/b/config",
        env = { KUBECONFIG = dir .. "/a/config", HOME = home } }))
      assert.equal("ctx-b", cfg.context)
      assert.equal(dir .. "/b/config", cfg.source)
    end)

    it("fails when the explicit path does not exist", function()
      local dir = three()
      local msg = S.load_error({ path = dir .. "/nope", env = { KUBECONFIG = dir .. "/a/config" } })
      assert.matches(S.lit(dir .. "/nope") .. ": cannot read kubeconfig: No such file", msg)
    end)

    it("uses $HOME/.kube/config without KUBECONFIG", function()
      local home = S.tree({ [".kube/config"] = B })
      local cfg = assert(core.kubeconfig.load({ context = "both", env = { HOME = home } }))
      assert.equal(home .. "/.kube/config", cfg.source)
      assert.equal("https://only-b:1", cfg.server)
    end)

    it("treats an empty KUBECONFIG as unset", function()
      local home = S.tree({ [".kube/config"] = B })
      local cfg = assert(core.kubeconfig.load({ context = "both", env = { KUBECONFIG = "", HOME = home } }))
      assert.equal(home .. "/.kube/config", cfg.source)
    end)

    it("does not fall back to in-cluster when KUBECONFIG names only missing files", function()
      local sa = S.tree({ token = "t" })
      local msg = S.load_error({ env = { KUBECONFIG = sa .. "/none",
        KUBERNETES_SERVICE_HOST = "10.0.0.1", KUBERNETES_SERVICE_PORT = "443" },
        serviceaccount_dir = sa })
      assert.matches("none of the listed kubeconfig files exists", msg)
    end)
  end)

  describe("contexts", function()
    local TWO = [[
current-context: one
clusters:
- {name: c1, cluster: {server: "https://one:1"}}
- {name: c2, cluster: {server: "https://two:2"}}
contexts:
- {name: one, context: {cluster: c1, namespace: n1}}
- {name: two, context: {cluster: c2}}
]]
    it("uses current-context by default and an explicit context when given", function()
      local dir = S.tree({ config = TWO })
      local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
      assert.equal("one", cfg.context)
      assert.equal("https://one:1", cfg.server)
      assert.equal("n1", cfg.namespace)
      cfg = assert(core.kubeconfig.load({ path = dir .. "/config", context = "two" }))
      assert.equal("two", cfg.context)
      assert.equal("https://two:2", cfg.server)
      assert.equal("default", cfg.namespace)
    end)
  end)

  describe("options", function()
    it("raises on unknown options and env names", function()
      assert.has_error(function() core.kubeconfig.load({ pathh = "x" }) end,
        "kubeconfig.load: unknown option 'pathh'")
      assert.has_error(function() core.kubeconfig.load({ env = { KUBE_CONFIG = "x" } }) end,
        "kubeconfig.load env: unknown option 'KUBE_CONFIG'")
      assert.has_error(function() core.kubeconfig.load({ path = 1 }) end,
        "field 'path' must be a string, got number")
      assert.has_error(function() core.kubeconfig.load("x") end)
    end)

    it("raises on an unknown config field", function()
      local cfg = load_one(S.simple())
      assert.has_error(function() return cfg.sever end, "kubeconfig has no field 'sever'")
    end)
  end)
end)
