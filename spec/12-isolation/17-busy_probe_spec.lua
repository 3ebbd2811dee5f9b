-- /healthz while every reconcile spins to its time budget.  One loop
-- thread serves the probes and runs the scripts, so a probe waits for the
-- stretch of script code in progress; it must not wait for more than one.
-- The slice lets one such reconcile start per loop iteration, and a probe
-- needs two or three iterations (accept, read, answer): without the
-- breather after a long stretch (host/controller/controller.c, LONG_STRETCH)
-- it waited two or three stretches, and the attack corpus's probe missed
-- its 1 s on a loaded machine (3-format-tostring-recursion).
local helpers = require("helpers")
local support = require("12-isolation.support")

local BUDGET = 0.4

describe("/healthz beside reconciles that spin to their budget #integration", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function()
    if p then support.stop_host(p) end
    support.stop(srv)
  end)

  it("answers within one stretch of script code (budget + 0.4 s), probe after probe", function()
    support.fresh_namespace(srv)
    for i = 1, 8 do srv:create_cm("spin-" .. i) end
    p = support.run(srv, { ["spin.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "spin", watch = { "v1/ConfigMap", namespace = "@NS@" }, workers = 4,
  reconcile = function(req) while true do end end,
}
]] }, { "--log-level", "info", "--health-probe-bind-address", "127.0.0.1:0", "--reconcile-instruction-limit", "0",
        "--reconcile-time-limit", tostring(BUDGET) })
    local line = support.wait_line(p, { "health probe server listening" }, 20)
    local port = assert(line:match(":(%d+)%s*$") or line:match("address=[^%s]*:(%d+)"))
    -- the keys spin, fail at the budget and are retried (backoff from 5 ms)
    support.wait_line(p, { "reconcile failed", "controller=spin", "attempt=2" }, 60)
    local before = #support.lines(p, { "reconcile failed", "controller=spin" })
    local worst, times = 0, {}
    for i = 1, 15 do
      local out = helpers.run("env -u LD_PRELOAD curl -s -m 10 -o /dev/null -w '%{http_code} %{time_total}' " ..
        "http://127.0.0.1:" .. port .. "/healthz")
      local code, secs = out:match("^(%d+) ([%d.]+)")
      assert.equal("200", code, "probe " .. i .. ": " .. out)
      secs = tonumber(secs)
      times[i] = ("%.2f"):format(secs)
      if secs > worst then worst = secs end
      while p:read_line(0.01) do end -- drain the host's output: it must never block on the pipe
    end
    assert.is_true(worst < BUDGET + 0.4, "probe times: " .. table.concat(times, " "))
    -- the reconciles went on spinning meanwhile (each probe waited for at
    -- most one, and some for one)
    local during = #support.lines(p, { "reconcile failed", "controller=spin" }) - before
    assert.is_true(during >= 3, "reconciles failed while probing: " .. during)
  end)
end)
