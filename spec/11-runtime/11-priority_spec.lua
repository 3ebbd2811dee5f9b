-- Live events before the backlog (controller-runtime's priority queue):
-- with many keys of the first list queued behind a reconcile that holds
-- the only worker, a live change and a live create are reconciled next,
-- before the rest of the first list; a controller with priority_queue =
-- false keeps plain FIFO order.  Order is read from the log, never timed.
local helpers = require("helpers")
local rt = require("11-runtime.support")

local N = 100

-- Two controllers on the same objects; each holds its single worker in
-- the first reconcile until the ConfigMap "gate" exists, so the whole
-- first list is queued when the live events arrive.
local GATED = [[
local luna = require "luna"
local open = false
return luna.controller {
  name = "@NAME@",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  priority_queue = @PRIORITY@,
  workers = 1,
  reconcile = function(req)
    luna.log.info("saw", { req_key = req.key })
    while not open do
      local gate, err = luna.get("v1/ConfigMap", req.namespace, "gate")
      if gate then open = true elseif err.reason ~= "NotFound" then return nil, err end
    end
  end,
}
]]

-- Resyncs every second: each resync re-delivers every cached object.
local RESYNC = [[
local luna = require "luna"
return luna.controller {
  name = "resync",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  resync = 1,
  workers = 4,
  reconcile = function(req) end,
}
]]

local function name_of(i) return ("cm-%03d"):format(i) end

-- n labelled ConfigMaps, before luna starts: its first list.
local function seed(srv, token, n)
  for i = 1, n do
    local code, _, raw = srv:request("POST", srv:ns_path("configmaps"), {
      apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = name_of(i), labels = { [rt.LABEL] = token } }, data = { v = "1" } })
    assert(code == 201, raw)
  end
end

