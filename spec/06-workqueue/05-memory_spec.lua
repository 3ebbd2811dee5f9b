-- Memory: every key, limiter record, callback and timer is released, checked
-- with LeakSanitizer in child processes and with ASan in process.
local helpers = require("helpers")
local core = require("luna.core")


describe("workqueue memory", function()
  it("C API: frees everything in every state (LeakSanitizer)", function()
    local out, rc = helpers.run_leak_checked(helpers.fixtures .. "/workqueue_c")
    assert.equal(0, rc, out)
    assert.matches("workqueue_c: all ok", out)
    assert.not_matches("LeakSanitizer", out)
  end)

  it("Lua objects: __gc frees queues, limiters and callbacks (LeakSanitizer)", function()
    local script = [[
      local core = require("luna.core")
      for round = 1, 3 do
        local q = core.workqueue.new{ clock = "fake", name = "leak" }
        local r = core.workqueue.new{ clock = "real", rate_limiter = { kind = "max_of",
          { kind = "exponential" }, { kind = "bucket" } } }
        q:on_ready(function() return q end)          -- refers to its own queue
        for i = 1, 5000 do
          local k = "ns/k" .. i
          if i % 4 == 0 then q:add(k)
          elseif i % 4 == 1 then q:add_after(k, i % 17 + 1)
          elseif i % 4 == 2 then q:add_rate_limited(k)
          else r:add_after(k, 60) end
          r:add_rate_limited(k)
        end
        for _ = 1, 50 do local k = q:get(); q:add(k) end
        q:shutdown_with_drain(function() return q end) -- stays pending
        local rl = core.ratelimit.new{ kind = "fast_slow", fast_delay = 1,
          slow_delay = 2, max_fast_attempts = 3 }
        for i = 1, 1000 do rl:when("k" .. i) end
      end
      collectgarbage(); collectgarbage()
      core.loop.run(0.01)
      print("script done")
    ]]
    local file = helpers.write_file(helpers.tmpdir() .. "/leak.lua", script)
    local out, rc = helpers.run_leak_checked(string.format("LUA_CPATH='%s/lua/?.so' luajit %s",
      helpers.build, file))
    assert.equal(0, rc, out)
    assert.matches("script done", out)
    assert.not_matches("LeakSanitizer", out)
  end)

  it("collects many queues holding many keys, including keys being processed", function()
    for _ = 1, 20 do
      local q = core.workqueue.new({ clock = "fake" })
      for i = 1, 2000 do
        q:add("k" .. i)
        q:add_after("d" .. i, i % 100 + 1)
      end
      for _ = 1, 100 do q:get() end
      q:advance(1000)
      assert.equal(2000 - 100 + 2000, q:len())
    end
    collectgarbage()
    collectgarbage()
  end)

  it("cycles many distinct keys through one queue", function()
    local q = core.workqueue.new({ clock = "fake" })
    for round = 1, 5 do
      for i = 1, 5000 do q:add(round .. "/" .. i) end
      for _ = 1, 5000 do q:done((q:get())) end
      local m = q:metrics()
      assert.equal(0, m.depth)
      assert.equal(0, m.processing)
    end
    assert.equal(25000, q:metrics().adds_total)
  end)

  it("raises, instead of crashing, when a collected queue is used from its finalizer", function()
    local leaked
    local function make_garbage()
      local q = core.workqueue.new({ clock = "fake" })
      -- An object finalized with q that hands q back out.
      local holder = newproxy(true)
      getmetatable(holder).__gc = function() leaked = q end
    end
    make_garbage()
    for _ = 1, 4 do collectgarbage() end
    -- Both are finalized in the same cycle, so q is closed by now.
    assert.is_not_nil(leaked)
    assert.has_error(function() leaked:add("x") end, "workqueue is closed")
    assert.equal("luna.workqueue(closed)", tostring(leaked))
  end)
end)
