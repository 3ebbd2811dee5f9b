-- Periodic work: `every = seconds` or a cron schedule on a controller adds
-- the key "@every" to its workqueue on that schedule (a source.Channel fed
-- by a ticker), with jitter; the reconcile sees req.periodic.  The queue's
-- rules hold: a tick while the last run is in flight is folded into one
-- more run, never two at once.  A reload that keeps the schedule keeps the
-- next due time; luna_periodic_* count it.
local luna = require("luna")
local core = require("luna.core")
local client = require("support.apiserver_client")
local exposition = require("support.exposition")
local helpers = require("helpers")
local rt = require("11-runtime.support")

local POLLER = [[
local luna = require "luna"
return luna.controller {
  name = "poller",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  every = @EVERY@,
  jitter = @JITTER@,
  reconcile = function(req)
    if req.periodic then
      @BODY@
      luna.log.info("polled", { key = req.key, name = req.name, version = "@VERSION@" })
    end
  end,
}
]]

local function poller(token, vars)
  return rt.source(POLLER, { TOKEN = token, EVERY = vars.every or "1", JITTER = vars.jitter or "0",
    BODY = vars.body or "", VERSION = vars.version or "v1" })
end

local METRICS_ARGS = { "--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false" }

local function scrape(env)
  local rec = rt.wait(env, rt.msg("metrics server listening"), 5, "the metrics server")
  local out, rc = helpers.run("env -u LD_PRELOAD curl -s -S --max-time 10 http://" .. rec.address .. "/metrics")
  assert(rc == 0, out)
  return exposition.parse(out)
end

local function value(env, name)
  return exposition.get(scrape(env), name, { controller = "poller" })
end

