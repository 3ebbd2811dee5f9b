-- Time-based controllers under `luna test`: luna.schedule(key, at) queues a
-- key of the calling controller at a time (earliest wins, bounded, every
-- bad input a clear error), and the fake clock drives luna.time.now(),
-- os.time() and os.date() inside controllers, so env:advance fires
-- schedules and moves the time scripts see.
local helpers = require("helpers")

local function tree(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  return dir
end

local function luna_test(dir)
  return helpers.run(helpers.luna .. " test " .. dir)
end

-- Every reconcile GETs its object (recorded by env:calls: one GET per
-- reconcile, with its key).  A ConfigMap's data says what to do, once
-- (annotation done): `after` = schedule { after = N }; `at` = schedule at
-- now + N (absolute); `after2` = a second schedule of the same key; `key`
-- = the key to schedule instead of its own; `bad` = try each bad input and
-- write the errors into annotations; `clock` = write the times the script
-- sees; `many` = schedule that many keys.
local TIMER = [[
local luna = require "luna"
local _, EARLY = pcall(luna.schedule, "default/x", { after = 1 })
local BAD = {
  nan = function(k) luna.schedule(k, 0 / 0) end,
  inf = function(k) luna.schedule(k, math.huge) end,
  neg_at = function(k) luna.schedule(k, -1) end,
  far_at = function(k) luna.schedule(k, luna.time.now() + 400 * 86400) end,
  neg_after = function(k) luna.schedule(k, { after = -5 }) end,
  nan_after = function(k) luna.schedule(k, { after = 0 / 0 }) end,
  far_after = function(k) luna.schedule(k, { after = 366 * 86400 }) end,
  str_after = function(k) luna.schedule(k, { after = "5" }) end,
  typo = function(k) luna.schedule(k, { aftr = 5 }) end,
  no_at = function(k) luna.schedule(k) end,
  str_at = function(k) luna.schedule(k, "2026-01-01T00:00:00Z") end,
  no_key = function() luna.schedule(nil, 5) end,
  empty_key = function() luna.schedule("", 5) end,
  slashes = function() luna.schedule("a/b/c", 5) end,
  empty_name = function() luna.schedule("default/", 5) end,
  periodic = function() luna.schedule("@every", 5) end,
  space = function() luna.schedule("default/a b", 5) end,
  long = function() luna.schedule("default/" .. ("x"):rep(400), 5) end,
}
return luna.controller {
  name = "timer",
  watch = "v1/ConfigMap",
  reconcile = function(req)
    local cm = luna.get("v1/ConfigMap", req.namespace, req.name)
    if not cm then return end
    local d, a = cm.data or {}, cm.metadata.annotations or {}
    if a.done == (d.round or "1") then return end
    local out = { done = d.round or "1" }
    if d.after then luna.schedule(d.key or req.key, { after = tonumber(d.after) }) end
    if d.at then luna.schedule(d.key or req.key, luna.time.now() + tonumber(d.at)) end
    if d.after2 then luna.schedule(d.key or req.key, { after = tonumber(d.after2) }) end
    if d.bad then
      out.early = tostring(EARLY)
      for name, fn in pairs(BAD) do
        local ok, err = pcall(fn, req.key)
        out[name] = ok and "accepted" or tostring(err)
      end
    end
    if d.many then
      local n = tonumber(d.many)
      for i = 1, n do luna.schedule("default/k" .. i, { after = 100 }) end
      local ok, err = pcall(luna.schedule, "default/one-more", { after = 100 })
      out.over = ok and "accepted" or tostring(err)
      ok, err = pcall(luna.schedule, "default/k1", { after = 50 })
      out.again = ok and "accepted" or tostring(err)
    end
    if d.clock then
      out.now = string.format("%.3f", luna.time.now())
      out.os_time = tostring(os.time())
      out.os_date = os.date("!%Y-%m-%dT%H:%M:%SZ")
      out.os_date_t = tostring(os.time(os.date("*t")))
      out.cron = luna.cron and tostring(luna.cron.next("0 * * * *")) or "none"
    end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name, { metadata = { annotations = out } })
    if err then return nil, err end
  end,
}
]]

local function cm(name, data)
  return ([[{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = %q, namespace = "default" }, data = %s }]])
    :format(name, data)
end

local function run(test, start)
  local dir = tree{ ["timer.lua"] = TIMER, ["timer_test.lua"] = [[
local testing = require "luna.testing"
-- The reconciles since the last env:calls(), by key (each GETs its object).
local function gets(env)
  local n = setmetatable({}, { __index = function() return 0 end })
  for _, c in ipairs(env:calls{ method = "GET" }) do n[c.key] = n[c.key] + 1 end
  return n
end
local function ann(env, name)
  return env:get("v1/ConfigMap", "default", name).metadata.annotations or {}
end
describe("timer", function()
  local env
  before_each(function() env = testing.start{ ]] .. (start or "") .. [[ } end)
]] .. test .. [[
end)
]] }
  local out, rc = luna_test(dir)
  assert.equal(0, rc, out)
  assert.matches("1 passed, 0 failed", out)
end

