-- Two `luna run --leader-elect` replicas against one dev server: exactly
-- one reconciles; a killed leader is replaced once its lease expires, a
-- leader stopped with SIGTERM releases the Lease so the standby takes over
-- at once.  Each replica's controller records its pod name in the
-- ConfigMaps it reconciles.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local S = require("15-production.support")

local CONTROLLER = [[
local luna = require "luna"
local ME = %q
return luna.controller {
  name = "recorder",
  watch = { "v1/ConfigMap", namespace = %q, labels = { app = "election" } },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm or (cm.data and cm.data.reconciled_by == ME) then return end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name,
                              { data = { reconciled_by = ME } })
    if err then return nil, err end
  end,
}
]]

describe("luna run --leader-elect", function()
  local srv
  local running = {}

  before_each(function() srv = client.start() end)
  after_each(function()
    for _, l in ipairs(running) do l:stop() end
    running = {}
    srv:stop()
  end)

  local function replica(name, lease)
    local dir = S.controllers({ ["recorder.lua"] = CONTROLLER:format(name, srv.ns) })
    local l = S.start(srv, dir, { name = name, leader = true, lease = lease })
    running[#running + 1] = l
    return l
  end

  local function reconciled_by(cm)
    local code, obj = srv:request("GET", srv:ns_path("configmaps", cm))
    return code == 200 and obj.data and obj.data.reconciled_by or nil
  end

  local function probe(name)
    srv:create_cm(name, { k = "v" }, { app = "election" })
    local who
    helpers.eventually(function() who = reconciled_by(name); return who ~= nil end, 10,
                       name .. " to be reconciled")
    return who
  end

  -- Starts two replicas and returns leader, standby once one leads and the
  -- other has seen it.
  local function pair(lease)
    local a, b = replica("pod-a", lease), replica("pod-b", lease)
    local leader, standby
    helpers.eventually(function()
      if a:count("leader lease acquired") > 0 then leader, standby = a, b end
      if b:count("leader lease acquired") > 0 then leader, standby = b, a end
      return leader ~= nil
    end, 15, "a leader")
    standby:await("new leader elected lease=%S+ identity=" .. leader.name:gsub("%-", "%%-"), 10)
    standby:await("caches synced", 10)
    return leader, standby
  end

  it("elects exactly one leader; only it reconciles, the standby is ready and warm", function()
    local leader, standby = pair()
    assert.equal(leader.name, S.lease(srv, "luna-spec").spec.holderIdentity)
    assert.equal(leader.name, probe("first"))
    assert.equal(leader.name, probe("second"))
    assert.equal(1, leader:count("controller started controller=recorder"))
    assert.equal(0, standby:count("controller started"))
    assert.equal(0, standby:count("leader lease acquired"))
    -- a standby with synced caches that sees the Lease is ready
    local code, body = S.get(standby.health .. "/readyz?verbose")
    assert.equal(200, code, body)
    assert.matches("[+]leader-or-standby ok", body, 1, true)
    assert.matches("[+]informers-synced ok", body, 1, true)
    assert.equal(1, S.value(S.scrape(leader), "leader_election_master_status", { name = "luna-spec" }))
    assert.equal(0, S.value(S.scrape(standby), "leader_election_master_status", { name = "luna-spec" }))
  end)

  it("after SIGKILL of the leader, the standby takes over once the lease expires", function()
    local leader, standby = pair({ 2, 1.5, 0.3 })
    assert.equal(leader.name, probe("before"))
    leader:kill(9)
    assert.equal(137, leader:wait(5))
    -- expiry: 2 s after the standby last saw a renewal, plus one retry
    standby:await("leader lease acquired", 8)
    standby:await("controller started controller=recorder", 5)
    local spec = S.lease(srv, "luna-spec").spec
    assert.equal(standby.name, spec.holderIdentity)
    assert.equal(1, spec.leaseTransitions)
    assert.equal(standby.name, probe("after"))
  end)

  it("after SIGTERM the leader releases the lease and the standby takes over at once", function()
    -- a 30 s lease: only a release lets the standby in within the 8 s below
    local leader, standby = pair({ 30, 20, 0.3 })
    leader:kill(15)
    assert.equal(0, leader:wait(10))
    local out = leader:output()
    local released = out:find("leader lease released", 1, true)
    assert.truthy(released, out)
    assert.truthy(out:find("shutdown complete", released, true), out)
    standby:await("leader lease acquired", 8)
    assert.equal(standby.name, S.lease(srv, "luna-spec").spec.holderIdentity)
    assert.equal(standby.name, probe("after-term"))
  end)

  it("exits 1 when another holder takes the lease away", function()
    local dir = S.controllers({ ["recorder.lua"] = CONTROLLER:format("pod-a", srv.ns) })
    local l = S.start(srv, dir, { name = "pod-a", leader = true, lease = { 2, 1.5, 0.3 } })
    running[#running + 1] = l
    l:await("controller started", 10)
    -- the leader renews every 0.3 s, so a PUT from a read races it (409
    -- whenever a renewal lands between, as it keeps doing on a busy
    -- machine); a merge patch names no resourceVersion and always lands
    local code = srv:request("PATCH", "/apis/coordination.k8s.io/v1/namespaces/" .. srv.ns ..
      "/leases/luna-spec", { spec = { holderIdentity = "intruder", leaseDurationSeconds = 3600 } },
      { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
    l:await("leader election lost", 8)
    assert.equal(1, l:wait(5))
    assert.matches("stopping: leader election lost", l:output(), 1, true)
    assert.equal("intruder", S.lease(srv, "luna-spec").spec.holderIdentity)
  end)
end)
