-- The operator's flags are ceilings (issue 23, class 1): a controller's
-- `limits` can lower its watchdog budgets, never remove them (0 no longer
-- means "none") or raise them past --reconcile-instruction-limit /
-- --reconcile-time-limit; only the operator lifts a budget, by flag.  And
-- SIGTERM ends the process within the grace period whatever scripts do: a
-- stretch of script code still running when it ends is stopped, even one
-- the operator allowed to run without limit (libev's signal watcher cannot
-- run while script code holds the loop; host/runtime/runtime.c's handler
-- sets the watchdog's deadline).  Runs `luna run` with the flags a user
-- gets unless the point is the flag.
local helpers = require("helpers")
local support = require("12-isolation.support")

local SIGHUP, SIGINT, SIGTERM = 1, 2, 15

local function hog(limits, name)
  return ([[
local luna = require "luna"
return luna.controller {
  name = %q, watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = %s,
  reconcile = function(req)
    print("hog spinning", req.name)
    while true do end
  end,
}
]]):format(name or "hog", limits)
end

-- Copies data.token of the ConfigMaps labelled canary=yes into an
-- annotation: the loop, the informers, the queue and API writes all work.
local CANARY = [[
local luna = require "luna"
return luna.controller {
  name = "canary", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { canary = "yes" } },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm or not cm.data then return end
    if luna.meta.annotation(cm, "seen") == cm.data.token then return end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name,
      { metadata = { annotations = { seen = cm.data.token } } })
    if err then return nil, err end
  end,
}
]]

local function drain(p)
  while p:read_line(0.001) do end
end

