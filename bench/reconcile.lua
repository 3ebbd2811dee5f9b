-- bench reconcile_dispatch / parked_reconciles: the controller runtime's
-- own costs, measured through `luna run --dev-server` (release build).
--
--   LUNA_BUILD=build luajit bench/reconcile.lua [objects=100000] [workers=4]
--                                               [parked=1000 (0: skip)] [callgrind=0|1]
-- prints:
--   bench reconcile_dispatch reconciles=N workers=W cpu_s=S per_s=R
--     N trivial reconciles (one lister get of a small ConfigMap, return)
--     from the first start to the N-th done, in CPU seconds of the luna
--     process (one core; the embedded dev server is idle meanwhile).
--   bench reconcile_instructions reconciles=N instructions_per_reconcile=I
--     (callgrind=1, needs valgrind) the same reconciles with `luna run`
--     under callgrind against a separate dev server, counting only inside
--     luna_reconcile_start and luna_workqueue_get: the dispatcher's whole
--     cost per key (coroutine, lister get, result, metrics, the collector's
--     share), and stable on a busy machine where CPU seconds are not.
--     LUNA_CALLGRIND_OUT=path keeps callgrind's file there for
--     callgrind_annotate (else it goes with the temporary directory).
--   bench parked_reconciles n=P extra_rss_mb=M rss_before_mb=B rss_parked_mb=A
--     P reconciles each waiting on an API call the server delays, extra
--     resident memory while they wait.
package.path = "spec/?.lua;" .. package.path
local helpers = require("helpers")

local opts = { objects = 100000, parked = 1000, workers = 4, callgrind = 0 }
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(%d+)$")
  if k then opts[k] = tonumber(v) end
end

local function seed(dir, n, ns)
  local items = {}
  items[1] = ('{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"}}'):format(ns)
  for i = 1, n do
    items[#items + 1] = string.format('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%06d",' ..
      '"namespace":"%s","labels":{"app":"bench"}},"data":{"key":"value-%d"}}', i, ns, i)
  end
  local path = dir .. "/seed-" .. ns .. ".json"
  helpers.write_file(path, '{"apiVersion":"v1","kind":"List","items":[' .. table.concat(items, ",") .. "]}")
  return path
end

local function rss_mb(pid)
  local s = helpers.read_file("/proc/" .. pid .. "/status") or ""
  return (tonumber(s:match("VmRSS:%s*(%d+)")) or 0) / 1024
end

-- 1. dispatch
local function dispatch_controller(dir)
  local ctl = dir .. "/ctl"
  os.execute("mkdir -p " .. ctl)
  helpers.write_file(ctl .. "/bench.lua", ([[
local luna = require "luna"
local n, t0 = 0, nil
return luna.controller {
  name = "bench", watch = { "v1/ConfigMap", namespace = "bench" }, workers = %d,
  reconcile = function(req)
    if not t0 then t0 = os.clock() end
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    n = n + 1
    if n == %d then
      luna.log.info("bench done", { reconciles = n, cpu_s = os.clock() - t0, found = cm ~= nil })
    end
  end,
}]]):format(opts.workers, opts.objects))
  return ctl
end

do
  local dir = helpers.tmpdir()
  local ctl = dispatch_controller(dir)
  local p = helpers.spawn({ helpers.luna, "run", "--dev-server", "--seed", seed(dir, opts.objects, "bench"), ctl })
  local line = p:expect("bench done", 600)
  p:stop()
  local n = tonumber(line:match("reconciles=(%d+)"))
  local cpu = tonumber(line:match("cpu_s=([%d.e%-]+)"))
  print(string.format("bench reconcile_dispatch reconciles=%d workers=%d cpu_s=%.3f per_s=%.0f",
    n, opts.workers, cpu, n / cpu))
end

