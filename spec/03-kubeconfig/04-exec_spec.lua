-- exec credential plugins: running, KUBERNETES_EXEC_INFO, caching until
-- expiry, invalidation after 401, and every way a plugin can fail.
local helpers = require("helpers")
local core = require("luna.core")
local cjson = require("cjson")
local S = require("03-kubeconfig.support")

local V1, V1BETA1 = "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"
local T = 1893456000                      -- 2030-01-01T00:00:00Z
local T_RFC = "2030-01-01T00:00:00Z"

-- The plugin records its invocation count, argv, environment and
-- KUBERNETES_EXEC_INFO next to itself, prints out.json, and exits with
-- $EXIT_CODE.
local PLUGIN = [[#!/bin/sh
d=$(dirname "$0")
n=$(cat "$d/count" 2>/dev/null || echo 0)
echo $((n + 1)) > "$d/count"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$d/info"
printf '%s\n' "$@" > "$d/args"
env > "$d/env"
cat "$d/out.json"
exit ${EXIT_CODE:-0}
]]

local function credential(status, api)
  return cjson.encode({ apiVersion = api or V1, kind = "ExecCredential", status = status })
end

local function chmod(path) assert(os.execute("chmod +x '" .. path .. "'") == 0) end

-- exec: YAML body (4-space indented lines under `exec:`); returns dir, cfg.
local function setup(exec_yaml, out, opts, cluster_yaml)
  local dir = S.tree({
    config = S.simple("    exec:\n" .. exec_yaml, cluster_yaml),
    ["plugin.sh"] = PLUGIN,
    ["out.json"] = out or credential({ token = S.TOKEN }),
  })
  chmod(dir .. "/plugin.sh")
  local o = { path = dir .. "/config" }
  for k, v in pairs(opts or {}) do o[k] = v end
  local cfg, err = core.kubeconfig.load(o)
  return dir, cfg, err
end

