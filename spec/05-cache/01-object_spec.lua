-- Cached objects: compact, immutable, reference-counted.
local core = require("luna.core")
local store = core.store

describe("cached object", function()
  it("keeps its identity fields and JSON", function()
    local o = store.object{ namespace = "prod", name = "web", uid = "u-1",
      resource_version = "42", labels = { app = "web", tier = "fe" }, json = '{"a":1}' }
    assert.equal("prod/web", o:key())
    assert.equal("web", o:name())
    assert.equal("prod", o:namespace())
    assert.equal("u-1", o:uid())
    assert.equal("42", o:resource_version())
    assert.equal('{"a":1}', o:json())
    assert.equal("web", o:label("app"))
    assert.is_nil(o:label("missing"))
    assert.same({ app = "web", tier = "fe" }, o:labels())
  end)

  it("keys cluster-scoped objects by name alone", function()
    local o = store.object{ name = "node-1" }
    assert.equal("node-1", o:key())
    assert.equal("", o:namespace())
    assert.equal("node-1", o:name())
  end)

  it("finds labels whatever order they were given in", function()
    local labels = {}
    for i = 1, 50 do labels["k" .. i] = "v" .. i end
    local o = store.object{ name = "x", labels = labels }
    for i = 1, 50 do assert.equal("v" .. i, o:label("k" .. i)) end
    assert.same(labels, o:labels())
  end)

  it("rejects an object without a name", function()
    assert.has_error(function() store.object{ namespace = "a" } end, "object has no metadata.name")
  end)

  it("is shared, not copied, between holders", function()
    local o = store.object{ namespace = "a", name = "b" }
    assert.equal(1, o:refs())
    local idx = store.indexer()
    idx:put(o)
    assert.equal(2, o:refs())
    local got = idx:get("a/b")
    assert.equal(3, o:refs())
    assert.is_true(got == o)
  end)

  it("is smaller than its JSON plus a small header", function()
    local json = string.rep("x", 1000)
    local o = store.object{ namespace = "default", name = "cm-1", uid = string.rep("u", 36),
      resource_version = "123456", json = json }
    assert.is_true(o:size() < #json + 100, "size " .. o:size())
  end)
end)
