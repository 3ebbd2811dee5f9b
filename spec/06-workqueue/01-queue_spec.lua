-- core.workqueue: the queue contract (client-go's queue.go): FIFO, dedupe,
-- one worker per key, shutdown and drain, metrics.  Fake clock throughout.
local helpers = require("helpers")
local core = require("luna.core")

local function new_queue(opts)
  opts = opts or {}
  opts.clock = opts.clock or "fake"
  return core.workqueue.new(opts)
end

-- Every key get returns until it reports something else; also returns that status.
local function drain_keys(q)
  local keys = {}
  while true do
    local k, status = q:get()
    if not k then return keys, status end
    keys[#keys + 1] = k
  end
end

describe("workqueue add/get/done", function()
  it("hands out keys in the order they were added", function()
    local q = new_queue()
    for _, k in ipairs({ "ns/c", "ns/a", "ns/b" }) do assert.is_true(q:add(k)) end
    assert.equal(3, q:len())
    local keys, status = drain_keys(q)
    assert.same({ "ns/c", "ns/a", "ns/b" }, keys)
    assert.equal("empty", status)
    assert.equal(0, q:len())
  end)

  it("hands out a key added twice before processing once", function()
    local q = new_queue()
    q:add("a"); q:add("b"); q:add("a"); q:add("a")
    assert.equal(2, q:len())
    assert.same({ "a", "b" }, (drain_keys(q)))
  end)

  it("holds back a key added while it is processed, then hands it out exactly once after done", function()
    local q = new_queue()
    q:add("a")
    assert.equal("a", q:get())
    assert.is_true(q:add("a"))
    assert.is_true(q:add("a"))
    assert.equal(0, q:len())
    local k, status = q:get()
    assert.is_nil(k)
    assert.equal("empty", status)
    q:done("a")
    assert.equal(1, q:len())
    assert.same({ "a" }, (drain_keys(q)))
    q:done("a")
    assert.same({}, (drain_keys(q)))
  end)

  it("puts a key re-queued by done behind the keys added meanwhile", function()
    local q = new_queue()
    q:add("a")
    assert.equal("a", q:get())
    q:add("a"); q:add("b")
    q:done("a")
    assert.same({ "b", "a" }, (drain_keys(q)))
  end)

  it("never has one key processing twice, whatever the interleaving", function()
    local q = new_queue()
    local processing = {}
    -- Workers take keys, re-add keys (as informer events would) and finish
    -- them in a fixed pseudo-random interleaving.
    local seed = 12345
    local function rand(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
    local busy = {}
    for _ = 1, 5000 do
      local op = rand(3)
      if op == 1 then
        q:add("k" .. rand(7))
      elseif op == 2 then
        local k = q:get()
        if k then
          assert.is_nil(processing[k], "key handed out twice at once: " .. k)
          processing[k] = true
          busy[#busy + 1] = k
        end
      elseif #busy > 0 then
        local k = table.remove(busy, rand(#busy))
        processing[k] = nil
        q:done(k)
      end
    end
    -- Every dirty key is eventually handed out once the workers finish.
    for _, k in ipairs(busy) do q:done(k) end
    local m = q:metrics()
    assert.equal(0, m.processing)
    assert.equal(m.depth, q:len())
  end)

  it("forgets a key once it is done and not added again", function()
    local q = new_queue()
    q:add("a")
    assert.equal("a", q:get())
    q:done("a")
    assert.has_error(function() q:done("a") end,
      'workqueue done: key "a" is not being processed')
    q:add("a")
    assert.same({ "a" }, (drain_keys(q)))
  end)

  it("raises on done of a key that is queued but not processing", function()
    local q = new_queue()
    q:add("a")
    assert.has_error(function() q:done("a") end,
      'workqueue done: key "a" is not being processed')
    assert.same({ "a" }, (drain_keys(q)))
  end)

  it("accepts any string key, including the empty string and bytes above 127", function()
    local q = new_queue()
    q:add(""); q:add("ns/\xc3\xa9")
    assert.same({ "", "ns/\xc3\xa9" }, (drain_keys(q)))
    q:done(""); q:done("ns/\xc3\xa9")
  end)

  it("raises on keys that are not strings or contain NUL bytes", function()
    local q = new_queue()
    assert.has_error(function() q:add(42) end)
    assert.has_error(function() q:add(nil) end)
    assert.has_error(function() q:add({}) end)
    assert.has_error(function() q:add("a\0b") end)
    assert.has_error(function() q:add_after(1, 1) end)
    assert.has_error(function() q:done(false) end)
    assert.has_error(function() q:forget(1) end)
    assert.has_error(function() q:num_requeues("a\0") end)
    assert.equal(0, q:len())
  end)

  it("raises when a method is called on something that is not a queue", function()
    local q = new_queue()
    assert.has_error(function() q.add({}, "a") end)
    assert.has_error(function() q.get(nil) end)
  end)
end)

describe("workqueue shutdown", function()
  it("drops adds, hands out what is queued, then reports shutdown", function()
    local q = new_queue()
    q:add("a"); q:add("b")
    assert.is_false(q:is_shutting_down())
    q:shutdown()
    assert.is_true(q:is_shutting_down())
    assert.is_false(q:add("c"))
    assert.is_false(q:add_after("d", 0))
    assert.is_false(q:add_after("e", 1))
    assert.is_false(q:add_rate_limited("f"))
    local keys, status = drain_keys(q)
    assert.same({ "a", "b" }, keys)
    assert.equal("shutdown", status)
    assert.equal(0, q:metrics().retries_total)
  end)

  it("reports empty, not shutdown, before shutdown", function()
    local q = new_queue()
    assert.same({ nil, "empty" }, { q:get() })
    q:shutdown()
    assert.same({ nil, "shutdown" }, { q:get() })
  end)

  it("still hands out a key added while processing once it is done", function()
    local q = new_queue()
    q:add("a")
    assert.equal("a", q:get())
    q:add("a")
    q:shutdown()
    assert.same({ nil, "shutdown" }, { q:get() })
    q:done("a")
    assert.same({ "a" }, (drain_keys(q)))
  end)

  it("discards keys waiting for their delay", function()
    local q = new_queue()
    q:add_after("a", 1)
    assert.equal(1, q:metrics().waiting)
    q:shutdown()
    assert.equal(0, q:metrics().waiting)
    q:advance(5)
    assert.same({ nil, "shutdown" }, { q:get() })
  end)
end)

describe("workqueue shutdown_with_drain", function()
  it("calls back at once with true when nothing is processing", function()
    local q = new_queue()
    q:add("queued")
    local calls = {}
    q:shutdown_with_drain(function(drained) calls[#calls + 1] = drained end)
    assert.same({ true }, calls)
    assert.is_true(q:is_shutting_down())
    assert.same({ "queued" }, (drain_keys(q)))
  end)

  it("calls back only after the last key being processed is done", function()
    local q = new_queue()
    q:add("a"); q:add("b")
    q:get(); q:get()
    local calls = {}
    q:shutdown_with_drain(function(drained) calls[#calls + 1] = drained end)
    assert.same({}, calls)
    q:done("a")
    assert.same({}, calls)
    q:done("b")
    assert.same({ true }, calls)
    -- One-shot: later activity does not call again.
    q:shutdown()
    assert.same({ true }, calls)
  end)

  it("lets the last done re-queue a key and still reports drained", function()
    local q = new_queue()
    q:add("a")
    q:get()
    q:add("a")
    local drained
    q:shutdown_with_drain(function(d) drained = d end)
    q:done("a")
    assert.is_true(drained)
    assert.same({ "a" }, (drain_keys(q)))
  end)

  it("ends a pending drain with false on shutdown", function()
    local q = new_queue()
    q:add("a")
    q:get()
    local calls = {}
    q:shutdown_with_drain(function(drained) calls[#calls + 1] = drained end)
    q:shutdown()
    assert.same({ false }, calls)
    q:done("a")
    assert.same({ false }, calls)
  end)

  it("raises when a drain is already pending", function()
    local q = new_queue()
    q:add("a")
    q:get()
    q:shutdown_with_drain(function() end)
    assert.has_error(function() q:shutdown_with_drain(function() end) end,
      "workqueue shutdown_with_drain: a drain is already pending")
  end)

  it("works without a callback and accepts a later one", function()
    local q = new_queue()
    q:add("a")
    q:get()
    q:shutdown_with_drain()
    assert.is_true(q:is_shutting_down())
    local drained
    q:shutdown_with_drain(function(d) drained = d end)
    q:done("a")
    assert.is_true(drained)
  end)

  it("raises when the callback is not a function", function()
    local q = new_queue()
    assert.has_error(function() q:shutdown_with_drain("nope") end)
    assert.is_false(q:is_shutting_down())
  end)

  it("logs an error raised by the callback instead of raising it from done", function()
    -- In a child luajit, so the log line can be read.
    local script = [[
      local q = require("luna.core").workqueue.new{ clock = "fake" }
      q:add("a")
      q:get()
      q:shutdown_with_drain(function() error("drain boom") end)
      q:done("a")
      print("after done", q:get())
    ]]
    local file = helpers.write_file(helpers.tmpdir() .. "/drain.lua", script)
    local out, rc = helpers.run(string.format("LUA_CPATH='%s/lua/?.so' luajit %s",
      helpers.build, file))
    assert.equal(0, rc, out)
    assert.matches('ERROR lua callback failed what="workqueue drain" error="[^"]*drain boom', out)
    assert.matches("after done\tnil\tshutdown", out)
  end)
end)

describe("workqueue on_ready", function()
  it("is called once per key that becomes available", function()
    local q = new_queue()
    local n = 0
    q:on_ready(function() n = n + 1 end)
    q:add("a")
    assert.equal(1, n)
    q:add("a")              -- dedupe: nothing new
    assert.equal(1, n)
    q:get()
    q:add("a")              -- processing: not available yet
    assert.equal(1, n)
    q:done("a")             -- re-queued
    assert.equal(2, n)
    q:add_after("b", 1); q:add_after("c", 1)
    assert.equal(2, n)
    q:advance(1)            -- one call for the tick that added both
    assert.equal(3, n)
    q:on_ready(nil)
    q:add("d")
    assert.equal(3, n)
  end)

  it("may take the key from inside the callback", function()
    local q = new_queue()
    local got = {}
    q:on_ready(function()
      local k = q:get()
      got[#got + 1] = k
      q:done(k)
    end)
    q:add("a"); q:add("b")
    assert.same({ "a", "b" }, got)
    assert.equal(0, q:len())
  end)

  it("raises when given something other than a function", function()
    assert.has_error(function() new_queue():on_ready(1) end)
  end)
end)

describe("workqueue metrics", function()
  it("counts depth, adds and durations on the queue's clock", function()
    local q = new_queue()
    q:add("a"); q:add("a"); q:add("b")
    local m = q:metrics()
    assert.equal(2, m.depth)
    assert.equal(2, m.queued)
    assert.equal(2, m.adds_total)
    q:advance(2)
    assert.equal("a", q:get())
    q:advance(3)
    assert.equal("b", q:get())
    q:add("a")              -- dirty while processing: counts in depth
    m = q:metrics()
    assert.equal(1, m.depth)
    assert.equal(0, m.queued)
    assert.equal(2, m.processing)
    assert.equal(3, m.adds_total)
    assert.equal(2 + 5, m.queue_duration_sum)
    assert.equal(2, m.queue_duration_count)
    assert.equal(3 + 0, m.unfinished_work_seconds)
    assert.equal(3, m.longest_running_processor_seconds)
    q:advance(1)
    q:done("b")
    m = q:metrics()
    assert.equal(1, m.work_duration_sum)
    assert.equal(1, m.work_duration_count)
    assert.equal(4, m.longest_running_processor_seconds)
    assert.equal(4, m.unfinished_work_seconds)
    q:done("a")
    m = q:metrics()
    assert.equal(1 + 4, m.work_duration_sum)
    assert.equal(0, m.longest_running_processor_seconds)
    assert.equal(0, m.unfinished_work_seconds)
    assert.equal(1, m.queued)
  end)

  it("counts every add_after and add_rate_limited as a retry", function()
    local q = new_queue()
    q:add_after("a", 0)
    q:add_after("b", 1)
    q:add_rate_limited("c")
    q:add("d")
    assert.equal(3, q:metrics().retries_total)
  end)
end)

describe("workqueue.new options", function()
  it("names the queue", function()
    assert.equal("luna.workqueue(mirror)", tostring(new_queue({ name = "mirror" })))
    assert.equal("luna.workqueue()", tostring(core.workqueue.new()))
  end)

  it("raises on unknown fields, wrong types and bad values", function()
    local cases = {
      { { clokc = "fake" }, "unknown field 'clokc'" },
      { { clock = "wall" }, "field 'clock' must be \"real\" or \"fake\"" },
      { { clock = 1 }, "field 'clock' must be a string" },
      { { name = {} }, "field 'name' must be a string" },
      { { qps = "10" }, "field 'qps' must be a number" },
      { { qps = 0 }, "qps must be > 0" },
      { { burst = 1.5 }, "burst must be an integer" },
      { { burst = 0 }, "burst must be an integer" },
      { { base_delay = -1 }, "base_delay must be a finite number" },
      { { max_delay = math.huge }, "max_delay must be a finite number" },
      { { rate_limiter = 5 }, "field 'rate_limiter' must be a table" },
      { { rate_limiter = { kind = "bucket" }, qps = 5 }, "give either rate_limiter" },
      { { rate_limiter = { kind = "bucket", base_delay = 1 } }, "unknown field 'base_delay'" },
      { { [1] = "x" }, "unexpected number key" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(core.workqueue.new, c[1])
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(c[2], 1, true), tostring(err) .. " should contain " .. c[2])
    end
    assert.has_error(function() core.workqueue.new("fake") end)
  end)
end)
