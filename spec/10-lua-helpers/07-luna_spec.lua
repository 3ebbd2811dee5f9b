-- The helper modules as controller files see them: re-exported on
-- `luna`, loadable inside the luna host, raising at the file's line.
local helpers = require("helpers")
local luna = require("luna")
local errors = require("luna.errors")

describe("luna re-exports", function()
  it("exposes the helper modules", function()
    assert.equal(require("luna.meta"), luna.meta)
    assert.equal(require("luna.finalizers"), luna.finalizers)
    assert.equal(require("luna.conditions"), luna.conditions)
    assert.equal(require("luna.events"), luna.events)
    assert.equal(require("luna.time"), luna.time)
    assert.equal(errors, luna.errors)
  end)

  it("puts every error predicate on luna itself", function()
    local n = 0
    for name, fn in pairs(errors) do
      if name:match("^is_") then
        assert.equal(fn, luna[name], name)
        n = n + 1
      end
    end
    assert.is_true(n >= 19)
    assert.is_true(luna.is_not_found({ code = 404, reason = "NotFound" }))
    assert.is_false(luna.is_conflict(nil))
  end)

  it("report misuse at the caller's line even when a sandbox hides debug", function()
    local saved = _G.debug
    _G.debug = nil
    local ok, err = pcall(function() luna.finalizers.add({}, "not a name") end)
    _G.debug = saved
    assert.is_false(ok)
    assert.matches("07%-luna_spec%.lua:%d+: invalid finalizer name", err)
  end)

  it("leaves luna.controller and luna.is_controller alone", function()
    local c = luna.controller({ name = "demo", watch = "v1/ConfigMap", reconcile = function() end })
    assert.is_true(luna.is_controller(c))
    assert.is_false(luna.is_controller({}))
  end)
end)

describe("the helpers inside the luna host", function()
  local function run(body)
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/a.lua", body)
    return helpers.run(helpers.luna .. " run " .. dir), dir
  end

  it("load with the host's library path and luna.core", function()
    local out = run([[
local luna = require "luna"
local cm = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "c", namespace = "ns" } }
local owner = { apiVersion = "v1", kind = "Node", metadata = { name = "n", uid = "u" } }
assert(luna.meta.set_owner(cm, owner, { controller = true }))
assert(luna.finalizers.add(cm, "example.com/f") and luna.finalizers.remove(cm, "example.com/f"))
assert(luna.conditions.set(cm, { type = "Ready", status = "True", reason = "Ok" }, 0))
local core = require "luna.core"
assert(core.json.encode(cm.metadata.finalizers) == "[]")
local rec = luna.events.recorder { controller = "example.com/demo", instance = "i" }
assert(rec:prepare(cm, "Normal", "Made", "note").create)
return luna.controller { name = "demo", watch = "v1/ConfigMap", reconcile = function() end }
]])
    assert.matches("controllers loaded dir=[^\n]* count=1", out)
  end)

  it("report misuse at the controller file's line", function()
    local out, dir = run([[
local luna = require "luna"
local cm = {}
luna.conditions.set(cm, { type = "Ready", status = "Yes", reason = "Ok" })
return luna.controller { name = "demo", watch = "v1/ConfigMap", reconcile = function() end }
]])
    assert.matches("controller load failed file=" .. dir:gsub("%-", "%%-") .. "/a.lua", out)
    assert.matches("a.lua:3: condition Ready: status must be ", out, 1, true)
  end)
end)
