-- Replicas of the Deployment with --leader-elect (client-go's timing, as
-- deployed: lease 15 s, renew deadline 10 s, retry 2 s): exactly one
-- reconciles; when the leader is killed the standby takes over once the
-- lease has expired; a leader cut off from the API server stops
-- reconciling before its lease can expire. Checked on a merged log of
-- every replica's reconcile begin/end lines, timestamped by luna and
-- tagged with the replica (its Lease holder identity): no two replicas
-- ever reconcile at the same time.
local C = require("17-container.support")

local skip = C.skip_reason()

local LEASE, RENEW, RETRY, JITTER = 15, 10, 2, 1.2

describe("two replicas with --leader-elect #container", function()
  if skip then
    pending(skip)
    return
  end

  local api, cm
  local pods = {}     -- every replica started, by name
  local ends = {}     -- name -> wall ms when it stopped running (killed, exited)

  local function replica()
    local p = C.pod(api, cm)
    pods[p.name] = p
    return p
  end

  local function lease()
    local code, obj = api:request("GET", "/apis/coordination.k8s.io/v1/namespaces/" .. api.ns .. "/leases/luna")
    assert.equal(200, code)
    return obj
  end

  -- Reconcile intervals of every replica: { pod, from, to } in wall ms. A
  -- reconcile without an end ends when its replica stopped: at its
  -- "stopping: leader election lost" line, or when it was killed.
  local function intervals()
    local list = {}
    for name, p in pairs(pods) do
      p:pump()
      local open, stop = {}, ends[name]
      for _, r in ipairs(p.lines) do
        if r.msg == "stopping: leader election lost" then stop = math.min(stop or math.huge, C.ms(r.ts)) end
      end
      for _, r in ipairs(p.lines) do
        if r.msg == "ct begin" then
          open[r.reconcile_id] = C.ms(r.ts)
        elseif r.msg == "ct end" and open[r.reconcile_id] then
          list[#list + 1] = { pod = name, from = open[r.reconcile_id], to = C.ms(r.ts) }
          open[r.reconcile_id] = nil
        end
      end
      for id, from in pairs(open) do
        assert(stop or p:running(), name .. ": reconcile " .. id .. " never ended")
        list[#list + 1] = { pod = name, from = from, to = stop or C.wall_ms() }
      end
    end
    table.sort(list, function(a, b) return a.from < b.from end)
    return list
  end

  -- No moment at which two replicas reconcile.
  local function assert_never_two()
    local list = intervals()
    for i = 1, #list do
      for j = i + 1, #list do
        local a, b = list[i], list[j]
        if a.pod ~= b.pod and b.from <= a.to then
          error(("%s reconciled over [%d, %d] while %s did over [%d, %d]"):format(a.pod, a.from, a.to,
            b.pod, b.from, b.to))
        end
      end
    end
    return list
  end

  local function begins(p) return #p:records("ct begin") end

  -- The replica that leads now (waits for "controller started").
  local function leader_of(list, secs)
    local found
    C.wait(function()
      for _, p in ipairs(list) do
        p:pump()
        if p:count("^controller started") > 0 then found = p return true end
      end
    end, secs or 60, "a leader")
    return found
  end

  setup(function()
    api = C.apiserver()
    api:make_objects(4)
    cm = C.configmap({ ["recorder.lua"] = C.recorder(api.ns, "v1", 0.3) })
  end)

  teardown(function()
    if api then api:stop() end
  end)

  local a, b, leader, standby

  it("runs the Deployment's election settings", function()
    local spec = table.concat(C.pod_spec().container.args, " ")
    assert.matches("%-%-leader%-elect", spec)
    -- client-go's defaults: the flags are not overridden
    assert.is_nil(spec:find("lease%-duration") or spec:find("renew%-deadline") or spec:find("retry%-period"))
  end)

  it("elects exactly one leader; only it reconciles; the standby is warm and ready", function()
    a, b = replica(), replica()
    leader = leader_of({ a, b })
    standby = leader == a and b or a
    standby:await("caches synced", 30)
    standby:await("new leader elected .*identity=" .. leader.name:gsub("%-", "%%-"), 30)
    C.wait(function() return begins(leader) >= 20 end, 30, "the leader reconciling")
    assert.equal(0, begins(standby))
    assert.equal(0, standby:count("^controller started"))
    assert.equal(leader.name, lease().spec.holderIdentity)
    -- probes and metrics of both over the container network
    for _, p in ipairs({ leader, standby }) do
      assert.equal(200, (p:http(C.port("health"), "/readyz")))
      assert.equal(200, (p:http(C.port("health"), "/healthz")))
    end
    assert.equal(1, C.metric(leader:metrics(), "leader_election_master_status", { name = "luna" }))
    assert.equal(0, C.metric(standby:metrics(), "leader_election_master_status", { name = "luna" }))
    assert_never_two()
  end)

  it("when the leader is killed, the standby takes over once the lease has expired", function()
    local killed_at = C.wall_ms()
    leader:kill()
    ends[leader.name] = killed_at
    local renewed = C.ms((lease().spec.renewTime:gsub("(%.%d%d%d)%d*Z$", "%1Z")))
    local rec = standby:await("leader lease acquired", LEASE + 10)
    local took = C.ms(rec.ts)
    -- not before the lease ran out (no two leaders) ...
    assert.is_true(took >= renewed + LEASE * 1000,
      ("took over %d ms after the last renewal"):format(took - renewed))
    -- ... and soon after it. A standby retries every RETRY * (1 + JITTER * u)
    -- seconds, u in [0, 1), as client-go's wait.JitterUntil does: it sees
    -- the last renewal up to one such interval late (its lease clock starts
    -- then), and takes over at its first retry once that clock has run
    -- LEASE: at most two intervals past the lease's own expiry.
    local slowest = RETRY * (1 + JITTER)
    assert.is_true(took <= renewed + (LEASE + 2 * slowest + 1) * 1000,
      ("took over %d ms after the last renewal (%d ms after the kill)"):format(took - renewed,
        took - killed_at))
    standby:await("controller started", 30)
    local n = begins(standby)
    C.wait(function() return begins(standby) >= n + 10 end, 30, "the new leader reconciling")
    assert_never_two()
    leader, standby = standby, replica()
    standby:await("caches synced", 30)
  end)

  it("a leader cut off from the API server stops reconciling before its lease can expire", function()
    standby:await("new leader elected .*identity=" .. leader.name:gsub("%-", "%%-"), 30)
    C.wait(function() return begins(leader) >= 10 end, 30, "the leader reconciling")
    local cut_at = C.wall_ms()
    leader:disconnect()
    -- it gives up once a renewal round misses the renew deadline, and exits 1
    local lost = leader:await("stopping: leader election lost", RENEW + 10)
    C.wait(function() return not leader:running() end, 20, "the cut-off leader to exit")
    assert.equal(1, leader:exit_code())
    ends[leader.name] = C.ms(lost.ts)
    local rec = standby:await("leader lease acquired", LEASE + 15)
    standby:await("controller started", 30)
    local n = begins(standby)
    C.wait(function() return begins(standby) >= n + 10 end, 30, "the new leader reconciling")
    -- the old leader's last reconcile ended before the new one's lease began
    local last = 0
    for _, iv in ipairs(intervals()) do
      if iv.pod == leader.name then last = math.max(last, iv.to) end
    end
    assert.is_true(last < C.ms(rec.ts), "the cut-off leader reconciled after the takeover")
    assert.is_true(C.ms(lost.ts) - cut_at <= (RENEW + RETRY * JITTER + 1) * 1000,
      ("the cut-off leader stopped %d ms after the cut"):format(C.ms(lost.ts) - cut_at))
    assert_never_two()
  end)
end)
