-- Event sources besides the primary watch: `owns` (a child enqueues its
-- controller owner) and `watches` (a map function names the keys).
local rt = require("11-runtime.support")

-- Primary: ConfigMaps; owned: Secrets; watched: Secrets of another label,
-- whose annotation "map" picks what the map function returns.
local SOURCES = [[
local luna = require "luna"
return luna.controller {
  name = "sources",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  owns = { { "v1/Secret", labels = { ["luna.dev/spec"] = "@TOKEN@" } } },
  watches = { { "v1/Secret", labels = { ["luna.dev/spec"] = "@MAPPED@" }, map = function(s)
    local ns = s.metadata.namespace
    local how = s.metadata.annotations and s.metadata.annotations.map
    if how == "string" then return ns .. "/str-target" end
    if how == "table" then return { namespace = ns, name = "tbl-target" } end
    if how == "list" then return { ns .. "/list-a", { namespace = ns, name = "list-b" } } end
    if how == "cache" then
      -- map functions may read the controller's cache
      local keys = {}
      for _, cm in ipairs(luna.cache("v1/ConfigMap"):list{ namespace = ns, labels = { pick = "me" } }) do
        keys[#keys + 1] = ns .. "/" .. cm.metadata.name
      end
      return keys
    end
    if how == "raise" then error("map exploded") end
    if how == "cyclic" then
      local t = {}
      t[1] = t
      return t
    end
    if how == "nested" then return { { ns .. "/nested" } } end
    if how == "number" then return 42 end
    if how == "badname" then return { name = 5, namespace = ns } end
    if how == "empty" then return "" end
    if how == "mixed" then return { ns .. "/mixed-ok", 42 } end
    if how == "api" then
      local obj = luna.get("v1/ConfigMap", ns, "x")
      return obj
    end
    return nil
  end } },
  reconcile = function(req) end,
}
]]

-- A cluster-scoped primary owning namespaced children.
local SCOPED_OWNER = [[
local luna = require "luna"
return luna.controller {
  name = "scoped-owner",
  watch = { "v1/Namespace", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  owns = { { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@-child" } } },
  reconcile = function(req) end,
}
]]

describe("owns and watches #integration", function()
  local env, token, mapped, ns
  setup(function()
    token, mapped = rt.token(), rt.token()
    env = rt.start{ sources = { ["sources.lua"] = rt.source(SOURCES, { TOKEN = token, MAPPED = mapped }),
                                ["scoped-owner.lua"] = rt.source(SCOPED_OWNER, { TOKEN = token }) } }
    ns = env.srv.ns
  end)
  teardown(function() env:stop() end)

  local function enqueues(name)
    return #rt.all(env, rt.msg("enqueue", { controller = "sources", key = ns .. "/" .. name }))
  end
  local function secret(name, labels, meta)
    meta = meta or {}
    meta.name, meta.labels = name, labels
    return rt.create(env, env.srv:ns_path("secrets"),
      { apiVersion = "v1", kind = "Secret", metadata = meta, stringData = { k = "v" } })
  end
  local function ref(o, controller)
    return { apiVersion = o.apiVersion or "v1", kind = o.kind, name = o.metadata.name,
             uid = o.metadata.uid, controller = controller }
  end

  it("enqueues the controller owner of a child, and not other owners", function()
    local label = { [rt.LABEL] = token }
    local owner = rt.cm(env, "owner-a", {}, label)
    local other = rt.cm(env, "owner-b", {}, label)
    rt.cm(env, "owner-c", {}, label)
    local not_cm = secret("owner-c", nil)     -- a Secret named like a primary
    rt.wait(env, rt.msg("reconcile done", { key = ns .. "/owner-c" }), 15, "owners reconciled")
    assert.same({ 1, 1, 1 }, { enqueues("owner-a"), enqueues("owner-b"), enqueues("owner-c") })

    -- a non-controller reference and a controller reference of another kind
    secret("child-b", label, { ownerReferences = { ref(other, false) } })
    secret("child-c", label, { ownerReferences = { ref(not_cm, true) } })
    -- then a controller reference to the primary kind
    secret("child-a", label, { ownerReferences = { ref(other, false), ref(owner, true) } })
    rt.wait_count(env, rt.msg("reconcile done", { key = ns .. "/owner-a" }), 2, 15, "owner-a again")
    -- events arrive in order: child-b and child-c were handled before child-a
    assert.same({ 2, 1, 1 }, { enqueues("owner-a"), enqueues("owner-b"), enqueues("owner-c") })
    -- the children themselves are never primary keys
    assert.same({ 0, 0, 0 }, { enqueues("child-a"), enqueues("child-b"), enqueues("child-c") })

    -- an update and the deletion of the child enqueue the owner too
    local path = env.srv:ns_path("secrets", "child-a")
    local code = env.srv:request("PATCH", path, { metadata = { annotations = { touched = "1" } } },
      { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
    rt.wait_count(env, rt.msg("enqueue", { key = ns .. "/owner-a" }), 3, 15, "update enqueues")
    assert.equal(200, (env.srv:request("DELETE", path)))
    rt.wait_count(env, rt.msg("enqueue", { key = ns .. "/owner-a" }), 4, 15, "delete enqueues")
    assert.equal(1, enqueues("owner-b"))
  end)

  it("enqueues a cluster-scoped owner by its name alone", function()
    local code, nsobj = env.srv:request("PATCH", "/api/v1/namespaces/" .. ns,
      { metadata = { labels = { [rt.LABEL] = token } } }, { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
    local owner_done = rt.msg("reconcile done", { controller = "scoped-owner", key = ns })
    rt.wait(env, owner_done, 15, "the namespace reconciled")
    rt.cm(env, "scoped-child", {}, { [rt.LABEL] = token .. "-child" }, { ownerReferences = {
      { apiVersion = "v1", kind = "Namespace", name = ns, uid = nsobj.metadata.uid, controller = true } } })
    rt.wait_count(env, owner_done, 2, 15, "the owner enqueued by its child")
    assert.is_nil(rt.find(env, rt.msg("enqueue", { controller = "scoped-owner", key = ns .. "/" .. ns })))
  end)

  it("enqueues what a watches map returns: a key, a table, a list, or nothing", function()
    local label = { [rt.LABEL] = mapped }
    secret("m-nil", label, { annotations = { map = "none" } })
    secret("m-str", label, { annotations = { map = "string" } })
    secret("m-tbl", label, { annotations = { map = "table" } })
    secret("m-list", label, { annotations = { map = "list" } })
    rt.wait(env, rt.msg("reconcile done", { key = ns .. "/list-b" }), 15, "list-b reconciled")
    for _, name in ipairs({ "str-target", "tbl-target", "list-a", "list-b" }) do
      assert.equal(1, enqueues(name), name)
      rt.wait(env, rt.msg("reconcile done", { key = ns .. "/" .. name }), 15, name)
    end
    -- the map's own objects are not keys, and returning nothing enqueues nothing
    for _, name in ipairs({ "m-nil", "m-str", "m-tbl", "m-list" }) do assert.equal(0, enqueues(name)) end
  end)

  it("lets a map function read the controller's cache", function()
    rt.cm(env, "picked", {}, { [rt.LABEL] = token, pick = "me" })
    rt.wait(env, rt.msg("reconcile done", { key = ns .. "/picked" }), 15, "picked reconciled")
    secret("m-cache", { [rt.LABEL] = mapped }, { annotations = { map = "cache" } })
    rt.wait_count(env, rt.msg("enqueue", { key = ns .. "/picked" }), 2, 15, "mapped through the cache")
  end)

  it("logs and ignores a map result of another shape, never walking it deeper", function()
    local label = { [rt.LABEL] = mapped }
    local shapes = { "cyclic", "nested", "number", "badname", "empty", "mixed" }
    for _, how in ipairs(shapes) do secret("m-" .. how, label, { annotations = { map = how } }) end
    rt.wait(env, rt.msg("reconcile done", { key = ns .. "/mixed-ok" }), 15, "the good item of a mixed list")
    local ignored = rt.all(env, rt.msg("watches map result ignored", { controller = "sources" }))
    assert.equal(#shapes, #ignored)
    assert.matches("map must return a key", ignored[1].error)
    assert.equal(0, enqueues("nested"))
    assert.is_true(env.luna:alive())
  end)

  it("logs a map function that raises, and goes on", function()
    local label = { [rt.LABEL] = mapped }
    secret("m-raise", label, { annotations = { map = "raise" } })
    secret("m-api", label, { annotations = { map = "api" } })
    secret("m-after", label, { annotations = { map = "table" } })
    rt.wait_count(env, rt.msg("enqueue", { key = ns .. "/tbl-target" }), 2, 15, "later map")
    local fails = rt.all(env, rt.msg("lua callback failed", { what = "watches map" }))
    local raised, api
    for _, f in ipairs(fails) do
      if f.error:find("map exploded", 1, true) then raised = f end
      if f.error:find("can only be called inside reconcile", 1, true) then api = f end
    end
    assert.is_not_nil(raised, "the raise is logged")
    assert.matches("sources%.lua:" .. rt.line_of(SOURCES, 'error("map exploded")') .. ": map exploded", raised.error)
    assert.matches("stack traceback", raised.error)
    assert.is_not_nil(api, "an API call from a map function raises")
    assert.matches("sources%.lua:" .. rt.line_of(SOURCES, 'luna.get("v1/ConfigMap", ns, "x")') ..
      ": luna.get can only be called inside reconcile", api.error)
    assert.is_true(env.luna:alive())
  end)
end)
