-- SIGTERM while reconciles wait on slow API calls (the dev server delays
-- every answer): luna stops taking keys, lets them finish, releases the
-- Lease, exits 0 — or abandons them once the grace period is over.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local S = require("15-production.support")
local cjson = require("cjson")

local SLOW = [[
local luna = require "luna"
return luna.controller {
  name = "slow",
  workers = 3,
  watch = { "v1/ConfigMap", namespace = %q, labels = { app = "slow" } },
  reconcile = function(req)
    luna.log.info("slow reconcile begin", { name = req.name })
    local obj, err = luna.get("v1/ConfigMap", req.namespace, req.name)
    luna.log.info("slow reconcile end", { name = req.name, ok = tostring(obj ~= nil) })
    if err then return nil, err end
  end,
}
]]

if client.real() then
  describe("luna run shutdown", function()
    pending(client.DEV_ONLY .. "slow API answers need the delay fault")
  end)
  return
end

describe("luna run shutdown", function()
  local srv, luna
  local creators = {}

  before_each(function() srv = client.start({ args = { "--admin" } }) end)
  after_each(function()
    for _, p in ipairs(creators) do p:stop() end
    creators = {}
    if luna then luna:stop() end
    luna = nil
    srv:stop()
  end)

  local function faults(spec)
    assert.equal(200, (srv:request("PUT", "/luna/v1/faults", spec, { content_type = "text/plain" })))
  end

  -- Creates the ConfigMaps without waiting for the (delayed) answers; the
  -- watch sees them at once, so their reconciles start and wait.
  local function create_slowly(names)
    for _, name in ipairs(names) do
      local body = cjson.encode({ apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = name, labels = { app = "slow" } }, data = { k = "v" } })
      creators[#creators + 1] = helpers.spawn({ "env", "-u", "LD_PRELOAD", "curl", "-s", "-X", "POST",
        "-H", "Content-Type: application/json", "--data-binary", body,
        srv.url .. srv:ns_path("configmaps") }, { stderr = false })
    end
  end

  local function start(opts)
    luna = S.start(srv, S.controllers({ ["slow.lua"] = SLOW:format(srv.ns) }), opts)
    luna:await("controller started", 15)
  end

  local function await_begins(n)
    helpers.eventually(function() return luna:count("slow reconcile begin") >= n end, 10,
                       n .. " reconciles in flight")
  end

  -- Position of the first line after `from` containing text (plain).
  local function at(out, text, from)
    local i = out:find(text, from or 1, true)
    assert(i, "no '" .. text .. "' in:\n" .. out)
    return i
  end

  it("finishes in-flight reconciles, then releases the lease, then exits 0", function()
    start({ name = "pod-s", leader = true, lease = { 15, 10, 2 } })
    faults("delay=1.5")
    create_slowly({ "a", "b", "c" })
    await_begins(3)
    luna:kill(15)
    assert.equal(0, luna:wait(20))
    faults("")
    local out = luna:output()
    local requested = at(out, "shutdown requested signal=SIGTERM")
    local ends = {}
    for line in out:gmatch("[^\n]*slow reconcile end[^\n]*") do ends[#ends + 1] = line end
    assert.equal(3, #ends, out)
    local last_end = requested
    for _, line in ipairs(ends) do
      assert.matches("ok=true", line, 1, true)
      last_end = math.max(last_end, at(out, line))
      assert.is_true(at(out, line) > requested, "reconcile ended before SIGTERM:\n" .. out)
    end
    local released = at(out, "leader lease released", requested)
    assert.is_true(released > last_end, out)
    assert.is_true(at(out, "shutdown complete", requested) > released, out)
    assert.equal("", S.lease(srv, "luna-spec").spec.holderIdentity)
  end)

  it("abandons reconciles still running when the grace period is over, and exits 0", function()
    start({ args = { "--shutdown-grace-period=0.5" } })
    faults("delay=5")
    create_slowly({ "a", "b" })
    await_begins(2)
    luna:kill(15)
    assert.equal(0, luna:wait(10))
    faults("")
    local out = luna:output()
    local over = at(out, "shutdown grace period over: abandoning in-flight reconciles",
                    at(out, "shutdown requested"))
    assert.is_true(at(out, "shutdown complete") > over)
    assert.is_nil(out:find("slow reconcile end", 1, true), out)
  end)

  -- After the grace period the reload is freed, but with a Lease the
  -- loop and the metrics server run on while it is released: a scrape
  -- then read the freed reload's states (luna_lua_memory_bytes).
  it("answers scrapes while the Lease is released after the grace period", function()
    start({ name = "pod-g", leader = true, lease = { 15, 10, 2 },
            args = { "--shutdown-grace-period=0.5" } })
    faults("delay=4")
    create_slowly({ "a", "b" })
    await_begins(2)
    luna:kill(15)
    luna:await("shutdown grace period over", 10)
    local code, body = S.get(luna.metrics .. "/metrics")
    assert.equal(200, code)
    assert.matches('luna_lua_memory_bytes{state="controllers"} 0\n', body, 1, true)
    assert.equal(0, luna:wait(20))
    faults("")
    local out = luna:output()
    assert.is_true(at(out, "leader lease released") > at(out, "shutdown grace period over"), out)
  end)

  it("exits 1 at once on a second signal", function()
    start()
    faults("delay=5")
    create_slowly({ "a" })
    await_begins(1)
    luna:kill(15)
    luna:await("shutdown requested", 5)
    luna:kill(2)
    assert.equal(1, luna:wait(5))
    faults("")
    assert.matches("second signal: exiting now", luna:output(), 1, true)
  end)
end)
