-- core.workqueue add_after: the delay heap (client-go's delaying_queue.go),
-- stepped with the fake clock, plus one run on the real clock and loop.
local helpers = require("helpers")
local core = require("luna.core")

local function new_queue()
  return core.workqueue.new({ clock = "fake" })
end

local function drain_keys(q)
  local keys = {}
  while true do
    local k = q:get()
    if not k then return keys end
    keys[#keys + 1] = k
  end
end

describe("workqueue add_after", function()
  it("makes keys ready in ready-time order, each once its time has come", function()
    local q = new_queue()
    q:add_after("c", 3)
    q:add_after("a", 1)
    q:add_after("b", 2)
    assert.equal(3, q:metrics().waiting)
    q:advance(0.5)
    assert.same({}, drain_keys(q))
    q:advance(0.5)
    assert.same({ "a" }, drain_keys(q))
    q:advance(1)
    assert.same({ "b" }, drain_keys(q))
    q:advance(1)
    assert.same({ "c" }, drain_keys(q))
    assert.equal(0, q:metrics().waiting)
  end)

  it("adds everything due in one step in ready-time order", function()
    local q = new_queue()
    local delays = { 5, 3, 9, 1, 7, 2, 8, 4, 6 }
    for _, d in ipairs(delays) do q:add_after("k" .. d, d) end
    q:advance(100)
    assert.same({ "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9" }, drain_keys(q))
  end)

  it("keeps insertion order for equal ready times", function()
    local q = new_queue()
    local want = {}
    for i = 1, 50 do
      local k = "key-" .. ((i * 37) % 101)
      want[#want + 1] = k
      q:add_after(k, 2)
    end
    q:add_after("early", 1)
    q:advance(2)
    local got = drain_keys(q)
    assert.equal("early", table.remove(got, 1))
    assert.same(want, got)
  end)

  it("moves a waiting key earlier when it is added again with an earlier time", function()
    local q = new_queue()
    q:add_after("a", 5)
    q:add_after("b", 3)
    q:add_after("a", 1)
    assert.equal(2, q:metrics().waiting)
    q:advance(1)
    assert.same({ "a" }, drain_keys(q))
    q:done("a")
    q:advance(2)
    assert.same({ "b" }, drain_keys(q))
    q:done("b")
    q:advance(10)
    assert.same({}, drain_keys(q)) -- the later time for a was replaced, not kept
  end)

  it("orders a key moved earlier after keys already waiting for that time", function()
    local q = new_queue()
    q:add_after("y", 5)
    q:add_after("x", 2)
    q:add_after("y", 2) -- scheduled for 2 after x was
    q:advance(2)
    assert.same({ "x", "y" }, drain_keys(q))
  end)

  it("keeps the earlier time when a waiting key is added again with a later one", function()
    local q = new_queue()
    q:add_after("a", 1)
    q:add_after("a", 5)
    assert.equal(1, q:metrics().waiting)
    q:advance(1)
    assert.same({ "a" }, drain_keys(q))
    q:done("a")
    q:advance(10)
    assert.same({}, drain_keys(q))
  end)

  it("adds at once for a delay <= 0", function()
    local q = new_queue()
    q:add_after("zero", 0)
    q:add_after("negative", -3)
    assert.equal(0, q:metrics().waiting)
    assert.same({ "zero", "negative" }, drain_keys(q))
  end)

  it("dedupes a delayed key with the same key already queued", function()
    local q = new_queue()
    q:add("a")
    q:add_after("a", 1)
    q:advance(1)
    assert.same({ "a" }, drain_keys(q))
  end)

  it("treats a delayed key that comes due while processing like any add", function()
    local q = new_queue()
    q:add("a")
    assert.equal("a", q:get())
    q:add_after("a", 1)
    q:advance(1)
    assert.same({}, drain_keys(q))
    q:done("a")
    assert.same({ "a" }, drain_keys(q))
  end)

  it("keeps many waiting keys in order", function()
    local q = new_queue()
    local seed = 7
    local function rand() seed = (seed * 1103515245 + 12345) % 2147483648; return seed end
    local due = {}
    for i = 1, 2000 do
      local d = rand() % 1000 + 1
      local k = "k" .. i
      q:add_after(k, d)
      due[k] = d
    end
    local t, last = 0, 0
    while t < 1000 do
      q:advance(10)
      t = t + 10
      for _, k in ipairs(drain_keys(q)) do
        assert.is_true(due[k] <= t, k .. " came out early")
        assert.is_true(due[k] > t - 10, k .. " came out late")
        assert.is_true(due[k] >= last, k .. " came out of order")
        last = due[k]
        due[k] = nil
      end
    end
    assert.is_nil(next(due))
  end)

  it("raises on a delay that is not a finite number", function()
    local q = new_queue()
    assert.has_error(function() q:add_after("a", 0 / 0) end)
    assert.has_error(function() q:add_after("a", math.huge) end)
    assert.has_error(function() q:add_after("a", -math.huge) end)
    assert.has_error(function() q:add_after("a", "1") end)
    assert.has_error(function() q:add_after("a") end)
    assert.equal(0, q:metrics().waiting)
    assert.equal(0, q:metrics().retries_total)
  end)
end)

describe("workqueue fake clock", function()
  it("starts at 0 and moves only with advance", function()
    local q = new_queue()
    assert.equal(0, q:now())
    q:advance(1.5)
    assert.equal(1.5, q:now())
    q:advance(0)
    assert.equal(1.5, q:now())
  end)

  it("raises on a negative or non-finite advance", function()
    local q = new_queue()
    q:add_after("a", 1)
    assert.has_error(function() q:advance(-1) end)
    assert.has_error(function() q:advance(0 / 0) end)
    assert.has_error(function() q:advance(math.huge) end)
    assert.has_error(function() q:advance("1") end)
    assert.equal(0, q:now())
  end)

  it("cannot be advanced on a real-clock queue", function()
    local q = core.workqueue.new({ clock = "real" })
    assert.has_error(function() q:advance(1) end,
      'workqueue advance: this queue runs on the real clock (create it with clock = "fake")')
  end)
end)

describe("workqueue add_after on the real clock", function()
  it("adds the key from the loop's timer", function()
    local q = core.workqueue.new({ clock = "real" })
    local ready = 0
    q:on_ready(function() ready = ready + 1 end)
    q:add_after("later", 0.02)
    assert.equal(1, q:metrics().waiting)
    helpers.eventually(function() return q:len() == 1 end, 5, "the delayed key")
    assert.equal("later", q:get())
    assert.equal(1, ready)
    assert.equal(0, q:metrics().waiting)
  end)

  it("re-arms for the next key after the first fires", function()
    local q = core.workqueue.new({ clock = "real" })
    q:add_after("second", 0.04)
    q:add_after("first", 0.01)
    helpers.eventually(function() return q:len() == 2 end, 5, "both delayed keys")
    assert.same({ "first", "second" }, drain_keys(q))
  end)

  it("stops its timer when collected", function()
    local q = core.workqueue.new({ clock = "real" })
    q:add_after("never", 0.01)
    q = nil
    collectgarbage()
    collectgarbage()
    -- The freed queue's timer must not fire (ASan would catch it).
    assert.is_false(core.loop.run(0.05))
  end)
end)
