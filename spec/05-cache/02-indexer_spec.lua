-- The informer cache: store by key, namespace index, custom indexes.
local core = require("luna.core")
local store = core.store

local function obj(ns, name, labels, rv)
  return store.object{ namespace = ns, name = name, labels = labels, resource_version = rv or "1" }
end

local function keys(list)
  local out = {}
  for i, o in ipairs(list) do out[i] = o:key() end
  return out
end

describe("indexer", function()
  it("stores the newest object per key and returns the replaced one", function()
    local idx = store.indexer()
    assert.is_nil(idx:put(obj("a", "x", nil, "1")))
    local old = idx:put(obj("a", "x", nil, "2"))
    assert.equal("1", old:resource_version())
    assert.equal("2", idx:get("a/x"):resource_version())
    assert.equal(1, idx:len())
  end)

  it("deletes by key and returns the last state", function()
    local idx = store.indexer()
    idx:put(obj("a", "x"))
    local old = idx:delete("a/x")
    assert.equal("a/x", old:key())
    assert.is_nil(idx:get("a/x"))
    assert.is_nil(idx:delete("a/x"))
    assert.equal(0, idx:len())
  end)

  it("indexes by namespace, following moves and deletions", function()
    local idx = store.indexer()
    idx:put(obj("a", "1")); idx:put(obj("a", "2")); idx:put(obj("b", "1")); idx:put(obj(nil, "c"))
    assert.same({ "a/1", "a/2" }, keys(idx:by_index("namespace", "a")))
    assert.same({ "b/1" }, keys(idx:by_index("namespace", "b")))
    assert.same({ "c" }, keys(idx:by_index("namespace", "")))
    idx:delete("a/1")
    assert.same({ "a/2" }, keys(idx:by_index("namespace", "a")))
    idx:delete("b/1")
    assert.same({}, keys(idx:by_index("namespace", "b")))
    assert.is_nil(idx:index_values("namespace").b)
  end)

  it("keeps custom indexes exact through updates", function()
    local idx = store.indexer()
    idx:add_index("by_app", function(o) return o:label("app") end)
    idx:put(obj("a", "1", { app = "web" }))
    idx:put(obj("a", "2", { app = "web" }))
    idx:put(obj("a", "3", { app = "db" }))
    assert.same({ "a/1", "a/2" }, keys(idx:by_index("by_app", "web")))
    idx:put(obj("a", "2", { app = "db" }))           -- moves between values
    assert.same({ "a/1" }, keys(idx:by_index("by_app", "web")))
    assert.same({ "a/2", "a/3" }, keys(idx:by_index("by_app", "db")))
    idx:put(obj("a", "1", {}))                        -- leaves the index
    assert.same({}, keys(idx:by_index("by_app", "web")))
    assert.same({ db = 2 }, idx:index_values("by_app"))
  end)

  it("supports several values per object", function()
    local idx = store.indexer()
    idx:add_index("by_owner", function(o)
      local owners = {}
      for k in pairs(o:labels()) do owners[#owners + 1] = k end
      return owners
    end)
    idx:put(obj("a", "1", { x = "", y = "" }))
    idx:put(obj("a", "2", { y = "" }))
    assert.same({ "a/1" }, keys(idx:by_index("by_owner", "x")))
    assert.same({ "a/1", "a/2" }, keys(idx:by_index("by_owner", "y")))
  end)

  it("indexes objects stored before the index was added", function()
    local idx = store.indexer()
    idx:put(obj("a", "1", { app = "web" }))
    idx:add_index("by_app", function(o) return o:label("app") end)
    assert.same({ "a/1" }, keys(idx:by_index("by_app", "web")))
  end)

  it("keeps an object cached when its index function fails", function()
    local idx = store.indexer()
    idx:add_index("broken", function(o)
      if o:name() == "bad" then error("cannot index") end
      return "ok"
    end)
    idx:put(obj("a", "bad"))
    idx:put(obj("a", "good"))
    assert.is_not_nil(idx:get("a/bad"))
    assert.same({ "a/good" }, keys(idx:by_index("broken", "ok")))
    idx:add_index("wrong_type", function() return 42 end)
    assert.same({}, idx:index_values("wrong_type"))
  end)

  it("rejects a duplicate or unknown index name", function()
    local idx = store.indexer()
    assert.has_error(function() idx:add_index("namespace", function() end) end,
      "index 'namespace' already exists")
    assert.has_error(function() idx:by_index("nope", "x") end, "no index named 'nope'")
  end)

  it("survives many objects and updates (ASan checks the bookkeeping)", function()
    local idx = store.indexer()
    idx:add_index("by_mod", function(o) return tostring(tonumber(o:name()) % 7) end)
    for round = 1, 3 do
      for i = 1, 2000 do idx:put(obj("ns" .. (i % 5), tostring(i), nil, tostring(round))) end
    end
    for i = 1, 2000, 2 do idx:delete("ns" .. (i % 5) .. "/" .. i) end
    assert.equal(1000, idx:len())
    local total = 0
    for _, n in pairs(idx:index_values("by_mod")) do total = total + n end
    assert.equal(1000, total)
    local ns_total = 0
    for _, n in pairs(idx:index_values("namespace")) do ns_total = ns_total + n end
    assert.equal(1000, ns_total)
  end)

  it("matches a model through thousands of random puts and deletes", function()
    -- Growth, shrinking and collision chains of the store and the buckets.
    local idx = store.indexer()
    local model, seed = {}, 12345
    local function rand(n)
      seed = (seed * 48271) % 2147483647
      return seed % n + 1
    end
    for step = 1, 6000 do
      local ns, name = "ns" .. rand(3), "o" .. rand(400)
      local key = ns .. "/" .. name
      if step > 4000 or rand(3) == 1 then
        local old = idx:delete(key)
        assert.equal(model[key], old and old:resource_version())
        model[key] = nil
      else
        local old = idx:put(obj(ns, name, nil, tostring(step)))
        assert.equal(model[key], old and old:resource_version())
        model[key] = tostring(step)
      end
      if step % 500 == 0 then
        local n, per_ns = 0, {}
        for k, rv in pairs(model) do
          n = n + 1
          assert.equal(rv, idx:get(k):resource_version())
          local kns = k:match("^(.-)/")
          per_ns[kns] = (per_ns[kns] or 0) + 1
        end
        assert.equal(n, idx:len())
        for i = 1, 3 do
          assert.equal(per_ns["ns" .. i] or 0, #idx:by_index("namespace", "ns" .. i))
        end
      end
    end
    for k, rv in pairs(model) do assert.equal(rv, idx:delete(k):resource_version()) end
    assert.equal(0, idx:len())
    assert.same({}, idx:by_index("namespace", "ns1"))
  end)
end)
