-- `luna run` loads the kubeconfig after the controllers: it logs what it
-- loaded (never the secret) or exits 1 with the file and the field.
local helpers = require("helpers")
local S = require("03-kubeconfig.support")

local CONTROLLER = [[
local luna = require "luna"
return luna.controller { name = "demo", watch = "v1/ConfigMap", reconcile = function() end }
]]

-- Runs luna with args (a list) and env overrides; returns output, exit code.
-- A luna that got past configuration keeps running (trying to reach the
-- server): once it has logged what it loaded it is stopped with SIGTERM,
-- which must end it cleanly (exit 0).
local function luna_run(args, env)
  local controllers = S.tree({ ["a.lua"] = CONTROLLER })
  -- no metrics/probe servers: the default ports may be taken on this machine
  local argv = { helpers.luna, "run", "--metrics-bind-address=0", "--health-probe-bind-address=0" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  argv[#argv + 1] = controllers
  local base = { HOME = helpers.tmpdir(), KUBECONFIG = false, KUBERNETES_SERVICE_HOST = false,
                 KUBERNETES_SERVICE_PORT = false, POD_NAMESPACE = false, LUNA_SERVICEACCOUNT_DIR = false }
  for k, v in pairs(env or {}) do base[k] = v end
  local p = helpers.spawn(argv, { env = base })
  local ok = pcall(p.expect, p, "kubeconfig ", 20)
  if ok and p:wait(0.3) == nil then p:kill() end
  local out = p:drain(20)
  local rc = p:wait(20)
  p:stop()
  return out, rc
end

describe("luna run with a kubeconfig", function()
  it("exits 1 naming the file and the field when --kubeconfig is broken", function()
    local p = S.pki("client")
    local dir = S.tree({ config = S.simple("    token: " .. S.TOKEN ..
      "\n    client-certificate-data: '***'\n    client-key-data: " .. S.b64(p.key)) })
    local out, rc = luna_run({ "--kubeconfig", dir .. "/config" })
    assert.equal(1, rc)
    assert.matches("controllers loaded", out)
    assert.matches("kubeconfig failed error=\"" .. S.lit(dir) ..
      "/config: users%[0%]%.user%.client%-certificate%-data: invalid base64\"", out)
    S.assert_no_secrets(out)
  end)

  it("exits 1 on a YAML syntax error with line and column", function()
    local dir = S.tree({ config = "current-context: a\nusers:\n- name: u\n  user: {token: " .. S.TOKEN .. "\n" })
    local out, rc = luna_run({ "--kubeconfig", dir .. "/config" })
    assert.equal(1, rc)
    assert.matches(S.lit(dir) .. "/config:%d+:%d+: YAML syntax error", out)
    S.assert_no_secrets(out)
  end)

  it("logs server, context, namespace and auth kind, but not the token", function()
    local dir = S.tree({ config = S.simple("    token: " .. S.TOKEN, nil, "team-a") })
    local out, rc = luna_run({ "--kubeconfig", dir .. "/config" })
    assert.matches("kubeconfig loaded source=" .. S.lit(dir) .. "/config server=https://k%.example:6443 " ..
                   "context=main namespace=team%-a auth=token", out)
    S.assert_no_secrets(out)
    assert.equal(0, rc)           -- running until SIGTERM, then a clean exit
  end)

  it("uses --context and KUBECONFIG from the environment", function()
    local dir = S.tree({ config = [[
current-context: a
clusters: [{name: c, cluster: {server: "https://a:1"}}, {name: d, cluster: {server: "https://b:2"}}]
contexts: [{name: a, context: {cluster: c}}, {name: b, context: {cluster: d, namespace: nb}}]
]] })
    local out = luna_run({ "--context", "b" }, { KUBECONFIG = dir .. "/config" })
    assert.matches("kubeconfig loaded source=" .. S.lit(dir) .. "/config server=https://b:2 context=b namespace=nb auth=none", out)
    out = luna_run({ "--context", "zz" }, { KUBECONFIG = dir .. "/config" })
    assert.matches('contexts: context \\"zz\\" not found', out, 1, true)
  end)

  it("falls back to the in-cluster service account", function()
    local sa = S.tree({ token = S.TOKEN, ["ca.crt"] = S.pki("ca").cert, namespace = "ops" })
    local out = luna_run({}, { KUBERNETES_SERVICE_HOST = "10.96.0.1", KUBERNETES_SERVICE_PORT = "443",
                               LUNA_SERVICEACCOUNT_DIR = sa })
    assert.matches("kubeconfig loaded source=in%-cluster server=https://10%.96%.0%.1:443 " ..
                   "context=%(in%-cluster%) namespace=ops auth=token%-file", out)
    S.assert_no_secrets(out)
  end)

  it("exits 1 when there is no configuration at all", function()
    local out, rc = luna_run({})
    assert.equal(1, rc)
    assert.matches("kubeconfig failed error=\"no configuration: ", out, 1, true)
  end)
end)
