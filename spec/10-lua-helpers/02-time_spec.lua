-- luna.time: RFC 3339 formatting and parsing, and the `now` argument.
local time = require("luna.time")
local S = require("10-lua-helpers.support")

local T0 = 1795327200 -- 2026-11-22T06:00:00Z

describe("luna.time.format", function()
  it("writes metav1.Time: UTC, whole seconds, rounded down", function()
    assert.equal("2026-11-22T06:00:00Z", time.format(T0))
    assert.equal("2026-11-22T06:00:00Z", time.format(T0 + 0.999))
    assert.equal("1970-01-01T00:00:00Z", time.format(0))
    assert.equal("2024-02-29T23:59:59Z", time.format(1709251199))
  end)

  it("normalises an RFC 3339 string", function()
    assert.equal("2026-11-22T06:00:00Z", time.format("2026-11-22T07:00:00+01:00"))
    assert.equal("2026-11-22T06:00:00Z", time.format("2026-11-22T06:00:00.75Z"))
  end)
end)

describe("luna.time.format_micro", function()
  it("writes metav1.MicroTime with six digits", function()
    assert.equal("2026-11-22T06:00:00.000000Z", time.format_micro(T0))
    assert.equal("2026-11-22T06:00:00.500000Z", time.format_micro(T0 + 0.5))
    assert.equal("2026-11-22T06:00:00.000001Z", time.format_micro("2026-11-22T06:00:00.000001Z"))
    assert.equal("2026-11-22T06:00:00.123456Z", time.format_micro("2026-11-22T06:00:00.123456Z"))
  end)

  it("rounds to the nearest microsecond, carrying into the second", function()
    assert.equal("2026-11-22T06:00:01.000000Z", time.format_micro("2026-11-22T06:00:00.9999996Z"))
    assert.equal(T0 * 1e6 + 1, time.micros(T0 + 0.000001))
  end)
end)

describe("luna.time.parse", function()
  it("reads UTC, offsets and fractions", function()
    assert.equal(T0, time.parse("2026-11-22T06:00:00Z"))
    assert.equal(T0, time.parse("2026-11-22t06:00:00z"))
    assert.equal(T0, time.parse("2026-11-22T08:30:00+02:30"))
    assert.equal(T0, time.parse("2026-11-21T23:00:00-07:00"))
    assert.equal(T0 + 0.25, time.parse("2026-11-22T06:00:00.25Z"))
    assert.equal(0, time.parse("1970-01-01T00:00:00Z"))
    assert.equal(-86400, time.parse("1969-12-31T00:00:00Z"))
    assert.equal(951782400, time.parse("2000-02-29T00:00:00Z"))
  end)

  it("agrees with os.date over four centuries of instants", function()
    for t = -2208988800, 7258118400, 86400 * 97 + 3607 do
      local s = os.date("!%Y-%m-%dT%H:%M:%SZ", t)
      assert.equal(t, time.parse(s), s)
      assert.equal(s, time.format(t))
    end
  end)

  it("refuses malformed text with nil, message", function()
    local bad = {
      "", "2026-11-22", "2026-11-22 06:00:00Z", "2026-11-22T06:00:00",
      "2026-11-22T06:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
      "2026-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-11-22T24:00:00Z",
      "2026-11-22T06:60:00Z", "2026-11-22T06:00:61Z", "2026-11-22T06:00:00.Z",
      "2026-11-22T06:00:00+0100", "2026-11-22T06:00:00+24:00", "2026-11-22T06:00:00ZZ",
      " 2026-11-22T06:00:00Z", "26-11-22T06:00:00Z",
    }
    for _, s in ipairs(bad) do
      local v, err = time.parse(s)
      assert.is_nil(v, s)
      assert.matches("invalid time", err, 1, true)
    end
    local v, err = time.parse(42)
    assert.is_nil(v)
    assert.equal("time must be an RFC 3339 string, got number", err)
  end)
end)

describe("luna.time.resolve", function()
  it("defaults to the wall clock, with a fraction", function()
    -- os.time() reads the kernel's coarse clock, which may lag the precise
    -- one by a tick across a second boundary: allow that second.
    local before = os.time()
    local now = time.resolve(nil)
    assert.is_true(now >= before - 1 and now < os.time() + 2, tostring(now))
    assert.is_true(time.now() >= now)
  end)

  it("passes numbers through and parses strings", function()
    assert.equal(12.5, time.resolve(12.5))
    assert.equal(T0, time.resolve("2026-11-22T06:00:00Z"))
  end)

  it("raises on bad values, at the caller's line", function()
    S.raises("now: invalid time \"yesterday\"", function() time.format("yesterday") end)
    S.raises("now must be nil, seconds since the epoch or an RFC 3339 string, got table",
             function() time.format({}) end)
    S.raises("now must be a finite number", function() time.format(0 / 0) end)
    S.raises("now must be a finite number", function() time.format_micro(math.huge) end)
    S.raises("now must be a finite number", function() time.resolve(-math.huge) end)
  end)
end)
