-- Streaming lists (KEP-3157, client-go's WatchListClient): an informer
-- gets its state from one WATCH with sendInitialEvents=true and
-- resourceVersionMatch=NotOlderThan, ending at the BOOKMARK annotated
-- "k8s.io/initial-events-end", and falls back to LIST on a server that
-- refuses.  The state must be the one a (paged) LIST gives, reach the
-- handlers the same way, survive cut streams and 410s, and lose nothing
-- written while it streams.
--
-- The first specs run against the cluster in KUBECONFIG too; refusal, cut
-- streams and 410s need the dev server's faults (--admin).
local helpers = require("helpers")
local client = require("support.apiserver_client")
local core = require("luna.core")
local S = require("07-informer.support")

local LABEL = "set=wl"

-- Writes n ConfigMaps labelled set=wl, many in flight at once, on the luna
-- loop; returns when all are created.
local function create_many(srv, n, prefix)
  local w, done, failed = S.writer(srv), 0, {}
  local next_i, in_flight = 1, 0
  local function pump()
    while next_i <= n and in_flight < 32 do
      local name = ("%s-%05d"):format(prefix, next_i)
      next_i = next_i + 1
      in_flight = in_flight + 1
      w:request("POST", srv:ns_path("configmaps"), S.configmap(name, { i = name }, { set = "wl" }),
        function(status)
          in_flight = in_flight - 1
          done = done + 1
          if status ~= 201 then failed[#failed + 1] = name .. ": " .. status end
          pump()
        end)
    end
  end
  pump()
  assert(core.loop.run_until(function() return done == n end, 120), "creates: " .. done .. " of " .. n)
  assert.same({}, failed)
end

-- Every on_add call's in_initial_list flag, by key.
local function recording(m)
  local initial = {}
  local on_add = m.handlers.on_add
  m.handlers.on_add = function(o, in_initial_list)
    initial[o:key()] = in_initial_list
    on_add(o)
  end
  return initial
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

describe("watch list", function()
  local srv, env
  S.server_each_test({ args = { "--admin" } }, function(s, e) srv, env = s, e end)

  it("syncs the objects a paged LIST gives, with the same handler calls", function()
    create_many(srv, 1200, "big")
    local mw, ml = S.mirror(), S.mirror()
    local initial_w, initial_l = recording(mw), recording(ml)
    local streamed = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = LABEL,
      watch_list = "on", on_add = mw.handlers.on_add, on_update = mw.handlers.on_update,
      on_delete = mw.handlers.on_delete }
    -- Another key (a field selector) so the two are different informers.
    local paged = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = LABEL,
      fields = "metadata.namespace=" .. srv.ns, watch_list = "off", page_size = 100,
      on_add = ml.handlers.on_add, on_update = ml.handlers.on_update,
      on_delete = ml.handlers.on_delete }
    helpers.eventually(function() return streamed:has_synced() and paged:has_synced() end, 60, "sync")
    local server = S.server_state(srv, "set%3Dwl")
    assert.equal(1200, count(server))
    assert.same(server, S.cache_state(streamed))
    assert.same(server, S.cache_state(paged))
    -- One add per object, each flagged as part of the initial list, and
    -- nothing else: the state reached the handlers at once, as a LIST's.
    for _, m in ipairs{ mw, ml } do
      assert.same(server, m.state)
      assert.equal(1200, m.adds)
      assert.equal(0, m.updates)
      assert.equal(0, m.deletes)
      assert.same({}, m.violations)
    end
    for k in pairs(server) do
      assert.is_true(initial_w[k], k)
      assert.is_true(initial_l[k], k)
    end
    local st = streamed:stats()
    assert.equal(1, st.lists)
    assert.equal(1, st.watch_lists)
    assert.equal(0, st.list_pages)
    assert.equal(0, st.watch_list_fallbacks)
    assert.equal(1200, st.watch_list_items)
    assert.equal(1, st.watches, "the watch list goes on as the watch")
    assert.equal(0, paged:stats().watch_lists)
    assert.is_true(paged:stats().list_pages >= 1)
    -- The stream goes on as the watch: a change after the sync arrives
    -- through it, as an update, without another request.
    srv:request("PUT", srv:ns_path("configmaps", "big-00007"),
      S.configmap("big-00007", { changed = "yes" }, { set = "wl" }))
    S.converge(streamed, S.server_state(srv, "set%3Dwl"), 20, mw)
    assert.equal(1, mw.updates)
    assert.equal(1, streamed:stats().watches)
    assert.equal(1, streamed:stats().watch_events)
    assert.same({}, mw.violations)
    streamed:release()
    paged:release()
  end)

  it("ends its state at the initial-events-end bookmark's resourceVersion", function()
    create_many(srv, 20, "rv")
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = LABEL,
      watch_list = "on" }
    helpers.eventually(function() return inf:has_synced() end, 20, "sync")
    -- The bookmark's version is at least that of every object streamed
    -- (a consistent read: nothing older than the request).
    local rv = tonumber(inf:resource_version())
    for _, v in pairs(S.cache_state(inf)) do assert.is_true(tonumber(v) <= rv) end
    assert.is_true(inf:stats().bookmarks >= 1)
    inf:release()
  end)

  it("loses nothing written while the state streams", function()
    -- On the dev server the stream is held back after its state is taken
    -- (hold-watches) until the faults are set again, so these writes land
    -- inside it however slow the machine; on a cluster they race with it,
    -- and must come out the same.
    local admin = not srv.real
    create_many(srv, 300, "during")
    -- A first informer resolves the kind, so the second one's watch list
    -- starts at once; one round trip later the server has it.
    local first = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = "first=yes" }
    helpers.eventually(function() return first:has_synced() end, 20, "discovery")
    if admin then S.faults(srv, "hold-watches=1") end
    local m = S.mirror()
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = LABEL,
      on_add = m.handlers.on_add, on_update = m.handlers.on_update, on_delete = m.handlers.on_delete }
    assert.equal(1, inf:stats().watches)
    local w = S.writer(srv)
    if admin then
      -- The count goes to 0 once the watch list has taken its state.
      assert(core.loop.run_until(function()
        local _, faults = w:call("GET", "/luna/v1/faults")
        return faults["hold-watches"] == 0
      end, 20), "the watch list to reach the server")
    end
    local answered, failed = 0, {}
    local function done(status, body)
      answered = answered + 1
      if status < 200 or status > 201 then
        failed[#failed + 1] = status .. " " .. tostring(body and body.message)
      end
    end
    for i = 1, 40 do
      local name = ("during-%05d"):format(i)
      w:request("PUT", srv:ns_path("configmaps", name), S.configmap(name, { v = "2" }, { set = "wl" }), done)
    end
    for i = 41, 60 do w:request("DELETE", srv:ns_path("configmaps", ("during-%05d"):format(i)), nil, done) end
    for i = 1, 20 do
      w:request("POST", srv:ns_path("configmaps"),
        S.configmap(("late-%05d"):format(i), nil, { set = "wl" }), done)
    end
    assert(core.loop.run_until(function() return answered == 80 end, 60), "writes answered")
    assert.same({}, failed)
    if admin then
      assert.is_false(inf:has_synced(), "the writes landed before the state arrived")
      S.faults(srv, "")
    end
    helpers.eventually(function() return inf:has_synced() end, 30, "sync")
    S.converge(inf, S.server_state(srv, "set%3Dwl"), 30, m)
    assert.equal(300 - 20 + 20, count(m.state))
    assert.same({}, m.violations)
    if admin then
      -- Taken before the writes: the state holds the old objects, the
      -- writes follow on the same stream.
      assert.equal(300, m.adds - 20)
      assert.equal(40, m.updates)
      assert.equal(20, m.deletes)
      assert.same({}, m.unknown_deletes)
      assert.equal(1, inf:stats().watches)
      assert.equal(300, inf:stats().watch_list_items)
    end
    inf:release()
    first:release()
  end)
