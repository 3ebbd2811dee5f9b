-- WATCH: initial state, from a resourceVersion, selectors, bookmarks, timeouts, 410.
local client = require("support.apiserver_client")

describe("apiserver WATCH", function()
  local srv
  setup(function() srv = client.start({ args = { "--bookmark-interval", "0.3" } }) end)
  teardown(function() srv:stop() end)

  it("starts with ADDED for existing objects, then streams changes", function()
    srv:create_cm("w1")
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1")
    -- other writers' objects (a cluster's kube-root-ca.crt) come too, also as ADDED
    local function named(name)
      return function(e)
        assert.equal("ADDED", e.type, e.object and e.object.metadata.name)
        return e.object.metadata.name == name
      end
    end
    assert.is_table(w:until_event(named("w1")), "an ADDED event for w1")
    srv:create_cm("w2")
    assert.is_table(w:until_event(named("w2")), "an ADDED event for w2")
    w:stop()
  end)

  it("replays MODIFIED and DELETED from a resourceVersion, in order", function()
    local cm = srv:create_cm("w3")
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=true&resourceVersion=" ..
      cm.metadata.resourceVersion)
    cm.data = { k = "changed" }
    local code, upd = srv:request("PUT", srv:ns_path("configmaps", "w3"), cm)
    assert.equal(200, code)
    assert.equal(200, (srv:request("DELETE", srv:ns_path("configmaps", "w3"))))
    local ev = w:event()
    assert.equal("MODIFIED", ev.type)
    assert.equal("changed", ev.object.data.k)
    assert.equal(upd.metadata.resourceVersion, ev.object.metadata.resourceVersion)
    ev = w:event()
    assert.equal("DELETED", ev.type)
    assert.equal("w3", ev.object.metadata.name)
    assert.is_true(tonumber(ev.object.metadata.resourceVersion) > tonumber(upd.metadata.resourceVersion))
    w:stop()
  end)

  it("filters by label selector and sends DELETED when an object leaves it", function()
    local cm = srv:create_cm("sel", nil, { color = "red" })
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&labelSelector=color%3Dred&resourceVersion=" ..
      cm.metadata.resourceVersion)
    srv:create_cm("other", nil, { color = "blue" })
    cm.metadata.labels = { color = "blue" }
    local code, upd = srv:request("PUT", srv:ns_path("configmaps", "sel"), cm)
    assert.equal(200, code)
    local ev = w:event()
    assert.equal("DELETED", ev.type)
    assert.equal("sel", ev.object.metadata.name)
    assert.equal(upd.metadata.resourceVersion, ev.object.metadata.resourceVersion)
    upd.metadata.labels = { color = "red" }
    srv:request("PUT", srv:ns_path("configmaps", "sel"), upd)
    ev = w:event()
    assert.equal("ADDED", ev.type)
    assert.equal("red", ev.object.metadata.labels.color)
    w:stop()
  end)

  it("filters by field selector", function()
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&fieldSelector=metadata.name%3Dpick")
    srv:create_cm("skip")
    srv:create_cm("pick")
    local ev = w:event()
    assert.equal("pick", ev.object.metadata.name)
    w:stop()
  end)

  it("ends the stream after timeoutSeconds", function()
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&timeoutSeconds=1&resourceVersion=" ..
      select(2, srv:request("GET", srv:ns_path("configmaps"))).metadata.resourceVersion)
    assert.is_true(w:ends(10))
    w:stop()
  end)

  it("sends BOOKMARK events with allowWatchBookmarks #devonly", function()
    if srv.real then
      return pending(client.DEV_ONLY .. "kube-apiserver sends a bookmark about once a minute; " ..
                     "the dev server every --bookmark-interval seconds")
    end
    local _, l = srv:request("GET", srv:ns_path("configmaps"))
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&allowWatchBookmarks=true&resourceVersion=" ..
      l.metadata.resourceVersion)
    local ev = w:event(5)
    assert.equal("BOOKMARK", ev.type)
    assert.equal("ConfigMap", ev.object.kind)
    assert.is_true(tonumber(ev.object.metadata.resourceVersion) >= tonumber(l.metadata.resourceVersion))
    assert.is_nil(ev.object.metadata.name)
    w:stop()
  end)

  it("answers sendInitialEvents with the state and an initial-events-end BOOKMARK", function()
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&sendInitialEvents=true" ..
      "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
    local ev = w:until_event(function(e) return e.type == "BOOKMARK" end)
    assert.equal("true", ev.object.metadata.annotations["k8s.io/initial-events-end"])
    w:stop()
  end)

  it("rejects an invalid selector on a watch with 400", function()
    local code, st = srv:request("GET", srv:ns_path("configmaps") .. "?watch=1&labelSelector=a%20in%20b")
    assert.equal(400, code)
    assert.equal("BadRequest", st.reason)
  end)
end)

describe("apiserver WATCH 410 #devonly", function()
  if client.dev_only("--history N (how far back a WATCH may start) cannot be set on " ..
                     "kube-apiserver") then return end
  local srv
  setup(function() srv = client.start({ args = { "--history", "2" } }) end)
  teardown(function() srv:stop() end)

  it("sends one ERROR event with 410 Expired for a too-old resourceVersion", function()
    local first = srv:create_cm("g1")
    for i = 2, 6 do srv:create_cm("g" .. i) end
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&resourceVersion=" ..
      first.metadata.resourceVersion)
    local ev = w:event()
    assert.equal("ERROR", ev.type)
    assert.equal("Status", ev.object.kind)
    assert.equal(410, ev.object.code)
    assert.equal("Expired", ev.object.reason)
    assert.matches("^too old resource version: %d+ %(%d+%)$", ev.object.message)
    assert.is_true(w:ends(5))
    w:stop()
  end)
end)
