-- bench peers: luna against a client-go controller and a controller-runtime
-- controller (bench/peers/), side by side in one run: the same server, the
-- same objects, the same phases, each controller its own process measured
-- from the outside the same way (/proc), alternating (round r starts with
-- the r-th subject).  `make bench-peers` runs it; docs/performance.md says
-- what each key means.
--
--   LUNA_BUILD=build luajit bench/peers.lua [objects=20000] [items=10000]
--       [rounds=3] [watch=20000] [rate=5000] [seconds=5] [warmup=1] [workers=4]
--       [wrate=1000] [wseconds=10] [churn=500] [wconns=4] [phases=all|peers|webhook]
--
-- Against the cluster in KUBECONFIG when it is set (the objects are created
-- in a fresh namespace; the relist phase needs the dev server's faults and
-- is left out there), else `luna dev-server` seeded with the objects.
--
-- Prints one `bench peers_run subject=S round=R …` line per run, one
-- `bench peers_median subject=S …` per subject, then
--   bench ratio_client_go dispatch=… rss=… sync=… relist_rss=… watch=…
--         p50=… p99=… status_cpu=…
--   bench ratio_controller_runtime …
-- each value luna's median divided by the peer's.  Then the webhook phase
-- (luna and controller-runtime serving the same admission webhooks, M.WEBHOOKS,
-- at `wrate` requests/s while `churn` ConfigMap writes/s keep their
-- controllers reconciling): `bench webhook_run …`, `bench webhook_median …`
-- and one `bench ratio_webhook_… luna/controller-runtime=…` line per figure.
package.path = "spec/?.lua;" .. package.path

local M = {}

-- The keys of a run, in print order, and the ratio key each one feeds.
M.KEYS = {
  { "dispatch_per_s", "dispatch" },     -- initial trivial reconciles per second
  { "dispatch_per_cpu_s" },             -- the same per CPU second of the process
  { "rss_mb", "rss" },                  -- VmRSS once idle after the initial reconciles, MB
  { "sync_s", "sync" },                 -- start → cache synced, s
  { "relist_peak_rss_mb", "relist_rss" }, -- VmHWM over a forced relist, MB
  { "watch_events_per_cpu_s", "watch" },-- watch events applied per CPU second
  { "watch_events_per_s" },             -- the same per wall second (server-bound)
  { "e2e_p50_ms", "p50" },              -- write sent → reconcile start at `rate`
  { "e2e_p99_ms", "p99" },
  { "write_rate" },                     -- the writes/s the load generator achieved
  { "status_cpu_s_per_100k", "status_cpu" }, -- CPU s per 100,000 status-writing reconciles
}
M.SUBJECTS = { "luna", "client_go", "controller_runtime" }