describe("periodic work", function()
  local env
  after_each(function()
    if env then env:stop() end
    env = nil
  end)

  it("ticks when the controller starts, then every period, with the periodic key", function()
    local token = rt.token()
    env = rt.start{ args = METRICS_ARGS, sources = { ["poller.lua"] = poller(token, { every = "1" }) } }
    local polls = rt.wait_count(env, rt.msg("polled"), 3, 20, "three polls")
    for _, r in ipairs(polls) do
      assert.same({ "@every", "@every" }, { r.key, r.name })
    end
    -- a lower bound only, on the grid the ticks follow: the k-th tick is
    -- due a period after the (k-1)-th was due (the first at the start), so
    -- the k-th poll is never sooner than k-1 periods after the controller
    -- started.  (Gaps between two polls say nothing: either may have
    -- waited for the loop.)
    local started = rt.seconds(assert(rt.find(env, rt.msg("controller started", { controller = "poller" }))))
    for k = 2, #polls do
      assert.is_true(rt.seconds(polls[k]) - started >= (k - 1) - 0.05,
        ("poll %d at %s, controller started %.3f s before"):format(k, polls[k].ts,
          rt.seconds(polls[k]) - started))
    end
    local ticks = #rt.all(env, rt.msg("periodic tick", { controller = "poller" }))
    assert.is_true(ticks >= 3)
    local m = scrape(env)
    assert.is_true(exposition.get(m, "luna_periodic_ticks_total", { controller = "poller" }) >= 3)
    local next_run = exposition.get(m, "luna_periodic_next_run_timestamp_seconds", { controller = "poller" })
    assert.is_true(next_run > os.time() - 5 and next_run < os.time() + 5, tostring(next_run))
  end)

  it("folds ticks that come while a run is in flight: one run at a time, none piled up", function()
    if client.real() then return pending(client.DEV_ONLY .. "holds a GET with --faults") end
    local token = rt.token()
    env = rt.start{ sources = { ["poller.lua"] = poller(token, {
        every = "1", body = 'luna.get("v1/ConfigMap", "default", "held-poll")' }) },
      server_args = { "--faults", "delay=2.5,delay-path=/configmaps/held-" } }
    rt.wait_count(env, rt.msg("periodic tick", { controller = "poller" }), 6, 30, "six ticks")
    local in_flight, starts = 0, 0
    for _, r in ipairs(rt.records(env)) do
      if r.key == "@every" and r.msg == "reconcile start" then
        in_flight = in_flight + 1
        starts = starts + 1
        assert.equal(1, in_flight, "two periodic runs at once")
      elseif r.key == "@every" and (r.msg == "reconcile done" or r.msg == "reconcile failed") then
        in_flight = in_flight - 1
      end
    end
    local ticks = #rt.all(env, rt.msg("periodic tick", { controller = "poller" }))
    -- each run holds 2.5 s: at most one run per two and a half ticks, plus the one folded in
    assert.is_true(starts <= math.ceil(ticks / 2) + 1, ("%d runs for %d ticks"):format(starts, ticks))
    assert.is_true(starts >= 2)
  end)

  it("keeps the next due time across a reload with the same schedule, starts over when it changes", function()
    local token = rt.token()
    env = rt.start{ args = METRICS_ARGS,
      sources = { ["poller.lua"] = poller(token, { every = "3600", jitter = "0.5" }) } }
    rt.wait(env, rt.msg("polled", { version = "v1" }), 15, "the first poll at start")
    local due = value(env, "luna_periodic_next_run_timestamp_seconds")
    assert.is_true(due >= os.time() + 3590 and due <= os.time() + 5410, tostring(due))

    helpers.write_file(env.dir .. "/poller.lua", poller(token, { every = "3600", jitter = "0.5", version = "v2" }))
    env.luna:kill(1)
    rt.wait(env, rt.msg("reload done", { result = "success", changed = 1 }), 20, "the reload")
    env:wait(function() return rt.find(env, rt.msg("controller started", { controller = "poller" })) end, 10)
    assert.equal(due, value(env, "luna_periodic_next_run_timestamp_seconds"))
    assert.equal(1, #rt.all(env, rt.msg("polled")), "a reload with the same schedule ticked")

    helpers.write_file(env.dir .. "/poller.lua", poller(token, { every = "1800", version = "v3" }))
    env.luna:kill(1)
    rt.wait(env, rt.msg("polled", { version = "v3" }), 20, "a changed schedule starting over")
    local new_due = value(env, "luna_periodic_next_run_timestamp_seconds")
    assert.is_true(new_due >= os.time() + 1790 and new_due <= os.time() + 1810, tostring(new_due))
    assert.equal(1, value(env, "luna_periodic_ticks_total") - 1, "one tick per schedule start")
  end)

  it("runs a cron schedule at its minutes (UTC)", function()
    local token = rt.token()
    env = rt.start{ args = METRICS_ARGS, sources = { ["poller.lua"] = poller(token, { every = '"* * * * *"' }) } }
    local due = value(env, "luna_periodic_next_run_timestamp_seconds")
    assert.equal(0, due % 60, tostring(due))
    assert.is_true(due > os.time() - 1 and due <= os.time() + 61, tostring(due))
  end)
end)

describe("every and jitter in the controller spec #unit", function()
  local function spec(extra)
    local s = { name = "demo", watch = "v1/ConfigMap", reconcile = function() end }
    for k, v in pairs(extra) do s[k] = v end
    return s
  end
  local function refused(extra)
    local ok, err = pcall(luna.controller, spec(extra))
    assert.is_false(ok, "accepted")
    return err
  end

  it("takes seconds or a cron schedule, and a jitter fraction", function()
    assert.equal(1, luna.controller(spec{ every = 1 }).every)
    assert.equal(31536000, luna.controller(spec{ every = 31536000 }).every)
    assert.equal("*/5 * * * *", luna.controller(spec{ every = "*/5 * * * *" }).every)
    assert.equal("@hourly", luna.controller(spec{ every = "@hourly" }).every)
    local c = luna.controller(spec{ every = 60, jitter = 0.25 })
    assert.same({ 60, 0.25 }, { c.every, c.jitter })
    assert.is_nil(luna.controller(spec{}).every)
  end)

  it("refuses what is not a schedule, saying why", function()
    local what = "controller field 'every' must be a number of seconds (1 to 31536000) or a cron schedule"
    for _, v in ipairs({ 0, 0.5, -1, 31536001, 0 / 0, math.huge, true, {}, function() end }) do
      assert.matches(what, refused{ every = v }, 1, true)
    end
    assert.matches("cron: minute: 61 out of range 0-59", refused{ every = "61 * * * *" }, 1, true)
    assert.matches("cron: want five fields", refused{ every = "* * * *" }, 1, true)
    assert.matches("the schedule never runs", refused{ every = "0 0 31 4 *" }, 1, true)
    assert.matches("at most 128 bytes", refused{ every = ("* "):rep(100) }, 1, true)
    assert.matches("at most 128 bytes", refused{ every = "* * * * *\0rm" }, 1, true)
    assert.matches("controller field 'jitter' needs 'every'", refused{ jitter = 0.1 }, 1, true)
    assert.matches("controller field 'jitter' must be a fraction of the period from 0 to 1",
      refused{ every = 5, jitter = 2 }, 1, true)
    assert.matches("controller field 'jitter' must be", refused{ every = 5, jitter = -0.1 }, 1, true)
    assert.matches("did you mean 'every'", refused{ evrey = 5 }, 1, true)
  end)
end)

describe("core.cron #unit", function()
  -- 2026-01-01 was a Thursday
  local function at(y, mo, d, h, mi)
    return os.time{ year = y, month = mo, day = d, hour = h, min = mi, sec = 0, isdst = false }
      - os.time{ year = 1970, month = 1, day = 1, hour = 0, isdst = false }
  end

  it("finds the next minute of a schedule, in UTC", function()
    local t0 = at(2026, 1, 1, 0, 7) + 30
    assert.equal(at(2026, 1, 1, 0, 15), core.cron.next("*/15 * * * *", t0))
    assert.equal(at(2026, 1, 1, 0, 8), core.cron.next("* * * * *", t0))
    assert.equal(at(2026, 1, 1, 0, 8), core.cron.next("* * * * *", at(2026, 1, 1, 0, 7)), "strictly after")
    assert.equal(at(2026, 1, 1, 9, 0), core.cron.next("0 9 * * 1-5", t0))        -- Thursday
    assert.equal(at(2026, 1, 5, 9, 0), core.cron.next("0 9 * * mon-fri", at(2026, 1, 2, 9, 0)))
    assert.equal(at(2026, 1, 4, 0, 0), core.cron.next("0 0 * * 7", t0))          -- 7 is Sunday
    assert.equal(at(2026, 2, 1, 0, 0), core.cron.next("@monthly", t0))
    assert.equal(at(2026, 7, 1, 0, 0), core.cron.next("0 0 1 jan,jul *", t0 + 86400))
    assert.equal(at(2026, 1, 1, 1, 0), core.cron.next("@hourly", t0))
    assert.equal(at(2026, 1, 1, 0, 50), core.cron.next("5-55/15 * * * *", at(2026, 1, 1, 0, 36)))
    assert.equal(at(2026, 1, 1, 0, 20), core.cron.next("5/15 * * * *", at(2026, 1, 1, 0, 7)))
    assert.equal(at(2028, 2, 29, 0, 0), core.cron.next("0 0 29 2 *", t0))        -- leap day
  end)

  it("keeps a step inside a one-value range (5-5/20 is minute 5 only)", function()
    -- it used to run to the end of the field, as 5/20 does
    assert.equal(at(2026, 1, 1, 1, 5), core.cron.next("5-5/20 * * * *", at(2026, 1, 1, 0, 7)))
    assert.equal(at(2026, 1, 1, 0, 25), core.cron.next("5/20 * * * *", at(2026, 1, 1, 0, 7)))
    assert.equal(at(2026, 1, 5, 0, 0), core.cron.next("0 0 * * mon-mon/2", at(2026, 1, 1, 0, 0)))
  end)

  it("answers nil for a time outside 1970 .. 9999 instead of overflowing", function()
    -- 1e300 overflowed time_t (signed overflow, UBSan) and gmtime_r failed
    for _, t in ipairs({ 1e300, -1e300, 1e17, -1, 253402300800, 0 / 0, math.huge, -math.huge }) do
      assert.is_nil((core.cron.next("* * * * *", t)), tostring(t))
    end
    assert.equal(253402300800, core.cron.next("* * * * *", 253402300799))
  end)

  it("runs on a day matching either restricted day field, as cron does", function()
    -- the 13th, or a Friday: Friday 2 January comes first
    assert.equal(at(2026, 1, 2, 0, 0), core.cron.next("0 0 13 * 5", at(2026, 1, 1, 0, 0)))
    assert.equal(at(2026, 1, 13, 0, 0), core.cron.next("0 0 13 * 5", at(2026, 1, 9, 0, 0)))
    -- with one day field `*`, the other decides alone
    assert.equal(at(2026, 1, 13, 0, 0), core.cron.next("0 0 13 * *", at(2026, 1, 1, 0, 0)))
    -- robfig/cron v3 (a CronJob's parser): a stepped star is restricted, so
    -- odd days OR Mondays (Saturday the 3rd), where Vixie cron would wait for
    -- an odd Monday (the 5th); a star with step 1, `?`, or a `*` anywhere in
    -- the list is unrestricted: Mondays only
    assert.equal(at(2026, 1, 3, 0, 0), core.cron.next("0 0 */2 * 1", at(2026, 1, 1, 0, 0)))
    assert.equal(at(2026, 1, 5, 0, 0), core.cron.next("0 0 */1 * 1", at(2026, 1, 1, 0, 0)))
    assert.equal(at(2026, 1, 5, 0, 0), core.cron.next("0 0 ? * 1", at(2026, 1, 1, 0, 0)))
    assert.equal(at(2026, 1, 5, 0, 0), core.cron.next("0 0 1,* * 1", at(2026, 1, 1, 0, 0)))
    assert.equal(at(2026, 1, 3, 0, 0), core.cron.next("0 0 * * */2", at(2026, 1, 1, 0, 0)))
  end)

  it("refuses bad schedules with the field and the reason", function()
    local cases = {
      { "a * * * *", "cron: minute: bad value \"a\"" },
      { "5-1 * * * *", "cron: minute: range 5-1 runs backwards" },
      { "*/0 * * * *", "cron: minute: bad step" },
      { "* 24 * * *", "cron: hour: 24 out of range 0-23" },
      { "* * 0 * *", "cron: day of month: 0 out of range 1-31" },
      { "* * * 13 *", "cron: month: 13 out of range 1-12" },
      { "* * * * 8", "cron: day of week: 8 out of range 0-7" },
      { "* * * * * *", "cron: want five fields, got more" },
      { "@often", "cron: unknown macro \"@often\"" },
      { "1,,2 * * * *", "cron: minute: empty list element in \"1,,2\"" },
      { "* 1, * * *", "cron: hour: empty list element in \"1,\"" },
      { "* * ,5 * *", "cron: day of month: empty list element in \",5\"" },
      { "", "cron: want five fields" },
    }
    for _, c in ipairs(cases) do
      local next, err = core.cron.next(c[1], 0)
      assert.is_nil(next, c[1])
      assert.matches(c[2], err, 1, true)
    end
    assert.is_nil((core.cron.next("0 0 30 2 *", 0)), "never")
  end)
end)
