-- bench/isolation.lua — what the watchdog costs and how fast it stops a
-- runaway reconcile.
--
--   isolation_jit   one reconcile-like call (decode a ConfigMap, build the
--                   mirror object, sort, format, set an owner, encode) and a
--                   tight numeric loop, under LuaJIT with the compiler on,
--                   off for the script's functions only (jit.off(f, true)),
--                   and off for the whole state (what luna run does); each
--                   without a hook and with a count hook every 1000
--                   instructions (debug.sethook; the host's hook is C)
--   isolation_stop  `luna run` (release build) against the dev server: the
--                   duration_ms of a reconcile stopped by the default
--                   instruction budget (`while true do end`), by a 0.5 s
--                   time budget, and by a 64 MiB heap cap
--
-- Run: LUNA_BUILD=build luajit bench/isolation.lua
-- Prints `bench <name> key=value ...` lines.
package.path = "spec/?.lua;" .. package.path
local build = require("support.bootstrap")

local core = require("luna.core")
local meta = require("luna.meta")
local json = core.json

local function data()
  local d = {}
  for i = 1, 20 do d["key" .. i] = string.rep("v", 40) .. i end
  return d
end
local SRC = json.encode({ apiVersion = "v1", kind = "ConfigMap",
  metadata = { name = "a", namespace = "ns", labels = { app = "x", tier = "y" }, uid = "1234" },
  data = data() })

local function reconcile_like()
  local obj = json.decode(SRC)
  local out = { apiVersion = "v1", kind = "ConfigMap",
    metadata = { name = obj.metadata.name .. "-mirror", namespace = obj.metadata.namespace, labels = {} },
    data = {} }
  for k, v in pairs(obj.metadata.labels) do out.metadata.labels[k] = v end
  local keys = {}
  for k in pairs(obj.data) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do out.data[k] = string.format("%s=%s", k, obj.data[k]:upper()) end
  meta.set_owner(out, obj)
  return json.encode(out)
end

local function numeric()
  local s = 0
  for i = 1, 1000 do s = s + (i % 7) * 3 end
  return s
end

-- Each mode runs in a fresh luajit process: jit.off() cannot be undone
-- for functions already blacklisted.
local mode = arg[1]
if mode == "child" then
  local jitmode, hook, name = arg[2], arg[3], arg[4]
  local fn = name == "reconcile" and reconcile_like or numeric
  if jitmode == "script_off" then jit.off(fn, true)
  elseif jitmode == "off" then jit.off(); jit.flush() end
  if hook == "count1000" then debug.sethook(function() end, "", 1000) end
  local n = 20000
  for _ = 1, 2000 do fn() end
  local best = math.huge
  for _ = 1, 5 do
    local t0 = os.clock()
    for _ = 1, n do fn() end
    best = math.min(best, (os.clock() - t0) / n * 1e6)
  end
  debug.sethook()
  print(string.format("bench isolation_jit jit=%s hook=%s workload=%s us_per_call=%.2f",
    jitmode, hook, name, best))
  os.exit(0)
end

for _, name in ipairs({ "reconcile", "numeric" }) do
  for _, jitmode in ipairs({ "on", "script_off", "off" }) do
    for _, hook in ipairs({ "none", "count1000" }) do
      local p = assert(io.popen(("LUNA_BUILD=%s luajit bench/isolation.lua child %s %s %s")
        :format(build, jitmode, hook, name)))
      io.write(p:read("*a"))
      p:close()
    end
  end
end

-- End to end: how long a runaway reconcile holds the loop before it is stopped.
local helpers = require("helpers")
helpers.luna = build .. "/luna"
local client = require("support.apiserver_client")
local srv = client.start()
local kc = require("support.luna_env").kubeconfig_file(srv.url)
srv:create_cm("spin")

local CASES = {
  { "instructions", "while true do end", {}, "budget=100000000" },
  { "time", "local s = string.rep('a', 100000) while true do s:find('b', 1, true) end",
    { "--reconcile-instruction-limit", "0", "--reconcile-time-limit", "0.5" }, "budget_s=0.5" },
  { "memory", "local t = {} while true do t[#t + 1] = { #t } end",
    { "--lua-memory-limit", "64" }, "cap_mib=64" },
}
for _, case in ipairs(CASES) do
  local dir = helpers.tmpdir()
  helpers.write_file(dir .. "/spin.lua", ([[
local luna = require "luna"
return luna.controller {
  name = "spin", watch = { "v1/ConfigMap", namespace = "%s" },
  reconcile = function(req) %s end,
}
]]):format(srv.ns, case[2]))
  local argv = { helpers.luna, "run", "--kubeconfig", kc }
  for _, a in ipairs(case[3]) do argv[#argv + 1] = a end
  argv[#argv + 1] = dir
  local p = helpers.spawn(argv)
  local line = p:expect("reconcile failed", 60)
  p:stop()
  print(string.format("bench isolation_stop reason=%s %s stopped=%s duration_ms=%s", case[1],
    case[4], line:match("stopped=(%a+)"), line:match("duration_ms=([%d%.]+)")))
end
srv:stop()
