-- Informers under faults: bookmarks, 410 Gone and relists, dropped and
-- hung watches, 5xx and 429 responses, malformed and truncated events.
-- After every fault the cache must equal the server, and the handlers must
-- have been told of every change exactly once (S.mirror records any call
-- that contradicts what they saw before).
--
-- The bookmark spec also runs against the cluster in KUBECONFIG; the rest
-- needs the dev server's fault injection (--admin).
local helpers = require("helpers")
local client = require("support.apiserver_client")
local core = require("luna.core")
local S = require("07-informer.support")

local function sorted(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  return c
end

local function put_cm(srv, name, data, labels)
  local code = srv:request("PUT", srv:ns_path("configmaps", name), S.configmap(name, data, labels))
  assert(code == 200, "update configmap " .. name .. ": " .. tostring(code))
end

local function delete_cm(srv, name)
  local code = srv:request("DELETE", srv:ns_path("configmaps", name))
  assert(code == 200, "delete configmap " .. name .. ": " .. tostring(code))
end

describe("informer bookmarks", function()
  local srv, env
  S.server_each_test({ args = { "--bookmark-interval", "0.1" } }, function(s, e) srv, env = s, e end)

  it("advance the resourceVersion while no event matches the selector", function()
    -- A real kube-apiserver sends a bookmark shortly before the watch's
    -- timeout (and about once a minute): a 10 s timeout brings it early.
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = "watched=yes",
      min_watch_timeout = 10, max_watch_timeout = 11 }
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    local listed = tonumber(inf:resource_version())
    -- Writes that the selector hides move the server's resourceVersion on.
    local other = srv:create_cm("unwatched", nil, { watched = "no" })
    local other_rv = tonumber(other.metadata.resourceVersion)
    assert.is_true(other_rv > listed)
    helpers.eventually(function() return tonumber(inf:resource_version()) >= other_rv end,
      srv.real and 40 or 10, "a bookmark past the hidden write")
    assert.is_true(inf:stats().bookmarks >= 1)
    assert.equal(0, inf:stats().watch_events)
    assert.equal(0, inf:len())
    inf:release()
  end)
end)

if client.real() then
  describe("informer faults", function()
    pending(client.DEV_ONLY .. "410s, dropped, failing, hung and corrupt watches are injected " ..
            "(--admin faults); a real cluster cannot be told to produce them")
  end)
  return
end

