-- Predicates: the luna.predicates helpers on their own, then custom and
-- built-in predicates filtering a running controller's events.
local rt = require("11-runtime.support")
local luna = require("luna")
local P = luna.predicates

local function obj(meta)
  meta.name = meta.name or "x"
  return { apiVersion = "v1", kind = "ConfigMap", metadata = meta }
end
local function update(old, new) return { type = "update", old = obj(old), object = obj(new) } end

describe("luna.predicates", function()
  it("generation_changed passes updates that change metadata.generation", function()
    assert.is_true(P.generation_changed(update({ generation = 1 }, { generation = 2 })))
    assert.is_false(P.generation_changed(update({ generation = 2, labels = { a = "1" } },
      { generation = 2, labels = { a = "2" } })))
    -- kinds without a generation: no update passes
    assert.is_false(P.generation_changed(update({ resourceVersion = "1" }, { resourceVersion = "2" })))
  end)

  it("labels_changed and annotations_changed compare the maps by content", function()
    assert.is_true(P.labels_changed(update({ labels = { a = "1" } }, { labels = { a = "2" } })))
    assert.is_true(P.labels_changed(update({ labels = { a = "1" } }, { labels = { a = "1", b = "1" } })))
    assert.is_true(P.labels_changed(update({ labels = { a = "1", b = "1" } }, { labels = { a = "1" } })))
    assert.is_true(P.labels_changed(update({}, { labels = { a = "1" } })))
    assert.is_false(P.labels_changed(update({ labels = { a = "1" }, generation = 1 },
      { labels = { a = "1" }, generation = 2 })))
    assert.is_false(P.labels_changed(update({}, { labels = {} })), "missing equals empty")
    assert.is_true(P.annotations_changed(update({ annotations = { n = "1" } }, { annotations = { n = "2" } })))
    assert.is_false(P.annotations_changed(update({ annotations = { n = "1" }, labels = { a = "1" } },
      { annotations = { n = "1" }, labels = { a = "2" } })))
  end)

  it("resource_version_changed drops no-change updates (resync)", function()
    assert.is_true(P.resource_version_changed(update({ resourceVersion = "5" }, { resourceVersion = "6" })))
    assert.is_false(P.resource_version_changed(update({ resourceVersion = "6" }, { resourceVersion = "6" })))
  end)

  it("passes every add and delete, and fails an update missing an object", function()
    for _, p in ipairs({ P.generation_changed, P.labels_changed, P.annotations_changed,
                         P.resource_version_changed }) do
      assert.is_true(p({ type = "add", object = obj({}) }))
      assert.is_true(p({ type = "delete", object = obj({}) }))
      assert.is_false(p({ type = "update", object = obj({}) }))
    end
  end)

  it("combines with any, all and negate", function()
    local labels_or_gen = P.any(P.generation_changed, P.labels_changed)
    assert.is_true(labels_or_gen(update({ generation = 1 }, { generation = 2 })))
    assert.is_true(labels_or_gen(update({ labels = { a = "1" } }, { labels = { a = "2" } })))
    assert.is_false(labels_or_gen(update({ annotations = { a = "1" } }, { annotations = { a = "2" } })))
    local both = P.all(P.generation_changed, P.labels_changed)
    assert.is_false(both(update({ generation = 1 }, { generation = 2 })))
    assert.is_true(both(update({ generation = 1, labels = {} }, { generation = 2, labels = { a = "1" } })))
    local unchanged = P.negate(P.resource_version_changed)
    assert.is_true(unchanged(update({ resourceVersion = "1" }, { resourceVersion = "1" })))
    assert.is_false(unchanged({ type = "add", object = obj({}) }))
  end)

  it("raises on misuse at the caller's line", function()
    local ok, err = pcall(P.generation_changed)
    assert.is_false(ok)
    assert.matches("list it in `predicates` without calling it", err)
    ok, err = pcall(function() return P.any() end)
    assert.is_false(ok)
    assert.matches("needs at least one predicate", err)
    ok, err = pcall(function() return P.any(P.labels_changed, "generation") end)
    assert.is_false(ok)
    assert.matches("04%-predicates_spec%.lua:%d+: luna.predicates.any: argument 2 must be a function, got string", err)
    ok, err = pcall(function() return P.negate(nil) end)
    assert.is_false(ok)
    assert.matches("negate: argument 1 must be a function, got nil", err)
  end)

  it("are checked when the controller loads", function()
    local ok, err = pcall(luna.controller, { name = "p", watch = "v1/ConfigMap",
      reconcile = function() end, predicates = { P.labels_changed, "generation" } })
    assert.is_false(ok)
    assert.matches("'predicates' must be a list of functions %(predicates%[2%] is a string%)", err)
  end)
end)

