-- bench priority_live: event→reconcile latency of a live change while the
-- first list's keys are still queued, with the priority queue (the
-- default) and without it (priority_queue = false: one FIFO, as
-- client-go's workqueue).
--
--   LUNA_BUILD=build luajit bench/priority.lua [objects=100000] [workers=4] [runs=3]
-- prints, per run and then the medians:
--   bench priority_live mode=priority|fifo queued=N latency_ms=L write_ms=W behind=B
--     The controller's first reconcile (all N keys of the first list are
--     queued by then: it starts after sync) patches the object listed
--     last.  latency_ms is the event latency probe's figure for that watch
--     event (LUNA_EVENT_LATENCY=1: from the event reaching the informer to
--     its reconcile starting); write_ms from sending the patch to that
--     reconcile (the write's round trip and the watch event's way in
--     included); behind the reconciles that ran in between.  Reconciles
--     are trivial (one lister get); the dev server is a process of its own.
--   bench priority_live_median / _ratio: medians, and fifo ÷ priority
-- Timing depends on the machine: compare the two modes of one run.
package.path = "spec/?.lua;" .. package.path
local helpers = require("helpers")

local opts = { objects = 100000, workers = 4, runs = 3 }
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(%d+)$")
  if k then opts[k] = tonumber(v) end
end

local function seed(dir, n)
  local items = { '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bench"}}' }
  for i = 1, n do
    items[#items + 1] = string.format('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%06d",' ..
      '"namespace":"bench"},"data":{"v":"1"}}', i)
  end
  local path = dir .. "/seed.json"
  helpers.write_file(path, '{"apiVersion":"v1","kind":"List","items":[' .. table.concat(items, ",") .. "]}")
  return path
end

local CONTROLLER = [[
local luna = require "luna"
local n, patched_at, sent = 0, nil, nil
local target = "cm-%06d"
return luna.controller {
  name = "live", watch = { "v1/ConfigMap", namespace = "bench" }, workers = %d,
  priority_queue = %s,
  reconcile = function(req)
    n = n + 1
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not patched_at then
      patched_at = n
      sent = luna.time.now()
      local _, err = luna.patch("v1/ConfigMap", "bench", target, { data = { v = "2" } })
      if err then luna.log.error("bench patch failed", { error = tostring(err) }) end
    elseif req.name == target and cm and cm.data.v == "2" then
      luna.log.info("bench live reconciled", { behind = n - patched_at - 1,
        write_ms = (luna.time.now() - sent) * 1000 })
    end
    if n == %d then luna.log.info("bench done", { reconciles = n }) end
  end,
}]]

local function run(dir, seed_file, priority)
  local ctl = dir .. "/ctl-" .. tostring(priority)
  os.execute("mkdir -p " .. ctl)
  helpers.write_file(ctl .. "/live.lua", CONTROLLER:format(opts.objects, opts.workers,
    tostring(priority), opts.objects))
  local srv = helpers.spawn({ helpers.luna, "dev-server", "--listen", "127.0.0.1:0",
    "--seed", seed_file })
  local _, url = srv:expect("listening on (http%S+)", 600)
  local kc = require("support.luna_env").kubeconfig_file(url)
  local p = helpers.spawn({ helpers.luna, "run", "--kubeconfig", kc,
    "--metrics-bind-address=0", "--health-probe-bind-address=0", ctl },
    { env = { LUNA_EVENT_LATENCY = "1", KUBECONFIG = false } })
  local live = p:expect("bench live reconciled", 600)
  p:expect("bench done", 600)
  p:kill(15)
  local report = p:expect("event latency", 60)
  p:wait(60)
  p:stop()
  srv:stop()
  return {
    latency_ms = tonumber(report:match("max_ms=([%d.e%-]+)")),
    write_ms = tonumber(live:match("write_ms=([%d.e%-]+)")),
    behind = tonumber(live:match("behind=(%d+)")),
  }
end

local function median(list)
  table.sort(list)
  local n = #list
  if n == 0 then return nil end
  if n % 2 == 1 then return list[(n + 1) / 2] end
  return (list[n / 2] + list[n / 2 + 1]) / 2
end

local dir = helpers.tmpdir()
local seed_file = seed(dir, opts.objects)
local lat = { priority = {}, fifo = {} }
local write = { priority = {}, fifo = {} }
for _ = 1, opts.runs do
  for _, mode in ipairs({ "priority", "fifo" }) do   -- alternating, same machine state
    local r = run(dir, seed_file, mode == "priority")
    lat[mode][#lat[mode] + 1] = r.latency_ms
    write[mode][#write[mode] + 1] = r.write_ms
    print(string.format("bench priority_live mode=%s queued=%d workers=%d latency_ms=%.3f write_ms=%.1f behind=%d",
      mode, opts.objects, opts.workers, r.latency_ms, r.write_ms, r.behind))
  end
end
local mp, mf = median(lat.priority), median(lat.fifo)
local wp, wf = median(write.priority), median(write.fifo)
print(string.format("bench priority_live_median latency_priority_ms=%.3f latency_fifo_ms=%.3f " ..
  "write_priority_ms=%.1f write_fifo_ms=%.1f", mp, mf, wp, wf))
print(string.format("bench priority_live_ratio latency_fifo_over_priority=%.0f write_fifo_over_priority=%.1f",
  mf / mp, wf / wp))
