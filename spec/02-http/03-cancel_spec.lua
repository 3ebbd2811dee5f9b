-- Cancelling requests: no callback afterwards, nothing left behind.
local helpers = require("helpers")
local core = require("luna.core")

local server, base

-- True once every key of a weak table has been collected.
local function collected(weak)
  collectgarbage()
  collectgarbage()
  return next(weak) == nil
end

describe("core.http cancellation", function()
  setup(function()
    server = helpers.spawn({ helpers.fixtures .. "/httpd" })
    base = select(2, server:expect("listening on (http://127%.0%.0%.1:%d+)"))
  end)

  teardown(function()
    server:stop()
  end)

  it("stops a stream in flight: no line and no on_done after cancel", function()
    local lines, done = 0, false
    local h = assert(core.http.request{
      url = base .. "/stream?n=100&delay_ms=5",
      on_line = function() lines = lines + 1 end,
      on_done = function() done = true end,
    })
    helpers.eventually(function() return lines >= 2 end, 5, "two lines")
    assert.equal(1, core.http.active())
    assert.is_true(h:cancel())
    local at_cancel = lines
    assert.equal(0, core.http.active())
    core.loop.run(0.3)
    assert.equal(at_cancel, lines)
    assert.is_false(done)
    assert.is_false(h:cancel())
  end)

  it("cancels a request before the loop ever ran", function()
    local called = false
    local h = assert(core.http.request{ url = base .. "/echo", on_done = function() called = true end })
    assert.is_true(h:cancel())
    core.loop.run(0.2)
    assert.is_false(called)
  end)

  it("cancels from inside its own on_line: that was the last callback", function()
    local lines, done = 0, false
    local h
    h = assert(core.http.request{
      url = base .. "/stream?n=50&delay_ms=0",
      on_line = function()
        lines = lines + 1
        if lines == 3 then assert(h:cancel()) end
      end,
      on_done = function() done = true end,
    })
    helpers.eventually(function() return lines >= 3 end, 5, "three lines")
    core.loop.run(0.3)
    assert.equal(3, lines)
    assert.is_false(done)
    assert.equal(0, core.http.active())
  end)

  it("cancels from on_headers, and one request from another's callback", function()
    local victim_lines, victim_done = 0, false
    local victim = assert(core.http.request{
      url = base .. "/stream?n=100&delay_ms=10",
      on_line = function() victim_lines = victim_lines + 1 end,
      on_done = function() victim_done = true end,
    })
    local head_h, head_lines, head_done = nil, 0, false
    head_h = assert(core.http.request{
      url = base .. "/stream?n=10",
      on_headers = function() head_h:cancel() end,
      on_line = function() head_lines = head_lines + 1 end,
      on_done = function() head_done = true end,
    })
    local killer_done = false
    assert(core.http.request{
      url = base .. "/stream?n=3",
      on_line = function() victim:cancel() end,
      on_done = function(resp, err) killer_done = resp and resp.status == 200 end,
    })
    helpers.eventually(function() return killer_done end, 5, "the killer stream")
    local seen = victim_lines
    core.loop.run(0.2)
    assert.equal(seen, victim_lines)
    assert.is_false(victim_done)
    assert.equal(0, head_lines)
    assert.is_false(head_done)
    assert.equal(0, core.http.active())
  end)

  it("returns false when canceling from on_done or after the end", function()
    local h, from_done
    h = assert(core.http.request{ url = base .. "/echo", on_done = function() from_done = h:cancel() end })
    helpers.eventually(function() return from_done ~= nil end, 5, "on_done")
    assert.is_false(from_done)
    assert.is_false(h:cancel())
  end)

  it("releases the Lua callbacks of a canceled request", function()
    local weak = setmetatable({}, { __mode = "k" })
    local h
    do
      local on_line = function() end
      weak[on_line] = true
      h = assert(core.http.request{ url = base .. "/stream?n=100&delay_ms=5", on_line = on_line })
    end
    core.loop.run(0.05)
    assert.is_false(collected(weak)) -- anchored while in flight
    h:cancel()
    assert.is_true(collected(weak))
  end)

  it("releases the Lua callbacks of a finished request", function()
    local weak = setmetatable({}, { __mode = "k" })
    local done = false
    do
      local on_done = function() done = true end
      weak[on_done] = true
      assert(core.http.request{ url = base .. "/echo", on_done = on_done })
    end
    helpers.eventually(function() return done end, 5, "on_done")
    assert.is_true(collected(weak))
  end)

  it("keeps running a request whose handle was garbage collected", function()
    local status
    core.http.request{ url = base .. "/slow?ms=100", on_done = function(resp) status = resp.status end }
    collectgarbage()
    collectgarbage()
    helpers.eventually(function() return status ~= nil end, 5, "on_done")
    assert.equal(200, status)
  end)

  it("frees everything on every cancel path (C client under LeakSanitizer)", function()
    local p = helpers.spawn({ helpers.fixtures .. "/http_cancel", base },
                            { env = { ASAN_OPTIONS = "detect_leaks=1" } })
    finally(function() p:stop() end)
    local rc = p:wait(20)
    local out = p:drain(1)
    assert.equal(0, rc, out)
    assert.matches("http_cancel ok", out)
    assert.is_nil(out:find("LeakSanitizer", 1, true), out)
  end)
end)
