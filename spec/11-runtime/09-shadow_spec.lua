-- Shadow mode: `luna run --shadow` sends every write of every controller as
-- a server-side dry run (dryRun=All) and logs, per key, what it would have
-- changed (a JSON merge patch from the object before to the dry run's
-- answer), counted in luna_shadow_writes_total.  Nothing is written: the
-- objects keep their resourceVersions, nothing is created or deleted, no
-- Event is recorded.  Against the dev server and a real kube-apiserver.
local cjson = require("cjson")
local exposition = require("support.exposition")
local helpers = require("helpers")
local rt = require("11-runtime.support")

local WRITER = [[
local luna = require "luna"
return luna.controller {
  name = "writer",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm then return end
    local kind, _, err = req.name:match("^(%a+)")
    if kind == "upd" then
      cm.data.x = "new"
      _, err = luna.update(cm)
    elseif kind == "same" then
      _, err = luna.update(cm)
    elseif kind == "patch" then
      _, err = luna.patch("v1/ConfigMap", req.namespace, req.name, { data = { p = "1" } })
    elseif kind == "apply" then
      _, err = luna.apply({ apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = req.name, namespace = req.namespace }, data = { a = "1" } },
        { field_manager = "shadow-spec" })
    elseif kind == "create" then
      _, err = luna.create({ apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = "made-" .. req.name, namespace = req.namespace }, data = { m = "1" } })
    elseif kind == "del" then
      _, err = luna.delete("v1/ConfigMap", req.namespace, req.name)
    elseif kind == "event" then
      _, err = luna.event(cm, "Normal", "Shadowed", "would be recorded")
    end
    luna.log.info("wrote", { kind = kind, error = err and tostring(err) or "none" })
  end,
}
]]

local CASES = { "upd-1", "same-1", "patch-1", "apply-1", "create-1", "del-1", "event-1" }