describe("luna.schedule", function()
  it("queues the key when the fake clock reaches { after = s }, once", function()
    run([[
  it("fires", function()
    env:create(]] .. cm("a", "{ after = '600' }") .. [[)
    local st = env:wait_idle()
    assert.equal(1, st.controllers[1].waiting)
    assert.equal(600, math.floor(st.controllers[1].next + 0.5))
    env:calls()
    env:advance(599)
    assert.equal(0, gets(env)["default/a"])
    env:advance(1)
    assert.equal(1, gets(env)["default/a"])
    assert.equal(0, env:status().controllers[1].waiting)
    env:advance(3600)
    assert.equal(0, gets(env)["default/a"])
  end)
]])
  end)

  it("takes an absolute unix time and any key of the controller", function()
    run([[
  it("fires", function()
    env:create(]] .. cm("b", "{ at = '300', key = 'other/ghost' }") .. [[)
    local st = env:wait_idle()
    assert.equal(300, math.floor(st.controllers[1].next + 0.5))
    env:calls()
    env:advance(300)
    local g = gets(env)
    assert.equal(1, g["other/ghost"])
    assert.equal(0, g["default/b"])
  end)
]])
  end)

  it("keeps the earliest of two schedules of a key", function()
    run([[
  it("fires", function()
    env:create(]] .. cm("c", "{ after = '600', after2 = '300' }") .. [[)
    env:create(]] .. cm("d", "{ after = '300', after2 = '600' }") .. [[)
    local st = env:wait_idle()
    assert.equal(2, st.controllers[1].waiting)
    assert.equal(300, math.floor(st.controllers[1].next + 0.5))
    env:calls()
    env:advance(299)
    assert.equal(0, gets(env)["default/c"])
    env:advance(1)
    local g = gets(env)
    assert.equal(1, g["default/c"])
    assert.equal(1, g["default/d"])
    assert.equal(0, env:status().controllers[1].waiting)
  end)
]])
  end)

  it("raises a clear error for each bad input and schedules nothing", function()
    run([[
  it("refuses", function()
    env:create(]] .. cm("e", "{ bad = 'y' }") .. [[)
    local st = env:wait_idle()
    assert.equal(0, st.controllers[1].waiting)
    local a = ann(env, "e")
    local want = {
      nan = "luna.schedule: at must be a finite number of seconds since the epoch",
      inf = "luna.schedule: at must be a finite number of seconds since the epoch",
      neg_at = "luna.schedule: at must be a finite number of seconds since the epoch",
      far_at = "luna.schedule: at is more than a year (31536000 s) from now",
      neg_after = "luna.schedule: after must be a number of seconds from 0 to 31536000",
      nan_after = "luna.schedule: after must be a number of seconds from 0 to 31536000",
      far_after = "luna.schedule: after must be a number of seconds from 0 to 31536000",
      str_after = "luna.schedule: after must be a number of seconds from 0 to 31536000",
      typo = "luna.schedule: unknown field 'aftr' (want { after = seconds })",
      no_at = "luna.schedule: at must be seconds since the epoch or { after = seconds }, got nil",
      str_at = "luna.schedule: at must be seconds since the epoch or { after = seconds }, got string",
      no_key = "luna.schedule: key must be a string, got nil",
      empty_key = 'luna.schedule: key must be "namespace/name" or "name", got ""',
      slashes = 'luna.schedule: key must be "namespace/name" or "name", got "a/b/c"',
      empty_name = 'luna.schedule: key must be "namespace/name" or "name", got "default/"',
      periodic = 'luna.schedule: key "@every" is the periodic key: use every',
      space = 'luna.schedule: key must be "namespace/name" or "name", got "default/a b"',
      long = "luna.schedule: key longer than 317 bytes",
    }
    assert.is_truthy(a.early:find("luna.schedule: only inside a reconcile", 1, true), a.early)
    for name, msg in pairs(want) do
      assert.is_truthy(a[name], name)
      assert.is_truthy(a[name]:find(msg, 1, true), name .. ": " .. a[name])
      assert.is_truthy(a[name]:find("timer.lua:", 1, true), name .. " at the script's line: " .. a[name])
    end
  end)
]])
  end)

  it("caps the pending timers of a controller; a key already waiting may move", function()
    run([[
  it("caps", function()
    env:create(]] .. cm("f", "{ many = '100000' }") .. [[)
    local st = env:wait_idle(120)
    assert.equal(100000, st.controllers[1].waiting)
    assert.equal(50, math.floor(st.controllers[1].next + 0.5))
    local a = ann(env, "f")
    assert.equal("accepted", a.again)
    assert.is_truthy(a.over:find("luna.schedule: the controller has 100000 keys waiting " ..
      "(schedules, requeue_after, retries), the most it may", 1, true), a.over)
  end)
]], [[args = { "--reconcile-time-limit", "100" }, timeout = 120]])
  end)
end)

describe("the fake clock under luna test", function()
  it("drives luna.time.now, os.time, os.date and luna.cron.next in controllers", function()
    run([[
  it("steps", function()
    env:create(]] .. cm("g", "{ clock = 'y' }") .. [[)
    env:wait_idle()
    local a1 = ann(env, "g")
    env:advance(3600)
    env:patch("v1/ConfigMap", "default", "g", { data = { round = "2" } })
    env:wait_idle()
    local a2 = ann(env, "g")
    local d = tonumber(a2.now) - tonumber(a1.now)
    assert.is_true(d >= 3600 and d < 3660, "luna.time.now moved " .. d)
    local dt = tonumber(a2.os_time) - tonumber(a1.os_time)
    assert.is_true(dt >= 3599 and dt <= 3660, "os.time moved " .. dt)
    assert.equal(os.date("!%Y-%m-%dT%H:%M:%SZ", tonumber(a2.os_time)), a2.os_date)
    assert.equal(a2.os_time, a2.os_date_t)
    assert.equal(tonumber(a1.cron) + 3600, tonumber(a2.cron))
    assert.is_true(math.abs(tonumber(a1.now) - os.time()) < 60, "starts at the real time")
  end)
]])
  end)
end)
