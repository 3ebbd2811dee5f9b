-- core.ratelimit: the limiter curves of client-go's default_rate_limiters.go,
-- point by point, with the fake clock.
local core = require("luna.core")

local function limiter(cfg)
  cfg.clock = cfg.clock or "fake"
  return core.ratelimit.new(cfg)
end

local function whens(rl, key, n)
  local out = {}
  for i = 1, n do out[i] = rl:when(key) end
  return out
end

describe("exponential rate limiter", function()
  it("doubles from 5 ms and caps at 1000 s by default", function()
    local rl = limiter({ kind = "exponential" })
    for i = 0, 17 do
      assert.equal(0.005 * 2 ^ i, rl:when("a"), "failure " .. i)
    end
    -- 0.005 * 2^18 = 1310.72 > 1000
    for _ = 1, 5 do assert.equal(1000, rl:when("a")) end
    assert.equal(23, rl:num_requeues("a"))
  end)

  it("resets a key on forget and keeps keys apart", function()
    local rl = limiter({ kind = "exponential", base_delay = 1, max_delay = 10 })
    assert.same({ 1, 2, 4, 8, 10, 10 }, whens(rl, "a", 6))
    assert.same({ 1, 2 }, whens(rl, "b", 2))
    assert.equal(6, rl:num_requeues("a"))
    assert.equal(2, rl:num_requeues("b"))
    rl:forget("a")
    assert.equal(0, rl:num_requeues("a"))
    assert.same({ 1, 2 }, whens(rl, "a", 2))
    assert.equal(4, rl:when("b"))
    rl:forget("never-seen")
    assert.equal(0, rl:num_requeues("never-seen"))
  end)

  it("stays at the cap for very many failures (no overflow)", function()
    local rl = limiter({ kind = "exponential", base_delay = 0.001, max_delay = 60 })
    local last
    for _ = 1, 5000 do last = rl:when("a") end
    assert.equal(60, last)
    assert.equal(5000, rl:num_requeues("a"))
    local huge = limiter({ kind = "exponential", base_delay = 1e300, max_delay = 1e308 })
    assert.same({ 1e300, 2e300, 4e300 }, whens(huge, "a", 3))
    for _ = 1, 2000 do last = huge:when("a") end
    assert.equal(1e308, last)
  end)

  it("returns 0 throughout with a zero base delay", function()
    local rl = limiter({ kind = "exponential", base_delay = 0, max_delay = 5 })
    local got = whens(rl, "a", 2000)
    assert.equal(0, got[1])
    assert.equal(0, got[2000])
  end)

  it("caps below the base delay when max_delay is smaller", function()
    local rl = limiter({ kind = "exponential", base_delay = 2, max_delay = 1 })
    assert.same({ 1, 1 }, whens(rl, "a", 2))
  end)
end)

describe("bucket rate limiter", function()
  it("lets a burst through, then spaces by 1/qps (defaults 10 qps, burst 100)", function()
    local rl = limiter({ kind = "bucket" })
    for i = 1, 100 do assert.equal(0, rl:when("k" .. i), "call " .. i) end
    -- x/time/rate reservations: the n-th call beyond the burst waits n/qps.
    assert.equal(1 / 10, rl:when("x"))
    assert.equal(2 / 10, rl:when("y"))
    assert.equal(3 / 10, rl:when("z"))
  end)

  it("refills over time, pays off debt first, and never beyond the burst", function()
    local rl = limiter({ kind = "bucket", qps = 2, burst = 3 })
    assert.same({ 0, 0, 0, 0.5, 1.0 }, whens(rl, "a", 5)) -- tokens now -2
    rl:advance(0.5)                                       -- -2 + 1 = -1
    assert.equal(1.0, rl:when("a"))                       -- -2 → 1 s
    rl:advance(1.25)                                      -- -2 + 2.5 = 0.5
    assert.equal(0.25, rl:when("a"))                      -- -0.5 → 0.25 s
    rl:advance(100)                                       -- full: 3, not 200
    assert.same({ 0, 0, 0, 0.5 }, whens(rl, "b", 4))
  end)

  it("starts full whatever the clock reads", function()
    local rl = limiter({ kind = "bucket", qps = 1, burst = 2 })
    rl:advance(12345)
    assert.same({ 0, 0, 1, 2 }, whens(rl, "a", 4))
  end)

  it("is one bucket for all keys: forget does nothing, num_requeues is 0", function()
    local rl = limiter({ kind = "bucket", qps = 1, burst = 1 })
    assert.equal(0, rl:when("a"))
    assert.equal(1, rl:when("b"))
    rl:forget("b")
    assert.equal(2, rl:when("c"))
    assert.equal(0, rl:num_requeues("a"))
  end)

  it("never waits with qps = math.huge", function()
    local rl = limiter({ kind = "bucket", qps = math.huge, burst = 1 })
    assert.same({ 0, 0, 0 }, whens(rl, "a", 3))
  end)
end)