end)

-- A server that refuses watch lists: the dev server with its WatchList
-- gate off (fault watch-list-off), or a cluster started with
-- KUBE_FEATURE_GATES=...,WatchList=false (docs/kube.md).
describe("watch list refused by the server", function()
  local srv, env
  S.server_each_test({ args = { "--faults", "watch-list-off=1" } }, function(s, e) srv, env = s, e end)

  it("is answered 422 Invalid, and the informer lists instead", function()
    local code, st = srv:request("GET", srv:ns_path("configmaps") .. "?watch=1&sendInitialEvents=true" ..
      "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1")
    if code == 200 then
      return pending("this cluster serves watch lists: start it with " ..
                     "KUBE_FEATURE_GATES=ShardedListAndWatch=true,WatchList=false to run this")
    end
    local message = 'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: ' ..
      "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
    assert.equal(422, code)
    assert.equal(message, st.message)
    assert.same({ { reason = "FieldValueForbidden", field = "sendInitialEvents",
      message = "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList " ..
                "feature gate is enabled" } }, st.details.causes)
    create_many(srv, 50, "refused")
    local m = S.mirror()
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = LABEL,
      on_add = m.handlers.on_add, on_update = m.handlers.on_update, on_delete = m.handlers.on_delete }
    helpers.eventually(function() return inf:has_synced() end, 20, "sync")
    local stats = inf:stats()
    assert.equal(1, stats.watch_list_fallbacks)
    assert.equal(0, stats.watch_lists)
    assert.equal(1, stats.lists)
    assert.equal("watch list: HTTP 422: " .. message, inf:last_error())
    assert.same(S.server_state(srv, "set%3Dwl"), S.cache_state(inf))
    assert.equal(50, m.adds)
    -- The plain watch after the LIST carries the changes.
    srv:request("DELETE", srv:ns_path("configmaps", "refused-00001"))
    S.converge(inf, S.server_state(srv, "set%3Dwl"), 20, m)
    assert.same({ "refused-00001" }, m.deleted)
    assert.same({}, m.violations)
    inf:release()
  end)
