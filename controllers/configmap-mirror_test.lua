-- configmap-mirror.lua on the real runtime: `luna test controllers`
-- (docs/authoring.md walks through this file).
local testing = require "luna.testing"

local function ns(name) return { apiVersion = "v1", kind = "Namespace", metadata = { name = name } } end

local function source(to)
  return { apiVersion = "v1", kind = "ConfigMap",
    metadata = { name = "settings", namespace = "default",
      labels = { ["luna.dev/mirror"] = "true", team = "x" },
      annotations = { ["luna.dev/mirror-to"] = to } },
    data = { color = "blue" } }
end

describe("configmap-mirror", function()
  local env
  before_each(function()
    env = testing.start{ controllers = { "configmap-mirror.lua" }, objects = { ns("a"), ns("b") } }
  end)

  it("copies a labelled ConfigMap into each namespace it names", function()
    env:create(source("a,b"))
    env:wait_idle()
    for _, target in ipairs { "a", "b" } do
      local copy = env:get("v1/ConfigMap", target, "settings")
      assert.is_not_nil(copy, "copy in " .. target)
      assert.same({ color = "blue" }, copy.data)
      assert.equal("true", copy.metadata.labels["luna.dev/mirror-copy"])
      assert.equal("x", copy.metadata.labels.team)
      assert.is_nil(copy.metadata.labels["luna.dev/mirror"])
      assert.equal("default/settings", copy.metadata.annotations["luna.dev/mirrored-from"])
    end
    -- the source carries the finalizer, and an Event says what happened
    assert.same({ "luna.dev/mirror" }, env:get("v1/ConfigMap", "default", "settings").metadata.finalizers)
    local mirrored
    for _, e in ipairs(env:events("default")) do
      if e.reason == "Mirrored" and e.regarding.name == "settings" then mirrored = e end
    end
    assert.is_not_nil(mirrored, "a Mirrored event")
    -- the writes it made: the finalizer, two copies, the Event
    local writes = {}
    for _, c in ipairs(env:calls()) do
      if c.method ~= "GET" then writes[#writes + 1] = c.method .. " " .. c.path:gsub("%?.*", "") end
    end
    table.sort(writes)
    assert.same({
      "PATCH /api/v1/namespaces/default/configmaps/settings",
      "POST /api/v1/namespaces/a/configmaps",
      "POST /api/v1/namespaces/b/configmaps",
      "POST /apis/events.k8s.io/v1/namespaces/default/events",
    }, writes)
  end)

  it("carries updates over, repairs copies and prunes namespaces dropped", function()
    env:create(source("a,b"))
    env:wait_idle()
    env:calls()
    -- an update of the source reaches the copies
    env:patch("v1/ConfigMap", "default", "settings", { data = { color = "green" } })
    env:wait_idle()
    assert.equal("green", env:get("v1/ConfigMap", "a", "settings").data.color)
    assert.equal("green", env:get("v1/ConfigMap", "b", "settings").data.color)
    -- a copy edited by hand is put back; one deleted by hand comes back
    env:patch("v1/ConfigMap", "a", "settings", { data = { color = "red" } })
    env:delete("v1/ConfigMap", "b", "settings")
    env:wait_idle()
    assert.equal("green", env:get("v1/ConfigMap", "a", "settings").data.color)
    assert.is_not_nil(env:get("v1/ConfigMap", "b", "settings"))
    -- dropping a namespace from the annotation prunes its copy
    env:patch("v1/ConfigMap", "default", "settings",
      { metadata = { annotations = { ["luna.dev/mirror-to"] = "a" } } })
    env:wait_idle()
    assert.is_nil(env:get("v1/ConfigMap", "b", "settings"))
    assert.is_not_nil(env:get("v1/ConfigMap", "a", "settings"))
  end)

  it("deletes the copies when the source is deleted, then lets it go", function()
    env:create(source("a,b"))
    env:wait_idle()
    env:delete("v1/ConfigMap", "default", "settings")
    env:wait_idle()
    assert.is_nil(env:get("v1/ConfigMap", "a", "settings"))
    assert.is_nil(env:get("v1/ConfigMap", "b", "settings"))
    assert.is_nil(env:get("v1/ConfigMap", "default", "settings"), "the finalizer was removed")
  end)

  it("looks again after 30 s for a namespace that does not exist yet", function()
    env:create(source("a,later"))
    local st = env:wait_idle()
    assert.is_not_nil(env:get("v1/ConfigMap", "a", "settings"))
    assert.equal(1, st.controllers[1].waiting)
    assert.equal(30, math.floor(st.controllers[1].next + 0.5))
    env:create(ns("later"))
    env:wait_idle()
    assert.is_nil(env:get("v1/ConfigMap", "later", "settings"), "namespaces are not watched")
    env:advance(29)
    assert.is_nil(env:get("v1/ConfigMap", "later", "settings"), "not due yet")
    st = env:advance(1)
    assert.is_not_nil(env:get("v1/ConfigMap", "later", "settings"))
    assert.equal(0, st.controllers[1].waiting, "nothing missing: no more rechecks")
  end)
end)