describe("fast_slow rate limiter", function()
  it("is fast for the first attempts, slow after, per key", function()
    local rl = limiter({ kind = "fast_slow", fast_delay = 0.1, slow_delay = 30, max_fast_attempts = 2 })
    assert.same({ 0.1, 0.1, 30, 30 }, whens(rl, "a", 4))
    assert.same({ 0.1 }, whens(rl, "b", 1))
    assert.equal(4, rl:num_requeues("a"))
    rl:forget("a")
    assert.same({ 0.1, 0.1, 30 }, whens(rl, "a", 3))
  end)

  it("is always slow with max_fast_attempts = 0", function()
    local rl = limiter({ kind = "fast_slow", fast_delay = 1, slow_delay = 2, max_fast_attempts = 0 })
    assert.same({ 2, 2 }, whens(rl, "a", 2))
  end)
end)

describe("max_of rate limiter", function()
  it("returns the largest delay, forgets in all, counts the most requeues", function()
    local rl = limiter({ kind = "max_of",
      { kind = "exponential", base_delay = 1, max_delay = 100 },
      { kind = "fast_slow", fast_delay = 3, slow_delay = 50, max_fast_attempts = 2 },
    })
    assert.same({ 3, 3, 50, 50, 50, 50, 64, 100 }, whens(rl, "a", 8))
    assert.equal(8, rl:num_requeues("a"))
    rl:forget("a")
    assert.equal(0, rl:num_requeues("a"))
    assert.same({ 3 }, whens(rl, "a", 1))
  end)

  it("nests", function()
    local rl = limiter({ kind = "max_of",
      { kind = "max_of", { kind = "bucket", qps = 1, burst = 1 } },
      { kind = "exponential", base_delay = 0.5, max_delay = 10 },
    })
    assert.same({ 0.5, 1, 2, 4 }, whens(rl, "a", 4)) -- bucket: 0, 1, 2, 3
    assert.equal(4, rl:when("b"))                    -- bucket debt 4 > 0.5
  end)
end)

describe("default rate limiter", function()
  it("is the max of exponential(5 ms, 1000 s) and bucket(10 qps, 100)", function()
    local rl = limiter({})
    -- One key: the exponential curve dominates while the bucket has tokens.
    for i = 0, 9 do assert.equal(0.005 * 2 ^ i, rl:when("a")) end
    -- 90 more distinct keys use up the bucket...
    for i = 1, 90 do assert.equal(0.005, rl:when("k" .. i)) end
    -- ...then the bucket's wait exceeds a new key's 5 ms.
    assert.equal(0.1, rl:when("late"))
    assert.equal(10, rl:num_requeues("a"))
    rl:forget("a")
    assert.equal(0, rl:num_requeues("a"))
  end)

  it("takes its four numbers from the description", function()
    local rl = limiter({ base_delay = 1, max_delay = 4, qps = 1, burst = 2 })
    assert.same({ 1, 2, 4, 4 }, whens(rl, "a", 4)) -- bucket: 0, 0, 1, 2
    assert.equal(3, rl:when("b"))                  -- bucket debt 3 > 1
    rl = limiter({ kind = "default", base_delay = 0.25 })
    assert.equal(0.25, rl:when("a"))
  end)

  it("runs on the real clock by default", function()
    local rl = core.ratelimit.new({ kind = "exponential" })
    assert.equal(0.005, rl:when("a"))
    assert.is_true(rl:now() > 0)
    assert.has_error(function() rl:advance(1) end,
      'advance: this rate limiter runs on the real clock (create it with clock = "fake")')
  end)
end)

