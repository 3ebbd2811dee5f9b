-- bench devserver_list: how long the dev server takes to serve a LIST of N
-- ConfigMaps, next to what a client spends decoding the same response.
--
--   LUNA_BUILD=build luajit bench/devserver_list.lua [objects=100000] [runs=5]
-- prints: bench devserver_list objects=N bytes=B seed_s=S list_ms=L (best of runs)
--         decode_ms=D (lua-cjson, same body) page500_ms=P (limit=500 first page)
package.path = "spec/?.lua;" .. package.path
local helpers = require("helpers")
local cjson = require("cjson")

local opts = { objects = 100000, runs = 5 }
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(%d+)$")
  if k then opts[k] = tonumber(v) end
end

local dir = helpers.tmpdir()
local items = {}
for i = 1, opts.objects do
  items[i] = string.format('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%06d",' ..
    '"namespace":"bench","labels":{"app":"bench","shard":"%d"}},"data":{"key":"value-%d",' ..
    '"config.yaml":"replicas: 3\\nimage: example/app:%d\\n"}}', i, i % 10, i, i)
end
helpers.write_file(dir .. "/seed.json", '{"apiVersion":"v1","kind":"List","items":[' ..
  table.concat(items, ",") .. "]}")
items = nil

local t0 = helpers.now()
local srv = helpers.spawn({ helpers.luna, "dev-server", "--listen", "127.0.0.1:0",
                            "--seed", dir .. "/seed.json" })
local _, url = srv:expect("listening on (http%S+)", 600)
local seed_s = helpers.now() - t0

local function timed(path, out)
  local res = helpers.run(string.format("curl -s -o %s -w '%%{time_total}' '%s%s'", out, url, path))
  return tonumber(res) * 1000
end

local best = math.huge
for _ = 1, opts.runs do
  local ms = timed("/api/v1/namespaces/bench/configmaps", dir .. "/list.json")
  if ms < best then best = ms end
end
local body = helpers.read_file(dir .. "/list.json")
local d0 = helpers.now()
local list = cjson.decode(body)
local decode_ms = (helpers.now() - d0) * 1000
assert(#list.items == opts.objects, "list returned " .. #list.items .. " items")
local page = math.huge
for _ = 1, opts.runs do
  local ms = timed("/api/v1/namespaces/bench/configmaps?limit=500", dir .. "/page.json")
  if ms < page then page = ms end
end
srv:stop()
print(string.format("bench devserver_list objects=%d bytes=%d seed_s=%.2f list_ms=%.1f " ..
  "decode_ms=%.1f page500_ms=%.2f", opts.objects, #body, seed_s, best, decode_ms, page))
