-- core.metrics.export_workqueue: a queue's numbers as client-go's
-- workqueue_* series, stepped on a fake clock so every value is exact.
local helpers = require("helpers") -- luacheck: ignore
local core = require("luna.core")
local expo = require("support.exposition")

local function parse(reg)
  local parsed = expo.parse(reg:render())
  expo.check_histograms(parsed)
  return parsed
end

local function new_queue(name)
  return core.workqueue.new{ clock = "fake", name = name }
end

-- The queue's numbers as the exposition shows them.
local function numbers(reg, name)
  local parsed = parse(reg)
  local l = { name = name }
  local function buckets(series)
    local out = {}
    for _, s in ipairs(expo.samples(parsed, series .. "_bucket")) do
      if s.labels.name == name then out[#out + 1] = s.value end
    end
    return out
  end
  return {
    depth = expo.get(parsed, "workqueue_depth", l),
    adds = expo.get(parsed, "workqueue_adds_total", l),
    retries = expo.get(parsed, "workqueue_retries_total", l),
    unfinished = expo.get(parsed, "workqueue_unfinished_work_seconds", l),
    longest = expo.get(parsed, "workqueue_longest_running_processor_seconds", l),
    queue_sum = expo.get(parsed, "workqueue_queue_duration_seconds_sum", l),
    queue_count = expo.get(parsed, "workqueue_queue_duration_seconds_count", l),
    queue_buckets = buckets("workqueue_queue_duration_seconds"),
    work_sum = expo.get(parsed, "workqueue_work_duration_seconds_sum", l),
    work_count = expo.get(parsed, "workqueue_work_duration_seconds_count", l),
    work_buckets = buckets("workqueue_work_duration_seconds"),
  }
end

describe("workqueue metrics export", function()
  it("exports every series at zero for a fresh queue, with client-go's buckets", function()
    local reg = core.metrics.new()
    local q = new_queue("fresh")
    core.metrics.export_workqueue(reg, q)
    local parsed = parse(reg)
    assert.same({
      "workqueue_adds_total", "workqueue_depth", "workqueue_longest_running_processor_seconds",
      "workqueue_queue_duration_seconds", "workqueue_retries_total",
      "workqueue_unfinished_work_seconds", "workqueue_work_duration_seconds",
    }, parsed.order)
    local les = {}
    for _, s in ipairs(expo.samples(parsed, "workqueue_queue_duration_seconds_bucket")) do
      les[#les + 1] = s.labels.le
      assert.equal(0, s.value)
    end
    assert.same({ "1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1",
      "10", "+Inf" }, les)
    assert.same({ "name" }, reg:find("workqueue_depth"):label_names())
    assert.equal("counter", parsed.families.workqueue_adds_total.type)
    assert.equal("gauge", parsed.families.workqueue_depth.type)
    assert.equal("histogram", parsed.families.workqueue_work_duration_seconds.type)
    assert.equal("Current depth of workqueue", parsed.families.workqueue_depth.help)
  end)

  it("shows depth, adds, retries, durations, unfinished work and the longest processor exactly", function()
    local reg = core.metrics.new()
    local q = new_queue("ctl")
    core.metrics.export_workqueue(reg, q)

    q:add("a"); q:add("b"); q:add("a")                   -- t = 0
    local n = numbers(reg, "ctl")
    assert.equal(2, n.depth)
    assert.equal(2, n.adds)
    assert.equal(0, n.unfinished)

    q:advance(0.5)
    assert.equal("a", q:get())                           -- waited 0.5
    q:advance(2)                                         -- t = 2.5
    n = numbers(reg, "ctl")
    assert.equal(1, n.depth)
    assert.equal(2, n.unfinished)
    assert.equal(2, n.longest)

    assert.equal("b", q:get())                           -- waited 2.5
    q:advance(1)                                         -- t = 3.5
    n = numbers(reg, "ctl")
    assert.equal(0, n.depth)
    assert.equal(3 + 1, n.unfinished)                    -- a: 3 s, b: 1 s
    assert.equal(3, n.longest)

    q:add("a")                                           -- dirty while processing
    assert.equal(1, numbers(reg, "ctl").depth)
    q:done("a")                                          -- worked 3, re-queued
    q:advance(0.25)                                      -- t = 3.75
    q:done("b")                                          -- worked 1.25
    assert.equal("a", q:get())                           -- waited 0.25 (since t = 3.5)
    q:done("a")                                          -- worked 0
    q:add_after("c", 5)
    q:add_rate_limited("d")
    n = numbers(reg, "ctl")
    assert.equal(0, n.depth)                             -- waiting keys are not dirty
    assert.equal(2, n.retries)
    assert.equal(3, n.adds)

    q:advance(10)
    n = numbers(reg, "ctl")
    assert.equal(2, n.depth)
    assert.equal(5, n.adds)
    assert.equal(0, n.unfinished)
    assert.equal(0, n.longest)
    assert.equal(3, n.queue_count)
    assert.equal(0.5 + 2.5 + 0.25, n.queue_sum)
    --                     1e-8 1e-7 1e-6 1e-5 1e-4 1e-3 .01  .1   1   10  +Inf
    assert.same({           0,   0,   0,   0,   0,   0,   0,   0,   2,  3,  3 }, n.queue_buckets)
    assert.equal(3, n.work_count)
    assert.equal(3 + 1.25 + 0, n.work_sum)
    assert.same({           1,   1,   1,   1,   1,   1,   1,   1,   1,  3,  3 }, n.work_buckets)
    -- the queue's own counters agree
    local m = q:metrics()
    assert.equal(m.adds_total, n.adds)
    assert.equal(m.retries_total, n.retries)
    assert.equal(m.queue_duration_sum, n.queue_sum)
    assert.equal(m.work_duration_sum, n.work_sum)
  end)

  it("shows the depth of each priority as controller-runtime labels it, and caps the label's values", function()
    local reg = core.metrics.new()
    local q = new_queue("prio")
    core.metrics.export_workqueue(reg, q)
    local function by_priority()
      local out = {}
      for _, s in ipairs(expo.samples(parse(reg), "workqueue_depth_by_priority")) do
        assert.equal("prio", s.labels.name)
        out[s.labels.priority] = s.value
      end
      return out
    end
    assert.same({}, by_priority())
    q:add("a", -100); q:add("b", -100); q:add("c")
    assert.same({ ["-100"] = 2, ["0"] = 1 }, by_priority())
    q:add("a", 0)                                        -- raised
    assert.same({ ["-100"] = 1, ["0"] = 2 }, by_priority())
    assert.equal(3, numbers(reg, "prio").depth)          -- the total, as client-go's
    assert.equal("c", q:get())                           -- a went behind c
    q:add("c", 7)                                        -- dirty while processing
    assert.same({ ["-100"] = 1, ["0"] = 1, ["7"] = 1 }, by_priority())
    q:done("c")
    while q:get() do end
    assert.same({ ["-100"] = 0, ["0"] = 0, ["7"] = 0 }, by_priority())
    for p = 1, 30 do q:add("k" .. p, 100 + p) end        -- 3 + 30 priorities seen
    local depths = by_priority()
    local labels = 0
    for _ in pairs(depths) do labels = labels + 1 end
    assert.equal(26, labels)                             -- 25 and the rest
    assert.equal(30 - 22, depths.exceeded_cardinality_limit)
    assert.equal(1, depths["101"])
    assert.is_nil(depths["130"])
  end)

  it("shows the priorities a queue already has when exported later", function()
    local reg = core.metrics.new()
    local q = new_queue("late")
    q:add("a", -100)
    core.metrics.export_workqueue(reg, q)
    local s = expo.samples(parse(reg), "workqueue_depth_by_priority")
    assert.equal(1, #s)
    assert.same({ name = "late", priority = "-100" }, s[1].labels)
    assert.equal(1, s[1].value)
  end)

  it("keeps queues apart by name, in name order", function()
    local reg = core.metrics.new()
    local b, a = new_queue("b-queue"), new_queue("a-queue")
    core.metrics.export_workqueue(reg, b)
    core.metrics.export_workqueue(reg, a)
    b:add("x"); b:add("y"); a:add("x")
    local parsed = parse(reg)
    local samples = expo.samples(parsed, "workqueue_depth")
    assert.equal("a-queue", samples[1].labels.name)
    assert.equal(1, samples[1].value)
    assert.equal("b-queue", samples[2].labels.name)
    assert.equal(2, samples[2].value)
  end)

  it("refuses unnamed queues, a second export, and two queues of one name", function()
    local reg = core.metrics.new()
    assert.has_error(function() core.metrics.export_workqueue(reg, new_queue()) end,
      "workqueue metrics: the queue needs a name")
    local q = new_queue("dup")
    core.metrics.export_workqueue(reg, q)
    assert.has_error(function() core.metrics.export_workqueue(reg, q) end)
    assert.has_error(function() core.metrics.export_workqueue(core.metrics.new(), q) end)
    assert.has_error(function() core.metrics.export_workqueue(reg, new_queue("dup")) end,
      'workqueue metrics: a queue named "dup" already exports them')
    assert.has_error(function() core.metrics.export_workqueue(reg, {}) end)
    -- the same name in another registry is fine
    core.metrics.export_workqueue(core.metrics.new(), new_queue("dup"))
  end)

  it("removes the series on detach; the queue carries on and can be exported again", function()
    local reg = core.metrics.new()
    local q = new_queue("d")
    local x = core.metrics.export_workqueue(reg, q)
    q:add("k")
    q:advance(1)
    q:get()
    x:detach()
    x:detach() -- a second detach does nothing
    assert.equal("", reg:render())
    q:done("k")
    q:add("k")
    assert.equal(1, q:len())
    core.metrics.export_workqueue(reg, q)
    local n = numbers(reg, "d")
    assert.equal(1, n.depth)
    assert.equal(2, n.adds)        -- read from the queue: its whole life
    assert.equal(0, n.queue_count) -- observed from the export on
  end)

  it("removes the series when the queue is collected", function()
    local reg = core.metrics.new()
    do
      local q = new_queue("short-lived")
      core.metrics.export_workqueue(reg, q)
      q:add("k")
    end
    assert.equal(1, numbers(reg, "short-lived").depth)
    collectgarbage(); collectgarbage(); collectgarbage()
    assert.equal("", reg:render())
    assert.equal(8, reg:count()) -- the families stay, without series
  end)

  it("lets a queue outlive its registry", function()
    local q = new_queue("orphan")
    do
      core.metrics.export_workqueue(core.metrics.new(), q)
    end
    collectgarbage(); collectgarbage(); collectgarbage()
    q:add("k")
    q:advance(1)
    assert.equal("k", q:get())
    q:advance(1)
    q:done("k")
    assert.equal(1, q:metrics().work_duration_count)
  end)
end)
