-- bench/lua_helpers.lua — cost of the pure-Lua reconcile helpers per call.
--
--   lua_helpers_condition_same     conditions.set with nothing changed (the
--                                  common steady-state reconcile)
--   lua_helpers_condition_flip     conditions.set flipping the status
--   lua_helpers_set_owner          meta.set_owner on an object already owned
--   lua_helpers_finalizer_ready    finalizers.handle on a live object that has it
--   lua_helpers_event_create       recorder:prepare, every event new (LRU full
--                                  at 4096, evicting on each call)
--   lua_helpers_event_repeat       recorder:prepare, a repeat (series patch)
-- Prints `bench <name> calls=N us_per_call=X` (CPU time).
--
-- Run: LUNA_BUILD=build luajit bench/lua_helpers.lua [calls]
package.path = "spec/?.lua;" .. package.path
require("support.bootstrap")

local core = require("luna.core")
local luna = require("luna")

local N = tonumber(arg and arg[1]) or 200000
local T0 = 1795240800

local function obj()
  return assert(core.json.decode([[{"apiVersion":"example.com/v1","kind":"Widget",
    "metadata":{"name":"w","namespace":"ns","uid":"w-1","resourceVersion":"42","generation":3,
      "finalizers":["example.com/cleanup"],
      "ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n","uid":"n-1"},
        {"apiVersion":"apps/v1","kind":"Deployment","name":"d","uid":"d-1","controller":true}]},
    "status":{"conditions":[
      {"type":"Ready","status":"True","reason":"Ok","message":"","lastTransitionTime":"2026-11-21T06:00:00Z"},
      {"type":"Synced","status":"True","reason":"Ok","message":"","lastTransitionTime":"2026-11-21T06:00:00Z"}]}}]]))
end

local function bench(name, n, fn)
  fn(1) -- warm up
  local t = os.clock()
  for i = 1, n do fn(i) end
  local dt = os.clock() - t
  print(string.format("bench lua_helpers_%s calls=%d us_per_call=%.3f", name, n, dt / n * 1e6))
end

local o = obj()
local ready = { type = "Ready", status = "True", reason = "Ok", observed_generation = 3 }
bench("condition_same", N, function() luna.conditions.set(o, ready, T0) end)

local flip = { { type = "Ready", status = "False", reason = "Down" },
               { type = "Ready", status = "True", reason = "Ok" } }
bench("condition_flip", N, function(i) luna.conditions.set(o, flip[i % 2 + 1], T0 + i) end)

local owner = assert(core.json.decode([[{"apiVersion":"apps/v1","kind":"Deployment",
  "metadata":{"name":"d","namespace":"ns","uid":"d-1"}}]]))
local opts = { controller = true }
bench("set_owner", N, function() luna.meta.set_owner(o, owner, opts) end)

local cleanup = { cleanup = function() return true end }
bench("finalizer_ready", N, function() luna.finalizers.handle(o, "example.com/cleanup", cleanup) end)

local rec = luna.events.recorder({ controller = "example.com/widgets", instance = "luna-0" })
local objs = {}
for i = 1, 8192 do
  local x = obj()
  x.metadata.name, x.metadata.uid = "w" .. i, "u" .. i
  objs[i] = x
end
bench("event_create", N, function(i) rec:prepare(objs[i % 8192 + 1], "Normal", "Created", "made", nil, T0 + i) end)
bench("event_repeat", N, function(i) rec:prepare(o, "Warning", "Failed", "boom", nil, T0 + i / 1000) end)
