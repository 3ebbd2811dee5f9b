-- A broken kubeconfig gives one error naming the file and the field, and no
-- error ever contains a secret (every config here carries S.TOKEN, and most
-- S.PASSWORD and a private key, to prove it).
local helpers = require("helpers")
local S = require("03-kubeconfig.support")

-- A config whose other user holds every kind of secret.
local function with_secrets(yaml)
  local p = S.pki("client")
  return yaml .. ([[
- name: holder
  user:
    token: %s
    password: %s
    client-key-data: %s
]]):format(S.TOKEN, S.PASSWORD, S.b64(p.key))
end

-- Writes yaml to DIR/config, loads it, returns the message and the path.
local function fails(yaml, opts)
  local dir = S.tree({ config = yaml })
  local o = { path = dir .. "/config" }
  for k, v in pairs(opts or {}) do o[k] = v end
  local msg, err = S.load_error(o)
  return msg, dir .. "/config", err
end

local function expect(yaml, pattern, opts)
  local msg, path, err = fails(yaml, opts)
  assert.matches("^" .. S.lit(path) .. pattern, err.message)
  return msg, err
end

-- string.gsub without its count (so it can be the first of several arguments).
local function sub(s, pattern, repl) return (s:gsub(pattern, repl)) end

local BASE = [[
current-context: main
clusters:
- name: c
  cluster: {server: "https://k:1"}
contexts:
- name: main
  context: {cluster: c, user: u}
users:
- name: u
  user: {token: ]] .. S.TOKEN .. [[}
]]