local function exec_yaml(fields)
  local lines = { "      apiVersion: " .. (fields.apiVersion or V1),
                  "      command: " .. (fields.command or "./plugin.sh") }
  if fields.interactiveMode ~= false then
    lines[#lines + 1] = "      interactiveMode: " .. (fields.interactiveMode or "Never")
  end
  for _, l in ipairs(fields.extra or {}) do lines[#lines + 1] = "      " .. l end
  return table.concat(lines, "\n")
end

local function count(dir) return tonumber(helpers.read_file(dir .. "/count") or "0") end

local function creds_error(cfg, now)
  local c, err = cfg:credentials(now)
  assert(c == nil, "expected an error")
  local msg = tostring(err)
  S.assert_no_secrets(msg)
  return msg, err
end

describe("exec plugins", function()
  it("runs a v1 plugin (relative to the kubeconfig) and returns its token", function()
    local dir, cfg = setup(exec_yaml({}))
    assert(cfg)
    assert.equal("exec", cfg.auth)
    assert.equal(0, cfg:exec_runs())        -- not run at load
    local c = assert(cfg:credentials())
    assert.equal(S.TOKEN, c.token)
    assert.equal(1, c.generation)
    assert.equal(1, count(dir))
    assert.equal(1, cfg:exec_runs())
  end)

  it("runs a v1beta1 plugin without interactiveMode (defaults to IfAvailable)", function()
    local dir, cfg = setup(exec_yaml({ apiVersion = V1BETA1, interactiveMode = false }),
                           credential({ token = "beta" }, V1BETA1))
    assert(cfg)
    assert.equal("beta", assert(cfg:credentials()).token)
    assert.equal(1, count(dir))
  end)

  it("passes args and env, overriding inherited variables", function()
    local dir, cfg = setup(exec_yaml({ extra = {
      "args: [get-token, --cluster, 'my cluster']",
      "env: [{name: LUNA_PLUGIN_FOO, value: bar}, {name: HOME, value: /override}, {name: EMPTY}]" } }))
    assert(cfg:credentials())
    assert.equal("get-token\n--cluster\nmy cluster\n", helpers.read_file(dir .. "/args"))
    local env = helpers.read_file(dir .. "/env")
    assert.matches("\nLUNA_PLUGIN_FOO=bar\n", "\n" .. env)
    assert.matches("\nHOME=/override\n", "\n" .. env)
    assert.matches("\nEMPTY=\n", "\n" .. env)
    assert.not_matches("\nHOME=" .. S.lit(os.getenv("HOME")) .. "\n", "\n" .. env)
    assert.matches("\nPATH=", "\n" .. env)   -- the rest of the environment is inherited
  end)

  it("finds a command without a slash in PATH", function()
    local dir = S.tree({ ["out.json"] = credential({ token = S.TOKEN }) })
    helpers.write_file(dir .. "/config", S.simple("    exec:\n" .. exec_yaml({ command = "sh",
      extra = { ("args: [-c, 'cat %s/out.json']"):format(dir) } })))
    local cfg
    cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
    assert.equal(S.TOKEN, assert(cfg:credentials()).token)
  end)

  it("sets KUBERNETES_EXEC_INFO without spec.cluster by default", function()
    local dir, cfg = setup(exec_yaml({}))
    assert(cfg:credentials())
    local info = cjson.decode(helpers.read_file(dir .. "/info"))
    assert.same({ apiVersion = V1, kind = "ExecCredential", spec = { interactive = false } }, info)
  end)

  it("adds spec.cluster with provideClusterInfo, CA file content and the exec extension", function()
    local pem = S.pki("ca").cert
    local dir = S.tree({ ["ca.crt"] = pem })
    local cluster = table.concat({
      "    certificate-authority: ca.crt",
      "    tls-server-name: api.internal",
      "    proxy-url: http://proxy:3128",
      "    extensions:",
      "    - name: other",
      "      extension: {ignored: true}",
      "    - name: client.authentication.k8s.io/exec",
      "      extension:",
      "        audience: luna",
      "        retries: 3",
      "        ratio: 0.5",
      "        flags: [true, null, 'yes', '3']",
    }, "\n")
    helpers.write_file(dir .. "/config", S.simple("    exec:\n" .. exec_yaml({ extra = { "provideClusterInfo: true" } }), cluster))
    helpers.write_file(dir .. "/plugin.sh", PLUGIN)
    chmod(dir .. "/plugin.sh")
    helpers.write_file(dir .. "/out.json", credential({ token = "x" }))
    local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
    assert(cfg:credentials())
    local info = cjson.decode(helpers.read_file(dir .. "/info"))
    assert.equal(false, info.spec.interactive)
    local c = info.spec.cluster
    assert.equal("https://k.example:6443", c.server)
    assert.equal("api.internal", c["tls-server-name"])
    assert.equal("http://proxy:3128", c["proxy-url"])
    assert.equal(S.b64(pem), c["certificate-authority-data"])
    assert.is_nil(c["insecure-skip-tls-verify"])
    assert.same({ audience = "luna", retries = 3, ratio = 0.5, flags = { true, cjson.null, "yes", "3" } }, c.config)
  end)

  it("sends insecure-skip-tls-verify and CA data in spec.cluster", function()
    local dir, cfg = setup(exec_yaml({ extra = { "provideClusterInfo: true" } }), nil, nil,
      "    insecure-skip-tls-verify: true")
    assert(cfg:credentials())
    local c = cjson.decode(helpers.read_file(dir .. "/info")).spec.cluster
    assert.is_true(c["insecure-skip-tls-verify"])
    assert.is_nil(c["certificate-authority-data"])
    local pem = S.pki("ca").cert
    dir, cfg = setup(exec_yaml({ extra = { "provideClusterInfo: true" } }), nil, nil,
      "    certificate-authority-data: " .. S.b64(pem))
    assert(cfg:credentials())
    c = cjson.decode(helpers.read_file(dir .. "/info")).spec.cluster
    assert.equal(S.b64(pem), c["certificate-authority-data"])
  end)

  it("returns a client certificate and key from the plugin", function()
    local p = S.pki("client")
    local dir, cfg = setup(exec_yaml({}), credential({ clientCertificateData = p.cert, clientKeyData = p.key }))
    local c = assert(cfg:credentials())
    assert.equal(p.cert, c.client_cert_data)
    assert.equal(p.key, c.client_key_data)
    assert.is_nil(c.token)
    assert.equal(1, count(dir))
  end)

  describe("caching", function()
    it("reuses the credential until it nears expirationTimestamp, then runs again", function()
      local dir, cfg = setup(exec_yaml({}), credential({ token = "first", expirationTimestamp = T_RFC }))
      assert.equal("first", assert(cfg:credentials(T - 3600)).token)
      helpers.write_file(dir .. "/out.json", credential({ token = "second", expirationTimestamp = "2030-01-01T02:00:00+01:00" }))
      assert.equal("first", assert(cfg:credentials(T - 3000)).token)
      assert.equal("first", assert(cfg:credentials(T - 11)).token)
      assert.equal(1, count(dir))
      local c = assert(cfg:credentials(T - 9))   -- inside the 10 s refresh margin
      assert.equal("second", c.token)
      assert.equal(2, c.generation)
      assert.equal(2, count(dir))
      -- the new one expires at 01:00Z (02:00+01:00): cached until then
      assert.equal("second", assert(cfg:credentials(T + 3000)).token)
      assert.equal(2, count(dir))
    end)

    it("refreshes a short-lived credential a tenth of its lifetime early", function()
      local dir, cfg = setup(exec_yaml({}), credential({ token = "short", expirationTimestamp = T_RFC }))
      assert(cfg:credentials(T - 20))           -- lifetime 20 s: margin 2 s
      assert(cfg:credentials(T - 3))
      assert.equal(1, count(dir))
      assert(cfg:credentials(T - 1))
      assert.equal(2, count(dir))
    end)

    it("runs again on every use when the plugin returns an expired credential", function()
      local dir, cfg = setup(exec_yaml({}), credential({ token = "old", expirationTimestamp = "2001-02-03T04:05:06.789Z" }))
      assert.equal("old", assert(cfg:credentials()).token)
      assert.equal("old", assert(cfg:credentials()).token)
      assert.equal(2, count(dir))
    end)

    it("keeps a credential without expiry until invalidated for its generation", function()
      local dir, cfg = setup(exec_yaml({}), credential({ token = "forever" }))
      local c
      for _ = 1, 3 do c = assert(cfg:credentials()) end
      assert.equal(1, count(dir))
      cfg:invalidate(c.generation)               -- a 401 with this credential
      helpers.write_file(dir .. "/out.json", credential({ token = "renewed" }))
      c = assert(cfg:credentials())
      assert.equal("renewed", c.token)
      assert.equal(2, c.generation)
      assert.equal(2, count(dir))
      cfg:invalidate(1)                          -- a late 401 from generation 1
      assert(cfg:credentials())
      assert.equal(2, count(dir))
      cfg:invalidate()                           -- any generation
      assert(cfg:credentials())
      assert.equal(3, count(dir))
    end)

    it("keeps nothing after a failed run and runs again next time", function()
      local dir, cfg = setup(exec_yaml({}), "not json")
      creds_error(cfg)
      helpers.write_file(dir .. "/out.json", credential({ token = "fixed" }))
      assert.equal("fixed", assert(cfg:credentials()).token)
      assert.equal(2, count(dir))
    end)
  end)

  describe("failures", function()
    it("reports a non-zero exit with the plugin and the user entry", function()
      local dir, cfg = setup(exec_yaml({ extra = { "env: [{name: EXIT_CODE, value: '3'}]" } }))
      local msg, err = creds_error(cfg)
      assert.equal("exec", err.reason)
      assert.matches(S.lit(dir .. "/config: users[0].user.exec: " .. dir .. "/plugin.sh failed with exit code 3"), msg)
    end)

    it("reports a plugin killed by a signal", function()
      local dir = S.tree({ config = S.simple("    exec:\n" .. exec_yaml({ command = "sh", extra = { "args: [-c, 'kill -9 $$']" } })) })
      local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
      assert.matches("sh was killed by signal 9", creds_error(cfg))
    end)

    it("reports invalid JSON without quoting the output", function()
      local _, cfg = setup(exec_yaml({}), '{"status": {"token": "' .. S.TOKEN .. '"} oops')
      assert.matches("plugin%.sh returned invalid JSON: lexical error: invalid char in json text%.$", creds_error(cfg))
    end)

    it("reports a wrong apiVersion, kind or missing status", function()
      local _, cfg = setup(exec_yaml({}), credential({ token = S.TOKEN }, V1BETA1))
      assert.matches("returned apiVersion " .. S.lit(V1BETA1) .. ", but the kubeconfig asks for " .. S.lit(V1), creds_error(cfg))
      _, cfg = setup(exec_yaml({}), cjson.encode({ apiVersion = V1, kind = "Secret", status = { token = S.TOKEN } }))
      assert.matches("returned kind Secret, want ExecCredential", creds_error(cfg))
      _, cfg = setup(exec_yaml({}), cjson.encode({ apiVersion = V1, kind = "ExecCredential" }))
      assert.matches("plugin%.sh returned no status$", creds_error(cfg))
      _, cfg = setup(exec_yaml({}), "[1, 2]")
      assert.matches("returned JSON that is not an object", creds_error(cfg))
    end)

    it("reports a status without a token or a complete key pair", function()
      local p = S.pki("client")
      local _, cfg = setup(exec_yaml({}), credential({ expirationTimestamp = T_RFC }))
      assert.matches("returned neither status%.token nor status%.clientCertificateData", creds_error(cfg))
      _, cfg = setup(exec_yaml({}), credential({ clientCertificateData = p.cert }))
      assert.matches("returned only one of status%.clientCertificateData and status%.clientKeyData", creds_error(cfg))
      _, cfg = setup(exec_yaml({}), credential({ token = 42 }))
      assert.matches("returned a status field that is not a string", creds_error(cfg))
    end)

    it("reports a key that does not match the certificate", function()
      local a, b = S.pki("client"), S.pki("other")
      local _, cfg = setup(exec_yaml({}), credential({ clientCertificateData = a.cert, clientKeyData = b.key }))
      assert.matches("users%[0%]%.user%.exec: plugin returned an invalid status%.clientKeyData: " ..
                     "private key does not match", creds_error(cfg))
    end)

    it("reports an invalid expirationTimestamp", function()
      for _, ts in ipairs({ "tomorrow", "2030-01-01 00:00:00Z", "2030-02-30T00:00:00Z", "2030-01-01T00:00:00", 7 }) do
        local _, cfg = setup(exec_yaml({}), credential({ token = S.TOKEN, expirationTimestamp = ts }))
        assert.matches("returned an invalid status%.expirationTimestamp %(want RFC 3339%)", creds_error(cfg))
      end
    end)

    it("reports a missing executable with its installHint", function()
      local _, cfg = setup(exec_yaml({ command = "luna-no-such-plugin",
        extra = { "installHint: 'install it with: apt install luna-auth'" } }))
      local msg, err = creds_error(cfg)
      assert.equal("not_found", err.reason)
      assert.matches("users%[0%]%.user%.exec: executable luna%-no%-such%-plugin not found: install it with: apt install luna%-auth$", msg)
    end)

    it("reports a plugin file that is not executable", function()
      local dir, cfg = setup(exec_yaml({}))
      os.execute("chmod -x '" .. dir .. "/plugin.sh'")
      assert.matches("cannot run " .. S.lit(dir) .. "/plugin%.sh: Permission denied", creds_error(cfg))
    end)

    it("rejects output larger than the limit", function()
      local dir = S.tree({ config = S.simple("    exec:\n" .. exec_yaml({ command = "sh",
        extra = { "args: [-c, 'head -c 5000000 /dev/zero']" } })) })
      local cfg = assert(core.kubeconfig.load({ path = dir .. "/config" }))
      local msg, err = creds_error(cfg)
      assert.equal("too_big", err.reason)
      assert.matches("sh wrote more than 4194304 bytes", msg)
    end)

    it("kills a plugin (and its children) that runs past the timeout", function()
      local dir = S.tree({ ["slow.sh"] = [[#!/bin/sh
d=$(dirname "$0")
sleep 30 &
echo $! > "$d/child"
echo $$ > "$d/pid"
wait
]] })
      chmod(dir .. "/slow.sh")
      helpers.write_file(dir .. "/config", S.simple("    exec:\n" .. exec_yaml({ command = "./slow.sh" })))
      -- 2 s: time for the shell to start and write both pids even on a
      -- loaded machine (0.5 s sometimes killed it before it had)
      local cfg = assert(core.kubeconfig.load({ path = dir .. "/config", exec_timeout = 2 }))
      local msg, err = creds_error(cfg)
      assert.equal("timeout", err.reason)
      assert.matches("slow%.sh did not finish within 2 s", msg)
      local function gone(pid)
        local stat = helpers.read_file("/proc/" .. pid .. "/stat")
        return stat == nil or stat:match("^%d+ %b() (%a)") == "Z"
      end
      for _, f in ipairs({ "pid", "child" }) do
        local pid = assert(helpers.read_file(dir .. "/" .. f)):match("%d+")
        helpers.eventually(function() return gone(pid) end, 5, f .. " " .. pid .. " to be killed")
      end
    end)

    it("logs the plugin's stderr line by line through luna's logger, never raw", function()
      -- two lines, a blank one, and a last line without a newline
      local dir = S.tree({ config = S.simple("    exec:\n" .. exec_yaml({ command = "sh",
        extra = { [==[args: [-c, 'printf "plugin-says-hello\n\nsecond line=with an equals sign\nno-newline" >&2; exit 1']]==] } })) })
      local script = helpers.write_file(dir .. "/run.lua", ([[
package.cpath = %q .. "/lua/?.so;" .. package.cpath
local cfg = assert(require("luna.core").kubeconfig.load({ path = %q }))
local c, err = cfg:credentials()
io.stdout:write("result: ", tostring(err), "\n")
]]):format(helpers.build, dir .. "/config"))
      local out = helpers.run("luajit " .. script)
      assert.matches("result: exec: .*sh failed with exit code 1", out)
      local lines = {}
      for line in out:gmatch("[^\n]+") do
        if not line:match("^result: ") then lines[#lines + 1] = line end
      end
      local TS = "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ "
      assert.equal(3, #lines, out)
      for _, line in ipairs(lines) do assert.matches(TS .. "WARN exec plugin stderr source=sh message=", line) end
      assert.matches("message=plugin%-says%-hello$", lines[1])
      assert.matches('message="second line=with an equals sign"$', lines[2])
      assert.matches("message=no%-newline$", lines[3])
    end)

    it("logs at most 64 KiB of the plugin's stderr a run, each line cut at 4 KiB", function()
      local dir = S.tree({ config = S.simple("    exec:\n" .. exec_yaml({ command = "sh",
        extra = { [==[args: [-c, 'head -c 10000 /dev/zero | tr "\\0" x >&2; echo >&2; yes line-of-stderr | head -c 200000 >&2; exit 3']]==] } })) })
      local script = helpers.write_file(dir .. "/run.lua", ([[
package.cpath = %q .. "/lua/?.so;" .. package.cpath
local cfg = assert(require("luna.core").kubeconfig.load({ path = %q }))
local c, err = cfg:credentials()
io.stdout:write("result: ", tostring(err), "\n")
]]):format(helpers.build, dir .. "/config"))
      local out = helpers.run("luajit " .. script)
      assert.matches("result: exec: .*sh failed with exit code 3", out)
      local long = out:match("message=(x+)\n")
      assert.equal(4096, #long)
      local n = select(2, out:gsub("message=line%-of%-stderr\n", ""))
      -- 64 KiB minus the 10,001 bytes of the long line: 3,702 lines of 15
      -- bytes at most (of the 13,333 the plugin wrote)
      assert.is_true(n >= 3650 and n <= 3702, tostring(n))
    end)
  end)

  describe("configuration", function()
    local function load_error(fields)
      local _, cfg, err = setup(exec_yaml(fields))
      assert.is_nil(cfg)
      local msg = tostring(err)
      S.assert_no_secrets(msg)
      return msg
    end

    it("requires interactiveMode for v1", function()
      assert.matches("users%[0%]%.user%.exec%.interactiveMode: must be set for " .. S.lit(V1),
        load_error({ interactiveMode = false }))
    end)

    it("rejects interactiveMode Always: luna has no terminal", function()
      assert.matches("exec%.interactiveMode: Always needs a terminal, and luna never has one",
        load_error({ interactiveMode = "Always" }))
    end)

    it("rejects an unknown interactiveMode", function()
      assert.matches('exec%.interactiveMode: "Sometimes" is not one of Never, IfAvailable, Always',
        load_error({ interactiveMode = "Sometimes" }))
    end)

    it("accepts IfAvailable for v1", function()
      local _, cfg = setup(exec_yaml({ interactiveMode = "IfAvailable" }))
      assert.equal(S.TOKEN, assert(cfg:credentials()).token)
    end)

    it("rejects an unsupported or missing apiVersion and a missing command", function()
      assert.matches('exec%.apiVersion: "client%.authentication%.k8s%.io/v1alpha1" is not supported',
        load_error({ apiVersion = "client.authentication.k8s.io/v1alpha1" }))
      assert.matches("exec%.apiVersion: not set", load_error({ apiVersion = "''" }))
      assert.matches("exec%.command: not set", load_error({ command = "''" }))
    end)
  end)
end)
