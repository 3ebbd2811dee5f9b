-- core.loop: running the libev loop from Lua.
local core = require("luna.core")

describe("core.loop", function()
  it("run_until returns true once the predicate holds", function()
    local n = 0
    assert.is_true(core.loop.run_until(function() n = n + 1; return n >= 3 end, 1))
    assert.equal(3, n)
  end)

  it("run_until returns false when the timeout passes", function()
    local t0 = core.loop.now()
    assert.is_false(core.loop.run_until(function() return false end, 0.05))
    assert.is_true(core.loop.now() - t0 >= 0.04)
  end)

  it("propagates an error raised by the predicate", function()
    local ok, err = pcall(core.loop.run_until, function() error("boom") end, 1)
    assert.is_false(ok)
    assert.matches("boom", err)
  end)

  it("exposes the version", function()
    assert.matches("^%d+%.%d+%.%d+$", core.version)
  end)
end)
