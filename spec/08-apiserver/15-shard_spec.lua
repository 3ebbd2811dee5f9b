-- KEP-5866 sharded LIST and WATCH (shardSelector, metadata.shardInfo).
--
-- Against the dev server, and against a real control plane run with the
-- ShardedListAndWatch feature gate (alpha in v1.36, off by default):
--   make test-kube SPEC=spec/08-apiserver/15-shard_spec.lua \
--     KUBE_FEATURE_GATES=ShardedListAndWatch=true
-- Without the gate the real server ignores the parameter; the spec then
-- reports itself pending rather than failing.
local client = require("support.apiserver_client")
local core = require("luna.core")
local shard = core.shard

local N = 30
local TOP = "0x10000000000000000"

local function esc(s)
  return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

local function split(n, field)
  local out = {}
  for i = 0, n - 1 do
    local a, b = shard.split_range(i, n)
    out[#out + 1] = ("shardRange(object.metadata.%s, '%s', '%s')"):format(field or "uid", a, b)
  end
  return out
end

describe("apiserver sharded LIST and WATCH", function()
  local srv, uids, gated
  setup(function()
    srv = client.start()
    uids = {}
    for i = 1, N do
      local cm = srv:create_cm(("s%02d"):format(i))
      uids[cm.metadata.name] = cm.metadata.uid
    end
    local code, l = srv:request("GET", srv:ns_path("configmaps") .. "?shardSelector=" .. esc(split(2)[1]))
    assert.equal(200, code)
    gated = l.metadata.shardInfo ~= nil
  end)
  teardown(function() srv:stop() end)

  -- Pending unless the server serves KEP-5866 (the dev server always does).
  local function served()
    if gated then return true end
    pending("the control plane runs without the ShardedListAndWatch feature gate: run with "
      .. "KUBE_FEATURE_GATES=ShardedListAndWatch=true")
    return false
  end

  local function list(query)
    local code, l, raw = srv:request("GET", srv:ns_path("configmaps") .. query)
    assert.equal(200, code, raw)
    return l
  end

  -- The ConfigMaps this spec made, name → uid, of a list.
  local function own(l)
    local out = {}
    for _, it in ipairs(l.items) do
      if uids[it.metadata.name] then out[it.metadata.name] = it.metadata.uid end
    end
    return out
  end

  it("splits a LIST into disjoint shards that cover it, each echoing shardInfo", function()
    if not served() then return end
    for _, n in ipairs({ 2, 3 }) do
      local seen = {}
      for _, sel in ipairs(split(n)) do
        local l = list("?shardSelector=" .. esc(sel))
        assert.same({ selector = sel }, l.metadata.shardInfo)
        assert.is_nil(l.metadata.remainingItemCount)
        for _, it in ipairs(l.items) do
          assert.is_true(shard.matches(sel, it.metadata.namespace, it.metadata.uid),
            it.metadata.name .. " is outside " .. sel)
        end
        for name in pairs(own(l)) do
          assert.is_nil(seen[name], name .. " is in two shards")
          seen[name] = true
        end
      end
      for name in pairs(uids) do assert.is_true(seen[name], name .. " is in no shard of " .. n) end
    end
  end)

  it("echoes the selector in the server's canonical form", function()
    if not served() then return end
    local a, b = shard.split_range(0, 2)
    local sent = (" ( shardRange( object.metadata.uid ,\"%s\",'%s' ) )"):format(a, b)
    local l = list("?shardSelector=" .. esc(sent))
    assert.equal(split(2)[1], l.metadata.shardInfo.selector)
  end)

  it("ORs ranges: the halves joined select everything", function()
    if not served() then return end
    local both = table.concat(split(2), " || ")
    local l = list("?shardSelector=" .. esc(both))
    assert.equal(both, l.metadata.shardInfo.selector)
    local count = 0
    for _ in pairs(own(l)) do count = count + 1 end
    assert.equal(N, count)
  end)

  it("pages a sharded LIST, shardInfo on every page", function()
    if not served() then return end
    local sel = split(2)[2]
    local whole = own(list("?shardSelector=" .. esc(sel)))
    local paged, cont, pages = {}, nil, 0
    repeat
      local l = list("?limit=4&shardSelector=" .. esc(sel) .. (cont and ("&continue=" .. esc(cont)) or ""))
      pages = pages + 1
      assert.same({ selector = sel }, l.metadata.shardInfo)
      assert.is_true(#l.items <= 4)
      for name, u in pairs(own(l)) do paged[name] = u end
      cont = l.metadata.continue
      if cont == "" then cont = nil end
    until not cont
    assert.is_true(pages > 1)
    assert.same(whole, paged)
  end)

  it("shards by namespace across all namespaces", function()
    if not served() then return end
    for _, sel in ipairs(split(2, "namespace")) do
      local code, l = srv:request("GET", "/api/v1/configmaps?shardSelector=" .. esc(sel))
      assert.equal(200, code)
      assert.equal(sel, l.metadata.shardInfo.selector)
      local mine = shard.matches(sel, srv.ns, "")
      local found = false
      for _, it in ipairs(l.items) do
        assert.is_true(shard.matches(sel, it.metadata.namespace, ""), it.metadata.namespace)
        if it.metadata.namespace == srv.ns then found = true end
      end
      assert.equal(mine, found)
    end
  end)

  it("takes an empty shardSelector as none", function()
    local l = list("?shardSelector=")
    assert.is_nil(l.metadata.shardInfo)
    local count = 0
    for _ in pairs(own(l)) do count = count + 1 end
    assert.equal(N, count)
  end)

  it("filters a WATCH the same way", function()
    if not served() then return end
    local sel = split(2)[1]
    local rv = list("?shardSelector=" .. esc(sel)).metadata.resourceVersion
    local w = srv:watch(srv:ns_path("configmaps") .. "?watch=true&resourceVersion=" .. rv
      .. "&shardSelector=" .. esc(sel))
    local expect, last = {}, nil
    for i = 1, 20 do
      local cm = srv:create_cm(("w%02d"):format(i))
      if shard.matches(sel, srv.ns, cm.metadata.uid) then
        expect[cm.metadata.name] = true
        last = cm.metadata.name
      end
    end
    assert.truthy(last, "no new ConfigMap fell into the shard")
    -- Events come in order: by the last one in the shard, every other
    -- creation has been either sent (a bug) or filtered.
    local got = {}
    local ev = w:until_event(function(e)
      if e.type == "ADDED" then
        local o = e.object
        assert.is_true(shard.matches(sel, o.metadata.namespace, o.metadata.uid),
          o.metadata.name .. " is outside the shard")
        got[o.metadata.name] = true
      end
      return e.type == "ADDED" and e.object.metadata.name == last
    end, 20)
    w:stop()
    assert.truthy(ev, "the watch did not deliver " .. last)
    assert.same(expect, got)
  end)

  it("deletes one shard's objects with DELETE on the collection (it lists through the registry)",
    function()
      if not served() then return end
      -- objects of their own, so the other tests' counts stand
      local mine = {}
      for i = 1, 12 do
        local cm = srv:create_cm(("d%02d"):format(i), nil, { batch = "delete" })
        mine[cm.metadata.name] = cm.metadata.uid
      end
      local sel = split(2)[2]
      local code, _, raw = srv:request("DELETE", srv:ns_path("configmaps")
        .. "?labelSelector=batch%3Ddelete&shardSelector=" .. esc(sel))
      assert.equal(200, code, raw)
      local l = list("?labelSelector=batch%3Ddelete")
      local left = {}
      for _, it in ipairs(l.items) do left[it.metadata.name] = true end
      for name, uid in pairs(mine) do
        -- deleted exactly when in the shard (a real server may still be
        -- finishing: none of these has finalizers, so deletion is at once)
        assert.equal(not shard.matches(sel, srv.ns, uid), left[name] == true, name)
      end
    end)

  -- kube-apiserver v1.37 parses the selector in its registry and answers a
  -- bad one with a plain error: 500, no reason, "invalid shard selector: ".
  local bad = {
    { "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
      'unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace' },
    { "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
      'hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)' },
    { "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
      "shard range start 0x8000000000000000 must be less than end 0x8000000000000000" },
    { "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || "
      .. "shardRange(object.metadata.namespace, '0x8000000000000000', '" .. TOP .. "')",
      'all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace"' },
    { "  ", "empty shard selector is not allowed; omit the parameter for unfiltered lists" },
  }
  for _, c in ipairs(bad) do
    it(("refuses %q on LIST and WATCH with the server's error"):format(c[1]), function()
      if not served() then return end
      for _, q in ipairs({ "?", "?watch=true&" }) do
        local code, st, raw = srv:request("GET", srv:ns_path("configmaps") .. q .. "shardSelector="
          .. esc(c[1]), nil, { timeout = 5 })
        assert.equal(500, code, raw)
        assert.equal("Status", st.kind)
        assert.is_nil(st.reason)
        assert.equal("invalid shard selector: " .. c[2], st.message)
      end
    end)
  end
end)

describe("apiserver shardSelector on a server that ignores it", function()
  if client.dev_only("the ignore-shard-selector fault is a dev server switch") then return end
  local srv
  setup(function() srv = client.start({ args = { "--admin" } }) end)
  teardown(function() srv:stop() end)

  it("lists everything without shardInfo, as an older server does", function()
    for i = 1, 6 do srv:create_cm("i" .. i) end
    local code = srv:request("PUT", "/luna/v1/faults", "ignore-shard-selector=1",
      { content_type = "text/plain" })
    assert.equal(200, code)
    local sel = split(2)[1]
    local _, l = srv:request("GET", srv:ns_path("configmaps") .. "?shardSelector=" .. esc(sel))
    assert.is_nil(l.metadata.shardInfo)
    assert.equal(6, #l.items)
    -- even a selector the server would refuse passes unread
    code = srv:request("GET", srv:ns_path("configmaps") .. "?shardSelector=bad")
    assert.equal(200, code)
    srv:request("PUT", "/luna/v1/faults", "", { content_type = "text/plain" })
    _, l = srv:request("GET", srv:ns_path("configmaps") .. "?shardSelector=" .. esc(sel))
    assert.equal(sel, l.metadata.shardInfo.selector)
  end)
end)