describe("luna run --shadow", function()
  local env
  after_each(function()
    if env then env:stop() end
    env = nil
  end)

  it("sends every write as a dry run, logs what would change, and writes nothing", function()
    local token = rt.token()
    env = rt.start{ args = { "--shadow", "--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false" },
      sources = { ["writer.lua"] = rt.source(WRITER, { TOKEN = token }) } }
    rt.wait(env, rt.msg("shadow mode: every write is sent as a server-side dry run (dryRun=All) "
      .. "and logged as \"shadow write\"; nothing is written"), 5, "the shadow mode notice")
    local before = {}
    for _, name in ipairs(CASES) do
      before[name] = rt.cm(env, name, { k = "v", x = "old" }, { [rt.LABEL] = token })
    end
    local wrote = rt.wait_count(env, rt.msg("wrote"), #CASES, 30, "every write")
    for _, r in ipairs(wrote) do assert.equal("none", r.error, r.kind) end

    local function shadow(name)
      local list = rt.all(env, function(r) return r.msg == "shadow write" and r.key == env.srv.ns .. "/" .. name end)
      assert.equal(1, #list, name)
      return list[1]
    end
    local upd = shadow("upd-1")
    assert.same({ "update", "v1/ConfigMap", true }, { upd.verb, upd.kind, upd.changed })
    assert.same({ data = { x = "new" } }, cjson.decode(upd.diff))
    local same = shadow("same-1")
    assert.same({ "update", false }, { same.verb, same.changed })
    assert.is_nil(same.diff)
    assert.same({ data = { p = "1" } }, cjson.decode(shadow("patch-1").diff))
    assert.same({ data = { a = "1" } }, cjson.decode(shadow("apply-1").diff))
    local created = shadow("create-1")
    assert.same({ "create", true, "made-create-1" }, { created.verb, created.changed, created.name })
    local made = cjson.decode(created.diff)
    assert.same({ m = "1" }, made.data)
    assert.equal("made-create-1", made.metadata.name)
    local del = shadow("del-1")
    assert.same({ "delete", true, "null" }, { del.verb, del.changed, del.diff })
    assert.same({ "event", true }, { shadow("event-1").verb, shadow("event-1").changed })

    -- nothing was written
    for _, name in ipairs(CASES) do
      local now = env:get(env.srv:ns_path("configmaps", name))
      assert.is_table(now, name .. " is gone")
      assert.equal(before[name].metadata.resourceVersion, now.metadata.resourceVersion, name)
      assert.same({ k = "v", x = "old" }, now.data)
    end
    assert.is_nil(env:get(env.srv:ns_path("configmaps", "made-create-1")))
    local _, events = env.srv:request("GET", "/apis/events.k8s.io/v1/namespaces/" .. env.srv.ns .. "/events")
    for _, e in ipairs(events and events.items or {}) do
      assert.not_equal("Shadowed", e.reason, "an Event was recorded")
    end

    local rec = rt.wait(env, rt.msg("metrics server listening"), 5, "the metrics server")
    local out = helpers.run("env -u LD_PRELOAD curl -s -S --max-time 10 http://" .. rec.address .. "/metrics")
    local m = exposition.parse(out)
    local function writes(verb, changed)
      return exposition.get(m, "luna_shadow_writes_total", { controller = "writer", verb = verb, changed = changed })
    end
    assert.equal(1, writes("update", "true"))
    assert.equal(1, writes("update", "false"))
    assert.equal(1, writes("patch", "true"))
    assert.equal(1, writes("apply", "true"))
    assert.equal(1, writes("delete", "true"))
    assert.equal(1, writes("create", "true"))
    assert.equal(1, writes("event", "true"))
  end)

  -- A URL fragment is never sent: curl drops "#..." and the dryRun=All the
  -- host appended after it with it, so a subresource ending in "#" (or a
  -- "../other#" walking to another object) was a real write in shadow mode.
  local FRAGMENT = [[
local luna = require "luna"
return luna.controller {
  name = "fragment",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  reconcile = function(req)
    if req.name ~= "src" then return end
    local _, e1 = luna.patch("v1/ConfigMap", req.namespace, "src", { data = { p = "1" } },
      { subresource = "../victim#" })
    local _, e2 = luna.patch("v1/ConfigMap", req.namespace, "victim", { data = { q = "1" } },
      { subresource = "#" })
    local _, e3 = luna.apply({ apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "victim", namespace = req.namespace }, data = { a = "1" } },
      { field_manager = "shadow-spec", subresource = "../victim#" })
    luna.log.info("fragments", { e1 = tostring(e1), e2 = tostring(e2), e3 = tostring(e3) })
  end,
}
]]

  it("refuses a request path with a fragment instead of sending the write without dryRun", function()
    local token = rt.token()
    env = rt.start{ args = { "--shadow", "--metrics-bind-address=0" },
      sources = { ["fragment.lua"] = rt.source(FRAGMENT, { TOKEN = token }) } }
    local victim = rt.cm(env, "victim", { k = "v" })
    rt.cm(env, "src", { k = "v" }, { [rt.LABEL] = token })
    local rec = rt.wait(env, rt.msg("fragments"), 30, "the reconcile")
    local now = env:get(env.srv:ns_path("configmaps", "victim"))
    assert.same({ k = "v" }, now.data, "the shadow wrote")
    assert.equal(victim.metadata.resourceVersion, now.metadata.resourceVersion)
    -- refused before any request: a subresource is one path segment (the
    -- host also refuses a path with a fragment or a dot segment itself)
    for _, e in ipairs({ rec.e1, rec.e2, rec.e3 }) do
      assert.matches("BadRequest: invalid subresource", e, 1, true)
      assert.matches("#", e, 1, true)
    end
  end)

  it("refuses leader election: a shadow runs beside the live controllers", function()
    local out, rc = helpers.run(helpers.luna .. " run --shadow --leader-elect /nonexistent")
    assert.equal(2, rc, out)
    assert.matches("--shadow runs beside the live controllers: it takes no lease", out, 1, true)
  end)
end)