describe("informer faults", function()
  local srv, env
  local function start(args)
    local argv = { "--admin" }
    for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
    srv = client.start{ args = argv }
    env = assert(core.informer.env{ kubeconfig = S.kubeconfig_for(srv) })
  end
  after_each(function()
    collectgarbage()
    if srv then srv:stop() end
    srv = nil
  end)

  local function informer(m, extra)
    local o = { kind = "v1/ConfigMap", namespace = srv.ns, backoff_base = 0.02, backoff_max = 0.05 }
    for k, v in pairs(m and m.handlers or {}) do o[k] = v end
    for k, v in pairs(extra or {}) do o[k] = v end
    local inf = env:informer(o)
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    return inf
  end

  -- Sync comes as soon as the list is applied, before the watch request
  -- has reached the server: a fault injected right then would hit the
  -- first watch.  An object seen through the watch proves it is open.
  local function watching(inf)
    srv:create_cm("watch-ready")
    helpers.eventually(function() return inf:get(srv.ns .. "/watch-ready") ~= nil end, 10,
      "the watch to be open")
  end

  it("relists after 410 Gone, deleting what vanished while the watch was down", function()
    start{ "--history", "4" }
    for _, n in ipairs{ "a", "b", "c", "d", "e" } do srv:create_cm(n) end
    local m = S.mirror()
    local inf = informer(m)
    watching(inf)
    -- End the open watch at the next event, and fail every new watch.
    S.faults(srv, "error-on=watch,error-rate=1,error-code=503,retry-after=0,watch-close-after=1")
    srv:create_cm("trigger")
    helpers.eventually(function() return inf:get(srv.ns .. "/trigger") and inf:stats().failures >= 1 end,
      10, "the watch to end and its reconnect to fail")
    -- More writes than the server's history keeps: the informer's
    -- resourceVersion expires while it cannot watch.
    delete_cm(srv, "b")
    delete_cm(srv, "c")
    put_cm(srv, "d", { k = "v2" })
    put_cm(srv, "d", { k = "v3" })
    srv:create_cm("f")
    srv:create_cm("g")
    S.faults(srv, "")
    S.converge(inf, S.server_state(srv), 10, m)
    local st = inf:stats()
    assert.is_true(st.gone >= 1, "410s: " .. st.gone)
    assert.equal(2, st.lists)
    assert.same({ "b", "c" }, sorted(m.unknown_deletes))
    assert.same({ "b", "c" }, sorted(m.deleted))
    assert.same({}, m.violations)
    assert.same({ k = "v3" }, core.json.decode(inf:get(srv.ns .. "/d"):json()).data)
    inf:release()
  end)

  it("lists whole from the cache first, then in pages when page_size is set or after a 410 on a list", function()
    start()
    for i = 1, 7 do srv:create_cm("p" .. i) end
    local m = S.mirror()
    local inf = informer(m, { page_size = 3, watch_list = "off" })
    -- resourceVersion=0: served whole, as kube's watch cache does.
    assert.equal(1, inf:stats().list_pages)
    -- A relist (after a 410 watch) asks for the last version seen, in
    -- pages because page_size was set: 8 objects in pages of 3.
    S.faults(srv, "gone=1,watch-close-after=1")
    srv:create_cm("p8")
    helpers.eventually(function() return inf:stats().lists == 2 end, 10, "the relist")
    assert.equal(1 + 3, inf:stats().list_pages)
    -- A 410 on a list itself: back off, then list consistently in pages.
    S.faults(srv, "error-on=read,error-rate=1,error-code=410,watch-close-after=1")
    srv:create_cm("p9")
    helpers.eventually(function() return inf:stats().gone >= 3 end, 10, "410s on the relist")
    local pages = inf:stats().list_pages
    S.faults(srv, "")
    srv:create_cm("p10")
    S.converge(inf, S.server_state(srv), 10, m)
    helpers.eventually(function() return inf:stats().lists == 3 end, 10, "the consistent relist")
    assert.equal(pages + 4, inf:stats().list_pages) -- 10 objects in pages of 3
    assert.same({}, m.violations)
    inf:release()
  end)

  it("relists on a 410 ERROR event at the start of a watch", function()
    start()
    srv:create_cm("kept")
    srv:create_cm("gone-while-down")
    local m = S.mirror()
    -- Listing: a watch list would be cut by watch-close-after too
    -- (10-watch_list_spec.lua relists by watch list after a 410).
    local inf = informer(m, { watch_list = "off" })
    watching(inf)
    S.faults(srv, "gone=1,watch-close-after=1")
    delete_cm(srv, "gone-while-down")
    S.converge(inf, S.server_state(srv), 10, m)
    helpers.eventually(function() return inf:stats().lists == 2 end, 10, "the relist")
    assert.equal(1, inf:stats().gone)
    assert.matches("410", inf:last_error())
    -- The DELETED event arrived before the watch ended: a known final state.
    assert.same({}, m.unknown_deletes)
    assert.same({ "gone-while-down" }, m.deleted)
    srv:create_cm("after")
    S.faults(srv, "")
    srv:create_cm("after-2")
    S.converge(inf, S.server_state(srv), 10, m)
    assert.same({}, m.violations)
    inf:release()
  end)

  it("lists consistently when the server is behind its resourceVersion (restored from a backup)", function()
    start()
    local ns = srv.ns
    for i = 1, 12 do srv:create_cm("old-" .. i) end
    local m = S.mirror()
    -- The watch resumed from the informer's version waits in silence (as
    -- on kube-apiserver): replaced after 1 s, its version then checked.
    local inf = informer(m, { idle_timeout = 1 })
    local rv = tonumber(inf:resource_version())
    -- The server goes away and comes back on the same address with an
    -- older history: the informer's resourceVersion is in its future.
    local port = srv.url:match(":(%d+)$")
    srv.proc:stop()
    srv.stopped = true
    srv = client.start{ no_namespace = true, args = { "--listen", "127.0.0.1:" .. port } }
    srv.ns = ns
    assert.equal(201, (srv:request("POST", "/api/v1/namespaces",
      { apiVersion = "v1", kind = "Namespace", metadata = { name = ns } })))
    srv:create_cm("new-1")
    assert.is_true(tonumber(srv:create_cm("new-2").metadata.resourceVersion) < rv)
    S.converge(inf, S.server_state(srv), 15, m)
    assert.matches("Too large resource version", inf:last_error())
    assert.equal(1, inf:stats().rv_stale)
    assert.equal(2, inf:stats().lists)
    assert.equal(12, #m.unknown_deletes)
    assert.same({}, m.violations)
    inf:release()
  end)

  it("resumes dropped watches from the last resourceVersion, losing and repeating nothing", function()
    start()
    local m = S.mirror()
    local inf = informer(m)
    S.faults(srv, "watch-close-after=3")
    for round = 1, 3 do
      for i = 1, 6 do srv:create_cm(("r%d-%d"):format(round, i), nil, { round = tostring(round) }) end
      for i = 1, 6 do put_cm(srv, ("r%d-%d"):format(round, i), { k = "v2" }) end
      for i = 1, 3 do delete_cm(srv, ("r%d-%d"):format(round, i)) end
      S.converge(inf, S.server_state(srv), 10, m)
      assert.same({}, m.violations)
    end
    assert.equal(18, m.adds)
    assert.equal(18, m.updates)
    assert.equal(9, m.deletes)
    assert.same({}, m.unknown_deletes)
    local st = inf:stats()
    assert.equal(1, st.lists)
    assert.equal(45, st.watch_events)
    assert.is_true(st.watches >= 15, "watches: " .. st.watches)
    inf:release()
  end)

  it("backs off while watches fail with 500, then resumes without a relist", function()
    start()
    srv:create_cm("a")
    local m = S.mirror()
    local inf = informer(m)
    S.faults(srv, "error-on=read,error-rate=1,error-code=500,watch-close-after=1")
    srv:create_cm("trigger")
    helpers.eventually(function() return inf:stats().failures >= 3 end, 10, "failed reconnects")
    assert.matches("HTTP 500", inf:last_error())
    srv:create_cm("while-failing")
    delete_cm(srv, "a")
    S.faults(srv, "")
    S.converge(inf, S.server_state(srv), 10, m)
    assert.equal(1, inf:stats().lists)
    assert.same({ "a" }, m.deleted)
    assert.same({}, m.unknown_deletes)
    assert.same({}, m.violations)
    inf:release()
  end)

  it("retries a failing list with backoff and syncs once it succeeds", function()
    start()
    srv:create_cm("a")
    -- A first informer caches discovery, so only the second one's list fails.
    local first = informer(nil, { labels = "first=yes" })
    S.faults(srv, "error-rate=1,error-code=503,retry-after=0")
    local m = S.mirror()
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, backoff_base = 0.02,
      backoff_max = 0.05, on_add = m.handlers.on_add, on_update = m.handlers.on_update,
      on_delete = m.handlers.on_delete }
    helpers.eventually(function() return inf:stats().failures >= 3 end, 10, "failed lists")
    assert.is_false(inf:has_synced())
    assert.equal(0, inf:stats().lists)
    assert.matches("HTTP 503", inf:last_error())
    S.faults(srv, "")
    srv:create_cm("b")
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    S.converge(inf, S.server_state(srv), 10, m)
    assert.same({}, m.violations)
    inf:release()
    first:release()
  end)

  it("honours Retry-After on 429 before trying again", function()
    start()
    srv:create_cm("a")
    local first = informer(nil, { labels = "first=yes" })
    S.faults(srv, "error-rate=1,error-code=429,retry-after=1")
    -- Without Retry-After this backoff would retry every 10-40 ms.
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, backoff_base = 0.01,
      backoff_max = 0.02 }
    helpers.eventually(function() return inf:stats().failures >= 1 end, 10, "a 429")
    core.loop.run_until(function() return false end, 0.6)
    assert.equal(1, inf:stats().failures)
    assert.matches("HTTP 429", inf:last_error())
    S.faults(srv, "")
    S.converge(inf, S.server_state(srv), 10)
    inf:release()
    first:release()
  end)

  it("restarts the watch after a malformed event and loses nothing", function()
    start{ "--bookmark-interval", "0.1" }
    local m = S.mirror()
    -- no short idle timeout: a watch the informer gave up as idle on a
    -- busy machine could take the one malformed event with it
    local inf = informer(m)
    S.faults(srv, "malformed-event=1")
    srv:create_cm("m1", { k = "first" })
    srv:create_cm("m2")
    S.converge(inf, S.server_state(srv), 10, m)
    assert.is_true(inf:stats().decode_errors >= 1)
    assert.equal(1, inf:stats().lists)
    assert.equal(2, m.adds)
    assert.same({}, m.violations)
    inf:release()
  end)

  it("restarts the watch after a truncated event and loses nothing", function()
    start()
    local m = S.mirror()
    local inf = informer(m)
    S.faults(srv, "truncate-event=1")
    srv:create_cm("t1", { k = "first" })
    srv:create_cm("t2")
    S.converge(inf, S.server_state(srv), 10, m)
    assert.equal(1, inf:stats().decode_errors)
    assert.matches("event truncated", inf:last_error())
    assert.equal(1, inf:stats().lists)
    assert.equal(2, m.adds)
    assert.same({}, m.violations)
    inf:release()
  end)

  it("replaces a watch that stays silent for idle_timeout", function()
    -- Bookmarks every 0.1 s keep a healthy watch from ever looking idle.
    start{ "--bookmark-interval", "0.1" }
    local m = S.mirror()
    local inf = informer(m, { idle_timeout = 0.5 })
    core.loop.run_until(function() return false end, 0.8)
    assert.equal(0, inf:stats().failures)
    -- End the open watch; the next ones hang (no headers, no bytes).
    S.faults(srv, "delay=5,delay-on=watch,watch-close-after=1")
    srv:create_cm("before")
    helpers.eventually(function() return inf:stats().failures >= 2 end, 10, "idle timeouts")
    assert.matches("idle timeout", inf:last_error())
    srv:create_cm("while-hung")
    S.faults(srv, "")
    S.converge(inf, S.server_state(srv), 10, m)
    assert.equal(1, inf:stats().lists)
    assert.same({}, m.violations)
    inf:release()
  end)
end)
