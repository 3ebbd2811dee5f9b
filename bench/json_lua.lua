-- bench/json_lua.lua — JSON <-> Lua tables: lua-cjson against core.json.
--
-- Reads the ConfigMaps that bench/json.c generates (build/bench/json --dump N,
-- the same deterministic objects), then per library:
--   json_lua_decode  decode every object (one string each, like a watch event
--                    or a cache read), tables dropped at once
--   json_lua_encode  encode every decoded object back
--   json_lua_heap    Lua heap held by 20,000 decoded objects, over their bytes
-- for the full objects (with managedFields) and for the objects the cache
-- hands to scripts (managedFields dropped).  Prints `bench <name> key=value`.
--
-- Run: LUNA_BUILD=build luajit bench/json_lua.lua [objects]
package.path = "spec/?.lua;" .. package.path
local build = require("support.bootstrap")

local core = require("luna.core")
local cjson = require("cjson")
local ljson = core.json

local N = tonumber(arg and arg[1]) or 100000
local HEAP_N = math.min(N, 20000)

local function load_items(n, managed)
  local cmd = string.format("%s/bench/json --dump %d%s", build, n,
                            managed and "" or " --no-managed-fields")
  local p = assert(io.popen(cmd))
  local items, bytes = {}, 0
  for line in p:lines() do
    items[#items + 1] = line
    bytes = bytes + #line
  end
  p:close()
  assert(#items == n, "expected " .. n .. " items from " .. cmd)
  return items, bytes
end

local libs = {
  { name = "cjson", decode = cjson.decode, encode = cjson.encode },
  { name = "luna", decode = ljson.decode, encode = ljson.encode },
}

local function mb_per_s(bytes, seconds)
  return string.format("%.0f", bytes / 1e6 / seconds)
end

local function run(items, bytes, objects)
  local decode_rate = {}
  for _, lib in ipairs(libs) do
    local decode, encode = lib.decode, lib.encode
    collectgarbage()
    local t0 = os.clock()
    for i = 1, #items do
      local v = decode(items[i])
      if v == nil then error(lib.name .. " failed to decode item " .. i) end
    end
    local dt = os.clock() - t0
    decode_rate[lib.name] = bytes / dt
    print(string.format("bench json_lua_decode lib=%s objects=%s n=%d mb=%.1f mb_per_s=%s",
                        lib.name, objects, #items, bytes / 1e6, mb_per_s(bytes, dt)))

    -- Heap held by HEAP_N live decoded objects (nothing else decoded is
    -- alive, so no string is shared with an earlier decode).
    collectgarbage()
    collectgarbage()
    local before = collectgarbage("count")
    local decoded = {}
    for i = 1, HEAP_N do decoded[i] = decode(items[i]) end
    collectgarbage()
    local heap = (collectgarbage("count") - before) * 1024
    local heap_bytes = 0
    for i = 1, HEAP_N do heap_bytes = heap_bytes + #items[i] end
    print(string.format("bench json_lua_heap lib=%s objects=%s n=%d heap_mb=%.1f heap_x=%.2f",
                        lib.name, objects, HEAP_N, heap / 1e6, heap / heap_bytes))

    collectgarbage()
    local out = 0
    t0 = os.clock()
    for round = 1, math.ceil(#items / HEAP_N) do
      local last = math.min(HEAP_N, #items - (round - 1) * HEAP_N)
      for i = 1, last do
        local s = encode(decoded[i])
        out = out + #s
      end
    end
    dt = os.clock() - t0
    print(string.format("bench json_lua_encode lib=%s objects=%s n=%d mb=%.1f mb_per_s=%s",
                        lib.name, objects, #items, out / 1e6, mb_per_s(out, dt)))
    decoded = nil -- luacheck: ignore
  end
  print(string.format("bench json_lua_decode_speedup objects=%s luna_over_cjson=%.2f",
                      objects, decode_rate.luna / decode_rate.cjson))
end

local items, bytes = load_items(N, true)
run(items, bytes, "full")
items, bytes = load_items(N, false)
run(items, bytes, "no_managed_fields")

local f = io.open("/proc/self/status")
if f then
  local hwm = f:read("*a"):match("VmHWM:%s*(%d+)")
  f:close()
  print(string.format("bench json_lua_rss peak_rss_mb=%.0f", tonumber(hwm) / 1024))
end
