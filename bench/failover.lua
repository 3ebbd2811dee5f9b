-- bench failover: how long a standby `luna run --leader-elect` replica
-- takes to start reconciling after the leader is stopped, with SIGTERM
-- (the lease is released) and with SIGKILL (the lease must expire), and
-- what a /metrics scrape costs.
--
--   LUNA_BUILD=build luajit bench/failover.lua [runs=3]
-- prints: bench failover lease=L renew=R retry=T signal=S runs=N mean_ms=M max_ms=X
--         bench metrics_scrape bytes=B series=S ms=M (best of 20)
package.path = "spec/?.lua;" .. package.path
local helpers = require("helpers")
local client = require("support.apiserver_client")
local S = require("15-production.support")

local opts = { runs = 3 }
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(%d+)$")
  if k then opts[k] = tonumber(v) end
end

local CONTROLLER = [[
local luna = require "luna"
return luna.controller { name = "bench", watch = { "v1/ConfigMap", namespace = %q },
                         reconcile = function() end }
]]

local srv = client.start()
local dir = S.controllers({ ["bench.lua"] = CONTROLLER:format(srv.ns) })

-- Time from the signal to the standby's "controller started".
local function failover(lease, signal, name)
  local a = S.start(srv, dir, { name = name .. "-a", leader = true, lease = lease,
                                lease_name = name })
  a:await("controller started", 30)
  local b = S.start(srv, dir, { name = name .. "-b", leader = true, lease = lease,
                                lease_name = name })
  b:await("caches synced", 30)
  b:await("new leader elected", 30)
  local t0 = helpers.now()
  a:kill(signal)
  b:await("controller started", 60)
  local ms = (helpers.now() - t0) * 1000
  a:stop()
  b:stop()
  return ms
end

local n = 0
for _, case in ipairs({ { { 2, 1.5, 0.3 }, 9 }, { { 2, 1.5, 0.3 }, 15 },
                        { { 15, 10, 2 }, 15 } }) do
  local total, max = 0, 0
  for _ = 1, opts.runs do
    n = n + 1
    local ms = failover(case[1], case[2], "bench-" .. n)
    total, max = total + ms, math.max(max, ms)
  end
  print(("bench failover lease=%g renew=%g retry=%g signal=%s runs=%d mean_ms=%.0f max_ms=%.0f")
    :format(case[1][1], case[1][2], case[1][3], case[2] == 9 and "KILL" or "TERM", opts.runs,
            total / opts.runs, max))
end

local l = S.start(srv, dir)
l:await("controller started", 30)
for i = 1, 200 do srv:create_cm("cm-" .. i) end
local best, bytes, series = math.huge, 0, 0
for _ = 1, 20 do
  local out = helpers.run(("env -u LD_PRELOAD curl -s -o %s/m -w '%%{time_total} %%{size_download}' '%s/metrics'")
    :format(dir, l.metrics))
  local t, size = out:match("([%d.]+) (%d+)")
  best = math.min(best, tonumber(t) * 1000)
  bytes = tonumber(size)
end
for line in io.lines(dir .. "/m") do
  if not line:match("^#") then series = series + 1 end
end
print(("bench metrics_scrape bytes=%d series=%d ms=%.2f"):format(bytes, series, best))
l:stop()
srv:stop()