-- A write the canary must patch back within 30 s.
local function canary_round(srv, p, round)
  local name = "canary-" .. round
  local code = srv:request("POST", srv:ns_path("configmaps"), { apiVersion = "v1", kind = "ConfigMap",
    metadata = { name = name, labels = { canary = "yes" } }, data = { token = "t" .. round } })
  assert.equal(201, code)
  local deadline = helpers.now() + 30
  repeat
    local c, cm = srv:request("GET", srv:ns_path("configmaps", name))
    if c == 200 and cm.metadata.annotations and cm.metadata.annotations.seen == "t" .. round then return end
    drain(p)
    p:read_line(0.05)
  until helpers.now() > deadline
  error("the canary stopped reconciling (round " .. round .. ")\n" ..
    table.concat(p.out, "\n", math.max(1, #p.out - 40)))
end

-- GET /healthz within `secs`, reading the host's output meanwhile: the code.
local function healthz(p, port, secs)
  local c = helpers.spawn({ "curl", "-s", "-m", tostring(secs), "-o", "/dev/null", "-w", "%{http_code}",
    "http://127.0.0.1:" .. port .. "/healthz" }, { env = { LD_PRELOAD = false } })
  while c:alive() do drain(p) c:wait(0.005) end
  c:_fill(0.2)
  c:stop()
  return (table.concat(c.out, "\n") .. (c.buf or "")):match("%d+")
end

-- SIGTERM (or the signals given); the exit status and the seconds it took,
-- nil status if the host was still running after `secs`.
local function signal_and_wait(p, secs, signals)
  local t0 = helpers.now()
  for i, sig in ipairs(signals or { SIGTERM }) do
    if i > 1 then p:read_line(0.3) end
    p:kill(sig)
  end
  local rc = p:wait(secs)
  local took = helpers.now() - t0
  if rc then p:drain(1) end -- the host's last lines
  return rc, took
end

describe("a controller's limits under the operator's flags", function()
  -- Loads the hog with `limits` (no cluster: a spec that passes fails later,
  -- at the kubeconfig); the output and the exit status.
  local function load(limits, args)
    return support.load_only({ ["hog.lua"] = hog(limits):gsub("@NS@", "default") }, args)
  end

  it("refuses issue 23's reproducer, limits 0 (once documented as none), naming file:line and the ceiling", function()
    local out, rc = load("{ instructions = 0, seconds = 0 }")
    assert.equal(1, rc, out)
    assert.matches("controller load failed", out, 1, true)
    assert.matches("hog.lua:4: controller field 'limits.instructions' must be a number > 0 and <= 100000000, " ..
      "the ceiling --reconcile-instruction-limit sets; 0 does not mean unlimited: a controller's limits can " ..
      "lower its budgets, never remove them (only the operator can, with --reconcile-instruction-limit 0)",
      out, 1, true)
    out, rc = load("{ seconds = 0 }")
    assert.equal(1, rc, out)
    assert.matches("hog.lua:4: controller field 'limits.seconds' must be a number > 0 and <= 2, the ceiling " ..
      "--reconcile-time-limit sets; 0 does not mean unlimited", out, 1, true)
  end)

  it("refuses budgets above the flags, the documented maxima included, and every value that is not one", function()
    local cases = {
      { "{ instructions = 1e12, seconds = 86400 }", "'limits.instructions' must be a number > 0 and <= 100000000, " ..
        "the ceiling --reconcile-instruction-limit sets, not 1000000000000: a controller's limits can lower its " ..
        "budgets, never raise them" },
      { "{ seconds = 86400 }", "'limits.seconds' must be a number > 0 and <= 2, the ceiling --reconcile-time-limit " ..
        "sets, not 86400" },
      { "{ seconds = 2.5 }", "'limits.seconds' must be a number > 0 and <= 2, the ceiling --reconcile-time-limit sets, not 2.5" },
      { "{ instructions = 1e8 + 1 }", "not 100000001" },
      { "{ instructions = 2 ^ 63 }", "'limits.instructions' must be a number > 0 and <= 100000000" },
      { "{ seconds = -1 }", "'limits.seconds' must be a number > 0 and <= 2" },
      { "{ instructions = -0.0 }", "0 does not mean unlimited" },
      { "{ seconds = 0 / 0 }", "'limits.seconds' must be a number > 0 and <= 2" },
      { "{ seconds = math.huge }", "'limits.seconds' must be a number > 0 and <= 2" },
      { "{ instructions = -math.huge }", "'limits.instructions' must be a number > 0" },
      { '{ seconds = "0" }', "'limits.seconds' must be a number > 0 and <= 2, the ceiling --reconcile-time-limit " ..
        "sets, not a string" },
      { '{ instructions = "1e6" }', "not a string" },
      { "{ seconds = false }", "not a boolean" },
      { "{ seconds = {} }", "not a table" },
    }
    for _, case in ipairs(cases) do
      local out, rc = load(case[1])
      assert(rc == 1 and out:find("controller load failed", 1, true), case[1] .. " was not refused:\n" .. out)
      assert(out:find("hog.lua:4: controller field '", 1, true) and out:find(case[2], 1, true),
        case[1] .. ": the error lacks \"" .. case[2] .. "\":\n" .. out)
    end
  end)

  it("takes budgets up to the flags; a flag of 0 lifts the ceiling, never a script", function()
    -- refused with the defaults, taken under a higher flag
    local out = load("{ seconds = 5 }", { "--reconcile-time-limit", "10" })
    assert.is_nil(out:find("controller load failed", 1, true), out)
    assert.matches("kubeconfig", out, 1, true) -- got past the controllers
    -- at the ceilings exactly
    out = load("{ instructions = 1e8, seconds = 2 }")
    assert.is_nil(out:find("controller load failed", 1, true), out)
    -- the operator lifted the time budget: a script may ask for a day, not for none
    out = load("{ seconds = 86400 }", { "--reconcile-time-limit", "0" })
    assert.is_nil(out:find("controller load failed", 1, true), out)
    local rc
    out, rc = load("{ seconds = 0 }", { "--reconcile-time-limit", "0" })
    assert.equal(1, rc, out)
    assert.matches("'limits.seconds' must be a number > 0 and <= 86400 (--reconcile-time-limit is 0: no ceiling " ..
      "but this); 0 does not mean unlimited", out, 1, true)
    out = load("{ seconds = 86401 }", { "--reconcile-time-limit", "0" })
    assert.matches("'limits.seconds' must be a number > 0 and <= 86400", out, 1, true)
  end)
end)

describe("issue 23's reproducer, limits 0 and `while true do end`, with the default flags #integration", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function()
    if p then p:stop() end
    support.stop(srv)
  end)

  it("is refused by a reload: the canary keeps reconciling, /healthz answers, SIGTERM exits 0 promptly", function()
    support.fresh_namespace(srv)
    srv:create_cm("spin")
    p = support.run(srv, { ["canary.lua"] = CANARY }, { "--health-probe-bind-address", "127.0.0.1:0" })
    local listen = support.wait_line(p, { "health probe server listening" }, 20)
    local port = assert(listen:match("address=[^%s]*:(%d+)"))
    support.wait_line(p, { "caches synced" }, 30)
    canary_round(srv, p, 1)
    helpers.write_file(p.dir .. "/hog.lua", (hog("{ instructions = 0, seconds = 0 }"):gsub("@NS@", srv.ns)))
    p:kill(SIGHUP)
    local line = support.wait_line(p, { "reload failed" }, 30)
    assert.matches("hog.lua:4: controller field 'limits.instructions' must be a number > 0", line, 1, true)
    assert.same({}, support.lines(p, { "hog spinning" }))
    canary_round(srv, p, 2)
    assert.equal("200", healthz(p, port, 3))
    local rc, secs = signal_and_wait(p, 20)
    assert.equal(0, rc, table.concat(p.out, "\n", math.max(1, #p.out - 30)))
    assert.is_true(secs < 10, ("SIGTERM took %.1f s"):format(secs))
  end)
end)

describe("SIGTERM while script code holds the loop #integration", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)
  after_each(function()
    if p then p:stop() end
    p = nil
  end)

  -- Starts the hog (and the canary) with the flags, waits until it spins
  -- (on whichever ConfigMap comes first: a real cluster puts
  -- kube-root-ca.crt in every namespace).
  local function spinning(limits, args)
    support.fresh_namespace(srv)
    srv:create_cm("spin")
    p = support.run(srv, { ["hog.lua"] = hog(limits), ["canary.lua"] = CANARY }, args)
    support.wait_line(p, { "hog spinning " }, 30)
  end

  it("stops a stretch the operator let run without limit at the end of the grace period, and exits 0", function()
    spinning("nil", { "--reconcile-instruction-limit", "0", "--reconcile-time-limit", "0",
                      "--shutdown-grace-period", "3s" })
    local rc, secs = signal_and_wait(p, 20)
    local out = table.concat(p.out, "\n")
    assert.equal(0, rc, out)
    -- the operator was told what the flags allow
    support.wait_line(p, { "script code runs without budgets" }, 1)
    -- reconciles in flight get the grace period, not more (+ teardown on a busy machine)
    assert.is_true(secs >= 2.5 and secs < 13, ("SIGTERM took %.1f s\n%s"):format(secs, out))
    local line = support.wait_line(p, { "reconcile failed", "controller=hog", "stopped=shutdown" }, 1)
    assert.matches("reconcile stopped: luna is shutting down", line, 1, true)
    support.wait_line(p, { "shutdown complete" }, 1)
  end)

  it("stops one at the largest limits the operator allows, within the grace period", function()
    spinning("{ instructions = 1e12, seconds = 3600 }", { "--reconcile-instruction-limit", "1e12",
      "--reconcile-time-limit", "3600", "--shutdown-grace-period", "2s" })
    local rc, secs = signal_and_wait(p, 20)
    assert.equal(0, rc, table.concat(p.out, "\n"))
    assert.is_true(secs < 12, ("SIGTERM took %.1f s"):format(secs))
    support.wait_line(p, { "reconcile failed", "controller=hog", "stopped=shutdown" }, 1)
  end)

  it("exits at once, status 1, on a second signal during the stretch", function()
    spinning("nil", { "--reconcile-instruction-limit", "0", "--reconcile-time-limit", "0" })
    -- the default grace period is 30 s: the second signal does not wait for it
    local rc, secs = signal_and_wait(p, 20, { SIGTERM, SIGINT })
    assert.equal(1, rc, table.concat(p.out, "\n", math.max(1, #p.out - 30)))
    assert.is_true(secs < 10, ("exit took %.1f s"):format(secs))
    assert.equal(1, #support.lines(p, { "second signal: exiting now" }))
  end)

  -- The hook reads the clock every 1,000 instructions; an instruction can be
  -- one long C call (a plain find in a 16 MB string: milliseconds to tens of ms each).  A
  -- loop of them outran the 2 s budget 5-9 times (an outside review: 9-17 s
  -- stretches, /healthz dead meanwhile).  The deadline alarm (watchdog.c)
  -- ends the stretch once the call running at the deadline returns.
  local FINDS = [[
local luna = require "luna"
local hay = ("a"):rep(16e6)
local needle = ("a"):rep(3000) .. "b"
return luna.controller {
  name = "finds", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    if req.name ~= "finds-target" then return end
    print("finds started")
    pcall(function() for _ = 1, 1e9 do hay:find(needle, 1, true) end end)
  end,
}
]]

  it("stops a stretch of long C calls at its time budget, not a thousand calls later (default flags)", function()
    local ns = support.fresh_namespace(srv)
    p = support.run(srv, { ["finds.lua"] = FINDS:gsub("@NS@", ns), ["canary.lua"] = CANARY:gsub("@NS@", ns) },
      { "--health-probe-bind-address", "127.0.0.1:0" })
    support.wait_line(p, { "caches synced" }, 30)
    local code = srv:request("POST", srv:ns_path("configmaps"), { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "finds-target" } })
    assert.equal(201, code)
    local line = support.wait_line(p, { "reconcile failed", "controller=finds", "exceeded its time budget" }, 60)
    local ms = tonumber(line:match("duration_ms=([%d.]+)"))
    -- the 2 s budget, the one call running then (tens of ms), a busy machine
    assert.is_true(ms and ms < 3500, "the stretch ran " .. tostring(ms) .. " ms: " .. line)
    canary_round(srv, p, 1)
    local rc = signal_and_wait(p, 20)
    assert.equal(0, rc, table.concat(p.out, "\n", math.max(1, #p.out - 30)))
  end)
end)
