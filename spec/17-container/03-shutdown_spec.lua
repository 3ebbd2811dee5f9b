-- `docker stop` (SIGTERM, then SIGKILL after the pod's grace period) while
-- reconciles wait on a slow API server: luna stops taking keys, lets
-- every reconcile in flight finish, releases its Lease and exits 0 within
-- the grace period.
local C = require("17-container.support")

local skip = C.skip_reason()

describe("docker stop #container", function()
  if skip then
    pending(skip)
    return
  end

  local api, pod

  setup(function()
    api = C.apiserver()
    api:make_objects(3)
    pod = C.pod(api, C.configmap({ ["recorder.lua"] = C.recorder(api.ns, "v1") }))
    pod:await("controller started", 60)
    C.wait(function() return api:all_stamped("v1", 3) end, 60, "v1 on every object")
  end)

  teardown(function()
    if api then api:stop() end
  end)

  it("drains the reconciles in flight, releases the Lease and exits 0 within the grace period", function()
    pod:pump()
    local from = #pod.lines + 1
    api:slow(true)
    -- changed objects: their watch events, then their GETs, come 3 s late
    for i = 1, 3 do
      local code = api:request("PATCH", api:ns_path("configmaps", "ct-" .. i),
        { metadata = { annotations = { ["luna-ct/version"] = "changed" } } },
        { content_type = "application/merge-patch+json" })
      assert.equal(200, code)
    end
    C.wait(function()
      local n = 0
      for i = from, #pod.lines do if pod.lines[i].msg == "ct begin" then n = n + 1 end end
      pod:pump()
      return n >= 2
    end, 30, "two reconciles in flight")
    local code, took = pod:stop()
    assert.equal(0, code, pod:dump())
    assert.is_true(took < pod.grace, ("docker stop took %.1fs of %ds"):format(took, pod.grace))

    -- every reconcile that began finished, after SIGTERM and before the end
    local _, sigterm = pod:await("shutdown requested signal=SIGTERM", 1, from)
    local _, released = pod:await("leader lease released", 1, sigterm)
    local _, done = pod:await("shutdown complete", 1, released)
    local open = {}
    local in_flight = 0
    for i = from, #pod.lines do
      local r = pod.lines[i]
      if r.msg == "ct begin" then
        assert.is_true(i < sigterm, "a reconcile began after SIGTERM:\n" .. pod:dump())
        open[r.reconcile_id] = true
      elseif r.msg == "ct end" then
        assert.truthy(open[r.reconcile_id], "an end without a begin")
        assert.equal("true", r.ok, pod:dump())
        assert.is_true(i < released, "a reconcile ended after the Lease was released")
        if i > sigterm then in_flight = in_flight + 1 end
        open[r.reconcile_id] = nil
      end
    end
    assert.same({}, open, "reconciles were abandoned:\n" .. pod:dump())
    assert.is_true(in_flight >= 2, "fewer than two reconciles were in flight at SIGTERM:\n" .. pod:dump())
    assert.is_true(done > released)
    api:slow(false)
    -- the Lease is free for a standby at once
    local lcode, lease = api:request("GET", "/apis/coordination.k8s.io/v1/namespaces/" .. api.ns .. "/leases/luna")
    assert.equal(200, lcode)
    assert.equal("", lease.spec.holderIdentity or "")
  end)
end)
