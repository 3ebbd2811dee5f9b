-- Reflector retry delays: exponential, capped, jittered, reset after health.
local core = require("luna.core")

describe("backoff", function()
  it("doubles from base up to max without jitter", function()
    local b = core.backoff.new{ base = 0.8, max = 30, factor = 2, jitter = 0, reset_after = 120 }
    local got = {}
    for i = 1, 8 do got[i] = b:next(i) end
    assert.same({ 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30 }, got)
  end)

  it("stretches each delay by a jitter factor in [1, 1+jitter)", function()
    local b = core.backoff.new{ base = 1, max = 1, jitter = 1, seed = 42 }
    local distinct = {}
    for i = 1, 200 do
      local d = b:next(i)
      assert.is_true(d >= 1 and d < 2, tostring(d))
      distinct[string.format("%.6f", d)] = true
    end
    local n = 0
    for _ in pairs(distinct) do n = n + 1 end
    assert.is_true(n > 150, "jitter should vary, got " .. n .. " distinct delays")
  end)

  it("is reproducible for a seed", function()
    local a = core.backoff.new{ seed = 7 }
    local b = core.backoff.new{ seed = 7 }
    for i = 1, 10 do assert.equal(a:next(i), b:next(i)) end
  end)

  it("starts again from base after a quiet period", function()
    local b = core.backoff.new{ base = 1, max = 100, jitter = 0, reset_after = 60 }
    assert.equal(1, b:next(0)); assert.equal(2, b:next(1)); assert.equal(4, b:next(2))
    assert.equal(8, b:next(61))      -- 59 s since the last failure: keeps growing
    assert.equal(1, b:next(200))     -- quiet for longer than reset_after
  end)

  it("reset forgets past failures", function()
    local b = core.backoff.new{ base = 1, max = 100, jitter = 0 }
    b:next(0); b:next(0); b:reset()
    assert.equal(1, b:next(0))
  end)

  it("defaults to client-go's reflector settings", function()
    local b = core.backoff.new()
    local d = b:next(0)
    assert.is_true(d >= 0.8 and d < 1.6, tostring(d))
  end)

  it("rejects nonsense settings", function()
    assert.has_error(function() core.backoff.new{ base = 0 } end)
    assert.has_error(function() core.backoff.new{ base = 5, max = 1 } end)
  end)
end)
