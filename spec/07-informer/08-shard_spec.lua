-- Sharded informers (KEP-5866): three informers, one per shard of an equal
-- split, together hold every ConfigMap exactly once, through a list and
-- writes, whether the server filters (it echoes shardInfo) or ignores the
-- selector (the dev server's ignore-shard-selector fault, as an older API
-- server or one without the ShardedListAndWatch gate) and the reflector
-- filters on arrival.
--
-- Against a real control plane the server mode runs when the gate is on:
--   make test-kube SPEC=spec/07-informer/08-shard_spec.lua \
--     KUBE_FEATURE_GATES=ShardedListAndWatch=true
local helpers = require("helpers")
local client = require("support.apiserver_client")
local core = require("luna.core")
local S = require("07-informer.support")
local shard = core.shard

local MEMBERS = { "replica-a", "replica-b", "replica-c" }

local function client_escape(v)
  return (v:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end
local N = 45

-- The server's ConfigMaps of the spec namespace that fall in sel: key -> rv.
local function server_shard(srv, sel)
  local code, list = srv:request("GET", srv:ns_path("configmaps"))
  assert(code == 200, "list configmaps: " .. tostring(code))
  local out = {}
  for _, it in ipairs(list.items) do
    if shard.matches(sel, it.metadata.namespace, it.metadata.uid) then
      out[it.metadata.namespace .. "/" .. it.metadata.name] = it.metadata.resourceVersion
    end
  end
  return out
end

local function converge_all(srv, infs, sels)
  for i, inf in ipairs(infs) do S.converge(inf, server_shard(srv, sels[i]), 20) end
end

-- Every cached object of every informer is in its shard and in no other
-- informer's cache; together they hold all `total` objects of the namespace.
local function assert_partition(infs, sels, total)
  local seen = {}
  for i, inf in ipairs(infs) do
    for _, o in ipairs(inf:list()) do
      local ns, uid = o:namespace(), o:uid()
      assert.is_true(shard.matches(sels[i], ns, uid), o:key() .. " outside " .. sels[i])
      assert.is_nil(seen[o:key()], o:key() .. " in two shards")
      seen[o:key()] = i
    end
  end
  local count = 0
  for _ in pairs(seen) do count = count + 1 end
  assert.equal(total, count)
end

local function write_some(srv)
  for i = 1, 15 do srv:create_cm(("late-%02d"):format(i)) end
  for i = 1, 10 do
    local code = srv:request("PUT", srv:ns_path("configmaps", ("cm-%02d"):format(i)),
      S.configmap(("cm-%02d"):format(i), { k = "changed" }))
    assert.equal(200, code)
  end
  for i = 11, 20 do
    assert.equal(200, (srv:request("DELETE", srv:ns_path("configmaps", ("cm-%02d"):format(i)))))
  end
end

local function run_case(mode, setup_faults)
  local srv, env
  setup(function()
    srv = client.start({ args = { "--admin" } })
    for i = 1, N do srv:create_cm(("cm-%02d"):format(i)) end
    if setup_faults then S.faults(srv, setup_faults) end
    env = assert(core.informer.env{ kubeconfig = S.kubeconfig_for(srv) })
  end)
  teardown(function()
    collectgarbage()
    srv:stop()
  end)

  it("splits the namespace among three informers, exactly once, through writes (" .. mode .. ")",
    function()
      if srv.real then
        local code, l = srv:request("GET", srv:ns_path("configmaps") .. "?shardSelector="
          .. client_escape(assert(shard.split(MEMBERS, MEMBERS[1]))))
        assert.equal(200, code)
        if not l.metadata.shardInfo then
          return pending("the control plane runs without the ShardedListAndWatch feature gate: "
            .. "run with KUBE_FEATURE_GATES=ShardedListAndWatch=true")
        end
      end
      -- a real cluster adds kube-root-ca.crt to every namespace
      local total = 0
      for _ in pairs(S.server_state(srv)) do total = total + 1 end
      local sels, infs = {}, {}
      for i, m in ipairs(MEMBERS) do
        sels[i] = assert(shard.split(MEMBERS, m))
        infs[i] = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, shard = sels[i] }
      end
      helpers.eventually(function()
        for _, inf in ipairs(infs) do if not inf:has_synced() then return false end end
        return true
      end, 20, "sync")
      local dropped = 0
      for _, inf in ipairs(infs) do
        local st = inf:stats()
        assert.equal(mode, st.shard_mode)
        dropped = dropped + st.shard_dropped
      end
      -- server mode: nothing foreign arrives; client mode: each object
      -- reaches all three and two drop it
      assert.equal(mode == "server" and 0 or 2 * total, dropped)
      converge_all(srv, infs, sels)
      assert_partition(infs, sels, total)

      write_some(srv)
      converge_all(srv, infs, sels)
      assert_partition(infs, sels, total + 15 - 10)
      local events = 0
      for _, inf in ipairs(infs) do events = events + inf:stats().watch_events end
      -- 15 adds, 10 updates and 10 deletes, each seen by its shard only
      -- when the server filters
      if mode == "server" then assert.equal(35, events) end
      for _, inf in ipairs(infs) do inf:release() end
    end)