end)

describe("luna run --watch-list", function()
  local luna_env = require("support.luna_env")
  local CONTROLLER = [[
local luna = require "luna"
return luna.controller { name = "wl", watch = { "v1/ConfigMap" }, reconcile = function(req) end }
]]
  local function via(opts)
    opts.sources = { ["wl.lua"] = CONTROLLER }
    local env = luna_env.start(opts)
    local out = env:stop()
    local how = out:match("reflector listed informer=\"v1/ConfigMap [^\n]*via=(%b\"\")") or
                out:match("reflector listed informer=\"v1/ConfigMap [^\n]*via=(%w+)")
    return how
  end

  it("streams by default, lists with off, from the flag or LUNA_WATCH_LIST", function()
    assert.equal('"watch list"', via{})
    assert.equal("list", via{ args = { "--watch-list", "off" } })
    assert.equal("list", via{ env = { LUNA_WATCH_LIST = "off" } })
    assert.equal('"watch list"', via{ args = { "--watch-list=on" }, env = { LUNA_WATCH_LIST = "off" } })
  end)

  it("refuses a bad mode with a clear error", function()
    local out, rc = helpers.run(helpers.luna .. " run --watch-list sometimes /tmp")
    assert.equal(2, rc, out)
    assert.matches("luna run: --watch-list=sometimes: want auto, on or off", out, 1, true)
    out, rc = helpers.run("LUNA_WATCH_LIST=yes " .. helpers.luna .. " run /tmp")
    assert.equal(2, rc, out)
    assert.matches("luna run: LUNA_WATCH_LIST=yes: want auto, on or off", out, 1, true)
  end)
end)

-- No server changes the state inside a watch list's initial events, but
-- the state must come out right if one did (a scripted stream from the
-- spec/fixtures/httpd server).
describe("watch list whose initial events change the state", function()
  it("holds the state at the end of the initial events", function()
    local server = helpers.spawn({ helpers.fixtures .. "/httpd" })
    local url = select(2, server:expect("listening on (http://127%.0%.0%.1:%d+)"))
    local env = assert(core.informer.env{ kubeconfig = require("support.luna_env").kubeconfig_file(url) })
    local m = S.mirror()
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = "wl", watch_list = "on",
      on_add = m.handlers.on_add, on_update = m.handlers.on_update, on_delete = m.handlers.on_delete }
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    assert.same({ ["wl/a"] = "4", ["wl/c"] = "3", ["wl/d"] = "6" }, S.cache_state(inf))
    assert.same({ v = "2" }, core.json.decode(inf:get("wl/a"):json()).data)
    assert.equal(3, m.adds)
    assert.equal(0, m.updates)
    assert.equal(0, m.deletes)
    assert.equal("7", inf:resource_version())
    local st = inf:stats()
    assert.equal(6, st.watch_list_items)
    assert.equal(2, st.bookmarks)
    assert.equal(1, st.watch_lists)
    assert.equal(0, st.watch_events)
    inf:release()
    env = nil
    collectgarbage()
    server:stop()
  end)
end)

if client.real() then
  describe("watch list faults", function()
    pending(client.DEV_ONLY .. "a server refusing watch lists, cut streams and 410s are " ..
            "injected (--admin faults); a real cluster cannot be told to produce them")
  end)
  return
end

