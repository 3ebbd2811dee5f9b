-- Memory per controller (issue 23, class 3): all controllers share one Lua
-- heap, but each controller's share of it is its own account.  A controller
-- that keeps a lot (here in an upvalue, in steps) fails its OWN reconciles
-- when it reaches its cap (--controller-memory-limit, by default half of
-- --lua-memory-limit, lowered by `limits = { memory = MiB }`), and its
-- neighbours' ordinary reconciles keep succeeding.  Every host here runs
-- with the default flags a user gets.
local helpers = require("helpers")
local exposition = require("support.exposition")
local support = require("12-isolation.support")

local METRICS = { "--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false" }

-- Keeps 4 MiB more in an upvalue at each reconcile of its key, up to
-- @TOTAL@ MiB, logging what it holds.
local function hog(name, extra, total)
  return ([[
local luna = require "luna"
local kept, mib = {}, 0
return luna.controller {
  name = %q, watch = { "v1/ConfigMap", namespace = "@NS@" }, %s
  reconcile = function(req)
    if req.name ~= %q then return end
    if mib >= %d then return end
    -- its own bytes: two hogs making the same string would share one
    -- interned copy, charged to whichever made it first
    kept[#kept + 1] = string.rep(("%%04d%%4s"):format(#kept, (%q):sub(-4)), 512 * 1024) -- 4 MiB
    mib = mib + 4
    print(%q .. " holds " .. mib .. " MiB")
    return { requeue_after = 0.01 }
  end,
}
]]):format(name, extra or "", name, total or 120, name, name)
end

-- Ordinary work: reads its ConfigMap and renders ~2 MiB of text from it.
local NEIGHBOUR = [[
local luna = require "luna"
return luna.controller {
  name = "neighbour", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    if not req.name:match("^n%-") then return end
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    local lines = {}
    for i = 1, 16384 do
      lines[i] = ("%s/%s line %d: %s"):format(req.namespace, req.name, i, cm and cm.metadata.uid or "")
    end
    local text = table.concat(lines, "\n")
    print("neighbour reconciled " .. req.name .. " " .. #text)
  end,
}
]]

-- The first line with every part in parts_a or every part in parts_b.
local function wait_either(p, parts_a, parts_b, secs)
  local function has(line, parts)
    for _, s in ipairs(parts) do if not line:find(s, 1, true) then return false end end
    return true
  end
  for _, line in ipairs(p.out) do
    if has(line, parts_a) or has(line, parts_b) then return line end
  end
  local deadline = helpers.now() + secs
  while true do
    local line = p:read_line(math.max(0, deadline - helpers.now()))
    if not line then
      error("no line with " .. table.concat(parts_a, " + ") .. " or " ..
        table.concat(parts_b, " + ") .. "; output:\n" .. table.concat(p.out, "\n"), 2)
    end
    if has(line, parts_a) or has(line, parts_b) then return line end
  end
end

local function scrape(p)
  local line = support.wait_line(p, { "metrics server listening" }, 20)
  local address = line:match("address=(%S+)")
  local out, rc = helpers.run("env -u LD_PRELOAD curl -s -S --max-time 10 http://" .. address .. "/metrics")
  assert(rc == 0, out)
  return exposition.parse(out)
end

local MiB = 1024 * 1024

-- A controller for support.load_only, which has no spec namespace.
local function plain(name, extra)
  return (support.controller(name, "", extra):gsub("@NS@", "default"))
end

describe("memory per controller", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)
  before_each(function() support.fresh_namespace(srv) end)
  after_each(function() if p then p:stop() end p = nil end)

  -- The neighbour's 36 ConfigMaps, once the hog holds all it can; returns
  -- when each was reconciled.
  local function neighbour_runs()
    for i = 1, 36 do srv:create_cm(("n-%02d"):format(i)) end
    for i = 1, 36 do
      support.wait_line(p, { ("neighbour reconciled n-%02d "):format(i) }, 60)
    end
  end

  it("a hog that keeps 120 MiB fails its own reconciles, not its neighbour's (default flags)", function()
    srv:create_cm("hog")
    p = support.run(srv, { ["hog.lua"] = hog("hog"), ["neighbour.lua"] = NEIGHBOUR }, METRICS)
    -- the hog either got all it wanted or was stopped at its own cap
    wait_either(p, { "hog holds 120 MiB" }, { "reconcile failed", "controller=hog" }, 120)
    neighbour_runs()
    local failed = support.lines(p, { "reconcile failed", "controller=neighbour" })
    assert.same({}, failed, "the neighbour's reconciles failed:\n" .. table.concat(failed, "\n"))
    assert.same({}, support.lines(p, { "hog holds 120 MiB" }))

    -- the hog's own failure names its cap: half the default 128 MiB heap
    local line = support.wait_line(p, { "reconcile failed", "controller=hog", "stopped=memory" }, 20)
    assert.matches("reconcile exceeded the Lua memory limit of controller hog %(64 MiB%)", line)
    local held = 0
    for _, l in ipairs(support.lines(p, { "hog holds " })) do
      held = math.max(held, tonumber(l:match("hog holds (%d+) MiB")))
    end
    assert.is_true(held >= 48 and held < 64, "the hog held " .. held .. " MiB")

    -- each controller's memory and stops, per controller
    local m = scrape(p)
    local hog_bytes = exposition.get(m, "luna_controller_lua_memory_bytes", { controller = "hog" })
    local nb_bytes = exposition.get(m, "luna_controller_lua_memory_bytes", { controller = "neighbour" })
    assert.is_true(hog_bytes >= held * MiB and hog_bytes <= 64 * MiB, tostring(hog_bytes))
    assert.is_true(nb_bytes > 0 and nb_bytes < 32 * MiB, tostring(nb_bytes))
    assert.is_true(exposition.get(m, "luna_controller_watchdog_stops_total",
      { controller = "hog", reason = "memory" }) >= 1)
    assert.equal(0, exposition.get(m, "luna_controller_watchdog_stops_total",
      { controller = "neighbour", reason = "memory" }))
    assert.is_true(p:alive())
  end)

  it("two hogs cannot take the heap's reserve from a third controller", function()
    srv:create_cm("hog")
    srv:create_cm("hog2")
    p = support.run(srv, { ["hog.lua"] = hog("hog"), ["hog2.lua"] = hog("hog2"),
                           ["neighbour.lua"] = NEIGHBOUR }, METRICS)
    wait_either(p, { "hog holds 120 MiB" }, { "reconcile failed", "controller=hog " }, 120)
    wait_either(p, { "hog2 holds 120 MiB" }, { "reconcile failed", "controller=hog2" }, 120)
    neighbour_runs()
    local failed = support.lines(p, { "reconcile failed", "controller=neighbour" })
    assert.same({}, failed, "the neighbour's reconciles failed:\n" .. table.concat(failed, "\n"))
    -- together the hogs stay out of the last quarter of the heap
    local m = scrape(p)
    local a = exposition.get(m, "luna_controller_lua_memory_bytes", { controller = "hog" })
    local b = exposition.get(m, "luna_controller_lua_memory_bytes", { controller = "hog2" })
    assert.is_true(a + b <= 96 * MiB, tostring(a + b))
    assert.is_true(#support.lines(p, { "reconcile failed", "stopped=memory", "fair share of controller hog" }) > 0,
      table.concat(p.out, "\n"))
  end)

  it("limits.memory lowers a controller's cap", function()
    srv:create_cm("hog")
    p = support.run(srv, { ["hog.lua"] = hog("hog", "limits = { memory = 16 },"),
                           ["neighbour.lua"] = NEIGHBOUR })
    local line = support.wait_line(p, { "reconcile failed", "controller=hog", "stopped=memory" }, 60)
    assert.matches("reconcile exceeded the Lua memory limit of controller hog %(16 MiB%)", line)
    for _, l in ipairs(support.lines(p, { "hog holds " })) do
      assert.is_true(tonumber(l:match("hog holds (%d+) MiB")) < 16, l)
    end
  end)

  it("refuses limits.memory above the operator's cap, and a share above the heap", function()
    local out, rc = support.load_only({ ["a.lua"] = plain("a", "limits = { memory = 65 },") })
    assert.equal(1, rc)
    assert.matches("limits%.memory' must be a number of MiB > 0 and <= 64 %(%-%-controller%-memory%-limit%)", out)
    out, rc = support.load_only({ ["a.lua"] = plain("a", "limits = { memory = 100 },") },
      { "--controller-memory-limit", "100" })
    assert.not_matches("limits%.memory", out)
    assert.not_matches("controller load failed", out)
    assert.not_equal(2, rc)
    out, rc = support.load_only({ ["a.lua"] = plain("a") },
      { "--controller-memory-limit", "200" })
    assert.equal(2, rc)
    assert.matches("%-%-controller%-memory%-limit must be > 0 and at most %-%-lua%-memory%-limit %(128 MiB%)", out)
  end)

  -- The review's attack through interned strings (issue 23, 23.3): a
  -- victim reads 90 ConfigMaps of ~900 KB from its cache at each
  -- reconcile and keeps nothing; a hog reads the same values and keeps
  -- them.  In one shared state the hog's copies were the victim's interned
  -- strings, charged to the victim (first maker), whose reconciles failed
  -- at its own cap.  Each controller file has its own state now: the hog's
  -- copies are its own, and it fails at its cap.
  it("a hog keeping the strings a victim reads from its cache fails itself, not the victim (default flags)", function()
    -- 90 values of 900 KiB (12 bytes, 76,800 times), each its own
    for i = 1, 90 do
      local name = ("big-%02d"):format(i)
      srv:create_cm(name, { v = string.rep(("%s:%04d;"):format(name, i), 76800) })
    end
    srv:create_cm("victim")
    local VICTIM = [[
local luna = require "luna"
local runs = 0
return luna.controller {
  name = "victim", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    if req.name ~= "victim" then return end
    local cms, bytes = luna.cache("v1/ConfigMap"), 0
    for i = 1, 90 do
      bytes = bytes + #cms:get(req.namespace, ("big-%02d"):format(i)).data.v
    end
    runs = runs + 1
    print("victim read " .. bytes .. " bytes, run " .. runs)
    if runs < 30 then return { requeue_after = 0.05 } end
  end,
}
]]
    local HOG = [[
local luna = require "luna"
local kept = {}
return luna.controller {
  name = "hog", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    if req.name ~= "hog" then return end
    local cms = luna.cache("v1/ConfigMap")
    for i = 1, 90 do
      kept[i] = cms:get(req.namespace, ("big-%02d"):format(i)).data.v
      print("hog holds " .. i)
    end
    return { requeue_after = 0.05 }
  end,
}
]]
    p = support.run(srv, { ["victim.lua"] = VICTIM, ["hog.lua"] = HOG }, METRICS)
    support.wait_line(p, { "victim read", "run 1" }, 120)
    srv:create_cm("hog")
    -- the victim runs on to its 30th reconcile whatever the hog holds
    support.wait_line(p, { "victim read", "run 30" }, 240)
    local failed = support.lines(p, { "reconcile failed", "controller=victim" })
    assert.same({}, failed, "the victim's reconciles failed:\n" .. table.concat(failed, "\n"))
    for _, l in ipairs(support.lines(p, { "victim read" })) do
      assert.matches("victim read " .. 90 * 921600 .. " bytes", l, 1, true)
    end
    -- the hog fails at its own cap, never holding all 90
    local line = support.wait_line(p, { "reconcile failed", "controller=hog", "stopped=memory" }, 60)
    assert.matches("reconcile exceeded the Lua memory limit of controller hog %(64 MiB%)", line)
    assert.same({}, support.lines(p, { "hog holds 90" }))
    local m = scrape(p)
    assert.equal(0, exposition.get(m, "luna_controller_watchdog_stops_total",
      { controller = "victim", reason = "memory" }))
    assert.is_true(exposition.get(m, "luna_controller_watchdog_stops_total",
      { controller = "hog", reason = "memory" }) >= 1)
    assert.is_true(p:alive())
  end)

  it("charges what a controller file keeps at load to that controller", function()
    local out, rc = support.load_only({ ["big.lua"] = [[
local kept = {}
for i = 1, 40 do kept[i] = string.rep(("%08d"):format(i), 512 * 1024) end
]] , ["small.lua"] = plain("small") })
    assert.equal(1, rc)
    assert.matches("big%.lua: controller file exceeded the Lua memory limit of [^ ]*big%.lua %(64 MiB%)", out)
    assert.not_matches("small%.lua", out)
  end)
end)