describe("core.ratelimit.new", function()
  it("raises on bad descriptions", function()
    local cases = {
      { { kind = "linear" }, "unknown kind 'linear'" },
      { { kind = 5 }, "field 'kind' must be a string" },
      { { kind = "exponential", qps = 1 }, "rate limiter exponential: unknown field 'qps'" },
      { { kind = "bucket", base_delay = 1 }, "rate limiter bucket: unknown field 'base_delay'" },
      { { base_dealy = 1 }, "rate limiter default: unknown field 'base_dealy'" },
      { { base_delay = "1" }, "field 'base_delay' must be a number" },
      { { kind = "exponential", base_delay = -0.1 }, "base_delay must be a finite number of seconds >= 0" },
      { { kind = "exponential", base_delay = 0 / 0 }, "base_delay must be a finite number" },
      { { kind = "exponential", max_delay = math.huge }, "max_delay must be a finite number" },
      { { kind = "bucket", qps = 0 }, "qps must be > 0" },
      { { kind = "bucket", qps = -1 }, "qps must be > 0" },
      { { kind = "bucket", qps = 0 / 0 }, "qps must be > 0" },
      { { kind = "bucket", burst = 0 }, "burst must be an integer from 1" },
      { { kind = "bucket", burst = 2.5 }, "burst must be an integer from 1" },
      { { kind = "bucket", burst = 2 ^ 40 }, "burst must be an integer from 1" },
      { { kind = "fast_slow", fast_delay = 1, slow_delay = 2, max_fast_attempts = -1 },
        "max_fast_attempts must be an integer from 0" },
      { { kind = "fast_slow", fast_delay = 1, slow_delay = -1, max_fast_attempts = 1 },
        "slow_delay must be a finite number" },
      { { kind = "fast_slow", fast_delay = 1, slow_delay = 2 },
        "rate limiter fast_slow: field 'max_fast_attempts' is required" },
      { { kind = "fast_slow", slow_delay = 2, max_fast_attempts = 1 },
        "rate limiter fast_slow: field 'fast_delay' is required" },
      { { kind = "max_of" }, "max_of: needs at least one child" },
      { { kind = "max_of", "bucket" }, "child 1 must be a table, got string" },
      { { kind = "max_of", { kind = "bucket", burst = 0 } }, "bucket rate limiter: burst must be" },
      { { kind = "max_of", { kind = "bucket", clock = "fake" } }, "unknown field 'clock'" },
      { { kind = "max_of", { kind = "bucket" }, x = 1 }, "rate limiter max_of: unknown field 'x'" },
      { { kind = "bucket", [1] = {} }, "unexpected number key" },
      { { kind = "max_of", { kind = "bucket" }, [3] = {} }, "unexpected number key" },
      { { clock = "slow" }, "field 'clock' must be \"real\" or \"fake\"" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(core.ratelimit.new, c[1])
      assert.is_false(ok, c[2])
      assert.is_truthy(tostring(err):find(c[2], 1, true), tostring(err) .. " should contain " .. c[2])
    end
    assert.has_error(function() core.ratelimit.new() end)
    assert.has_error(function() core.ratelimit.new("bucket") end)
  end)

  it("raises on descriptions with too many limiters", function()
    local deep = { kind = "exponential" }
    for _ = 1, 40 do deep = { kind = "max_of", deep } end
    assert.has_error(function() core.ratelimit.new(deep) end,
      "rate limiter: more than 32 limiters in one description")
    local wide = { kind = "max_of" }
    for i = 1, 40 do wide[i] = { kind = "bucket" } end
    assert.has_error(function() core.ratelimit.new(wide) end,
      "rate limiter: more than 32 limiters in one description")
  end)

  it("raises on bad keys and bad advances", function()
    local rl = limiter({})
    assert.has_error(function() rl:when(1) end)
    assert.has_error(function() rl:when("a\0b") end)
    assert.has_error(function() rl:forget(nil) end)
    assert.has_error(function() rl:num_requeues({}) end)
    assert.has_error(function() rl:advance(-1) end)
    assert.has_error(function() rl:advance(0 / 0) end)
    assert.has_error(function() rl:advance("1") end)
    assert.equal(0, rl:now())
  end)

  it("has a fake clock that starts at 0", function()
    local rl = limiter({ kind = "bucket" })
    assert.equal(0, rl:now())
    rl:advance(2.5)
    assert.equal(2.5, rl:now())
    assert.matches("^luna.ratelimiter %(", tostring(rl))
  end)
end)
