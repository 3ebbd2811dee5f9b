-- core.workqueue priorities (controller-runtime's priority queue): higher
-- first, FIFO within a priority, raised on re-add and never lowered, with
-- client-go's dedup / processing / dirty / delay / shutdown contract kept.
-- Fake clock throughout.
local core = require("luna.core")

local LOW = -100

local function new_queue(opts)
  opts = opts or {}
  opts.clock = opts.clock or "fake"
  return core.workqueue.new(opts)
end

-- Every {key, priority} get_with_priority returns until the queue is empty.
local function drain(q)
  local out = {}
  while true do
    local k, p = q:get_with_priority()
    if not k then return out end
    out[#out + 1] = { k, p }
  end
end

local function keys_of(pairs_)
  local keys = {}
  for i, kp in ipairs(pairs_) do keys[i] = kp[1] end
  return keys
end

describe("workqueue priority", function()
  it("hands out higher priorities first, each in the order it was added", function()
    local q = new_queue()
    q:add("low-1", LOW); q:add("mid-1"); q:add("high-1", 10)
    q:add("low-2", LOW); q:add("mid-2", 0); q:add("high-2", 10)
    assert.same({ { "high-1", 10 }, { "high-2", 10 }, { "mid-1", 0 }, { "mid-2", 0 },
                  { "low-1", LOW }, { "low-2", LOW } }, drain(q))
  end)

  it("raises a queued key added again at a higher priority, to the tail of that priority", function()
    local q = new_queue()
    q:add("a", LOW); q:add("b", LOW); q:add("c", LOW)
    q:add("live")           -- 0
    q:add("c")              -- raised from LOW to 0, behind "live"
    assert.equal(4, q:len())
    assert.same({ { "live", 0 }, { "c", 0 }, { "a", LOW }, { "b", LOW } }, drain(q))
  end)

  it("never lowers a priority and counts a raise as no new add", function()
    local q = new_queue()
    q:add("a", 5)
    q:add("a", LOW)
    q:add("a", 1)
    assert.equal(1, q:len())
    assert.equal(1, q:metrics().adds_total)
    assert.same({ { "a", 5 } }, drain(q))
  end)

  it("deduplicates a key added at one priority many times", function()
    local q = new_queue()
    for _ = 1, 3 do q:add("a", LOW); q:add("b", LOW) end
    assert.equal(2, q:len())
    assert.same({ "a", "b" }, keys_of(drain(q)))
  end)

  it("holds a key added while processing, at the highest priority it was added with, until done", function()
    local q = new_queue()
    q:add("a", LOW)
    q:add("z", LOW)
    assert.same({ "a", LOW }, { q:get_with_priority() })
    q:add("a", LOW)
    q:add("a")              -- a live event while a is reconciled
    assert.equal(1, q:len()) -- only z: a is not handed out twice at once
    assert.equal(1, q:depth_at(0))
    assert.equal(1, q:depth_at(LOW))
    assert.same({ "z", LOW }, { q:get_with_priority() })
    assert.is_nil((q:get_with_priority()))
    q:add("y", LOW)
    q:done("a")
    -- re-queued at 0, so ahead of y though y was queued first
    assert.same({ { "a", 0 }, { "y", LOW } }, drain(q))
    q:done("a"); q:done("z"); q:done("y")
    assert.equal(0, q:metrics().depth)
  end)

  it("keeps the priority of delayed and rate-limited adds, and ready keys take their place by it", function()
    local q = new_queue({ base_delay = 1, max_delay = 10 })
    q:add("bulk-1", LOW); q:add("bulk-2", LOW)
    q:add_rate_limited("retry", 0)    -- ready after 1 s, at 0
    q:add_after("later", 2, LOW)
    q:add_after("later", 3, 7)        -- earlier time (2 s) and higher priority (7) stand
    assert.equal(2, q:len())
    q:advance(1)
    assert.same({ "retry", 0 }, { q:get_with_priority() })
    q:advance(1)
    assert.same({ { "later", 7 }, { "bulk-1", LOW }, { "bulk-2", LOW } }, drain(q))
    assert.equal(1, q:num_requeues("retry"))
    assert.equal(3, q:metrics().retries_total)
  end)

  it("adds a waiting key that is already queued at the higher of its priorities when due", function()
    local q = new_queue()
    q:add("a", LOW); q:add("b", LOW)
    q:add_after("b", 1, 0)
    q:advance(1)
    assert.same({ { "b", 0 }, { "a", LOW } }, drain(q))
  end)

  it("ignores priorities in fifo mode (client-go's plain FIFO)", function()
    local q = new_queue({ fifo = true })
    q:add("a", LOW); q:add("b", 10); q:add("a", 50)
    assert.same({ { "a", 0 }, { "b", 0 } }, drain(q))
    assert.equal(0, q:depth_at(LOW))
  end)

  it("hands out queued keys of every priority after shutdown, then reports shutdown", function()
    local q = new_queue()
    q:add("low", LOW); q:add("high", 1)
    q:add_after("gone", 1, 5)
    q:shutdown()
    assert.is_false(q:add("new", 9))
    q:advance(2)
    assert.same({ "high", 1 }, { q:get_with_priority() })
    assert.same({ "low", LOW }, { q:get_with_priority() })
    assert.same({ nil, "shutdown" }, { q:get_with_priority() })
  end)

  it("counts depth per priority as keys move between priorities", function()
    local q = new_queue()
    q:add("a", LOW); q:add("b", LOW); q:add("c", 3)
    assert.equal(2, q:depth_at(LOW))
    assert.equal(1, q:depth_at(3))
    q:add("a", 3)
    assert.equal(1, q:depth_at(LOW))
    assert.equal(2, q:depth_at(3))
    assert.equal(3, q:metrics().depth)
    drain(q)
    assert.equal(0, q:depth_at(LOW))
    assert.equal(0, q:depth_at(3))
  end)

  it("keeps the order across many priorities that come and go", function()
    -- more priorities than the queue keeps bands for when they empty
    local q = new_queue()
    for round = 1, 3 do
      for p = 1, 40 do q:add(round .. "-" .. p, p) end
      local got = drain(q)
      assert.equal(40, #got)
      for i, kp in ipairs(got) do
        assert.same({ round .. "-" .. (41 - i), 41 - i }, kp)
        q:done(kp[1])
      end
    end
    assert.equal(0, q:metrics().depth)
  end)

  it("rejects a priority that is not an integer", function()
    local q = new_queue()
    assert.has_error(function() q:add("a", 1.5) end)
    assert.has_error(function() q:add("a", "high") end)
    assert.has_error(function() q:add_after("a", 1, 2 ^ 40) end)
    assert.has_error(function() q:add_rate_limited("a", 0 / 0) end)
    assert.has_error(function() core.workqueue.new({ clock = "fake", fifo = "yes" }) end)
    assert.equal(0, q:len())
  end)
end)

describe("workqueue priority switched off", function()
  it("keeps the order get would have used, and every dirty key moves to priority 0", function()
    local q = new_queue()
    q:add("low-1", LOW); q:add("high", 5); q:add("mid"); q:add("low-2", LOW)
    q:add("busy", 3)
    assert.equal("high", q:get())
    assert.equal("busy", q:get())
    q:add("busy", 9)        -- dirty while processing
    assert.is_true(q:set_fifo(true))
    assert.equal(4, q:metrics().depth)
    assert.equal(4, q:depth_at(0))
    assert.equal(0, q:depth_at(LOW))
    q:add("new", 50)        -- ignored: FIFO now
    q:done("busy")
    assert.same({ { "mid", 0 }, { "low-1", 0 }, { "low-2", 0 }, { "new", 0 }, { "busy", 0 } }, drain(q))
    assert.is_true(q:set_fifo(false))
    q:add("x", LOW); q:add("y", 1)
    assert.same({ "y", "x" }, keys_of(drain(q)))
  end)
end)
