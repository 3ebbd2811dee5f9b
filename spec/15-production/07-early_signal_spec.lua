-- A signal at a bad moment: SIGTERM, SIGINT or SIGHUP that reaches `luna run`
-- while it is still starting (here: blocked in an exec credential plugin
-- while it connects) is caught, not the default action that kills the
-- process: SIGTERM/SIGINT end in a clean shutdown (exit 0) once the loop
-- runs, SIGHUP in a reload.
local helpers = require("helpers")
local client = require("support.apiserver_client")

local CONTROLLER = [[
local luna = require "luna"
return luna.controller { name = "quiet", watch = { "v1/ConfigMap", labels = { never = "%s" } },
                         reconcile = function() end }
]]

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

-- Starts luna with a kubeconfig whose exec plugin announces itself (file
-- `started`) and then waits until the spec creates the file `go`.
local function start_blocked(srv)
  local dir = helpers.tmpdir()
  local ctl = helpers.tmpdir()
  helpers.write_file(ctl .. "/quiet.lua", CONTROLLER:format(tostring(math.random(1e6))))
  helpers.write_file(dir .. "/plugin.sh", ([[#!/bin/sh
touch %s/started
while [ ! -e %s/go ]; do sleep 0.05; done
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t0ken"}}'
]]):format(dir, dir))
  assert(os.execute("chmod +x " .. dir .. "/plugin.sh") == 0)
  local kubeconfig = helpers.write_file(dir .. "/config", ([[
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "%s"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: %s, interactiveMode: Never}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
]]):format(srv.url, dir .. "/plugin.sh"))
  local luna = helpers.spawn({ helpers.luna, "run", "--kubeconfig", kubeconfig,
    "--metrics-bind-address=0", "--health-probe-bind-address=0", ctl },
    { env = { KUBECONFIG = false } })
  helpers.eventually(function() return exists(dir .. "/started") end, 20, "the exec plugin to start")
  return luna, dir
end

describe("luna run, signalled while it starts", function()
  local srv, luna
  before_each(function() srv = client.start{ no_namespace = true } end)
  after_each(function()
    if luna then luna:stop() end
    luna = nil
    srv:stop()
  end)

  for _, sig in ipairs({ "TERM", "INT" }) do
    it("shuts down cleanly on SIG" .. sig .. " that came before the loop ran", function()
      local dir
      luna, dir = start_blocked(srv)
      assert(os.execute(("kill -%s %d"):format(sig, luna.pid)) == 0)
      helpers.write_file(dir .. "/go", "")
      luna:expect("shutdown requested signal=SIG" .. sig, 20)
      assert.equal(0, luna:wait(20))
    end)
  end

  it("reloads on a SIGHUP that came before the loop ran, and keeps running", function()
    local dir
    luna, dir = start_blocked(srv)
    assert(os.execute(("kill -HUP %d"):format(luna.pid)) == 0)
    helpers.write_file(dir .. "/go", "")
    luna:expect("reload done", 20)
    luna:kill()
    assert.equal(0, luna:wait(20))
  end)
end)
