-- Shared informers against an API server: list, watch, selectors, indexes,
-- handler order, resync.  Runs against the dev server, or the cluster in
-- KUBECONFIG (in a throwaway namespace).
local helpers = require("helpers")
local core = require("luna.core")

local kubeconfig_for = require("support.luna_env").kubeconfig_for
local S = require("07-informer.support")

-- The server's view of the spec namespace's ConfigMaps: key -> resourceVersion.
local function server_state(srv, labels)
  local q = labels and ("?labelSelector=" .. labels) or ""
  local code, list = srv:request("GET", srv:ns_path("configmaps") .. q)
  assert.equal(200, code)
  local out = {}
  for _, item in ipairs(list.items) do
    out[item.metadata.namespace .. "/" .. item.metadata.name] = item.metadata.resourceVersion
  end
  return out
end

local function cache_state(inf)
  local out = {}
  for _, o in ipairs(inf:list()) do out[o:key()] = o:resource_version() end
  return out
end

describe("informer", function()
  local srv, env
  S.server_each_test(nil, function(s, e) srv, env = s, e end)

  it("lists, then follows the watch until the cache equals the server", function()
    -- The first list asks for resourceVersion 0, which a server with a
    -- watch cache (and the dev server) answers whole whatever the page
    -- size; paged lists are in 04-faults_spec.lua, watch lists (the
    -- default) in 10-watch_list_spec.lua.
    for i = 1, 7 do srv:create_cm("cm-" .. i) end
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, page_size = 3,
                              watch_list = "off" }
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    assert.same(server_state(srv), cache_state(inf))
    assert.is_true(inf:stats().list_pages >= 1)
    assert.equal(1, inf:stats().lists)
    assert.equal("configmaps", inf:resource().resource)

    srv:create_cm("cm-new")
    srv:request("PUT", srv:ns_path("configmaps", "cm-1"), { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "cm-1" }, data = { changed = "yes" } })
    srv:request("DELETE", srv:ns_path("configmaps", "cm-2"))
    helpers.eventually(function()
      local cache, server = cache_state(inf), server_state(srv)
      for k, v in pairs(server) do if cache[k] ~= v then return false end end
      for k in pairs(cache) do if not server[k] then return false end end
      return true
    end, 10, "cache to equal the server")
    local cm1 = core.json.decode(inf:get(srv.ns .. "/cm-1"):json())
    assert.same({ changed = "yes" }, cm1.data)
    assert.is_nil(cm1.metadata.managedFields)
    inf:release()
  end)

  it("tells handlers of every change in order, with old and new states", function()
    srv:create_cm("a")
    local seen = {}
    -- only this spec's objects: a cluster puts its kube-root-ca.crt here too
    local own = { a = true, b = true }
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns,
      on_add = function(o, initial)
        if own[o:name()] then seen[#seen + 1] = "add " .. o:name() .. (initial and " initial" or "") end
      end,
      on_update = function(old, new)
        if not own[new:name()] then return end
        seen[#seen + 1] = "update " .. new:name() .. " " .. (core.json.decode(new:json()).data.k or "")
      end,
      on_delete = function(o) if own[o:name()] then seen[#seen + 1] = "delete " .. o:name() end end,
    }
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    srv:create_cm("b")
    srv:request("PUT", srv:ns_path("configmaps", "b"), { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "b" }, data = { k = "v2" } })
    srv:request("DELETE", srv:ns_path("configmaps", "b"))
    helpers.eventually(function() return #seen >= 4 end, 10, "four events")
    assert.same({ "add a initial", "add b", "update b v2", "delete b" }, seen)
    inf:release()
  end)

  it("shares one informer between identical requests and replays the cache to late handlers", function()
    srv:create_cm("x")
    local first = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = { app = "a" } }
    local second_adds = {}
    local second = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = "app=a" }
    assert.equal(1, env:count())
    srv:create_cm("labelled", nil, { app = "a" })
    helpers.eventually(function() return first:has_synced() and first:len() == 1 end, 10, "sync")
    local late = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = { app = "a" },
      on_add = function(o) second_adds[#second_adds + 1] = o:name() end }
    assert.same({ "labelled" }, second_adds)
    assert.equal(3, late:stats().refs)
    first:release(); second:release(); late:release()
    assert.equal(0, env:count())
  end)

  it("applies label selectors, deleting objects that move out of the selector", function()
    srv:create_cm("in", nil, { app = "web" })
    srv:create_cm("out", nil, { app = "db" })
    local deleted = {}
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = "app=web",
      on_delete = function(o) deleted[#deleted + 1] = o:name() end }
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    assert.same({ srv.ns .. "/in" }, inf:keys())
    srv:request("PUT", srv:ns_path("configmaps", "in"), { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "in", labels = { app = "moved" } }, data = { k = "v" } })
    helpers.eventually(function() return inf:len() == 0 end, 10, "object to leave the cache")
    assert.same({ "in" }, deleted)
    inf:release()
  end)

  it("keeps custom indexes over watched objects", function()
    -- objects with an app label: this spec's, not a cluster's kube-root-ca.crt
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = "app" }
    inf:add_index("by_app", function(o) return o:label("app") end)
    srv:create_cm("w1", nil, { app = "web" })
    srv:create_cm("w2", nil, { app = "web" })
    srv:create_cm("d1", nil, { app = "db" })
    helpers.eventually(function() return inf:has_synced() and inf:len() == 3 end, 10, "three objects")
    assert.equal(2, #inf:by_index("by_app", "web"))
    assert.equal(1, #inf:by_index("by_app", "db"))
    inf:release()
  end)

  it("re-delivers cached objects as updates at the resync period", function()
    srv:create_cm("r")
    local updates = 0
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, resync = 0.2,
      on_update = function(old, new) if old == new then updates = updates + 1 end end }
    helpers.eventually(function() return updates >= 2 end, 10, "two resyncs")
    inf:release()
  end)

  it("gives each handler of a shared informer its own resync period", function()
    srv:create_cm("r")
    local fast, slow, none = 0, 0, 0
    local function counter(add)
      return function(old, new) if old == new then add() end end
    end
    -- the first acquirer asks for no resync; the others share its informer
    local a = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns,
      on_update = counter(function() none = none + 1 end) }
    local b = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, resync = 0.2,
      on_update = counter(function() fast = fast + 1 end) }
    local c = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, resync = 3600,
      on_update = counter(function() slow = slow + 1 end) }
    helpers.eventually(function() return fast >= 4 end, 10, "four resyncs of the 0.2 s handler")
    assert.equal(0, none)
    assert.equal(0, slow)
    a:release(); b:release(); c:release()
  end)

  it("syncs on an empty first list", function()
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = "nothing=matches" }
    helpers.eventually(function() return inf:has_synced() end, 10, "sync of an empty list")
    assert.equal(0, inf:len())
    inf:release()
  end)

  it("sees a write made on a kept-alive connection of the same process at once", function()
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns }
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    -- core.http keeps its connection open (curl's CLI closes it), so the
    -- server must wake the watch without any other connection activity.
    local done
    local kc = core.kubeconfig.load{ path = kubeconfig_for(srv), env = {} }
    local cred = kc:credentials()
    core.http.request{ method = "POST", url = kc.server .. srv:ns_path("configmaps"),
      headers = { ["Content-Type"] = "application/json" }, bearer_token = cred.token,
      tls = { ca_pem = kc.ca_data, cert_pem = cred.client_cert_data, key_pem = cred.client_key_data,
              ca_file = kc.ca_file, insecure = kc.insecure },
      body = core.json.encode({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "kept" } }),
      on_done = function(resp) done = resp and resp.status end }
    helpers.eventually(function() return done ~= nil end, 10, "the create")
    assert.equal(201, done)
    helpers.eventually(function() return inf:get(srv.ns .. "/kept") ~= nil end, 5, "the watch event")
    inf:release()
  end)

  it("reports an unknown kind and keeps retrying discovery", function()
    local inf = env:informer{ kind = "example.com/v1/Nothing", namespace = srv.ns, backoff_base = 0.05 }
    assert.is_false(core.loop.run_until(function() return inf:has_synced() end, 0.3))
    assert.is_nil(inf:resource())
    inf:release()
  end)
end)
