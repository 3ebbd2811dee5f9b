-- The local loop (issue 30, item 5): `luna run --dev-server` with no
-- address flags listens on loopback, on free ports (so a second run beside
-- the first starts), logs one line per server with its URL and how to call
-- it, and /metrics and `luna trigger` accept the dev server's own token
-- (the one its TokenReview authenticates).  Explicit flags still win, and
-- `make run` starts at --log-level info.
local helpers = require("helpers")
local cjson = require("cjson")

local CONTROLLER = [[
local luna = require "luna"
return luna.controller {
  name = "local-loop",
  watch = "v1/ConfigMap",
  reconcile = function(req) luna.log.info("reconciled", { object = req.name }) end,
}
]]

local function controllers()
  local dir = helpers.tmpdir()
  helpers.write_file(dir .. "/local_loop.lua", CONTROLLER)
  return dir
end

local function start(extra)
  local argv = { helpers.luna, "run", "--dev-server" }
  for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = controllers()
  return helpers.spawn(argv, { env = { KUBECONFIG = false, POD_NAME = false } })
end

-- Waits for the line (already read or to come) matching pattern (or one
-- of a list of patterns); returns it and the captures.
local function await(p, pattern, secs)
  local deadline = helpers.now() + (secs or 20)
  local seen = 0
  local patterns = type(pattern) == "table" and pattern or { pattern }
  while true do
    for i = seen + 1, #p.out do
      for _, pat in ipairs(patterns) do
        local caps = { p.out[i]:match(pat) }
        if caps[1] then return p.out[i], table.unpack(caps) end
      end
    end
    seen = #p.out
    if helpers.now() > deadline then
      error(("no line matching %s; output:\n%s"):format(table.concat(patterns, " or "), table.concat(p.out, "\n")), 2)
    end
    p:read_line(0.05)
  end
end

-- The command a log line's try="..." field shows (text format: quoted,
-- with \" and \\ escaped).
local function try_of(line)
  local v = assert(line:match(' try="(.-[^\\])"'), "no try= field in: " .. line)
  return (v:gsub('\\(.)', "%1"))
end

local function sh(cmd)
  return helpers.run("env -u LD_PRELOAD " .. cmd)
end

describe("luna run --dev-server's local defaults #integration", function()
  local procs = {}
  after_each(function()
    for _, p in ipairs(procs) do p:stop() end
    procs = {}
  end)
  local function run(extra)
    local p = start(extra)
    procs[#procs + 1] = p
    return p
  end

  it("binds loopback on free ports, so a second run beside the first starts", function()
    local a, b = run(), run()
    local ports = {}
    for _, p in ipairs({ a, b }) do
      local _, maddr = await(p, "metrics server listening address=(%S+)")
      local _, haddr = await(p, "health probe server listening address=(%S+)")
      assert.matches("^127%.0%.0%.1:%d+$", maddr)
      assert.matches("^127%.0%.0%.1:%d+$", haddr)
      assert.is_nil(ports[maddr], "two runs on one metrics address")
      assert.is_nil(ports[haddr], "two runs on one probe address")
      ports[maddr], ports[haddr] = true, true
      await(p, "caches synced")
    end
    -- both still running and serving their probes
    for _, p in ipairs({ a, b }) do
      local line = await(p, "health probe server listening .* url=(%S+)")
      local url = line:match(" url=(%S+)")
      local out, rc = sh("curl -s -f --max-time 10 " .. url)
      assert.equal(0, rc, out)
    end
  end)

  it("logs how to scrape /metrics with the dev server's token, which is authorized", function()
    local p = run()
    local line, addr = await(p, "metrics server listening address=(%S+)")
    assert.matches(" url=https://" .. addr:gsub("%p", "%%%0") .. "/metrics", line)
    local cmd = try_of(line)
    assert.matches("^curl %-k %-H 'Authorization: Bearer %x+' https://", cmd)
    await(p, "caches synced")
    local out, rc = sh(cmd:gsub("^curl ", "curl -s -f --max-time 10 "))
    assert.equal(0, rc, out)
    assert.matches('workqueue_depth{name="local%-loop"}', out)
    -- another token is still refused: the dev server's authentication decides
    local code = sh(("curl -s -k -o /dev/null -w '%%{http_code}' --max-time 10 " ..
      "-H 'Authorization: Bearer not-the-token' https://%s/metrics"):format(addr))
    assert.equal("401", code)
  end)

  it("logs how to call `luna trigger`, which works with the dev server's token", function()
    local p = run()
    local line = await(p, "admin endpoints enabled")
    local cmd = try_of(line)
    assert.matches("^LUNA_TOKEN=%x+ ", cmd)
    assert.matches(" trigger ", cmd)
    assert.matches(" list$", cmd)
    await(p, "caches synced")
    -- run as logged, with this build's binary in place of the logged argv[0]
    local out, rc = helpers.run(cmd)
    assert.equal(0, rc, out)
    assert.equal("local-loop", cjson.decode(out).controllers[1].name)
    out, rc = helpers.run(cmd:gsub(" list$", " reconcile local-loop kube-system/some-cm"))
    assert.equal(0, rc, out)
    await(p, "reconciled.*object=some%-cm")
  end)

  it("keeps explicit addresses: --metrics-bind-address=0 turns metrics off", function()
    local p = run({ "--metrics-bind-address=0" })
    local _, haddr = await(p, "health probe server listening address=(%S+)")
    assert.matches("^127%.0%.0%.1:%d+$", haddr)
    await(p, "caches synced")
    for _, l in ipairs(p.out) do assert.is_nil(l:find("metrics server listening", 1, true), l) end
  end)
end)

describe("luna run against a cluster", function()
  it("keeps the cluster defaults :8443 and :8081, and logs no token", function()
    local srv = helpers.spawn({ helpers.luna, "dev-server", "--listen", "127.0.0.1:0" })
    local _, url = srv:expect("listening on (http://%S+)", 20)
    local kc = helpers.tmpdir() .. "/kubeconfig"
    helpers.write_file(kc, ("apiVersion: v1\nkind: Config\n" ..
      "clusters: [{name: c, cluster: {server: %q}}]\nusers: [{name: u, user: {}}]\n" ..
      "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"):format(url))
    local p = helpers.spawn({ helpers.luna, "run", "--kubeconfig", kc, controllers() },
                            { env = { KUBECONFIG = false, POD_NAME = false } })
    -- another process may hold a port: then the start fails naming it
    local line = await(p, { "metrics server listening address=", "cannot listen on :8443" })
    if line:find("metrics server listening", 1, true) then
      assert.matches("address=%S+:8443 ", line)
      assert.is_nil(line:find(" try=", 1, true), line)
      local admin = await(p, "admin endpoints enabled")
      assert.is_nil(admin:find("LUNA_TOKEN", 1, true), admin)
      line = await(p, { "health probe server listening address=", "cannot listen on :8081" })
      assert.matches(":8081", line)
    end
    p:stop()
    srv:stop()
  end)
end)

describe("make run", function()
  it("starts at --log-level info: the reconciles, not the debug noise", function()
    local out, rc = helpers.run("make -n run KUBECONFIG=")
    assert.equal(0, rc, out)
    assert.matches("%-%-log%-level info", out)
    assert.matches("%-%-dev%-server", out)
    assert.is_nil(out:find("--log-level debug", 1, true))
  end)
end)