describe("kubeconfig errors", function()
  describe("context selection", function()
    it("reports a missing explicit context", function()
      local _, err = expect(BASE, ': contexts: context "prod" not found$', { context = "prod" })
      assert.equal("not_found", err.reason)
    end)

    it("reports a missing current-context", function()
      expect(sub(BASE, "current%-context: main", "current-context: gone"),
        ': contexts: context "gone" not found$')
    end)

    it("reports a config with no current-context and no context given", function()
      expect(sub(BASE, "current%-context: main\n", ""),
        ": current%-context is not set and no context was given$")
    end)

    it("reports a context whose cluster does not exist", function()
      expect(with_secrets(sub(BASE, "cluster: c, user", "cluster: nope, user")),
        ': contexts%[0%]%.context%.cluster: cluster "nope" not found$')
    end)

    it("reports a context without a cluster", function()
      expect(sub(BASE, "cluster: c, user: u", "user: u"),
        ': contexts%[0%]%.context%.cluster: not set %(context "main"%)$')
    end)

    it("reports a context whose user does not exist", function()
      expect(with_secrets(sub(BASE, "user: u}", "user: ghost}")),
        ': contexts%[0%]%.context%.user: user "ghost" not found$')
    end)

    it("reports a cluster without a server", function()
      expect(with_secrets(sub(BASE, '{server: "https://k:1"}', "{insecure-skip-tls-verify: true}")),
        ': clusters%[0%]%.cluster%.server: not set %(cluster "c"%)$')
    end)

    it("names the file that defined the broken entry in a merged list", function()
      local dir = S.tree({ a = "current-context: main\n", b = sub(BASE, "cluster: c, user", "cluster: nope, user") })
      local msg = S.load_error({ env = { KUBECONFIG = dir .. "/a:" .. dir .. "/b" } })
      assert.matches("^not_found: " .. S.lit(dir .. "/b") .. ": contexts%[0%]%.context%.cluster: " ..
                     'cluster "nope" not found$', msg)
    end)

    it("names every file of the list when the context is missing from all", function()
      local dir = S.tree({ a = "clusters: []\n", b = BASE })
      local msg = S.load_error({ context = "x", env = { KUBECONFIG = dir .. "/a:" .. dir .. "/b" } })
      assert.matches(S.lit(dir .. "/a:" .. dir .. "/b") .. ': contexts: context "x" not found', msg)
    end)
  end)

  describe("YAML", function()
    it("reports a syntax error with line and column", function()
      local msg = expect("current-context: a\nclusters:\n  - name: c\n   cluster: x\n" .. "token: " .. S.TOKEN .. "\n",
        ":4:4: YAML syntax error: did not find expected '%-' indicator %(while parsing a block collection%)$")
      assert.not_matches(S.TOKEN, msg, 1, true)
    end)

    it("reports an unterminated quote with its position", function()
      expect('current-context: "main\nusers: []\n',
        ":3:1: YAML syntax error: found unexpected end of stream %(while scanning a quoted scalar%)$")
    end)

    it("reports tabs used for indentation", function()
      expect("clusters:\n\t- name: c\n", ":2:1: YAML syntax error: found character that cannot start any token")
    end)

    it("reports a list where a mapping is expected", function()
      expect(with_secrets(sub(BASE, '{server: "https://k:1"}', "[1, 2]")),
        ": clusters%[0%]%.cluster: expected a mapping, got a list %(line 4%)$")
    end)

    it("reports a scalar where a list is expected", function()
      expect(with_secrets("users:\n") .. "clusters: none\n",
        ": clusters: expected a list, got a scalar %(line %d+%)$")
    end)

    it("reports a mapping where a string is expected", function()
      expect(with_secrets(sub(BASE, "user: u}", "user: u, namespace: {a: 1}}")),
        ": contexts%[0%]%.context%.namespace: expected a string, got a mapping %(line 7%)$")
    end)

    it("reports a quoted boolean like kubectl does", function()
      expect(sub(BASE, '{server: "https://k:1"}', '{server: "https://k:1", insecure-skip-tls-verify: "true"}'),
        ": clusters%[0%]%.cluster%.insecure%-skip%-tls%-verify: expected a boolean %(true or false%), " ..
        "got a quoted string %(line 4%)$")
    end)

    it("reports a list entry that is not a mapping", function()
      expect(with_secrets("users:\n") .. "contexts:\n- just-a-name\n",
        ": contexts%[0%]: expected a mapping, got a scalar")
    end)

    it("reports a top level that is not a mapping", function()
      expect("- a\n- b\n", ": expected a mapping at the top level, got a list %(line 1%)$")
    end)

    it("rejects a different kind or apiVersion", function()
      expect("apiVersion: v1\nkind: Pod\n", ": kind: must be Config$")
      expect("apiVersion: v2\nkind: Config\n", ": apiVersion: must be v1$")
    end)

    it("rejects duplicate names in one file", function()
      expect(with_secrets(BASE .. "- name: u\n  user: {}\n"),
        ': users%[1%]%.name: duplicate name "u"$')
    end)

    it("rejects a key given twice", function()
      expect(sub(BASE, "current%-context: main\n", "current-context: main\ncurrent-context: other\n"),
        ": current%-context: key appears twice %(line 2%)$")
    end)

    it("treats an empty file as an empty config", function()
      expect("", ": current%-context is not set and no context was given$")
      expect("# just a comment\n", ": current%-context is not set")
    end)

    it("reports a file that is not UTF-8 text", function()
      expect("current-context: \xff\xfe\n", ": invalid text at byte %d+")
    end)

    it("refuses an exec extension whose aliases expand past 1 MiB of JSON, without expanding it", function()
      -- nine levels of ten aliases: 10^9 strings from a few hundred bytes
      local lines = { '        x0: &a0 ["x","x","x","x","x","x","x","x","x","x"]' }
      for i = 1, 8 do
        local refs = {}
        for j = 1, 10 do refs[j] = "*a" .. (i - 1) end
        lines[#lines + 1] = ("        x%d: &a%d [%s]"):format(i, i, table.concat(refs, ","))
      end
      local yaml = sub(BASE, '  cluster: {server: "https://k:1"}\n',
        '  cluster:\n    server: https://k:1\n    extensions:\n' ..
        '    - name: client.authentication.k8s.io/exec\n      extension:\n' ..
        table.concat(lines, "\n") .. "\n")
      expect(yaml, ": clusters%[0%]%.cluster%.extensions%[0%]%.extension: cannot be converted to JSON")
    end)

    it("reports invalid args and env in exec", function()
      local user = "{exec: {apiVersion: client.authentication.k8s.io/v1, command: x, interactiveMode: Never, %s}}"
      local function with_user(u) return sub(BASE, "{token: [^}]*}", u) end
      expect(with_user(user:format("args: [a, {b: 1}]")),
        ": users%[0%]%.user%.exec%.args%[1%]: expected a string, got a mapping")
      expect(with_user(user:format("env: [{value: x}]")),
        ": users%[0%]%.user%.exec%.env%[0%]%.name: must be a non%-empty name without '='$")
      expect(with_user(user:format("env: {A: b}")),
        ": users%[0%]%.user%.exec%.env: expected a list, got a mapping")
    end)
  end)

  describe("base64 and PEM", function()
    it("reports invalid base64 in certificate-authority-data", function()
      expect(with_secrets(sub(BASE, '{server: "https://k:1"}', '{server: "https://k:1", certificate-authority-data: "abc!"}')),
        ": clusters%[0%]%.cluster%.certificate%-authority%-data: invalid base64$")
    end)

    it("reports invalid base64 in client-certificate-data and client-key-data", function()
      local p = S.pki("client")
      expect(S.simple("    client-certificate-data: Zm9v=Zm9v\n    client-key-data: " .. S.b64(p.key)),
        ": users%[0%]%.user%.client%-certificate%-data: invalid base64$")
      local broken = S.b64(p.key):sub(1, -2)        -- lost its last character
      local msg = expect(S.simple("    client-certificate-data: " .. S.b64(p.cert) .. "\n    client-key-data: " .. broken),
        ": users%[0%]%.user%.client%-key%-data: invalid base64$")
      assert.not_matches(broken:sub(1, 20), msg, 1, true)
    end)

    it("reports base64 errors in entries that are not selected, like kubectl", function()
      expect(BASE .. "- name: other\n  user: {client-key-data: '%%%%'}\n",
        ": users%[1%]%.user%.client%-key%-data: invalid base64$")
    end)

    it("reports certificate-authority-data that holds no certificate", function()
      expect(with_secrets(sub(BASE, '{server: "https://k:1"}',
        '{server: "https://k:1", certificate-authority-data: ' .. S.b64("not a cert") .. "}")),
        ": clusters%[0%]%.cluster%.certificate%-authority%-data: no PEM certificate found$")
    end)

    it("reports a missing certificate-authority file with its resolved path", function()
      local msg, path = fails(S.simple(nil, "    certificate-authority: certs/ca.pem"))
      local dir = path:match("^(.*)/config$")
      assert.matches(": clusters%[0%]%.cluster%.certificate%-authority: " .. S.lit(dir) ..
        "/certs/ca%.pem: No such file or directory$", msg)
    end)

    it("rejects both certificate-authority and certificate-authority-data", function()
      local pem = S.pki("ca").cert
      expect(S.simple(nil, "    certificate-authority: /etc/hostname\n    certificate-authority-data: " .. S.b64(pem)),
        ": clusters%[0%]%.cluster: certificate%-authority and certificate%-authority%-data are both set")
    end)

    it("rejects insecure-skip-tls-verify together with a CA", function()
      local pem = S.pki("ca").cert
      expect(S.simple(nil, "    insecure-skip-tls-verify: true\n    certificate-authority-data: " .. S.b64(pem)),
        ": clusters%[0%]%.cluster: insecure%-skip%-tls%-verify cannot be combined with a certificate authority$")
    end)

    it("rejects a client key that does not match the certificate", function()
      local a, b = S.pki("client"), S.pki("other")
      expect(S.simple("    client-certificate-data: " .. S.b64(a.cert) .. "\n    client-key-data: " .. S.b64(b.key)),
        ": users%[0%]%.user%.client%-key%-data: private key does not match the certificate's public key$")
    end)

    it("rejects key data that is not a PEM key", function()
      local a = S.pki("client")
      expect(S.simple("    client-certificate-data: " .. S.b64(a.cert) .. "\n    client-key-data: " .. S.b64(a.cert)),
        ": users%[0%]%.user%.client%-key%-data: no unencrypted PEM private key found$")
    end)

    it("rejects an unreadable client-certificate file with its path", function()
      local a = S.pki("client")
      local msg, path = fails(S.simple("    client-certificate: tls.crt\n    client-key-data: " .. S.b64(a.key)))
      assert.matches(": users%[0%]%.user%.client%-certificate: " .. S.lit(path:match("^(.*)/config$")) ..
        "/tls%.crt: No such file or directory$", msg)
    end)

    it("requires a key with a certificate and a certificate with a key", function()
      local a = S.pki("client")
      expect(S.simple("    client-certificate-data: " .. S.b64(a.cert)),
        ": users%[0%]%.user: client%-key or client%-key%-data must be set to use a client certificate$")
      expect(S.simple("    client-key-data: " .. S.b64(a.key)),
        ": users%[0%]%.user: client%-certificate or client%-certificate%-data must be set")
    end)

    it("rejects a client certificate given as both file and data", function()
      local a = S.pki("client")
      expect(S.simple("    client-certificate: x.crt\n    client-certificate-data: " .. S.b64(a.cert) ..
                      "\n    client-key-data: " .. S.b64(a.key)),
        ": users%[0%]%.user: client%-certificate and client%-certificate%-data are both set")
    end)
  end)

  describe("authentication", function()
    it("rejects token together with username/password", function()
      expect(S.simple("    token: " .. S.TOKEN .. "\n    username: a\n    password: " .. S.PASSWORD),
        ": users%[0%]%.user: more than one authentication method %(token and username/password%)")
    end)

    it("rejects exec together with a token", function()
      expect(S.simple("    token: " .. S.TOKEN .. "\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: x, interactiveMode: Never}"),
        ": users%[0%]%.user: exec cannot be combined with another authentication method")
    end)

    it("rejects auth-provider and impersonation instead of ignoring them", function()
      expect(S.simple("    auth-provider: {name: oidc}"),
        ": users%[0%]%.user%.auth%-provider: not supported by luna %(use an exec credential plugin%)$")
      expect(S.simple("    token: " .. S.TOKEN .. "\n    as: admin"),
        ": users%[0%]%.user%.as: not supported by luna %(impersonation%)$")
    end)

    it("reports a missing tokenFile when there is no token to fall back on", function()
      local msg, path = fails(S.simple("    tokenFile: secrets/token"))
      local dir = path:match("^(.*)/config$")
      assert.matches(": users%[0%]%.user%.tokenFile: " .. S.lit(dir) ..
        "/secrets/token: cannot read token file: No such file or directory$", msg)
    end)

    it("reports an empty tokenFile", function()
      local dir = S.tree({ config = S.simple("    tokenFile: token"), token = " \n" })
      local msg = S.load_error({ path = dir .. "/config" })
      assert.matches(": users%[0%]%.user%.tokenFile: " .. S.lit(dir) .. "/token: token file is empty$", msg)
    end)
  end)

  it("never puts a secret into any of the messages above", function()
    -- S.load_error checked each message; this proves the check itself works.
    assert.has_error(function() S.assert_no_secrets("x " .. S.TOKEN) end)
    assert.has_error(function() S.assert_no_secrets("x " .. S.PASSWORD) end)
    local p = S.pki("client")
    assert.has_error(function() S.assert_no_secrets(p.key) end)
  end)
end)