describe("priority of live events #integration", function()
  local env, token, ns

  setup(function()
    token = rt.token()
    env = rt.start{
      sources = {
        ["prio.lua"] = rt.source(GATED, { TOKEN = token, NAME = "prio", PRIORITY = "true" }),
        ["fifo.lua"] = rt.source(GATED, { TOKEN = token, NAME = "fifo", PRIORITY = "false" }),
      },
      prepare = function(srv) seed(srv, token, N) end,
    }
    ns = env.srv.ns
  end)
  teardown(function() env:stop() end)

  local function key(name) return ns .. "/" .. name end

  -- The log read incrementally: the gates' polling logs a line per
  -- request, and rescanning every record at each poll would be quadratic.
  -- order[c]: the keys controller c reconciled, in order (first reconcile
  -- of each); enqueued["c key priority"]: an enqueue was logged.
  local read, order, first, enqueued = 0, { prio = {}, fifo = {} }, { prio = {}, fifo = {} }, {}
  local function follow()
    local recs = rt.records(env)
    for i = read + 1, #recs do
      local r = recs[i]
      if r.msg == "saw" and order[r.controller] and not first[r.controller][r.req_key] then
        first[r.controller][r.req_key] = true
        table.insert(order[r.controller], r.req_key)
      elseif r.msg == "enqueue" then
        enqueued[("%s %s %s"):format(r.controller, r.key, r.priority)] = true
      end
    end
    read = #recs
  end
  local function wait_for(cond, what)
    return env:wait(function() follow(); return cond() end, 30, what)
  end

  it("reconciles a live change and a live create before the queued first list", function()
    -- both controllers hold their worker: every other key of the first list is queued
    wait_for(function() return order.prio[1] and order.fifo[1] end, "the first reconciles")
    local held = order.prio[1]
    local live = held == key(name_of(N)) and name_of(N - 1) or name_of(N)

    local code = env.srv:request("PATCH", env.srv:ns_path("configmaps") .. "/" .. live,
      { data = { v = "2" } }, { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
    rt.cm(env, "new", { v = "1" }, { [rt.LABEL] = token })
    for _, c in ipairs({ "prio", "fifo" }) do
      wait_for(function() return enqueued[c .. " " .. key("new") .. " 0"] end,
        c .. " enqueue of the created object")
      assert.is_true(enqueued[c .. " " .. key(live) .. " 0"], c .. " enqueue of the change")
    end
    rt.cm(env, "gate", {}, {})
    wait_for(function() return #order.prio == N + 1 and #order.fifo == N + 1 end,
      "reconciles of every key")

    -- priority: the two live keys right after the reconcile that held the worker
    local prio = order.prio
    assert.same({ held, key(live), key("new") }, { prio[1], prio[2], prio[3] })
    -- the first list went in at -100, the live keys at 0
    local start = rt.find(env, rt.msg("reconcile start", { controller = "prio", key = key(live) }))
    assert.equal(0, start.priority)
    local initial = rt.all(env, rt.msg("enqueue", { controller = "prio", priority = -100 }))
    assert.equal(N, #initial)
    for _, r in ipairs(rt.all(env, rt.msg("reconcile start", { controller = "prio" }))) do
      local live_key = r.key == key(live) or r.key == key("new")
      assert.equal(live_key and 0 or -100, r.priority, r.key)
    end

    -- fifo: the changed key kept its place in the first list, the new one came last
    local listed = {}
    for _, r in ipairs(rt.all(env, rt.msg("enqueue", { controller = "fifo", priority = -100 }))) do
      listed[#listed + 1] = r.key
    end
    listed[#listed + 1] = key("new")
    assert.same(listed, order.fifo)
    for _, r in ipairs(rt.all(env, rt.msg("reconcile start", { controller = "fifo" }))) do
      assert.equal(0, r.priority, r.key)
    end
  end)
end)

describe("priority of resyncs #integration", function()
  local env, token
  local M = 10

  setup(function()
    token = rt.token()
    env = rt.start{ sources = { ["resync.lua"] = rt.source(RESYNC, { TOKEN = token }) },
                    prepare = function(srv) seed(srv, token, M) end }
  end)
  teardown(function() env:stop() end)

  it("enqueues the first list and every resync at the low priority", function()
    -- the first list, then two resyncs of every object (nothing changes)
    rt.wait_count(env, rt.msg("enqueue", { controller = "resync", priority = -100 }), 3 * M, 30,
      "two resyncs of every object")
    assert.same({}, rt.all(env, rt.msg("enqueue", { controller = "resync", priority = 0 })))
    for _, r in ipairs(rt.all(env, rt.msg("reconcile start", { controller = "resync" }))) do
      assert.equal(-100, r.priority)
    end
  end)
end)

-- A reload that turns priorities off applies to the queue the new code
-- inherits (take_queue): the keys the changed code gets are FIFO at 0.
local VERSIONED = [[
local luna = require "luna"
return luna.controller {
  name = "switch",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  priority_queue = @PRIORITY@,
  reconcile = function(req) luna.log.info("saw", { version = "@VERSION@", req_key = req.key }) end,
}
]]

describe("priority_queue across a reload #integration", function()
  local env, token
  local M = 10

  setup(function()
    token = rt.token()
    env = rt.start{
      sources = { ["switch.lua"] = rt.source(VERSIONED, { TOKEN = token, PRIORITY = "true", VERSION = "v1" }) },
      prepare = function(srv) seed(srv, token, M) end,
    }
  end)
  teardown(function() env:stop() end)

  it("hands the changed code its keys without priorities once it sets priority_queue = false", function()
    rt.wait_count(env, rt.msg("saw", { version = "v1" }), M, 20, "v1 reconciles")
    for _, r in ipairs(rt.all(env, rt.msg("reconcile start", { controller = "switch" }))) do
      assert.equal(-100, r.priority)
    end
    helpers.write_file(env.dir .. "/switch.lua",
      rt.source(VERSIONED, { TOKEN = token, PRIORITY = "false", VERSION = "v2" }))
    env.luna:kill(1) -- SIGHUP
    -- the changed code gets every key again, enqueued at -100 (a backlog),
    -- handed out at 0: its queue is one FIFO now
    local v2 = rt.wait_count(env, rt.msg("saw", { version = "v2" }), M, 20, "v2 reconciles")
    local ids = {}
    for _, r in ipairs(v2) do ids[r.reconcile_id] = true end
    local n = 0
    for _, r in ipairs(rt.all(env, rt.msg("reconcile start", { controller = "switch" }))) do
      if ids[r.reconcile_id] then
        assert.equal(0, r.priority, r.key)
        n = n + 1
      end
    end
    assert.equal(M, n)
  end)
end)
