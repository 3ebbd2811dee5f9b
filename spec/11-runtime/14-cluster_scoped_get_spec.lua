-- luna.cache(kind):get for a cluster-scoped kind: the key is the bare
-- name, and a reconcile of a Namespace gets `req.namespace == nil`, so
-- `get(req.namespace, req.name)` (the form every namespaced example uses)
-- must read it too, as must `get(name)` and `get("", name)`.  It raised
-- "string expected, got nil" before.
local helpers = require("helpers")

local CONTROLLER = [[
local luna = require "luna"
return luna.controller {
  name = "ns-reader",
  watch = "v1/Namespace",
  reconcile = function(req)
    if req.name ~= "team-a" then return end
    local c = luna.cache("v1/Namespace")
    local a, b, d = c:get(req.namespace, req.name), c:get(req.name), c:get("", req.name)
    assert(req.namespace == nil, "req.namespace of a Namespace")
    local found = a and b and d and a.metadata.name == "team-a" and b.metadata.uid == d.metadata.uid
    local missing = c:get(nil, "no-such") == nil
    local _, err = luna.patch("v1/Namespace", nil, req.name,
      { metadata = { labels = { read = (found and missing) and "yes" or "no" } } })
    if err then return nil, err end
  end,
}
]]

local TEST = [[
local testing = require "luna.testing"
describe("ns-reader", function()
  it("reads a Namespace from the cache by every form of its key", function()
    local env = testing.start{ controllers = { "ns-reader.lua" } }
    env:create({ apiVersion = "v1", kind = "Namespace", metadata = { name = "team-a" } })
    env:wait_idle()
    assert.equal("yes", env:get("v1/Namespace", nil, "team-a").metadata.labels.read)
  end)
end)
]]

describe("luna.cache(kind):get of a cluster-scoped kind", function()
  it("takes get(req.namespace, req.name), get(name) and get('', name)", function()
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/ns-reader.lua", CONTROLLER)
    helpers.write_file(dir .. "/ns-reader_test.lua", TEST)
    local luna = helpers.luna
    if luna:sub(1, 1) ~= "/" then luna = helpers.run("pwd"):gsub("\n$", "") .. "/" .. luna end
    local out, rc = helpers.run("cd '" .. dir .. "' && " .. luna .. " test . 2>&1")
    assert.equal(0, rc, out)
    assert.matches("1 passed, 0 failed", out)
  end)
end)
