-- A watch resumed from a resourceVersion the server has not reached: one
-- a lying server (or a corrupted event) carried, or every version an
-- informer holds after its server was restored from an older etcd backup.
-- kube-apiserver does not refuse such a watch: it waits for the version in
-- silence (no event, no bookmark) until the watch times out, so an
-- informer that simply resumed from the same version would be wedged for
-- ever (the hostile corpus's watch-rv-huge found it).  A watch that ends
-- having brought nothing makes the reflector check the version with a
-- one-item LIST (resourceVersionMatch=NotOlderThan): 504 "Too large
-- resource version" → a consistent relist.
--
-- The version comes from spec/fixtures/hostile_proxy.c in front of the
-- server, so this runs against the cluster in KUBECONFIG too, where the
-- silence is kube-apiserver's own.
local client = require("support.apiserver_client")
local core = require("luna.core")
local S = require("07-informer.support")
local RR = require("12-isolation.response_runner")

-- One ADDED event for a made-up object at a version far in the future,
-- then the end of the stream.
local PHANTOM = [[
HTTP/1.1 200 OK
Content-Type: application/json
Connection: close

{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"phantom","namespace":"@NS@","resourceVersion":"999999999999","uid":"phantom"}}}
]]

local function run_until(cond, secs, what)
  assert(core.loop.run_until(cond, secs), "timed out waiting for " .. what)
end

describe("a watch from a resourceVersion the server has not reached", function()
  local srv, proxy, env
  before_each(function()
    srv = client.start()
    proxy = RR.proxy(srv)
    env = assert(core.informer.env{ kubeconfig = proxy.kubeconfig })
  end)
  after_each(function()
    collectgarbage()
    if proxy then proxy:stop() end
    srv:stop()
  end)

  it("is served in silence by the server (no event, no bookmark); a watch list from it is refused",
    function()
      local cm = srv:create_cm("before")
      local future = tonumber(cm.metadata.resourceVersion) + 1000000
      -- The request the reflector makes, from the future version: 200, and
      -- nothing comes until the server ends it (timeoutSeconds).
      local code, _, raw = srv:request("GET", srv:ns_path("configmaps") ..
        "?watch=1&allowWatchBookmarks=true&timeoutSeconds=3&resourceVersion=" .. future)
      assert.equal(200, code)
      assert.equal("", (raw:gsub("%s", "")))
      -- A watch list (sendInitialEvents) from it: 200 and one ERROR event,
      -- a 504 Too large resource version; a LIST from it: 504.
      local code2, ev = srv:request("GET", srv:ns_path("configmaps") ..
        "?watch=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan" ..
        "&timeoutSeconds=3&resourceVersion=" .. future)
      assert.equal(200, code2)
      assert.equal("ERROR", ev and ev.type)
      assert.equal(504, ev.object.code)
      assert.matches("Too large resource version", ev.object.message)
      local code3, st3 = srv:request("GET", srv:ns_path("configmaps") ..
        "?limit=1&resourceVersionMatch=NotOlderThan&resourceVersion=" .. future)
      assert.equal(504, code3)
      assert.matches("Too large resource version", st3 and st3.message or "")
    end)

  for _, mode in ipairs({ "off", "on" }) do
    it(("is checked when the watch brings nothing, and the informer relists (watch_list=%s)"):format(mode),
      function()
        srv:create_cm("before")
        local m = S.mirror()
        local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, watch_list = mode,
          idle_timeout = 2, on_add = m.handlers.on_add, on_update = m.handlers.on_update,
          on_delete = m.handlers.on_delete }
        S.converge(inf, S.server_state(srv), 20, m)
        local coll = "/api/v1/namespaces/" .. srv.ns .. "/configmaps"
        proxy:arm("watch", coll, RR.compile(PHANTOM, { NS = srv.ns }))
        proxy:cut(coll)
        run_until(function() return m.state[srv.ns .. "/phantom"] ~= nil end, 20,
          "the phantom event to reach the handlers")
        -- The next watch asks for 999999999999: silent until the idle
        -- timeout, then the check finds the server behind it and the
        -- informer relists: the phantom goes, a later write arrives.
        -- (Resumed from the same version, it would wait for ever.)
        srv:create_cm("after")
        S.converge(inf, S.server_state(srv), 60, m)
        assert.is_nil(m.state[srv.ns .. "/phantom"])
        assert.same({}, m.violations)
        assert.is_true(inf:stats().rv_stale >= 1)
        assert.is_true(inf:stats().lists >= 2)
        assert.matches("has not reached resourceVersion 999999999999", inf:last_error())
        inf:release()
      end)
  end

  it("is not mistaken for one when the collection is only quiet", function()
    srv:create_cm("quiet")
    local inf = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, watch_list = "off",
      idle_timeout = 1 }
    run_until(function() return inf:has_synced() end, 20, "the sync")
    -- Silent watches (the dev server's bookmarks come once a minute here)
    -- are checked, found fine, and resumed: no relist.
    run_until(function() return inf:stats().rv_checks >= 2 end, 30, "two version checks")
    assert.equal(0, inf:stats().rv_stale)
    assert.equal(1, inf:stats().lists)
    srv:create_cm("later")
    S.converge(inf, S.server_state(srv), 20)
    inf:release()
  end)
end)

describe("luna run --watch-idle-timeout", function()
  local helpers = require("helpers")
  it("refuses a duration outside 1s..1h with a clear error", function()
    for _, bad in ipairs({ "0", "500ms", "2h", "soon", "-1s" }) do
      local out, rc = helpers.run(helpers.luna .. " run --watch-idle-timeout=" .. bad .. " /tmp")
      assert.equal(2, rc, out)
      assert.matches("luna run: --watch-idle-timeout=" .. bad .. ": want a duration from 1s to 1h", out, 1, true)
    end
  end)
end)
