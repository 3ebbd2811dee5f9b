-- The API a reconcile calls (luna.get/list/create/update/update_status/
-- patch/apply/delete/event/log) and its misuse, end to end: one reconcile
-- of the "driver" ConfigMap runs every step and logs each result as JSON
-- ("step" lines); the specs below check them, and the server's state.
local cjson = require("cjson")
local rt = require("11-runtime.support")

local API = [=[
local luna = require "luna"
local json = require("luna.core").json

local function err_of(e)
  if not e then return nil end
  return { code = e.code, reason = e.reason, message = e.message, text = tostring(e), where = e.where,
           not_found = luna.is_not_found(e), conflict = luna.is_conflict(e),
           already_exists = luna.is_already_exists(e), no_kind_match = luna.is_no_kind_match(e) }
end
local function result(obj, err) return { obj = obj, err = err_of(err) } end
local function raised(fn, ...)
  local ok, e = pcall(fn, ...)
  return { ok = ok, message = not ok and tostring(e) or nil }
end
local function cm(ns, name, data, meta)
  local m = { name = name, namespace = ns }
  for k, v in pairs(meta or {}) do m[k] = v end
  return { apiVersion = "v1", kind = "ConfigMap", metadata = m, data = data }
end

local steps = {}
local function step(name, fn) steps[#steps + 1] = { name = name, fn = fn } end

step("get_missing", function(ns) return result(luna.get("v1/ConfigMap", ns, "missing")) end)
step("get_unknown_kind", function(ns) return result(luna.get("example.com/v1/Nope", ns, "x")) end)
-- a kind the server does not serve: a typo'd core kind, a group nobody
-- serves (a real kube-apiserver answers its discovery with a plain-text
-- 404), a version the group does not have
step("delete_unknown_kind", function(ns)
  return result(luna.delete("v1/ConfigMaps", ns, "driver"))
end)
step("create_unknown_group", function(ns)
  return result(luna.create{ apiVersion = "nope-@TOKEN@.example.com/v1", kind = "Thing",
    metadata = { name = "t", namespace = ns } })
end)
step("get_unknown_version", function(ns) return result(luna.get("apps/v7/Deployment", ns, "x")) end)
step("get_no_namespace", function() return result(luna.get("v1/ConfigMap", "just-a-name")) end)
step("create", function(ns) return result(luna.create(cm(ns, "made", { a = "1" }))) end)
step("create_again", function(ns) return result(luna.create(cm(ns, "made", { a = "1" }))) end)
step("update", function(ns)
  local first = assert(luna.get("v1/ConfigMap", ns, "made"))
  local stale = luna.get("v1/ConfigMap", ns, "made")
  first.data.a = "2"
  local updated, err = luna.update(first)
  stale.data.a = "stale"
  local _, conflict = luna.update(stale)
  return { updated = updated, err = err_of(err), first_rv = stale.metadata.resourceVersion,
           conflict = err_of(conflict) }
end)
step("update_status", function(ns)
  local w = assert(luna.create{ apiVersion = "example.com/v1", kind = "Widget",
    metadata = { name = "w", namespace = ns }, spec = { image = "nginx" } })
  w.status = { readyReplicas = 3 }
  w.spec.image = "ignored-through-status"
  local got, err = luna.update_status(w)
  return { got = got, err = err_of(err), now = luna.get("example.com/v1/Widget", ns, "w") }
end)
step("patch_merge", function(ns)
  return result(luna.patch("v1/ConfigMap", ns, "made", { data = { m = "merge" } }))
end)
step("patch_json", function(ns)
  return result(luna.patch("v1/ConfigMap", ns, "made",
    { { op = "add", path = "/data/j", value = "json" } }, { type = "json" }))
end)
step("patch_json_failed_test", function(ns)
  return result(luna.patch("v1/ConfigMap", ns, "made",
    { { op = "test", path = "/data/a", value = "nope" } }, { type = "json" }))
end)
step("patch_strategic", function(ns)
  local svc = { apiVersion = "v1", kind = "Service", metadata = { name = "svc", namespace = ns },
    spec = { ports = { { name = "http", port = 80, targetPort = 8080 } } } }
  assert(luna.create(svc))
  local more = { spec = { ports = { { name = "https", port = 443, targetPort = 8443 } } } }
  local strategic, err = luna.patch("v1/Service", ns, "svc", more, { type = "strategic" })
  local merged, err2 = luna.patch("v1/Service", ns, "svc",
    { spec = { ports = { { name = "metrics", port = 9090, targetPort = 9090 } } } })
  return { strategic = strategic, err = err_of(err), merged = merged, err2 = err_of(err2) }
end)
step("patch_bad_type", function(ns)
  return raised(luna.patch, "v1/ConfigMap", ns, "made", {}, { type = "bogus" })
end)
step("apply", function(ns)
  local first, e1 = luna.apply(cm(ns, "applied", { x = "1" }), { field_manager = "mgr-a" })
  local _, conflict = luna.apply(cm(ns, "applied", { x = "2" }), { field_manager = "mgr-b" })
  local forced, e3 = luna.apply(cm(ns, "applied", { x = "2" }), { field_manager = "mgr-b", force = true })
  return { first = first, e1 = err_of(e1), conflict = err_of(conflict), forced = forced, e3 = err_of(e3) }
end)
step("apply_without_manager", function(ns)
  return raised(luna.apply, cm(ns, "applied", { x = "3" }), {})
end)
step("list", function(ns)
  for _, n in ipairs({ "l-1", "l-2", "l-3" }) do
    assert(luna.create(cm(ns, n, {}, { labels = { group = n == "l-3" and "@TOKEN@-b" or "@TOKEN@-a" } })))
  end
  local a, e1 = luna.list("v1/ConfigMap", { namespace = ns, labels = { group = "@TOKEN@-a" } })
  local b, e2 = luna.list("v1/ConfigMap", { labels = "group=@TOKEN@-b" })
  local names = function(l)
    local out = {}
    for i, o in ipairs(l and l.items or {}) do out[i] = o.metadata.name end
    table.sort(out)
    return out
  end
  return { a = names(a), kind = a and a.kind, e1 = err_of(e1), b = names(b), e2 = err_of(e2) }
end)
step("delete_preconditions", function(ns)
  local made = assert(luna.get("v1/ConfigMap", ns, "made"))
  local _, conflict = luna.delete("v1/ConfigMap", ns, "made",
    { preconditions = { uid = "00000000-0000-0000-0000-000000000000" } })
  local ok, err = luna.delete("v1/ConfigMap", ns, "made", { preconditions = { uid = made.metadata.uid } })
  local _, gone = luna.get("v1/ConfigMap", ns, "made")
  return { conflict = err_of(conflict), ok = ok and true, err = err_of(err), gone = err_of(gone) }
end)
-- names that are dot segments: curl squashes "/configmaps/.." to the
-- namespace's path, so each would address another resource than the one
-- named ("delete ConfigMap .." deleting the namespace); a subresource that
-- walks up to another object
step("dot_segments", function(ns)
  local _, e1 = luna.delete("v1/ConfigMap", ns, "..")
  local _, e2 = luna.get("v1/ConfigMap", "..", "driver")
  local _, e3 = luna.update(cm(ns, ".", {}))
  local _, e4 = luna.patch("v1/ConfigMap", ns, "driver", { data = { x = "1" } },
    { subresource = "../../other" })
  local still, e5 = luna.get("v1/Namespace", ns)
  return { e1 = err_of(e1), e2 = err_of(e2), e3 = err_of(e3), e4 = err_of(e4),
           namespace_kept = still ~= nil and still.metadata.deletionTimestamp == nil, e5 = err_of(e5) }
end)
step("delete_propagation", function(ns)
  local out = {}
  for _, policy in ipairs({ "Orphan", "Background" }) do
    local parent = assert(luna.create(cm(ns, "parent-" .. policy:lower(), {})))
    assert(luna.create(cm(ns, "child-" .. policy:lower(), {}, { ownerReferences = { {
      apiVersion = "v1", kind = "ConfigMap", name = parent.metadata.name, uid = parent.metadata.uid } } })))
    local ok, err = luna.delete("v1/ConfigMap", ns, parent.metadata.name, { propagation = policy })
    out[policy] = { ok = ok and true, err = err_of(err) }
  end
  return out
end)
step("event", function(ns, req)
  local driver = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
  local ok1, e1 = luna.event(driver, "Normal", "Tested", "the API spec ran")
  local ok2, e2 = luna.event(driver, "Normal", "Tested", "the API spec ran")
  return { ok1 = ok1, e1 = err_of(e1), ok2 = ok2, e2 = err_of(e2) }
end)
step("log", function()
  luna.log.info("fields", { num = 42, flag = true, text = "plain", list = { 1 }, [1] = "positional" })
  luna.log.debug("debug fields", { level_ok = "yes" })
  return { logged = true }
end)
step("own_coroutine", function(ns)
  local co = coroutine.create(function() return luna.get("v1/ConfigMap", ns, "applied") end)
  local ok, e = coroutine.resume(co)
  local co2 = coroutine.create(function() return luna.cache("v1/ConfigMap"):get(ns, "applied") end)
  local ok2, e2 = coroutine.resume(co2)
  return { ok = ok, message = tostring(e), cache_ok = ok2, cache_message = tostring(e2) }
end)
step("cache_unwatched", function(ns)
  return raised(function() return luna.cache("v1/Secret"):get(ns, "x") end)
end)
step("cache_not_a_kind", function()
  return raised(function() return luna.cache(42) end)
end)

return luna.controller {
  name = "api",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  reconcile = function(req)
    if req.name ~= "driver" then return end
    for _, s in ipairs(steps) do
      local ok, value = pcall(s.fn, req.namespace, req)
      if not ok then value = { raised = tostring(value) } end
      luna.log.info("step", { step = s.name, value = json.encode(value) })
    end
    luna.log.info("steps done")
  end,
}
]=]

-- A top-level call outside any reconcile, at load time.
local LOADTIME = [[
local luna = require "luna"
local ok, err = pcall(function() return luna.get("v1/ConfigMap", "default", "x") end)
luna.log.info("load-time call", { ok = ok, err = err })
return luna.controller { name = "loadtime", watch = { "v1/ConfigMap", labels = { never = "@TOKEN@" } },
  reconcile = function() end }
]]

describe("the API from reconcile #integration", function()
  local env, token, ns, steps = nil, nil, nil, {}
  setup(function()
    token = rt.token()
    env = rt.start{ sources = { ["api.lua"] = rt.source(API, { TOKEN = token }),
                                ["loadtime.lua"] = rt.source(LOADTIME, { TOKEN = token }) },
                    seed = { "deploy/crd-widgets.yaml" } }
    ns = env.srv.ns
    env:wait(function() return env:get("/apis/example.com/v1") end, 30, "the Widget CRD served")
    rt.cm(env, "driver", {}, { [rt.LABEL] = token })
    rt.wait(env, rt.msg("steps done"), 30, "the API steps")
    for _, r in ipairs(rt.all(env, rt.msg("step"))) do steps[r.step] = cjson.decode(r.value) end
  end)
  teardown(function() env:stop() end)

  local function step(name)
    local v = steps[name]
    assert(v, "no step " .. name)
    assert(not v.raised, name .. " raised: " .. tostring(v.raised))
    return v
  end

  it("a kind the server does not serve: NoKindMatch, never NotFound, for every call", function()
    local cases = {
      { "get_unknown_kind", 'no matches for kind "Nope" in version "example.com/v1"', "luna.get" },
      { "delete_unknown_kind", 'no matches for kind "ConfigMaps" in version "v1"', "luna.delete" },
      { "create_unknown_group", 'no matches for kind "Thing" in version "nope%-' .. token ..
        '%.example%.com/v1": the server does not serve that group%-version', "luna.create" },
      { "get_unknown_version", 'no matches for kind "Deployment" in version "apps/v7"', "luna.get" },
    }
    for _, c in ipairs(cases) do
      local s = step(c[1])
      assert.is_nil(s.obj, c[1])
      assert.same({ 0, "NoKindMatch", false, true },
                  { s.err.code, s.err.reason, s.err.not_found, s.err.no_kind_match }, c[1])
      assert.matches("^NoKindMatch: " .. c[2], s.err.text)
      assert.matches("^" .. c[3]:gsub("%.", "%%.") .. " at .*api%.lua:%d+$", s.err.where)
    end
    -- the typo'd delete touched nothing: the driver is still there
    assert.is_table(env:get(env.srv:ns_path("configmaps", "driver")))
  end)

  it("get: NotFound as nil, err with code, reason and luna.is_not_found", function()
    local s = step("get_missing")
    assert.is_nil(s.obj)
    assert.equal(404, s.err.code)
    assert.equal("NotFound", s.err.reason)
    assert.is_true(s.err.not_found)
    assert.matches("^NotFound: .*missing", s.err.text)
    assert.matches("^luna%.get at .*api%.lua:" .. rt.line_of(API, '"missing"') .. "$", s.err.where)
    local unknown = step("get_unknown_kind")
    assert.is_nil(unknown.obj)
    assert.equal("NoKindMatch", unknown.err.reason)
    assert.is_false(unknown.err.not_found)
    local nons = step("get_no_namespace")
    assert.equal(400, nons.err.code)
    assert.equal("BadRequest", nons.err.reason)
    assert.matches("is namespaced", nons.err.message)
  end)

  it("create, then AlreadyExists", function()
    local s = step("create")
    assert.is_nil(s.err)
    assert.equal("made", s.obj.metadata.name)
    assert.is_string(s.obj.metadata.uid)
    local again = step("create_again")
    assert.equal(409, again.err.code)
    assert.equal("AlreadyExists", again.err.reason)
    assert.is_true(again.err.already_exists)
  end)

  it("update, and Conflict with a stale resourceVersion", function()
    local s = step("update")
    assert.is_nil(s.err)
    assert.equal("2", s.updated.data.a)
    assert.are_not.equal(s.first_rv, s.updated.metadata.resourceVersion)
    assert.equal(409, s.conflict.code)
    assert.equal("Conflict", s.conflict.reason)
    assert.is_true(s.conflict.conflict)
  end)

  it("update_status writes the status and ignores the spec", function()
    local s = step("update_status")
    assert.is_nil(s.err)
    assert.equal(3, s.got.status.readyReplicas)
    assert.equal("nginx", s.got.spec.image)
    assert.equal(3, s.now.status.readyReplicas)
    assert.equal("nginx", s.now.spec.image)
  end)

  it("patch: merge, json and strategic", function()
    assert.equal("merge", step("patch_merge").obj.data.m)
    local j = step("patch_json").obj
    assert.equal("json", j.data.j)
    assert.equal("merge", j.data.m)
    local failed = step("patch_json_failed_test").err
    assert.equal(422, failed.code, "a failed JSON patch test")
    local p = step("patch_strategic")
    assert.is_nil(p.err)
    local ports = {}
    for _, port in ipairs(p.strategic.spec.ports) do ports[#ports + 1] = port.port end
    table.sort(ports)
    assert.same({ 80, 443 }, ports, "strategic merges lists by key")
    assert.is_nil(p.err2)
    assert.equal(1, #p.merged.spec.ports, "merge replaces lists")
    assert.equal(9090, p.merged.spec.ports[1].port)
    assert.is_false(step("patch_bad_type").ok)
    assert.matches("api%.lua:" .. rt.line_of(API, "pcall(fn, ...)") ..
      ": patch type must be merge, json or strategic", step("patch_bad_type").message)
  end)

  it("apply: field managers, Conflict without force, ownership taken with force", function()
    local s = step("apply")
    assert.is_nil(s.e1)
    assert.equal("1", s.first.data.x)
    assert.equal(409, s.conflict.code)
    assert.equal("Conflict", s.conflict.reason)
    assert.is_nil(s.e3)
    assert.equal("2", s.forced.data.x)
    local managers = {}
    for _, m in ipairs(s.forced.metadata.managedFields or {}) do managers[m.manager] = m.operation end
    assert.equal("Apply", managers["mgr-b"])
    local misuse = step("apply_without_manager")
    assert.is_false(misuse.ok)
    assert.matches("api%.lua:" .. rt.line_of(API, "pcall(fn, ...)") ..
      ": luna.apply needs opts.field_manager", misuse.message)
  end)

  it("list with a namespace and labels (table or selector text)", function()
    local s = step("list")
    assert.is_nil(s.e1)
    assert.equal("ConfigMapList", s.kind)
    assert.same({ "l-1", "l-2" }, s.a)
    assert.is_nil(s.e2)
    assert.same({ "l-3" }, s.b)
  end)

  it("delete with preconditions: a uid mismatch is a Conflict", function()
    local s = step("delete_preconditions")
    assert.equal(409, s.conflict.code)
    assert.equal("Conflict", s.conflict.reason)
    assert.is_nil(s.err)
    assert.is_true(s.ok)
    assert.is_true(s.gone.not_found)
  end)

  it("refuses '.' and '..' names and a subresource of more than one segment, sending nothing", function()
    local s = step("dot_segments")
    for _, k in ipairs({ "e1", "e2", "e3", "e4" }) do
      assert.equal(400, s[k].code, k)
      assert.equal("BadRequest", s[k].reason, k)
    end
    assert.matches("invalid name \"..\"", s.e1.message, 1, true)
    assert.matches("invalid namespace \"..\"", s.e2.message, 1, true)
    assert.matches("invalid subresource", s.e4.message, 1, true)
    assert.is_nil(s.e5)
    assert.is_true(s.namespace_kept)
    local driver = env:get(env.srv:ns_path("configmaps", "driver"))
    assert.is_nil(driver.data and driver.data.x)
  end)

  it("delete with propagation: Orphan keeps the child, Background collects it", function()
    local s = step("delete_propagation")
    assert.is_nil(s.Orphan.err)
    assert.is_nil(s.Background.err)
    env:wait(function()
      return env:get(env.srv:ns_path("configmaps", "child-background")) == nil
    end, 30, "the background child collected")
    local orphan = env:wait(function()
      local c = env:get(env.srv:ns_path("configmaps", "child-orphan"))
      local p = env:get(env.srv:ns_path("configmaps", "parent-orphan"))
      return c and not p and not c.metadata.ownerReferences and c
    end, 30, "the orphan released")
    assert.equal("child-orphan", orphan.metadata.name)
  end)

  it("event: records an Event; a repeat counts in its series", function()
    local s = step("event")
    assert.is_nil(s.e1)
    assert.is_nil(s.e2)
    assert.is_true(s.ok1)
    assert.is_true(s.ok2)
    local _, list = env.srv:request("GET", "/apis/events.k8s.io/v1/namespaces/" .. ns .. "/events")
    local found = {}
    for _, e in ipairs(list.items) do
      if e.reason == "Tested" then found[#found + 1] = e end
    end
    assert.equal(1, #found)
    local e = found[1]
    assert.equal("driver", e.regarding.name)
    assert.equal("ConfigMap", e.regarding.kind)
    assert.equal("Normal", e.type)
    assert.equal("the API spec ran", e.note)
    assert.equal("luna.dev/api", e.reportingController)
    assert.equal(2, e.series.count)
  end)

  it("log: controller, key and reconcile_id attached; numbers and booleans typed, the rest as text", function()
    step("log")
    local r = rt.find(env, rt.msg("fields"))
    assert.equal("info", r.level)
    assert.equal("api", r.controller)
    assert.equal(ns .. "/driver", r.key)
    local start = rt.find(env, rt.msg("reconcile start", { controller = "api", key = ns .. "/driver" }))
    assert.equal(start.reconcile_id, r.reconcile_id)
    assert.equal(ns, r.namespace)
    assert.equal("driver", r.name)
    assert.equal(ns, start.namespace)
    assert.equal("driver", start.name)
    assert.equal(42, r.num)
    assert.equal(true, r.flag)
    assert.equal("plain", r.text)
    assert.matches("^table: ", r.list)
    assert.is_nil(r["1"], "only string keys become fields")
    assert.equal("yes", rt.find(env, rt.msg("debug fields")).level_ok)
  end)

  it("raises for API calls outside reconcile or from a coroutine the script made", function()
    local load = rt.find(env, rt.msg("load-time call"))
    assert.equal(false, load.ok)
    assert.matches("loadtime%.lua:" .. rt.line_of(LOADTIME, "pcall(") ..
      ": luna.get can only be called inside reconcile", load.err)
    assert.is_nil(load.controller)
    local s = step("own_coroutine")
    assert.is_false(s.ok)
    assert.matches("luna.get can only be called inside reconcile %(on its own coroutine, not one it created%)",
      s.message)
    assert.is_false(s.cache_ok)
    assert.matches("can only be called inside reconcile", s.cache_message)
  end)

  it("raises for the cache of a kind the controller does not watch", function()
    local s = step("cache_unwatched")
    assert.is_false(s.ok)
    assert.matches("controller api does not watch v1/Secret", s.message)
    local bad = step("cache_not_a_kind")
    assert.is_false(bad.ok)
    assert.matches("luna.cache takes a kind", bad.message)
  end)
end)
