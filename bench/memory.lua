-- bench memory_floor / memory_objects: where the resident memory of
-- `luna run` goes once its cache is synced and the initial reconciles are
-- done, for the objects of `make bench-peers` (small labelled ConfigMaps,
-- bench/peers.lua's seed) and one trivial controller (a lister get per key).
--
--   LUNA_BUILD=build luajit bench/memory.lua [objects=20000]
-- prints:
--   bench memory_floor objects=1 rss_mb=R anon_mb=A file_mb=F <lib>_mb=...
--     the process with one object: what luna costs before any cache, split
--     into anonymous memory (heap, Lua, stacks, and the data pages the
--     libraries wrote) and pages of mapped files (the binary and the shared
--     libraries of its Debian packages; those with over 0.5 MiB are named,
--     their file-backed pages only)
--   bench memory_objects objects=N rss_mb=R anon_mb=A file_mb=F
--     anon_bytes_per_object=B json_bytes_per_object=J
--     the same with N objects; B is the anonymous memory over the floor's
--     per object, J the size of one such object (cm-000000, the shortest)
--     as the dev server sends it, less managedFields (the JSON the cache
--     keeps).  Below 10,000 objects the initial reconciles are no burst
--     the heap is trimmed after (LUNA_RECONCILE_TRIM_BURST), and B holds
--     the holes they left.
-- Memory does not move with the machine's load (unlike the timings of
-- the other benches); each figure is read from /proc/<pid>.
package.path = "spec/?.lua;bench/?.lua;" .. package.path
local helpers = require("helpers")
local peers = require("peers")

local opts = { objects = 20000 }
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(%d+)$")
  if not k or opts[k] == nil or tonumber(v) < 2 then
    io.stderr:write("bench/memory.lua: bad argument " .. a .. " (known: objects=N, N >= 2)\n")
    os.exit(2)
  end
  opts[k] = tonumber(v)
end

local NS = "peers"
local CONTROLLER = [[
local luna = require "luna"
local n = 0
return luna.controller {
  name = "memory", watch = { "v1/ConfigMap", namespace = %q }, workers = 4,
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if cm and req.name:sub(1, 3) == "cm-" then
      n = n + 1
      if n == %d then luna.log.info("memory reconciled", { reconciles = n }) end
    end
  end,
}]]

-- The file-backed resident pages of each mapped file, summed by file, in
-- KiB: a mapping's Rss less its Anonymous part (a library's data pages
-- once written: relocations, its globals) which RssAnon counts.  Mappings
-- of no file ([heap], [stack], anonymous) are left out.
local function file_rss_by_file(pid)
  local by = {}
  local name, rss = nil, 0
  for line in (helpers.read_file("/proc/" .. pid .. "/smaps") or ""):gmatch("[^\n]+") do
    local range, rest = line:match("^(%x+%-%x+) (.*)$")
    if range then
      name = rest:match("^%S+%s+%S+%s+%S+%s+%S+%s+(/%S.*)$")
    elseif name then
      local kb = line:match("^Rss:%s+(%d+)")
      if kb then rss = tonumber(kb) end
      local anon = line:match("^Anonymous:%s+(%d+)")
      if anon then by[name] = (by[name] or 0) + rss - tonumber(anon) end
    end
  end
  return by
end

local function status_kb(pid, key)
  local s = helpers.read_file("/proc/" .. pid .. "/status") or ""
  return tonumber(s:match(key .. ":%s*(%d+)")) or 0
end

-- Runs `luna run` against a dev server seeded with n ConfigMaps; returns
-- its memory once all n are reconciled (and the loop has run on: the
-- heap is handed back after a burst of reconciles).
local function measure(n)
  local dir = helpers.tmpdir()
  helpers.write_file(dir .. "/objects.json", peers.seed_objects(NS, n, 0))
  local srv = helpers.spawn({ helpers.luna, "dev-server", "--listen", "127.0.0.1:0",
                              "--seed", dir .. "/objects.json" })
  local _, url = srv:expect("listening on (http%S+)", 300)
  local kc = require("support.luna_env").kubeconfig_file(url)
  os.execute("mkdir -p " .. dir .. "/ctl")
  helpers.write_file(dir .. "/ctl/memory.lua", CONTROLLER:format(NS, n))
  local p = helpers.spawn({ helpers.luna, "run", "--kubeconfig", kc, "--metrics-bind-address=0",
                            "--health-probe-bind-address=0", dir .. "/ctl" })
  p:expect("memory reconciled", 600)
  -- the line is logged inside the last reconcile: wait until the loop is
  -- past it (a liveness line would need a server; the CPU time settling
  -- is enough here)
  local function cpu()
    local f = {}
    for w in ((helpers.read_file("/proc/" .. p.pid .. "/stat") or ""):match("%) (.*)$") or ""):gmatch("%S+") do
      f[#f + 1] = w
    end
    return (tonumber(f[12]) or 0) + (tonumber(f[13]) or 0)
  end
  local c, deadline = cpu(), os.time() + 60
  repeat
    os.execute("sleep 0.5")
    local c2 = cpu()
    local settled = c2 == c
    c = c2
    assert(os.time() < deadline, "luna run still busy 60 s after its reconciles")
  until settled
  local r = { rss = status_kb(p.pid, "VmRSS"), anon = status_kb(p.pid, "RssAnon"),
              file = status_kb(p.pid, "RssFile"), files = file_rss_by_file(p.pid) }
  if r.rss == 0 then error("luna run exited (no VmRSS):\n" .. p:drain(1)) end
  p:stop()
  -- one object as the server sends it, less managedFields (which the
  -- cache drops)
  local body = helpers.run(("env -u LD_PRELOAD curl -s -S --max-time 10 '%s/api/v1/namespaces/%s/configmaps/cm-000000'")
    :format(url, NS))
  r.json = #(body:gsub(',"managedFields":%b[]', ""):gsub("%s+$", ""))
  srv:stop()
  return r
end

local function mb(kb) return string.format("%.2f", kb / 1024) end

local floor = measure(1)
local libs = {}
for file, kb in pairs(floor.files) do
  if file ~= "" and kb >= 512 then
    libs[#libs + 1] = { file:match("([^/]+)$"):gsub("%.so.*$", ""), kb }
  end
end
table.sort(libs, function(a, b) return a[2] > b[2] end)
local parts = {}
for _, l in ipairs(libs) do parts[#parts + 1] = l[1] .. "_mb=" .. mb(l[2]) end
print(string.format("bench memory_floor objects=1 rss_mb=%s anon_mb=%s file_mb=%s %s",
  mb(floor.rss), mb(floor.anon), mb(floor.file), table.concat(parts, " ")))

local full = measure(opts.objects)
print(string.format("bench memory_objects objects=%d rss_mb=%s anon_mb=%s file_mb=%s " ..
  "anon_bytes_per_object=%.0f json_bytes_per_object=%d",
  opts.objects, mb(full.rss), mb(full.anon), mb(full.file),
  (full.anon - floor.anon) * 1024 / (opts.objects - 1), full.json))
