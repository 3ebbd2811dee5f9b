-- bench shard_sync: three informers of an equal KEP-5866 split syncing N
-- ConfigMaps from the dev server, when the server filters (it echoes
-- shardInfo) and when it ignores shardSelector and the reflectors filter
-- on arrival; one unsharded informer for comparison.  All informers run on
-- one loop in this process, so a time is the sum of what three replicas
-- would each spend.
--
--   LUNA_BUILD=build luajit bench/shard_sync.lua [objects=20000] [runs=3]
-- prints: bench shard_sync objects=N mode=whole|server|client shards=S
--         sync_ms=T (best of runs) cached=C dropped=D
package.path = "spec/?.lua;" .. package.path
package.cpath = (os.getenv("LUNA_BUILD") or "build") .. "/lua/?.so;" .. package.cpath
local helpers = require("helpers")
local core = require("luna.core")
local luna_env = require("support.luna_env")

local opts = { objects = 20000, runs = 3 }
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(%d+)$")
  if k then opts[k] = tonumber(v) end
end

local dir = helpers.tmpdir()
local items = {}
for i = 1, opts.objects do
  items[i] = string.format('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%06d",' ..
    '"namespace":"bench","labels":{"app":"bench"}},"data":{"key":"value-%d",' ..
    '"config.yaml":"replicas: 3\\nimage: example/app:%d\\n"}}', i, i, i)
end
helpers.write_file(dir .. "/seed.json", '{"apiVersion":"v1","kind":"List","items":[' ..
  table.concat(items, ",") .. "]}")
items = nil

local function server(faults)
  local argv = { helpers.luna, "dev-server", "--listen", "127.0.0.1:0", "--seed", dir .. "/seed.json" }
  if faults then
    argv[#argv + 1] = "--faults"
    argv[#argv + 1] = faults
  end
  local p = helpers.spawn(argv)
  local _, url = p:expect("listening on (http%S+)", 600)
  return p, url
end

local MEMBERS = { "replica-a", "replica-b", "replica-c" }

local function run(mode, url)
  local best, cached, dropped = math.huge, 0, 0
  for _ = 1, opts.runs do
    local env = assert(core.informer.env{ kubeconfig = luna_env.kubeconfig_file(url) })
    local infs = {}
    local t0 = helpers.now()
    if mode == "whole" then
      infs[1] = env:informer{ kind = "v1/ConfigMap", namespace = "bench" }
    else
      for i, m in ipairs(MEMBERS) do
        infs[i] = env:informer{ kind = "v1/ConfigMap", namespace = "bench",
          shard = assert(core.shard.split(MEMBERS, m)) }
      end
    end
    assert(core.loop.run_until(function()
      for _, inf in ipairs(infs) do if not inf:has_synced() then return false end end
      return true
    end, 600), "sync")
    local ms = (helpers.now() - t0) * 1000
    if ms < best then best = ms end
    cached, dropped = 0, 0
    for _, inf in ipairs(infs) do
      cached = cached + inf:len()
      dropped = dropped + inf:stats().shard_dropped
      if mode ~= "whole" then assert(inf:stats().shard_mode == mode, inf:stats().shard_mode) end
      inf:release()
    end
    env:close()
    collectgarbage()
  end
  assert(cached == opts.objects, "cached " .. cached)
  print(string.format("bench shard_sync objects=%d mode=%s shards=%d sync_ms=%.1f cached=%d " ..
    "dropped=%d", opts.objects, mode, mode == "whole" and 1 or #MEMBERS, best, cached, dropped))
end

local p, url = server()
run("whole", url)
run("server", url)
p:stop()
p, url = server("ignore-shard-selector=1")
run("client", url)
p:stop()
