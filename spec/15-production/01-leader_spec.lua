-- Leader election on a coordination.k8s.io/v1 Lease (core.leader, the C
-- elector `luna run --leader-elect` uses), against the dev server, on fake
-- clocks: each elector acts only when its clock is advanced, so expiry,
-- renewal and deadlines are stepped, not slept.  Lease 2 s, renew
-- deadline 1.5 s, retry 0.3 s, no jitter.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local core = require("luna.core")
local S = require("15-production.support")

describe("leader election", function()
  local srv, kubeconfig
  local electors = {}

  before_each(function()
    srv = client.start({ args = { "--admin" } })
    kubeconfig = S.kubeconfig_for(srv)
  end)
  after_each(function()
    for _, le in ipairs(electors) do le:close() end
    electors = {}
    collectgarbage()
    srv:stop()
  end)

  -- An elector on the spec's Lease; events = what its callbacks saw.
  local function elector(id, opts)
    local events = {}
    local o = { kubeconfig = kubeconfig, name = "lease", namespace = srv.ns, identity = id,
                lease_duration = 2, renew_deadline = 1.5, retry_period = 0.3, jitter = false,
                clock = "fake",
                on_started_leading = function() events[#events + 1] = "started" end,
                on_stopped_leading = function() events[#events + 1] = "stopped" end,
                on_new_leader = function(who) events[#events + 1] = "leader " .. who end }
    for k, v in pairs(opts or {}) do o[k] = v end
    local le = assert(core.leader.new(o))
    electors[#electors + 1] = le
    return le, events
  end

  -- Runs the loop until the elector's attempt (all its requests) is over.
  local function settle(le)
    helpers.eventually(function() return not le:busy() end, 10, "the attempt to end")
  end

  local function lease() return assert(S.lease(srv, "lease"), "no lease").spec end

  it("creates the Lease and leads; a second elector stands by and knows who leads", function()
    local a, ev_a = elector("a")
    a:start()
    settle(a)
    assert.is_true(a:is_leader())
    assert.same({ "leader a", "started" }, ev_a)
    local spec = lease()
    assert.equal("a", spec.holderIdentity)
    assert.equal(2, spec.leaseDurationSeconds)
    assert.equal(0, spec.leaseTransitions)
    assert.matches(S.MICRO_TIME, spec.acquireTime)
    assert.matches(S.MICRO_TIME, spec.renewTime)

    local b, ev_b = elector("b")
    b:start()
    settle(b)
    assert.is_false(b:is_leader())
    assert.equal("a", b:holder())
    assert.same({ "leader a" }, ev_b)
    assert.same({ true, "" }, { b:healthy() })
    assert.equal("a", lease().holderIdentity)
  end)

  it("takes over an expired lease only once leaseDurationSeconds passed since it saw a change", function()
    local a = elector("a")
    a:start()
    settle(a)
    local b, ev_b = elector("b")
    b:start()
    settle(b)
    local acquired = lease().acquireTime
    b:advance(1.9) -- a has not renewed: still valid for 0.1 s on b's clock
    settle(b)
    assert.is_false(b:is_leader())
    b:advance(0.3) -- b's next attempt, 2.2 s after it saw a's last change
    settle(b)
    assert.is_true(b:is_leader())
    assert.same({ "leader a", "leader b", "started" }, ev_b)
    local spec = lease()
    assert.equal("b", spec.holderIdentity)
    assert.equal(1, spec.leaseTransitions)
    assert.are_not.equal(acquired, spec.acquireTime)
  end)

  it("renews every retry period, and each renewal seen restarts the standby's wait", function()
    local a = elector("a")
    a:start()
    settle(a)
    local b = elector("b")
    b:start()
    settle(b)
    local first = lease().renewTime
    a:advance(0.3)
    settle(a)
    assert.are_not.equal(first, lease().renewTime)
    assert.equal(1, a:stats().renewals)
    b:advance(2.1) -- first look since the renewal: observed now, valid until 4.1
    settle(b)
    assert.is_false(b:is_leader())
    b:advance(1.8)
    settle(b)
    assert.is_false(b:is_leader())
    b:advance(0.3)
    settle(b)
    assert.is_true(b:is_leader())
  end)

  it("gives leadership up once a renewal round misses the renew deadline", function()
    local a, ev_a = elector("a")
    a:start()
    settle(a)
    local b = elector("b")
    b:start()
    settle(b)
    b:advance(2.1)
    settle(b)
    assert.is_true(b:is_leader())

    a:advance(0.3) -- round starts: deadline 1.8; the update conflicts, the re-read shows b
    settle(a)
    assert.is_true(a:is_leader())
    assert.is_true(a:stats().conflicts >= 1)
    a:advance(1.0)
    settle(a)
    assert.is_true(a:is_leader())
    a:advance(0.6)
    assert.is_false(a:is_leader())
    assert.same({ "leader a", "started", "leader b", "stopped" }, ev_a)
    assert.is_false(a:busy())
    a:advance(5) -- a lost elector stays stopped
    assert.is_false(a:busy())
    assert.equal("b", lease().holderIdentity)
  end)

  it("releases the lease on request, so a standby takes over at its next attempt", function()
    local a, ev_a = elector("a")
    a:start()
    settle(a)
    local b = elector("b")
    b:start()
    settle(b)
    a:release()
    helpers.eventually(function() return a:released() ~= nil end, 10, "the release")
    assert.is_true(a:released())
    assert.is_false(a:is_leader())
    assert.same({ "leader a", "started", "leader " }, ev_a) -- released, not lost
    local spec = lease()
    assert.equal("", spec.holderIdentity)
    assert.equal(1, spec.leaseDurationSeconds)
    assert.equal(0, spec.leaseTransitions)
    b:advance(0.3) -- long before the 2 s expiry
    settle(b)
    assert.is_true(b:is_leader())
    assert.equal(1, lease().leaseTransitions)
  end)

  it("releases nothing when it does not lead", function()
    local a = elector("a")
    a:start()
    settle(a)
    local b = elector("b")
    b:start()
    settle(b)
    b:release()
    assert.is_false(b:released())
    assert.equal("a", lease().holderIdentity)
  end)

  it("takes its own lease back at once after a restart, without a transition", function()
    local a = elector("a")
    a:start()
    settle(a)
    a:close()
    local again = elector("a")
    again:start()
    settle(again)
    assert.is_true(again:is_leader())
    assert.equal(0, lease().leaseTransitions)
  end)

  it("keeps the Lease's labels and annotations when it writes", function()
    local code = srv:request("POST", "/apis/coordination.k8s.io/v1/namespaces/" .. srv.ns .. "/leases",
      { apiVersion = "coordination.k8s.io/v1", kind = "Lease",
        metadata = { name = "lease", labels = { team = "x" }, annotations = { note = "keep" } },
        spec = { leaseTransitions = 4 } })
    assert.equal(201, code)
    local a = elector("a")
    a:start()
    settle(a)
    assert.is_true(a:is_leader())
    local obj = S.lease(srv, "lease")
    assert.same({ team = "x" }, obj.metadata.labels)
    assert.same({ note = "keep" }, obj.metadata.annotations)
    assert.equal(5, obj.spec.leaseTransitions)
  end)

  it("is an unhealthy standby while the API server fails, and leads once it answers", function()
    if srv.real then return pending(client.DEV_ONLY .. "needs fault injection") end
    assert.equal(200, (srv:request("PUT", "/luna/v1/faults", "error-rate=1,error-code=500",
                                   { content_type = "text/plain" })))
    local a = elector("a")
    a:start()
    settle(a)
    assert.is_false(a:is_leader())
    local ok, reason = a:healthy()
    assert.is_false(ok)
    assert.matches("get lease: HTTP 500", reason, 1, true)
    assert.equal(200, (srv:request("PUT", "/luna/v1/faults", "", { content_type = "text/plain" })))
    a:advance(0.3)
    settle(a)
    assert.is_true(a:is_leader())
    assert.is_true((a:healthy()))
  end)

  it("rejects settings client-go rejects, and bad names", function()
    local base = { kubeconfig = kubeconfig, name = "l", namespace = "ns", identity = "a" }
    local function with(over)
      local o = {}
      for k, v in pairs(base) do o[k] = v end
      for k, v in pairs(over) do o[k] = v end
      return function() core.leader.new(o) end
    end
    assert.has_error(with({ lease_duration = 10, renew_deadline = 10 }),
      "core.leader.new: leader election: lease duration (10 s) must be greater than the renew deadline (10 s)")
    assert.has_error(with({ renew_deadline = 2.4, retry_period = 2 }),
      "core.leader.new: leader election: renew deadline (2.4 s) must be greater than 1.2 x the retry period (2 s)")
    assert.has_error(with({ lease_duration = 0.5, renew_deadline = 0.4, retry_period = 0.1 }),
      "core.leader.new: leader election: lease duration must be at least 1 second, got 0.5")
    assert.has_error(with({ name = "Bad_Name" }),
      'core.leader.new: leader election: lease name "Bad_Name" is not a DNS subdomain name')
    assert.has_error(with({ identity = "" }),
      "core.leader.new: leader election: identity must be non-empty UTF-8 of at most 511 bytes")
    assert.has_error(with({ lease = 3 }), "core.leader.new: unknown field 'lease'")
    assert.has_error(with({ jitter = 0 }), "field 'jitter' must be positive (false: none)")
    assert.has_error(with({ clock = "slow" }), 'field \'clock\' must be "real" or "fake", got "slow"')
    local le, err = core.leader.new({ kubeconfig = "/nonexistent/kubeconfig", name = "l",
                                      namespace = "ns", identity = "a" })
    assert.is_nil(le)
    assert.equal("InvalidConfig", err.reason)
  end)
end)
