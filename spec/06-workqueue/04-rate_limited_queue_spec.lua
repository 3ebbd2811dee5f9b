-- core.workqueue add_rate_limited / forget / num_requeues (client-go's
-- rate_limiting_queue.go) end to end with the fake clock.
local core = require("luna.core")

local function drain_keys(q)
  local keys = {}
  while true do
    local k = q:get()
    if not k then return keys end
    keys[#keys + 1] = k
  end
end

describe("workqueue add_rate_limited", function()
  it("retries a failing key with growing delays until it is forgotten", function()
    local q = core.workqueue.new({ clock = "fake", base_delay = 1, max_delay = 4 })
    -- A reconcile loop that fails every time: the key comes back after
    -- 1, 2, 4, 4 seconds.
    for attempt, delay in ipairs({ 1, 2, 4, 4 }) do
      assert.is_true(q:add_rate_limited("ns/a"))
      assert.equal(attempt, q:num_requeues("ns/a"))
      q:advance(delay / 2)
      assert.same({}, drain_keys(q), "early at attempt " .. attempt)
      q:advance(delay / 2)
      assert.same({ "ns/a" }, drain_keys(q), "attempt " .. attempt)
      q:done("ns/a")
    end
    -- Success: forget ends the backoff.
    q:forget("ns/a")
    assert.equal(0, q:num_requeues("ns/a"))
    q:add_rate_limited("ns/a")
    q:advance(1)
    assert.same({ "ns/a" }, drain_keys(q))
  end)

  it("adds at once while the default limiter has no delay", function()
    local q = core.workqueue.new({ clock = "fake", base_delay = 0, qps = 1, burst = 2 })
    q:add_rate_limited("a")
    q:add_rate_limited("b")
    assert.same({ "a", "b" }, drain_keys(q))
    -- The bucket is empty: the third key waits 1/qps.
    q:add_rate_limited("c")
    assert.equal(1, q:metrics().waiting)
    q:advance(0.5)
    assert.same({}, drain_keys(q))
    q:advance(0.5)
    assert.same({ "c" }, drain_keys(q))
  end)

  it("uses the default limiter (5 ms base) when none is configured", function()
    local q = core.workqueue.new({ clock = "fake" })
    q:add_rate_limited("a")
    q:add_rate_limited("a")            -- the waiting entry keeps its earlier time
    assert.equal(2, q:num_requeues("a"))
    q:advance(0.004)
    assert.same({}, drain_keys(q))
    q:advance(0.001)
    assert.same({ "a" }, drain_keys(q))
  end)

  it("takes any limiter description", function()
    local q = core.workqueue.new({ clock = "fake", rate_limiter = {
      kind = "fast_slow", fast_delay = 1, slow_delay = 60, max_fast_attempts = 1 } })
    q:add_rate_limited("a")
    q:advance(1)
    assert.same({ "a" }, drain_keys(q))
    q:done("a")
    q:add_rate_limited("a")
    q:advance(59)
    assert.same({}, drain_keys(q))
    q:advance(1)
    assert.same({ "a" }, drain_keys(q))
    assert.equal(2, q:num_requeues("a"))
  end)

  it("keeps the retry history of a key apart from whether it is queued", function()
    local q = core.workqueue.new({ clock = "fake", base_delay = 1, max_delay = 100 })
    q:add_rate_limited("a")
    q:add_rate_limited("b")
    q:forget("b")
    assert.equal(1, q:num_requeues("a"))
    assert.equal(0, q:num_requeues("b"))
    q:advance(1)
    assert.same({ "a", "b" }, drain_keys(q)) -- forget does not cancel the retry
  end)

  it("is dropped after shutdown without consulting the limiter", function()
    local q = core.workqueue.new({ clock = "fake" })
    q:add_rate_limited("a")
    q:shutdown()
    assert.is_false(q:add_rate_limited("a"))
    assert.equal(1, q:num_requeues("a"))
    assert.equal(1, q:metrics().retries_total)
  end)
end)
