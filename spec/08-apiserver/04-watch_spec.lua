-- WATCH: initial state, from a resourceVersion, selectors, bookmarks, timeouts, 410.
local client = require("support.apiserver_client")
local helpers = require("helpers")

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

  -- Reads events up to the first BOOKMARK: the ADDED objects by name, and
  -- the bookmark (nil if the stream ends or stalls first).
  local function state_then_bookmark(w)
    local added = {}
    while true do
      local ev = w:event(10)
      if not ev then return added, nil end
      if ev.type == "BOOKMARK" then return added, ev end
      assert.equal("ADDED", ev.type)
      added[ev.object.metadata.name] = ev.object
    end
  end

  it("answers sendInitialEvents with the state and an initial-events-end BOOKMARK", function()
    local a = srv:create_cm("wl-a")
    local b = srv:create_cm("wl-b")
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&sendInitialEvents=true" ..
      "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
    local added, ev = state_then_bookmark(w)
    assert.is_table(ev, "the initial-events-end bookmark")
    assert.equal(a.metadata.resourceVersion, added["wl-a"].metadata.resourceVersion)
    assert.equal(b.metadata.resourceVersion, added["wl-b"].metadata.resourceVersion)
    -- An empty object of the kind, with the version and the annotation.
    assert.equal("ConfigMap", ev.object.kind)
    assert.equal("v1", ev.object.apiVersion)
    assert.same({ ["k8s.io/initial-events-end"] = "true" }, ev.object.metadata.annotations)
    assert.is_nil(ev.object.metadata.name)
    assert.is_true(tonumber(ev.object.metadata.resourceVersion) >= tonumber(b.metadata.resourceVersion))
    -- Then the stream goes on as a watch (periodic bookmarks may come
    -- first: both servers send them).
    srv:create_cm("wl-c")
    local c = w:event(10)
    while c and c.type == "BOOKMARK" do c = w:event(10) end
    assert.equal("ADDED", c.type)
    assert.equal("wl-c", c.object.metadata.name)
    w:stop()
  end)

  it("streams the current state for a watch list from an older resourceVersion", function()
    local cm = srv:create_cm("wl-old")
    cm.data = { k = "new" }
    assert.equal(200, (srv:request("PUT", srv:ns_path("configmaps", "wl-old"), cm)))
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&sendInitialEvents=true" ..
      "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion=" ..
      cm.metadata.resourceVersion)
    local added, ev = state_then_bookmark(w)
    assert.is_table(ev, "the initial-events-end bookmark")
    assert.equal("true", ev.object.metadata.annotations["k8s.io/initial-events-end"])
    assert.same({ k = "new" }, added["wl-old"].data)
    w:stop()
  end)

  it("ends a watch from \"\" with allowWatchBookmarks with the same bookmark (WatchList defaulting)", function()
    srv:create_cm("legacy")
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&allowWatchBookmarks=true")
    local added, ev = state_then_bookmark(w)
    assert.is_table(added.legacy)
    assert.is_table(ev, "the initial-events-end bookmark")
    assert.equal("true", ev.object.metadata.annotations["k8s.io/initial-events-end"])
    w:stop()
  end)

  it("sends the state without a bookmark when bookmarks are not allowed", function()
    srv:create_cm("nobm")
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&sendInitialEvents=true" ..
      "&resourceVersionMatch=NotOlderThan")
    assert.is_table(w:until_event(function(e)
      assert.equal("ADDED", e.type)
      return e.object.metadata.name == "nobm"
    end, 10))
    srv:create_cm("nobm-after")
    assert.is_table(w:until_event(function(e)
      assert.equal("ADDED", e.type, "no BOOKMARK without allowWatchBookmarks")
      return e.object.metadata.name == "nobm-after"
    end, 10))
    w:stop()
  end)

  it("starts from now with sendInitialEvents=false", function()
    srv:create_cm("existing")
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=1&sendInitialEvents=false" ..
      "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
    -- The watch is open once a write made now shows up; nothing before it
    -- but periodic bookmarks (this server sends one every 0.3 s), none of
    -- them the initial-events-end one.
    -- Each round has its own deadline: the bookmarks come every 0.3 s, so
    -- waiting for a quiet 0.5 s never ended when the first write landed
    -- before curl's watch was open (a busy machine), and no later write
    -- was made.
    local fresh
    for i = 1, 20 do
      srv:create_cm("fresh-" .. i)
      local deadline = helpers.now() + (i == 20 and 10 or 0.5)
      repeat
        fresh = w:event(math.max(0.01, deadline - helpers.now()))
        if fresh and fresh.type == "BOOKMARK" then
          local ann = fresh.object.metadata.annotations
          assert.is_nil(ann and ann["k8s.io/initial-events-end"], "no initial-events-end bookmark")
        end
      until not fresh or fresh.type ~= "BOOKMARK" or helpers.now() >= deadline
      if fresh and fresh.type ~= "BOOKMARK" then break end
      fresh = nil
    end
    assert.is_table(fresh)
    assert.equal("ADDED", fresh.type)
    assert.matches("^fresh%-", fresh.object.metadata.name)
    w:stop()
  end)

  -- kube-apiserver's ListOptions validation, word for word.
  local function invalid(query, message, causes)
    local code, st = srv:request("GET", srv:ns_path("configmaps") .. query)
    assert.equal(422, code)
    assert.equal("Invalid", st.reason)
    assert.equal('ListOptions.meta.k8s.io "" is invalid: ' .. message, st.message)
    assert.equal("meta.k8s.io", st.details.group)
    assert.equal("ListOptions", st.details.kind)
    assert.same(causes, st.details.causes)
  end

  it("refuses sendInitialEvents without resourceVersionMatch=NotOlderThan", function()
    invalid("?watch=1&sendInitialEvents=true&allowWatchBookmarks=true",
      "resourceVersionMatch: Forbidden: sendInitialEvents requires setting " ..
      "resourceVersionMatch to NotOlderThan",
      { { reason = "FieldValueForbidden", field = "resourceVersionMatch",
          message = "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan" } })
    invalid("?watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1",
      "[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch " ..
      "to NotOlderThan, resourceVersionMatch: Unsupported value: \"Exact\": supported values: " ..
      "\"NotOlderThan\"]",
      { { reason = "FieldValueForbidden", field = "resourceVersionMatch",
          message = "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan" },
        { reason = "FieldValueNotSupported", field = "resourceVersionMatch",
          message = 'Unsupported value: "Exact": supported values: "NotOlderThan"' } })
  end)

  it("refuses resourceVersionMatch on a watch without sendInitialEvents", function()
    invalid("?watch=1&resourceVersionMatch=NotOlderThan&resourceVersion=1",
      "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless " ..
      "sendInitialEvents is provided",
      { { reason = "FieldValueForbidden", field = "resourceVersionMatch",
          message = "Forbidden: resourceVersionMatch is forbidden for watch unless " ..
                    "sendInitialEvents is provided" } })
  end)

  it("refuses sendInitialEvents on a LIST", function()
    invalid("?sendInitialEvents=true",
      "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
      { { reason = "FieldValueForbidden", field = "sendInitialEvents",
          message = "Forbidden: sendInitialEvents is forbidden for list" } })
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
