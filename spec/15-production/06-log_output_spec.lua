-- Every line `luna run` writes goes through its logger, in its format: with
-- --log-format json each line of its output is one JSON record, including
-- what the libraries and programs it runs have to say (libmicrohttpd's
-- messages, an exec credential plugin's stderr).
local helpers = require("helpers")
local cjson = require("cjson")
local client = require("support.apiserver_client")

local CONTROLLER = [[
local luna = require "luna"
return luna.controller { name = "quiet", watch = { "v1/ConfigMap", labels = { never = "%s" } },
                         reconcile = function() end }
]]

local function controllers()
  local dir = helpers.tmpdir()
  helpers.write_file(dir .. "/quiet.lua", CONTROLLER:format(tostring(math.random(1e6))))
  return dir
end

-- Every output line decoded; raises naming the first line that is not a
-- JSON log record.
local function records(out)
  local list = {}
  for line in out:gmatch("[^\n]+") do
    local ok, rec = pcall(cjson.decode, line)
    assert(ok and type(rec) == "table" and type(rec.ts) == "string" and
           type(rec.level) == "string" and type(rec.msg) == "string",
           "not a JSON log record: " .. line .. "\nin:\n" .. out)
    list[#list + 1] = rec
  end
  return list
end

local function find(list, msg, fields)
  for _, r in ipairs(list) do
    local match = r.msg == msg
    for k, v in pairs(fields or {}) do match = match and r[k] == v end
    if match then return r end
  end
end

describe("luna run's output with --log-format json #integration", function()
  local luna
  after_each(function()
    if luna then luna:stop() end
    luna = nil
  end)

  it("has libmicrohttpd's messages as records: a watch client gone mid-stream", function()
    luna = helpers.spawn({ helpers.luna, "run", "--dev-server", "--log-format", "json",
      "--log-level", "debug", "--metrics-bind-address=0", "--health-probe-bind-address=0",
      controllers() }, { env = { KUBECONFIG = false } })
    local _, url = luna:expect('"msg":"dev server listening".*"url":"(http://[^"]+)"', 20)
    luna:expect('"msg":"caches synced"', 20)
    -- a watch whose client disappears: the server's next chunk cannot be sent
    local w = helpers.spawn({ "env", "-u", "LD_PRELOAD", "curl", "-sN", url .. "/api/v1/namespaces?watch=1" },
                            { stderr = false })
    assert.is_string(w:read_line(10), "the watch's first event")
    w:kill(9)
    w:stop()
    local prefix = "luna-log-" .. math.random(100000, 999999)
    local i = 0
    local lib
    local deadline = helpers.now() + 20
    repeat
      i = i + 1
      local out = helpers.run(("env -u LD_PRELOAD curl -s -o /dev/null -w '%%{http_code}' -X POST " ..
        "-H 'Content-Type: application/json' -d '%s' %s/api/v1/namespaces"):format(
        cjson.encode({ apiVersion = "v1", kind = "Namespace", metadata = { name = prefix .. "-" .. i } }), url))
      assert.equal("201", out)
      luna:read_line(0.1)
      for _, line in ipairs(luna.out) do
        if line:find("libmicrohttpd", 1, true) then lib = line end
      end
    until lib or helpers.now() > deadline
    assert(lib, "no libmicrohttpd message in:\n" .. table.concat(luna.out, "\n"))
    luna:kill()
    assert.equal(0, luna:wait(20))
    local list = records(luna:drain(1))
    local rec = find(list, "library message", { source = "libmicrohttpd", server = "dev-server" })
    assert.is_table(rec)
    assert.equal("debug", rec.level)
    assert.matches("/api/v1/namespaces", rec.message, 1, true)
    assert.is_table(find(list, "shutdown complete"))
  end)

  it("has an exec credential plugin's stderr as records, one per line", function()
    local srv = client.start{ no_namespace = true }
    local dir = helpers.tmpdir()
    -- stderr lines that would break a JSON log if passed through: quotes,
    -- braces, a blank line, no final newline
    helpers.write_file(dir .. "/plugin.sh", [[#!/bin/sh
printf 'plugin: {"not": json\n\nsecond "line"\nlast' >&2
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t0ken"}}'
]])
    assert(os.execute("chmod +x " .. dir .. "/plugin.sh") == 0)
    local kubeconfig = helpers.write_file(dir .. "/config", ([[
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "%s"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: %s, interactiveMode: Never}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
]]):format(srv.url, dir .. "/plugin.sh"))
    luna = helpers.spawn({ helpers.luna, "run", "--kubeconfig", kubeconfig, "--log-format", "json",
      "--metrics-bind-address=0", "--health-probe-bind-address=0", controllers() },
      { env = { KUBECONFIG = false } })
    -- the plugin's last line logged; whether the server takes its token
    -- (a cluster behind kubectl proxy may not) does not matter here
    luna:expect('"msg":"exec plugin stderr".*"message":"last"', 20)
    luna:kill()
    assert.equal(0, luna:wait(20))
    local list = records(luna:drain(1))
    srv:stop()
    local got = {}
    for _, r in ipairs(list) do
      if r.msg == "exec plugin stderr" and #got < 3 then
        assert.equal("warn", r.level)
        assert.equal(dir .. "/plugin.sh", r.source)
        got[#got + 1] = r.message
      end
    end
    assert.same({ 'plugin: {"not": json', 'second "line"', "last" }, got)
  end)
end)