end

describe("sharded informers, the server filters", function()
  run_case("server")
end)

describe("sharded informers, the server ignores shardSelector", function()
  if client.dev_only("needs the dev server's ignore-shard-selector fault") then return end
  run_case("client", "ignore-shard-selector=1")
end)

describe("sharded informer, a server that stops filtering", function()
  if client.dev_only("needs the dev server's faults") then return end
  local srv, env
  setup(function()
    srv = client.start({ args = { "--admin" } })
    for i = 1, 20 do srv:create_cm(("cm-%02d"):format(i)) end
    env = assert(core.informer.env{ kubeconfig = S.kubeconfig_for(srv) })
  end)
  teardown(function()
    collectgarbage()
    srv:stop()
  end)

  it("switches to filtering on arrival at the next list, and the cache stays the shard", function()
    local sel = assert(shard.split(MEMBERS, MEMBERS[2]))
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, shard = sel,
      min_watch_timeout = 1, max_watch_timeout = 2 }
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    assert.equal("server", inf:stats().shard_mode)
    -- The server now ignores the selector, and the next watch gets 410:
    -- the reflector relists from a server that sends everything.
    S.faults(srv, "ignore-shard-selector=1,gone=1")
    helpers.eventually(function() return inf:stats().lists >= 2 end, 20, "a relist")
    assert.equal("client", inf:stats().shard_mode)
    assert.is_true(inf:stats().shard_dropped > 0)
    for i = 21, 40 do srv:create_cm(("cm-%02d"):format(i)) end
    S.converge(inf, server_shard(srv, sel), 20)
    -- the new objects outside the shard reached the reflector and were
    -- dropped there: the cache is the shard alone
    for _, o in ipairs(inf:list()) do
      assert.is_true(shard.matches(sel, o:namespace(), o:uid()), o:key())
    end
    inf:release()
  end)
end)

describe("sharded informer options", function()
  if client.dev_only("checks only the binding's argument handling") then return end
  it("refuses a bad shard selector with the server's message", function()
    local srv = client.start()
    local env = assert(core.informer.env{ kubeconfig = S.kubeconfig_for(srv) })
    assert.has_error(function()
      env:informer{ kind = "v1/ConfigMap", shard = "shardRange(object.metadata.uid, '0x0', '0x1')" }
    end, 'hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean '
      .. '"0x0000000000000000"?)')
    env:close()
    srv:stop()
  end)
end)

describe("sharded informer, moved to another shard", function()
  if client.dev_only("runs against the dev server only, to keep the cluster run short") then return end
  local srv, env
  setup(function()
    srv = client.start()
    for i = 1, 30 do srv:create_cm(("cm-%02d"):format(i)) end
    env = assert(core.informer.env{ kubeconfig = S.kubeconfig_for(srv) })
  end)
  teardown(function()
    collectgarbage()
    srv:stop()
  end)

  it("relists: objects that left the shard are deleted, those that joined are added", function()
    local first = assert(shard.split({ "a", "b" }, "a"))
    local second = assert(shard.split({ "a", "b", "c" }, "b"))
    local m = S.mirror()
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, shard = first,
      on_add = m.handlers.on_add, on_update = m.handlers.on_update, on_delete = m.handlers.on_delete }
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    S.converge(inf, server_shard(srv, first), 10, m)
    assert.matches("shard=" .. first, inf:key(), 1, true)
    assert(inf:set_shard(second))
    assert.matches("shard=" .. second, inf:key(), 1, true)
    S.converge(inf, server_shard(srv, second), 10, m)
    assert.same({}, m.violations)
    assert.is_true(inf:stats().lists >= 2)
    -- a second informer on the same shard shares it; moving onto a taken
    -- shard is refused and changes nothing
    local other = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, shard = first }
    assert.equal(2, env:count())
    local ok, err = inf:set_shard(first)
    assert.is_nil(ok)
    assert.matches("an informer for that shard exists", tostring(err))
    assert.matches("shard=" .. second, inf:key(), 1, true)
    -- back to the whole collection
    assert(inf:set_shard(nil))
    S.converge(inf, S.server_state(srv), 10, m)
    assert.same({}, m.violations)
    other:release()
    inf:release()
  end)