function M.median(values)
  local v = {}
  for _, x in ipairs(values) do v[#v + 1] = x end
  if #v == 0 then return nil end
  table.sort(v)
  local mid = math.floor(#v / 2)
  if #v % 2 == 1 then return v[mid + 1] end
  return (v[mid] + v[mid + 1]) / 2
end

local function fmt(x)
  if x == nil then return "-" end
  if x ~= x then return "nan" end
  if math.abs(x) >= 100 then return string.format("%.0f", x) end
  if math.abs(x) >= 1 then return string.format("%.2f", x) end
  return string.format("%.3f", x)
end
M.fmt = fmt

-- runs: { [subject] = { {key=value,...}, ... } } → medians per subject, of
-- keys (default M.KEYS).
function M.medians(runs, keys)
  local out = {}
  for subject, list in pairs(runs) do
    local m = {}
    for _, k in ipairs(keys or M.KEYS) do
      local vals = {}
      for _, r in ipairs(list) do
        if r[k[1]] then vals[#vals + 1] = r[k[1]] end
      end
      m[k[1]] = M.median(vals)
    end
    out[subject] = m
  end
  return out
end

-- The ratio line of one peer: luna's median ÷ the peer's, per ratio key.
function M.ratio_line(peer, luna_m, peer_m)
  local parts = { "bench ratio_" .. peer }
  for _, k in ipairs(M.KEYS) do
    if k[2] then
      local a, b = luna_m[k[1]], peer_m[k[1]]
      local r = (a and b and b ~= 0) and a / b or nil
      parts[#parts + 1] = k[2] .. "=" .. (r and string.format("%.2f", r) or "-")
    end
  end
  return table.concat(parts, " ")
end

function M.run_line(kind, subject, round, r, keys)
  local parts = { "bench " .. kind, "subject=" .. subject }
  if round then parts[#parts + 1] = "round=" .. round end
  for _, k in ipairs(keys or M.KEYS) do parts[#parts + 1] = k[1] .. "=" .. fmt(r[k[1]]) end
  return table.concat(parts, " ")
end

-- The webhook phase (luna and controller-runtime only: client-go has no
-- webhook server): the keys of a run, in print order.
M.WEBHOOK_KEYS = {
  { "requests" },          -- AdmissionReviews counted (after the warm-up)
  { "rate" },              -- requests/s reached over the counted window
  { "p50_ms" },            -- due time → answer, nearest rank
  { "p99_ms" },
  { "max_ms" },
  { "cpu_s_per_10k" },     -- the subject's CPU s over the window × 10,000 ÷ requests
  { "churn_cpu_s_per_10k" }, -- its CPU s over as long a window of the churn alone, same scale
  { "net_cpu_s_per_10k" }, -- the difference: what the requests cost
  { "churn_rate" },        -- writes/s the churn reached during the window
}
-- The ratio lines (luna's median ÷ controller-runtime's) and issue 25's
-- targets for them.
M.WEBHOOK_RATIOS = {
  { "ratio_webhook_p50", "p50_ms" },
  { "ratio_webhook_p99", "p99_ms", 0.5 },
  { "ratio_webhook_max", "max_ms" },
  { "ratio_webhook_cpu_per_10k", "cpu_s_per_10k", 0.5 },
  { "ratio_webhook_net_cpu_per_10k", "net_cpu_s_per_10k" },
}

function M.webhook_ratio_lines(luna_m, peer_m)
  local out = {}
  for _, r in ipairs(M.WEBHOOK_RATIOS) do
    local a, b = luna_m[r[2]], peer_m[r[2]]
    local v = (a and b and b > 0) and a / b or nil
    local line = "bench " .. r[1] .. " luna/controller-runtime=" .. (v and string.format("%.2f", v) or "-")
    if r[3] then
      line = line .. string.format(" target=%.2f met=%s", r[3], v == nil and "-" or (v <= r[3] and "yes" or "no"))
    end
    out[#out + 1] = line
  end
  return out
end

-- The admission webhooks luna serves in the webhook phase: the rules of
-- peer-controller-runtime/webhooks.go, line for line (an empty spec.mode
-- counts as unset there, as Go's zero value does).
M.WEBHOOKS = [[
local luna = require "luna"
local MAX_SIZE, CLASS = 1000000, "bench.luna.dev/size-class"
local ITEMS = { { api_groups = { "bench.luna.dev" }, api_versions = { "v1" }, resources = { "items" },
                  operations = { "CREATE", "UPDATE" } } }
local function unset(v) return v == nil or v == "" end
local function check(spec)
  local size = spec.size
  if type(size) ~= "number" or size < 0 or size > MAX_SIZE or size % 1 ~= 0 then
    return "spec.size must be an integer from 0 to 1000000"
  end
  if not unset(spec.mode) and spec.mode ~= "fast" and spec.mode ~= "safe" then
    return "spec.mode must be fast or safe"
  end
end
return luna.webhooks {
  luna.webhook {
    name = "items.validate.bench.luna.dev", rules = ITEMS,
    validate = function(req)
      if req.operation ~= "CREATE" and req.operation ~= "UPDATE" then return end
      local spec = req.object.spec or {}
      local err = check(spec)
      if err then return false, err end
      if req.operation == "UPDATE" then
        local old = req.old_object.spec or {}
        if not unset(old.mode) and spec.mode ~= old.mode then return false, "spec.mode is immutable" end
      end
    end,
  },
  luna.webhook {
    name = "items.default.bench.luna.dev", rules = ITEMS,
    mutate = function(req, obj)
      if req.operation == "DELETE" then return end
      obj.spec = obj.spec or {}
      local spec = obj.spec
      if unset(spec.mode) then spec.mode = "safe" end
      local labels = obj.metadata.labels or {}
      obj.metadata.labels = labels
      if labels[CLASS] == nil then
        labels[CLASS] = type(spec.size) == "number" and spec.size >= 1000 and "large" or "small"
      end
    end,
  },
}
]]

-- Parses key=value (value maybe quoted) out of a log line.
function M.field(line, key)
  local v = line:match("[%s{,]" .. key .. "=\"?([^%s\",}]+)")
  return v
end

-- The Lua controller luna runs: internal/peer's contract (bench/peers/
-- internal/peer/peer.go), line for line.
function M.controller(mode, ns, objects, workers, run)
  if mode == "configmaps" then
    return ([[
local luna = require "luna"
local now = luna.time.now
local N = %d
local started, t0, c0, done = false, 0, 0, 0
local samples, n, last = {}, 0, nil
local function q(v, f) return #v > 0 and v[math.max(1, math.ceil(f * #v))] * 1e3 or 0 end
return luna.controller {
  name = "peers", watch = { "v1/ConfigMap", namespace = %q }, workers = %d,
  reconcile = function(req)
    local t1 = now()
    if not started then started, t0, c0 = true, t1, os.clock() end
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm then return end
    local name, data = req.name, cm.data or {}
    if name == "report" then
      if data.seq == "0" or data.seq == nil then return end   -- as seeded
      local v = {}
      for i = 1, n do v[i] = samples[i] end
      table.sort(v)
      luna.log.info("peer e2e", { samples = n, e2e_p50_ms = string.format("%%.3f", q(v, 0.5)),
        e2e_p99_ms = string.format("%%.3f", q(v, 0.99)) })
      samples, n = {}, 0
    elseif name == "marker" then
      if data.phase ~= last and data.phase ~= "" then
        last = data.phase
        luna.log.info("peer marker", { phase = tostring(last) })
      end
    else
      local t = tonumber(data.t)
      if t and t > 0 then n = n + 1; samples[n] = t1 - t end
      if name:sub(1, 3) == "cm-" then
        done = done + 1
        if done == N then
          luna.log.info("peer dispatched", { reconciles = done,
            seconds = string.format("%%.6f", now() - t0), cpu_s = string.format("%%.6f", os.clock() - c0) })
        end
      end
    end
  end,
}
]]):format(objects, ns, workers)
  end
  return ([[
local luna = require "luna"
local now = luna.time.now
local N, RUN = %d, %q
local KIND = "bench.luna.dev/v1/Item"
local started, t0, c0, writes = false, 0, 0, 0
return luna.controller {
  name = "peers", watch = { KIND, namespace = %q }, workers = %d,
  predicates = { luna.predicates.generation_changed },
  reconcile = function(req)
    if not started then started, t0, c0 = true, now(), os.clock() end
    local it = luna.cache(KIND):get(req.namespace, req.name)
    if not it then return end
    if it.status and it.status.run == RUN then return end
    it.status = it.status or {}
    it.status.run = RUN
    local ok, err = luna.update_status(it)
    if not ok then return nil, err end
    writes = writes + 1
    if writes == N then
      luna.log.info("peer status", { writes = writes,
        seconds = string.format("%%.6f", now() - t0), cpu_s = string.format("%%.6f", os.clock() - c0) })
    end
  end,
}
]]):format(objects, run, ns, workers)
end

function M.seed_objects(ns, objects, items)
  local out = { ('{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"}}'):format(ns) }
  for _, name in ipairs({ "marker", "report" }) do
    out[#out + 1] = ('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","namespace":"%s"},' ..
      '"data":{"phase":"","seq":"0"}}'):format(name, ns)
  end
  for i = 0, objects - 1 do
    out[#out + 1] = ('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%06d","namespace":"%s",' ..
      '"labels":{"app":"peers"}},"data":{"seq":"0","t":"0","config":"value-%d"}}'):format(i, ns, i)
  end
  for i = 0, items - 1 do
    out[#out + 1] = ('{"apiVersion":"bench.luna.dev/v1","kind":"Item","metadata":{"name":"item-%06d",' ..
      '"namespace":"%s"},"spec":{"size":%d}}'):format(i, ns, i)
  end
  return '{"apiVersion":"v1","kind":"List","items":[' .. table.concat(out, ",") .. "]}"
end

M.CRD = [[{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"items.bench.luna.dev"},"spec":{"group":"bench.luna.dev","scope":"Namespaced",
"names":{"kind":"Item","listKind":"ItemList","plural":"items","singular":"item"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}]]

---------------------------------------------------------------------------

local function main()
  local helpers = require("helpers")
  local ffi = require("ffi")
  pcall(ffi.cdef, "long sysconf(int name);")
  local opts = { objects = 20000, items = 10000, rounds = 3, watch = 20000, rate = 5000,
                 seconds = 5, warmup = 1, workers = 4,
                 wrate = 1000, wseconds = 10, churn = 500, wconns = 4 }
  local phases = { peers = true, webhook = true }
  for _, a in ipairs(arg) do
    local k, v = a:match("^(%w+)=(%d+)$")
    local p = a:match("^phases=(%a+)$")
    if p == "peers" or p == "webhook" then
      phases = { [p] = true }
    elseif p == "all" then
      phases = { peers = true, webhook = true }
    elseif not k or opts[k] == nil or tonumber(v) <= 0 then
      io.stderr:write("bench/peers.lua: bad argument " .. a .. " (known: objects items rounds watch " ..
        "rate seconds warmup workers wrate wseconds churn wconns, each a positive integer; " ..
        "phases=all|peers|webhook)\n")
      os.exit(2)
    else
      opts[k] = tonumber(v)
    end
  end

  -- the peers: built (or found) in their cache
  local out, rc = helpers.run("bench/peers/build.sh 2>&1")
  if rc ~= 0 then io.stderr:write(out); os.exit(1) end
  local bin = out:match("([^\n]+)\n?$")
  local load = bin .. "/peers-load"

  local clock = ffi.new("struct { long s, ns; }[1]")
  pcall(ffi.cdef, "int clock_gettime(int, void *);")
  local function now()   -- CLOCK_MONOTONIC, s
    ffi.C.clock_gettime(1, clock)
    return tonumber(clock[0].s) + tonumber(clock[0].ns) / 1e9
  end
  local tck = tonumber(ffi.C.sysconf(2)) -- _SC_CLK_TCK
  local function cpu(pid)
    local s = helpers.read_file("/proc/" .. pid .. "/stat") or ""
    local rest = s:match("%) (.*)$") or ""
    local f = {}
    for w in rest:gmatch("%S+") do f[#f + 1] = w end
    return ((tonumber(f[12]) or 0) + (tonumber(f[13]) or 0)) / tck
  end
  local function status_mb(pid, key)
    local s = helpers.read_file("/proc/" .. pid .. "/status") or ""
    return (tonumber(s:match(key .. ":%s*(%d+)")) or 0) / 1024
  end
  local function sleep(s) os.execute("sleep " .. s) end

  local dir = helpers.tmpdir()
  local ns = "peers"
  local kubeconfig = os.getenv("KUBECONFIG")
  local server
  if kubeconfig and kubeconfig ~= "" then
    ns = "peers-" .. os.time()
    local o, c = helpers.run(("%s create %s %d %d 2>&1"):format(load, ns, opts.objects,
      phases.peers and opts.items or 0))
    if c ~= 0 then io.stderr:write(o); os.exit(1) end
  else
    helpers.write_file(dir .. "/crd.json", M.CRD)
    helpers.write_file(dir .. "/objects.json", M.seed_objects(ns, opts.objects,
      phases.peers and opts.items or 0))
    server = helpers.spawn({ helpers.luna, "dev-server", "--listen", "127.0.0.1:0", "--admin",
      "--seed", dir .. "/crd.json", "--seed", dir .. "/objects.json" })
    local _, url = server:expect("listening on (http%S+)", 300)
    kubeconfig = require("support.luna_env").kubeconfig_file(url)
  end
  local env = "KUBECONFIG=" .. kubeconfig .. " "
  local function loadgen(args)
    local o, c = helpers.run(env .. load .. " " .. args .. " 2>&1")
    if c ~= 0 then error("peers-load " .. args .. ": " .. o) end
    return o
  end

  -- The webhook phase's certificate: a CA and a serving pair for
  -- 127.0.0.1, tls.crt and tls.key as both subjects read them.
  local certs
  if phases.webhook then
    certs = dir .. "/certs"
    os.execute("mkdir -p " .. certs)
    require("support.certs").make_cert(certs, "tls")
  end

  -- Mode "webhooks": the configmaps controller and the webhooks; returns
  -- the process, seconds to synced and (webhooks) the server's base URL.
  local function start(subject, mode, run)
    local penv = { KUBECONFIG = kubeconfig, PEERS_MODE = mode, PEERS_NAMESPACE = ns,
      PEERS_OBJECTS = tostring(mode == "status" and opts.items or opts.objects),
      PEERS_RUN = run, PEERS_WORKERS = tostring(opts.workers), PEERS_WEBHOOK_CERT_DIR = certs }
    local argv, want
    if subject == "luna" then
      local ctl = dir .. "/ctl-" .. run .. "-" .. mode
      os.execute("mkdir -p " .. ctl)
      helpers.write_file(ctl .. "/peers.lua", M.controller(mode == "status" and "status" or "configmaps",
        ns, mode == "status" and opts.items or opts.objects, opts.workers, run))
      argv = { helpers.luna, "run", "--kubeconfig", kubeconfig, "--metrics-bind-address=0",
               "--health-probe-bind-address=0" }
      want = { "caches synced" }
      if mode == "webhooks" then
        helpers.write_file(ctl .. "/webhooks.lua", M.WEBHOOKS)
        argv[#argv + 1] = "--webhook-bind-address=127.0.0.1:0"
        argv[#argv + 1] = "--webhook-cert-path=" .. certs
        want[2] = "webhook server listening.*address=\"?([%d.:]+)"
      end
      argv[#argv + 1] = ctl
    else
      argv = { bin .. "/peer-" .. subject:gsub("_", "-") }
      want = { "peer synced" }
      if mode == "webhooks" then want[2] = "peer webhooks serving port=(%d+)" end
    end
    local t0 = now()
    local p = helpers.spawn(argv, { env = penv })
    -- the lines come in either order
    local seen, url, n, sync_s = {}, nil, 0, nil
    while n < #want do
      local line = p:read_line(math.max(0, t0 + 600 - now()))
      if not line then
        error(("%s: no %q within 600 s; output:\n%s"):format(subject, want[n + 1], table.concat(p.out, "\n")))
      end
      for i, pat in ipairs(want) do
        if not seen[i] and line:find(pat) then
          seen[i], n = true, n + 1
          if i == 1 then sync_s = now() - t0 end
          if i == 2 then
            local addr = line:match(pat)
            url = "https://" .. (addr:find(":") and addr or "127.0.0.1:" .. addr)
          end
        end
      end
    end
    return p, sync_s, url
  end

  local function idle(pid)
    local deadline = now() + 30
    local c = cpu(pid)
    repeat
      sleep(0.25)
      local c2 = cpu(pid)
      if c2 - c < 0.02 then return end
      c = c2
    until now() > deadline
  end

  -- One subject's run over ConfigMaps, then over Items.
  local function measure(subject, round)
    local r = {}
    local tag = ("r%d-%s"):format(round, subject)
    local p, sync_s = start(subject, "configmaps", tag)
    r.sync_s = sync_s
    local line = p:expect("peer dispatched", 600)
    local reconciles = tonumber(M.field(line, "reconciles"))
    r.dispatch_per_s = reconciles / tonumber(M.field(line, "seconds"))
    r.dispatch_per_cpu_s = reconciles / math.max(tonumber(M.field(line, "cpu_s")), 1e-6)
    -- the line is logged inside the last initial reconcile; marker and
    -- report follow it: memory is read once the process is idle
    idle(p.pid)
    r.rss_mb = status_mb(p.pid, "VmRSS")

    -- watch: `watch` writes as fast as the server takes them, then a marker
    local c0, t0 = cpu(p.pid), now()
    loadgen(("patch %s %d 0 0 %d 16"):format(ns, opts.objects, opts.watch))
    loadgen(("mark %s marker phase watched-%s"):format(ns, tag))
    p:expect("peer marker.*watched%-" .. tag:gsub("%-", "%%-"), 600)
    r.watch_events_per_cpu_s = opts.watch / math.max(cpu(p.pid) - c0, 1 / tck)
    r.watch_events_per_s = opts.watch / (now() - t0)

    -- latency: warm-up, report (cleared), the window, report
    loadgen(("patch %s %d %d %d 0 16"):format(ns, opts.objects, opts.rate, opts.warmup))
    loadgen(("mark %s report seq w-%s"):format(ns, tag))
    p:expect("peer e2e", 120)
    local lo = loadgen(("patch %s %d %d %d 0 16"):format(ns, opts.objects, opts.rate, opts.seconds))
    r.write_rate = tonumber(lo:match("write_rate=([%d.]+)"))
    loadgen(("mark %s report seq m-%s"):format(ns, tag))
    line = p:expect("peer e2e", 120)
    r.e2e_p50_ms = tonumber(M.field(line, "e2e_p50_ms"))
    r.e2e_p99_ms = tonumber(M.field(line, "e2e_p99_ms"))

    -- relist (dev server only): the watch ends after the marker's event,
    -- the next watch gets 410 Gone, the informer lists everything again
    if server then
      idle(p.pid)
      helpers.write_file("/proc/" .. p.pid .. "/clear_refs", "5")   -- VmHWM := VmRSS
      loadgen(("relist %s marker relist-%s"):format(ns, tag))
      loadgen(("mark %s marker phase relisted-%s"):format(ns, tag))
      p:expect("peer marker.*relisted%-" .. tag:gsub("%-", "%%-"), 600)
      idle(p.pid)
      r.relist_peak_rss_mb = status_mb(p.pid, "VmHWM")
    end
    p:stop()

    local s = start(subject, "status", tag)
    line = s:expect("peer status", 600)
    r.status_cpu_s_per_100k = tonumber(M.field(line, "cpu_s")) * 100000 / opts.items
    s:stop()
    return r
  end

  -- Runs argv (a peers-load) to its end while reading what `subject`
  -- prints (its pipe must not fill while it serves); returns its output.
  local function run_beside(argv, subject)
    local lg = helpers.spawn(argv, { env = { KUBECONFIG = kubeconfig } })
    while lg.fd >= 0 do
      lg:read_line(0.05)
      if subject then
        subject:_fill(0)
        subject.buf = subject.buf:match("[^\n]*$")
      end
    end
    local rc = lg:wait(60)
    local out = table.concat(lg.out, "\n") .. lg.buf
    if rc ~= 0 then error(table.concat(argv, " ") .. ": exit " .. tostring(rc) .. ": " .. out) end
    return out
  end

  -- The webhook phase of one subject: the configmaps controller (initial
  -- reconciles done, idle), the churn alone for `wseconds` (its CPU), then
  -- the churn and `wrate` AdmissionReviews/s together.
  local function measure_webhook(subject, round)
    local r = {}
    local tag = ("w%d-%s"):format(round, subject)
    local p, _, url = start(subject, "webhooks", tag)
    p:expect("peer dispatched", 600)
    idle(p.pid)
    local patch = { load, "patch", ns, tostring(opts.objects), tostring(opts.churn) }
    local c0, t0 = cpu(p.pid), now()
    run_beside({ patch[1], patch[2], patch[3], patch[4], patch[5], tostring(opts.wseconds), "0", "4" }, p)
    local churn_cpu_per_s = (cpu(p.pid) - c0) / (now() - t0)
    local churn = helpers.spawn({ patch[1], patch[2], patch[3], patch[4], patch[5],
      tostring(opts.warmup + opts.wseconds), "0", "4" }, { env = { KUBECONFIG = kubeconfig } })
    local lo = run_beside({ load, "webhook", url, certs .. "/tls-ca.crt", tostring(p.pid),
      tostring(opts.wrate), tostring(opts.warmup), tostring(opts.wseconds), tostring(opts.wconns) }, p)
    local line = lo:match("load webhook [^\n]+")
    if not line or tonumber(M.field(line, "errors")) ~= 0 then error("peers-load webhook: " .. lo) end
    while churn.fd >= 0 do churn:read_line(0.05); p:_fill(0); p.buf = p.buf:match("[^\n]*$") end
    assert(churn:wait(60) == 0, "churn: " .. table.concat(churn.out, "\n"))
    local cl = table.concat(churn.out, "\n")
    p:stop()
    r.requests = tonumber(M.field(line, "requests"))
    r.rate = tonumber(M.field(line, "rate"))
    r.p50_ms = tonumber(M.field(line, "p50_ms"))
    r.p99_ms = tonumber(M.field(line, "p99_ms"))
    r.max_ms = tonumber(M.field(line, "max_ms"))
    local secs, cpu_s = tonumber(M.field(line, "seconds")), tonumber(M.field(line, "cpu_s"))
    r.cpu_s_per_10k = cpu_s * 1e4 / r.requests
    r.churn_cpu_s_per_10k = churn_cpu_per_s * secs * 1e4 / r.requests
    r.net_cpu_s_per_10k = r.cpu_s_per_10k - r.churn_cpu_s_per_10k
    r.churn_rate = tonumber(cl:match("write_rate=([%d.]+)"))
    return r
  end

  print(("bench peers_setup objects=%d items=%d rounds=%d watch=%d rate=%d seconds=%d workers=%d server=%s peers=%s"):format(
    opts.objects, opts.items, opts.rounds, opts.watch, opts.rate, opts.seconds, opts.workers,
    server and "dev-server" or "kubeconfig", bin))
  io.stdout:flush()
  if phases.peers then
    local runs = { luna = {}, client_go = {}, controller_runtime = {} }
    for round = 1, opts.rounds do
      for i = 0, #M.SUBJECTS - 1 do
        local subject = M.SUBJECTS[(round - 1 + i) % #M.SUBJECTS + 1]
        local r = measure(subject, round)
        table.insert(runs[subject], r)
        print(M.run_line("peers_run", subject, round, r))
        io.stdout:flush()
      end
    end
    local med = M.medians(runs)
    for _, subject in ipairs(M.SUBJECTS) do print(M.run_line("peers_median", subject, nil, med[subject])) end
    print(M.ratio_line("client_go", med.luna, med.client_go))
    print(M.ratio_line("controller_runtime", med.luna, med.controller_runtime))
  end
  if phases.webhook then
    print(("bench webhook_setup wrate=%d wseconds=%d warmup=%d churn=%d wconns=%d rounds=%d"):format(
      opts.wrate, opts.wseconds, opts.warmup, opts.churn, opts.wconns, opts.rounds))
    local runs, subjects = { luna = {}, controller_runtime = {} }, { "luna", "controller_runtime" }
    for round = 1, opts.rounds do
      for i = 0, 1 do
        local subject = subjects[(round - 1 + i) % 2 + 1]
        local r = measure_webhook(subject, round)
        table.insert(runs[subject], r)
        print(M.run_line("webhook_run", subject, round, r, M.WEBHOOK_KEYS))
        io.stdout:flush()
      end
    end
    local med = M.medians(runs, M.WEBHOOK_KEYS)
    for _, subject in ipairs(subjects) do
      print(M.run_line("webhook_median", subject, nil, med[subject], M.WEBHOOK_KEYS))
    end
    for _, line in ipairs(M.webhook_ratio_lines(med.luna, med.controller_runtime)) do print(line) end
  end
  if server then server:stop() else loadgen("delete " .. ns) end
end

if arg and arg[0] and arg[0]:match("peers%.lua$") then
  main()
end
return M
