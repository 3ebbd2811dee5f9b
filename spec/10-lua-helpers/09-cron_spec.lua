-- luna.cron.next(expr, after): the host's cron parser (base/cron.h, the one
-- `every` uses) for scripts: the next run strictly after `after` (default:
-- now), UTC; a bad schedule raises with the messages `every` gives.
local luna = require("luna")

local T0 = 1795327200 -- 2026-11-22T06:00:00Z, a Sunday

describe("luna.cron.next", function()
  it("returns the next minute of the schedule strictly after `after`", function()
    assert.equal(T0 + 300, luna.cron.next("*/5 * * * *", T0))
    assert.equal(T0 + 300, luna.cron.next("*/5 * * * *", T0 + 1))
    assert.equal(T0 + 3 * 3600 - 6 * 3600 + 86400, luna.cron.next("0 3 * * *", T0))
    assert.equal(T0 + 18 * 3600, luna.cron.next("@daily", T0))
    -- Monday 03:00 (the next weekday slot after Sunday 06:00)
    assert.equal(T0 + 21 * 3600, luna.cron.next("0 3 * * 1-5", T0))
  end)

  it("defaults `after` to now", function()
    local before = os.time()
    local t = luna.cron.next("* * * * *")
    assert.is_true(t > before and t <= before + 61, tostring(t))
    assert.equal(0, t % 60)
  end)

  it("raises on a bad schedule with the message `every` gives", function()
    assert.has_error(function() luna.cron.next("61 * * * *", T0) end,
      "luna.cron.next: cron: minute: 61 out of range 0-59")
    assert.has_error(function() luna.cron.next("* * *", T0) end)
    assert.has_error(function() luna.cron.next("0 0 30 2 *", T0) end,
      "luna.cron.next: the schedule never runs")
    assert.has_error(function() luna.cron.next(("1,"):rep(100) .. "1 * * * *", T0) end,
      "luna.cron.next: a schedule of at most 128 bytes")
    assert.has_error(function() luna.cron.next(5, T0) end,
      "luna.cron.next: the schedule must be a string, got number")
  end)

  it("raises on a bad `after`", function()
    for _, v in ipairs({ 0 / 0, math.huge, -math.huge, -1, "soon", true }) do
      local ok, err = pcall(luna.cron.next, "* * * * *", v)
      assert.is_false(ok)
      assert.matches("luna.cron.next: after must be", err)
    end
  end)

  it("returns nil when the schedule has no run within five years", function()
    -- Feb 29 after 2097-03-01: 2100 is no leap year, the next is 2104
    assert.is_nil(luna.cron.next("0 0 29 2 *", 4012934400)) -- 2097-03-01
    assert.equal(3981312000, luna.cron.next("0 0 29 2 *", 3981312000 - 1)) -- 2096-02-29
  end)
end)
