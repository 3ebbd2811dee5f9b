-- DeltaFIFO: client-go's semantics, step by step.
local core = require("luna.core")
local store = core.store

local function obj(name, rv)
  return store.object{ namespace = "ns", name = name, resource_version = rv or "1" }
end

local function types(deltas)
  local out = {}
  for i, d in ipairs(deltas) do
    out[i] = d.type .. (d.final_state_unknown and "?" or "") ..
      (d.object and ("@" .. d.object:resource_version()) or "")
  end
  return out
end

describe("delta fifo", function()
  it("queues a key once and hands over all its deltas in order", function()
    local f = store.delta_fifo()
    f:add(obj("a", "1")); f:add(obj("b", "1")); f:update(obj("a", "2"))
    assert.equal(2, f:len())
    local key, deltas = f:pop()
    assert.equal("ns/a", key)
    assert.same({ "Added@1", "Updated@2" }, types(deltas))
    key, deltas = f:pop()
    assert.equal("ns/b", key)
    assert.same({ "Added@1" }, types(deltas))
    assert.is_nil(f:pop())
  end)

  it("collapses consecutive deletions", function()
    local f = store.delta_fifo()
    f:add(obj("a", "1")); f:delete(obj("a", "2")); f:delete(obj("a", "3"))
    local _, deltas = f:pop()
    assert.same({ "Added@1", "Deleted@2" }, types(deltas))
  end)

  it("drops a deletion of an object nobody knows", function()
    local idx = store.indexer()
    local f = store.delta_fifo(idx)
    f:delete(obj("ghost"))
    assert.equal(0, f:len())
    idx:put(obj("known"))
    f:delete(obj("known"))
    local key, deltas = f:pop()
    assert.equal("ns/known", key)
    assert.same({ "Deleted@1" }, types(deltas))
  end)

  it("replace emits Replaced for listed objects and final-state-unknown deletions for vanished ones", function()
    local idx = store.indexer()
    idx:put(obj("stays", "1")); idx:put(obj("gone", "5"))
    local f = store.delta_fifo(idx)
    f:replace({ obj("stays", "2"), obj("new", "3") })
    local seen = {}
    while true do
      local key, deltas = f:pop()
      if not key then break end
      seen[key] = types(deltas)
    end
    assert.same({ "Replaced@2" }, seen["ns/stays"])
    assert.same({ "Replaced@3" }, seen["ns/new"])
    assert.same({ "Deleted?@5" }, seen["ns/gone"])
  end)

  it("replace also deletes queued keys that never reached the cache", function()
    local idx = store.indexer()
    local f = store.delta_fifo(idx)
    f:add(obj("brief", "7"))
    f:replace({})
    local key, deltas = f:pop()
    assert.equal("ns/brief", key)
    assert.same({ "Added@7", "Deleted?@7" }, types(deltas))
  end)

  it("a seen deletion wins over a relist's unknown-state deletion", function()
    local idx = store.indexer()
    idx:put(obj("x", "1"))
    local f = store.delta_fifo(idx)
    f:delete(obj("x", "2"))
    f:replace({})
    local _, deltas = f:pop()
    assert.same({ "Deleted@2" }, types(deltas))
  end)

  it("has_synced turns true once the first replace is fully popped", function()
    local idx = store.indexer()
    local f = store.delta_fifo(idx)
    assert.is_false(f:has_synced())
    f:replace({ obj("a"), obj("b") })
    assert.is_false(f:has_synced())
    f:pop()
    assert.is_false(f:has_synced())
    f:add(obj("c"))            -- a watch event queued behind the list
    f:pop()
    assert.is_true(f:has_synced())
  end)

  it("an empty first list syncs at once", function()
    local f = store.delta_fifo(store.indexer())
    f:replace({})
    assert.is_true(f:has_synced())
  end)

  it("resync re-delivers known objects without pending deltas", function()
    local idx = store.indexer()
    idx:put(obj("quiet", "1")); idx:put(obj("busy", "1"))
    local f = store.delta_fifo(idx)
    f:update(obj("busy", "2"))
    f:resync()
    local seen = {}
    while true do
      local key, deltas = f:pop()
      if not key then break end
      seen[key] = types(deltas)
    end
    assert.same({ "Updated@2" }, seen["ns/busy"])
    assert.same({ "Sync@1" }, seen["ns/quiet"])
  end)

  it("keeps FIFO order across many keys and a growing ring", function()
    local f = store.delta_fifo()
    for i = 1, 500 do f:add(obj("k" .. i)) end
    for i = 1, 200 do assert.equal("ns/k" .. i, (f:pop())) end
    for i = 501, 800 do f:add(obj("k" .. i)) end
    for i = 201, 800 do assert.equal("ns/k" .. i, (f:pop())) end
    assert.equal(0, f:len())
  end)

  it("releases objects once popped (refcounts)", function()
    local f = store.delta_fifo()
    local o = obj("a")
    f:add(o); f:update(o)
    assert.equal(3, o:refs())
    local _, deltas = f:pop()
    deltas = nil
    collectgarbage(); collectgarbage()
    assert.equal(1, o:refs())
  end)
end)