if opts.callgrind == 1 then
  local dir = helpers.tmpdir()
  local ctl = dispatch_controller(dir)
  -- the server apart, unprofiled: only `luna run` runs under valgrind
  local srv = helpers.spawn({ helpers.luna, "dev-server", "--listen", "127.0.0.1:0",
    "--seed", seed(dir, opts.objects, "bench") })
  local _, url = srv:expect("listening on (http%S+)", 600)
  local kc = require("support.luna_env").kubeconfig_file(url)
  local out = os.getenv("LUNA_CALLGRIND_OUT") or (dir .. "/callgrind.out")
  local p = helpers.spawn({ "valgrind", "--tool=callgrind", "--collect-atstart=no",
    "--toggle-collect=luna_reconcile_start", "--toggle-collect=luna_workqueue_get",
    "--callgrind-out-file=" .. out, helpers.luna, "run", "--kubeconfig", kc,
    "--metrics-bind-address=0", "--health-probe-bind-address=0", ctl })
  p:expect("bench done", 3600)
  p:kill(15)
  p:wait(600) -- callgrind writes its file at exit
  p:stop()
  srv:stop()
  local totals = tonumber((helpers.read_file(out) or ""):match("\ntotals:%s*(%d+)") or
                          (helpers.read_file(out) or ""):match("\nsummary:%s*(%d+)"))
  print(string.format("bench reconcile_instructions reconciles=%d workers=%d instructions_per_reconcile=%.0f",
    opts.objects, opts.workers, (totals or 0) / opts.objects))
end

-- 2. parked reconciles
if opts.parked > 0 then
  local dir = helpers.tmpdir()
  local ctl = dir .. "/ctl"
  os.execute("mkdir -p " .. ctl)
  helpers.write_file(ctl .. "/park.lua", [[
local luna = require "luna"
local waiting = 0
return luna.controller {
  name = "park", watch = { "v1/ConfigMap", namespace = "park" }, workers = 100000,
  reconcile = function(req)
    waiting = waiting + 1
    if waiting % 100 == 0 then luna.log.info("parked", { waiting = waiting }) end
    local _, err = luna.get("v1/ConfigMap", req.namespace, req.name)   -- delayed by the server
    waiting = waiting - 1
  end,
}]])
  -- Measure the host alone: a separate dev server that delays answers.
  local srv = helpers.spawn({ helpers.luna, "dev-server", "--listen", "127.0.0.1:0",
    "--seed", seed(dir, opts.parked, "park"), "--admin" })
  local _, url = srv:expect("listening on (http%S+)", 120)
  local kc = require("support.luna_env").kubeconfig_file(url)
  local p = helpers.spawn({ helpers.luna, "run", "--kubeconfig", kc, ctl })
  p:expect("caches synced", 60)
  os.execute("sleep 0.5")
  local before = rss_mb(p.pid)
  -- from now on every request waits 30 s
  helpers.run(("env -u LD_PRELOAD curl -s -X PUT --data-binary 'delay=30' %s/luna/v1/faults"):format(url))
  -- Touch every object so each key reconciles again.  The server applies a
  -- write at once and only delays its answer, so these curls give up early.
  local cmds = {}
  for i = 1, opts.parked do
    cmds[#cmds + 1] = ("curl -s -o /dev/null --max-time 1 -X PATCH -H 'Content-Type: application/merge-patch+json' " ..
      "-d '{\"data\":{\"touched\":\"1\"}}' %s/api/v1/namespaces/park/configmaps/cm-%06d &"):format(url, i)
  end
  helpers.write_file(dir .. "/touch.sh", table.concat(cmds, "\n") .. "\nwait\n")
  helpers.run("env -u LD_PRELOAD sh " .. dir .. "/touch.sh")
  p:expect("waiting=" .. opts.parked, 120)
  local parked = rss_mb(p.pid)
  p:stop()
  srv:stop()
  print(string.format("bench parked_reconciles n=%d extra_rss_mb=%.1f rss_before_mb=%.1f rss_parked_mb=%.1f",
    opts.parked, parked - before, before, parked))
end
