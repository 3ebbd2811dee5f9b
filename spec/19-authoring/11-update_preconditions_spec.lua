-- Under `luna test` a controller meets kube-apiserver's preconditions: an
-- update of a custom resource (or its /status) without
-- metadata.resourceVersion is refused (422), as a real cluster refuses it,
-- instead of passing the test and failing in production
-- (spec/08-apiserver/19-preconditions_spec.lua compares the two servers).
local helpers = require("helpers")

local function tree(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  return dir
end

-- Labels each Widget "seen", by a PUT of an object it builds (the bug: no
-- resourceVersion) or, with label fixed=true, of the object it read.
local STAMPER = [[
local luna = require "luna"
return luna.controller {
  name = "stamper",
  watch = "example.com/v1/Widget",
  reconcile = function(req)
    local w = luna.cache("example.com/v1/Widget"):get(req.namespace, req.name)
    if not w or w.metadata.labels.seen then return end
    local obj = { apiVersion = "example.com/v1", kind = "Widget",
      metadata = { name = req.name, namespace = req.namespace,
                   labels = { seen = "yes", fixed = w.metadata.labels.fixed } },
      spec = w.spec }
    if w.metadata.labels.fixed then obj.metadata.resourceVersion = w.metadata.resourceVersion end
    local _, err = luna.update(obj)
    if err then
      luna.log.info("update refused", { code = err.code, reason = err.reason })
      return { requeue_after = 3600 }
    end
    local st = { apiVersion = "example.com/v1", kind = "Widget",
      metadata = { name = req.name, namespace = req.namespace }, status = { readyReplicas = 1 } }
    local _, serr = luna.update_status(st)
    if serr then
      luna.log.info("status refused", { code = serr.code, reason = serr.reason })
      return { requeue_after = 3600 }
    end
  end,
}
]]

local TEST = [[
local testing = require "luna.testing"

local function widget(name, labels)
  return { apiVersion = "example.com/v1", kind = "Widget",
    metadata = { name = name, namespace = "default", labels = labels or { new = "y" } },
    spec = { image = "nginx", replicas = 1 } }
end

describe("stamper", function()
  local env
  before_each(function()
    env = testing.start{ controllers = { "stamper.lua" }, seed = { "crd-widgets.yaml" } }
  end)

  it("gets 422 for an update without resourceVersion", function()
    env:create(widget("w1"))
    env:wait_idle()
    local puts = env:calls{ method = "PUT" }
    assert.equal(1, #puts)
    assert.equal(422, puts[1].status)
    assert.is_nil(env:get("example.com/v1/Widget", "default", "w1").metadata.labels.seen)
    local log = env:log()
    assert.matches("update refused[^\n]*code=422", log)
    assert.matches("update refused[^\n]*reason=Invalid", log)
  end)

  it("gets 422 for a /status update without resourceVersion", function()
    env:create(widget("w2", { fixed = "y" }))
    env:wait_idle()
    local puts = env:calls{ method = "PUT" }
    assert.equal(2, #puts)
    assert.equal(200, puts[1].status)
    assert.matches("/widgets/w2/status$", puts[2].path)
    assert.equal(422, puts[2].status)
    assert.matches("status refused[^\n]*code=422", env:log())
    assert.matches("status refused[^\n]*reason=Invalid", env:log())
  end)
end)
]]

describe("luna test and update preconditions", function()
  it("refuses a controller's update of a custom resource without resourceVersion", function()
    local dir = tree{ ["stamper.lua"] = STAMPER, ["stamper_test.lua"] = TEST,
                      ["crd-widgets.yaml"] = helpers.read_file("deploy/crd-widgets.yaml") }
    local out, rc = helpers.run(helpers.luna .. " test " .. dir)
    assert.equal(0, rc, out)
    assert.matches("2 passed, 0 failed", out)
  end)
end)