end)

-- The mode is logged once, when first known, and again only when it
-- changes: not at every relist, nor at every shard change (a replica's
-- claim changes relist).  A process of its own, so its log lines can be
-- read; it sets the dev server's faults itself between its phases.
describe("sharded informer log", function()
  if client.dev_only("needs the dev server's faults to force relists") then return end
  local srv
  setup(function()
    srv = client.start({ args = { "--admin" } })
    for i = 1, 5 do srv:create_cm(("cm-%02d"):format(i)) end
  end)
  teardown(function() srv:stop() end)

  -- The child's informer relists (every watch gets 410 Gone) in phases:
  -- each phase sets the faults, waits for the mode, then for `lists` more
  -- lists, moving the informer to the next shard of `moves` between them.
  local function run_child(sel, phases)
    local script = helpers.tmpdir() .. "/child.lua"
    helpers.write_file(script, ([[
      package.cpath = %q .. "/lua/?.so;" .. package.cpath
      local core = require("luna.core")
      local cjson = require("cjson")
      local url, phases = %q, cjson.decode(%q)
      local env = assert(core.informer.env{ kubeconfig = %q })
      local inf = env:informer{ kind = "v1/ConfigMap", namespace = %q, shard = %q,
        min_watch_timeout = 1, max_watch_timeout = 2, backoff_base = 0.05, backoff_max = 0.1 }
      for i, ph in ipairs(phases) do
        local status
        assert(core.http.request{ url = url .. "/luna/v1/faults", method = "PUT",
          body = ph.faults, headers = { ["Content-Type"] = "text/plain" },
          on_done = function(resp, err) status = resp and resp.status or tostring(err) end })
        assert(core.loop.run_until(function() return status ~= nil end, 10), "faults")
        assert(status == 200, "faults: " .. tostring(status))
        assert(core.loop.run_until(function() return inf:stats().shard_mode == ph.mode end, 30),
               "mode " .. ph.mode)
        for _, sel in ipairs(ph.moves) do
          local n = inf:stats().lists
          assert(core.loop.run_until(function() return inf:stats().lists >= n + 2 end, 30),
                 "relists")
          assert(inf:set_shard(sel))
          assert(core.loop.run_until(function() return inf:stats().shard_mode == ph.mode end, 30),
                 "mode after the move")
        end
        local n = inf:stats().lists
        assert(core.loop.run_until(function() return inf:stats().lists >= n + 2 end, 30),
               "relists")
        print("child phase " .. i .. " lists=" .. inf:stats().lists ..
              " mode=" .. inf:stats().shard_mode)
      end
      inf:release()
      env:close()
    ]]):format(helpers.build, srv.url, require("cjson").encode(phases), S.kubeconfig_for(srv),
               srv.ns, sel))
    local p = helpers.spawn({ "luajit", script })
    local modes = {}
    for i = 1, #phases do
      local _, mode = p:expect("child phase " .. i .. " lists=%d+ mode=(%a+)", 90)
      modes[i] = mode
    end
    local out = p:drain(10)
    p:stop()
    return modes, out
  end

  it("says once which mode it runs in, over relists and shard changes, and again when it " ..
     "changes", function()
    local sels = {}
    for i, m in ipairs(MEMBERS) do sels[i] = assert(shard.split(MEMBERS, m)) end
    local modes, text = run_child(sels[1], {
      -- the server filters: relists, and two moves to another shard
      { faults = "gone=1000", mode = "server", moves = { sels[2], sels[3] } },
      -- it stops echoing shardInfo (a server without the gate)
      { faults = "gone=1000,ignore-shard-selector=1", mode = "client", moves = { sels[1] } },
      -- and filters again
      { faults = "gone=1000", mode = "server", moves = {} },
    })
    assert.same({ "server", "client", "server" }, modes)
    local _, n = text:gsub("the API server filters", "")
    assert.equal(2, n, text)
    local _, c = text:gsub("filtering on arrival", "")
    assert.equal(1, c, text)
  end)
end)
