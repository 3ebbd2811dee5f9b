-- controllers/configmap-mirror.lua end to end.
local luna_env = require("support.luna_env")

describe("configmap-mirror controller", function()
  local env, a, b
  before_each(function()
    env = luna_env.start{ controllers = { "controllers/configmap-mirror.lua" } }
    a, b = env.srv.ns .. "-a", env.srv.ns .. "-b"
    for _, ns in ipairs({ a, b }) do
      local code = env.srv:request("POST", "/api/v1/namespaces",
        { apiVersion = "v1", kind = "Namespace", metadata = { name = ns } })
      assert.equal(201, code)
    end
  end)
  after_each(function()
    for _, ns in ipairs({ a, b }) do pcall(env.srv.request, env.srv, "DELETE", "/api/v1/namespaces/" .. ns) end
    env:stop()
  end)

  local function cm_path(ns, name) return "/api/v1/namespaces/" .. ns .. "/configmaps/" .. name end

  it("copies, repairs, prunes and finally cleans up", function()
    local srv = env.srv
    local code = srv:request("POST", srv:ns_path("configmaps"), { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "settings", labels = { ["luna.dev/mirror"] = "true", team = "x" },
        annotations = { ["luna.dev/mirror-to"] = a .. "," .. b } },
      data = { color = "blue" } })
    assert.equal(201, code)

    -- copies appear with the data, the copy label and the source annotation
    local copy = env:wait(function() return env:get(cm_path(b, "settings")) end, 15, "copy in b")
    assert.same({ color = "blue" }, copy.data)
    assert.equal("true", copy.metadata.labels["luna.dev/mirror-copy"])
    assert.equal("x", copy.metadata.labels.team)
    assert.is_nil(copy.metadata.labels["luna.dev/mirror"])
    assert.equal(srv.ns .. "/settings", copy.metadata.annotations["luna.dev/mirrored-from"])
    assert.is_not_nil(env:wait(function() return env:get(cm_path(a, "settings")) end, 15, "copy in a"))

    -- the source carries the finalizer
    local src = env:get(srv:ns_path("configmaps", "settings"))
    assert.same({ "luna.dev/mirror" }, src.metadata.finalizers)

    -- an update of the source reaches the copies
    src.data.color = "green"
    assert.equal(200, (srv:request("PUT", srv:ns_path("configmaps", "settings"), src)))
    env:wait(function()
      local c = env:get(cm_path(a, "settings"))
      return c and c.data.color == "green"
    end, 15, "updated copy")

    -- a copy deleted by hand comes back
    assert.equal(200, (srv:request("DELETE", cm_path(b, "settings"))))
    env:wait(function() return env:get(cm_path(b, "settings")) end, 15, "restored copy")

    -- dropping a namespace from the annotation prunes its copy
    src = env:get(srv:ns_path("configmaps", "settings"))
    src.metadata.annotations["luna.dev/mirror-to"] = a
    assert.equal(200, (srv:request("PUT", srv:ns_path("configmaps", "settings"), src)))
    env:wait(function() return env:get(cm_path(b, "settings")) == nil end, 15, "pruned copy")

    -- an Event was recorded about the source
    local _, events = srv:request("GET", "/apis/events.k8s.io/v1/namespaces/" .. srv.ns .. "/events")
    local mirrored = false
    for _, e in ipairs(events.items or {}) do
      if e.reason == "Mirrored" and e.regarding.name == "settings" then mirrored = true end
    end
    assert.is_true(mirrored, "a Mirrored event")

    -- deleting the source deletes the copies, then the finalizer lets it go
    srv:request("DELETE", srv:ns_path("configmaps", "settings"))
    env:wait(function()
      return env:get(cm_path(a, "settings")) == nil and env:get(srv:ns_path("configmaps", "settings")) == nil
    end, 15, "cleanup")
  end)
end)