describe("watch list faults", function()
  local srv, env
  S.server_each_test({ args = { "--admin" } }, function(s, e) srv, env = s, e end)

  local function informer(m, extra)
    local o = { kind = "v1/ConfigMap", namespace = srv.ns, backoff_base = 0.02, backoff_max = 0.05 }
    for k, v in pairs(m and m.handlers or {}) do o[k] = v end
    for k, v in pairs(extra or {}) do o[k] = v end
    return env:informer(o)
  end

  it("falls back to LIST on a server that refuses, and tries again at the next relist", function()
    for i = 1, 5 do srv:create_cm("old-" .. i) end
    S.faults(srv, "watch-list-off=1")
    local m = S.mirror()
    local inf = informer(m, { min_watch_timeout = 1, max_watch_timeout = 1.5 })
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    local st = inf:stats()
    assert.equal(1, st.watch_list_fallbacks)
    assert.equal(1, st.lists)
    assert.equal(0, st.watch_lists)
    assert.is_true(st.list_pages >= 1)
    assert.matches("HTTP 422: ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: " ..
      "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate " ..
      "is enabled", inf:last_error(), 1, true)
    S.converge(inf, S.server_state(srv), 10, m)
    -- The watch after the LIST is a plain one: changes arrive.
    srv:create_cm("new-1")
    S.converge(inf, S.server_state(srv), 10, m)
    -- A relist (the watch's next start gets 410) tries a watch list again:
    -- refused again, listed again.
    S.faults(srv, "watch-list-off=1,gone=1")
    helpers.eventually(function() return inf:stats().lists == 2 end, 10, "the relist")
    assert.equal(2, inf:stats().watch_list_fallbacks)
    assert.equal(0, inf:stats().watch_lists)
    -- Once the server serves watch lists, the next relist streams.
    S.faults(srv, "gone=1")
    helpers.eventually(function() return inf:stats().lists == 3 end, 10, "the streamed relist")
    assert.equal(1, inf:stats().watch_lists)
    assert.equal(2, inf:stats().watch_list_fallbacks)
    srv:create_cm("new-2")
    S.converge(inf, S.server_state(srv), 10, m)
    assert.equal(7, m.adds)
    assert.same({}, m.violations)
    inf:release()
  end)

  it("with watch_list = \"on\" keeps trying instead of listing", function()
    srv:create_cm("a")
    S.faults(srv, "watch-list-off=1")
    local inf = informer(nil, { watch_list = "on" })
    helpers.eventually(function() return inf:stats().failures >= 3 end, 10, "refusals")
    assert.is_false(inf:has_synced())
    assert.equal(0, inf:stats().list_pages)
    assert.equal(0, inf:stats().watch_list_fallbacks)
    assert.matches("HTTP 422", inf:last_error())
    S.faults(srv, "")
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    assert.equal(1, inf:stats().watch_lists)
    S.converge(inf, S.server_state(srv), 10)
    inf:release()
  end)

  it("starts over when the stream breaks before its end, with nothing applied twice", function()
    for i = 1, 30 do srv:create_cm(("cut-%02d"):format(i)) end
    -- The first watch list is cut inside its first event.
    S.faults(srv, "truncate-event=1")
    local m = S.mirror()
    local inf = informer(m)
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    S.converge(inf, S.server_state(srv), 10, m)
    local st = inf:stats()
    assert.equal(1, st.decode_errors)
    assert.equal(1, st.watch_lists)
    assert.equal(0, st.watch_list_fallbacks)
    assert.equal(2, st.watches)
    assert.equal(30, m.adds)
    assert.same({}, m.violations)
    inf:release()
  end)

  it("lists after streams that keep ending before the bookmark", function()
    for i = 1, 30 do srv:create_cm(("short-%02d"):format(i)) end
    -- Every stream ends after 10 events: no watch list can finish.
    S.faults(srv, "watch-close-after=10")
    local m = S.mirror()
    local inf = informer(m)
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    local st = inf:stats()
    -- Three watch lists cut short, then the LIST's watch.
    assert.equal(4, st.watches)
    assert.equal(1, st.watch_list_fallbacks)
    assert.equal(0, st.watch_lists)
    assert.equal(1, st.lists)
    assert.matches("ended before the initial%-events%-end bookmark", inf:last_error())
    S.faults(srv, "")
    srv:create_cm("after")
    S.converge(inf, S.server_state(srv), 10, m)
    assert.equal(31, m.adds)
    assert.same({}, m.violations)
    inf:release()
  end)

  it("streams again from a consistent read after 410 Gone", function()
    for i = 1, 5 do srv:create_cm("g" .. i) end
    S.faults(srv, "gone=1")
    local m = S.mirror()
    local inf = informer(m, { min_watch_timeout = 1, max_watch_timeout = 1.5 })
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    local st = inf:stats()
    assert.equal(1, st.gone)
    assert.equal(1, st.watch_lists)
    assert.equal(0, st.watch_list_fallbacks)
    assert.equal(0, st.list_pages)
    assert.matches("watch list: watch ERROR event 410", inf:last_error(), 1, true)
    -- A 410 on the established watch (its next start, after its
    -- timeout) relists by watch list too; a delete made meanwhile is seen.
    S.faults(srv, "gone=1")
    helpers.eventually(function() return inf:stats().gone == 2 end, 10, "the 410")
    helpers.eventually(function() return inf:stats().lists == 2 end, 10, "the relist")
    assert.equal(2, inf:stats().watch_lists)
    assert.equal(0, inf:stats().list_pages)
    srv:request("DELETE", srv:ns_path("configmaps", "g1"))
    S.converge(inf, S.server_state(srv), 10, m)
    assert.same({ "g1" }, m.deleted)
    assert.same({}, m.violations)
    inf:release()
  end)
end)