-- "custom" lets only updates that change data.v through, and logs every
-- event it sees; "generation" and "labels" use the built-ins; "resync"
-- drops the resync's no-change updates that "resync-all" reconciles.
local CUSTOM = [[
local luna = require "luna"
return luna.controller {
  name = "custom",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  predicates = { function(ev)
    luna.log.info("predicate", { type = ev.type, object = ev.object.metadata.name,
      has_old = ev.old ~= nil, old_v = ev.old and ev.old.data and ev.old.data.v,
      v = ev.object.data and ev.object.data.v })
    return ev.type ~= "update" or ev.old.data.v ~= ev.object.data.v
  end },
  reconcile = function(req) end,
}
]]

local GENERATION = [[
local luna = require "luna"
return luna.controller {
  name = "generation",
  watch = { "apps/v1/Deployment", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  predicates = { luna.predicates.generation_changed },
  reconcile = function(req) end,
}
]]

local LABELS = [[
local luna = require "luna"
local P = luna.predicates
return luna.controller {
  name = "labels",
  watch = { "v1/Secret", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  predicates = { P.any(P.labels_changed, P.annotations_changed) },
  reconcile = function(req) end,
}
]]

local RESYNC = [[
local luna = require "luna"
return luna.controller {
  name = "@NAME@",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@", ["@NAME@"] = "yes" } },
  resync = 1, -- the shortest resync luna accepts
  predicates = { @PREDICATES@ },
  reconcile = function(req) end,
}
]]

describe("predicates in a running controller #integration", function()
  local env, token, ns
  setup(function()
    token = rt.token()
    local vars = { TOKEN = token }
    env = rt.start{ sources = {
      ["custom.lua"] = rt.source(CUSTOM, vars),
      ["generation.lua"] = rt.source(GENERATION, vars),
      ["labels.lua"] = rt.source(LABELS, vars),
      ["resync.lua"] = rt.source(RESYNC, { TOKEN = token, NAME = "resync",
        PREDICATES = "luna.predicates.resource_version_changed" }),
      ["resync-all.lua"] = rt.source(RESYNC, { TOKEN = token, NAME = "resync-all", PREDICATES = "" }),
    } }
    ns = env.srv.ns
  end)
  teardown(function() env:stop() end)

  -- Every event a controller's predicates pass is logged as "enqueue"
  -- (even when the queue already holds the key).
  local function enqueues(controller, name)
    return #rt.all(env, rt.msg("enqueue", { controller = controller, key = ns .. "/" .. name }))
  end
  local function merge(path, patch)
    local code = env.srv:request("PATCH", path, patch, { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
  end

  it("runs a custom predicate on every event and enqueues only what it passes", function()
    rt.cm(env, "c", { v = "1", other = "a" }, { [rt.LABEL] = token })
    rt.wait(env, rt.msg("reconcile done", { controller = "custom", key = ns .. "/c" }), 15, "first")
    local path = env.srv:ns_path("configmaps", "c")
    merge(path, { data = { other = "b" } })   -- filtered out
    merge(path, { data = { v = "2" } })       -- passes
    rt.wait_count(env, rt.msg("reconcile done", { controller = "custom", key = ns .. "/c" }), 2, 15, "second")
    local seen = rt.all(env, rt.msg("predicate", { object = "c" }))
    assert.equal(3, #seen)
    assert.same({ "add", false, "1" }, { seen[1].type, seen[1].has_old, seen[1].v })
    assert.same({ "update", true, "1", "1" }, { seen[2].type, seen[2].has_old, seen[2].old_v, seen[2].v })
    assert.same({ "update", "1", "2" }, { seen[3].type, seen[3].old_v, seen[3].v })
    assert.equal(2, enqueues("custom", "c"))
    -- a delete passes the predicate too (its type is "delete")
    assert.equal(200, (env.srv:request("DELETE", path)))
    rt.wait(env, rt.msg("predicate", { object = "c", type = "delete" }), 15, "delete event")
    rt.wait_count(env, rt.msg("reconcile done", { controller = "custom", key = ns .. "/c" }), 3, 15, "third")
  end)

  it("generation_changed drops status and metadata-only updates", function()
    local path = "/apis/apps/v1/namespaces/" .. ns .. "/deployments"
    rt.create(env, path, { apiVersion = "apps/v1", kind = "Deployment",
      metadata = { name = "d", labels = { [rt.LABEL] = token } },
      spec = { replicas = 0, selector = { matchLabels = { app = "d" } },
        template = { metadata = { labels = { app = "d" } },
          spec = { containers = { { name = "c", image = "registry.k8s.io/pause:3.9" } } } } } })
    rt.wait(env, rt.msg("reconcile done", { controller = "generation", key = ns .. "/d" }), 15, "first")
    merge(path .. "/d", { metadata = { labels = { extra = "1" } } })
    merge(path .. "/d/status", { status = { observedGeneration = 1 } })
    merge(path .. "/d", { spec = { template = { metadata = { annotations = { bump = "1" } } } } })
    rt.wait_count(env, rt.msg("reconcile done", { controller = "generation", key = ns .. "/d" }), 2, 15, "second")
    -- the label and status updates came first and were dropped (events arrive in order)
    assert.equal(2, enqueues("generation", "d"))
  end)

  it("any(labels_changed, annotations_changed) passes either change only", function()
    local path = env.srv:ns_path("secrets")
    rt.create(env, path, { apiVersion = "v1", kind = "Secret",
      metadata = { name = "s", labels = { [rt.LABEL] = token } }, stringData = { k = "v" } })
    local done = rt.msg("reconcile done", { controller = "labels", key = ns .. "/s" })
    rt.wait(env, done, 15, "first")
    merge(path .. "/s", { stringData = { k = "changed" } })             -- dropped
    merge(path .. "/s", { metadata = { labels = { more = "1" } } })     -- passes
    rt.wait_count(env, done, 2, 15, "labels")
    merge(path .. "/s", { metadata = { annotations = { note = "1" } } }) -- passes
    rt.wait_count(env, done, 3, 15, "annotations")
    assert.equal(3, enqueues("labels", "s"))
  end)

  it("resource_version_changed drops the periodic resync", function()
    rt.cm(env, "r", {}, { [rt.LABEL] = token, resync = "yes", ["resync-all"] = "yes" })
    rt.wait(env, rt.msg("reconcile done", { controller = "resync", key = ns .. "/r" }), 15, "first")
    -- without the predicate, resyncs reconcile again and again
    rt.wait_count(env, rt.msg("reconcile done", { controller = "resync-all", key = ns .. "/r" }), 4, 15, "resyncs")
    assert.equal(1, enqueues("resync", "r"))
    merge(env.srv:ns_path("configmaps", "r"), { data = { x = "1" } })
    rt.wait_count(env, rt.msg("reconcile done", { controller = "resync", key = ns .. "/r" }), 2, 15, "change")
  end)
end)
