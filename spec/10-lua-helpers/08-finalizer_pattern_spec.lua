-- The deletion pattern of lua/luna/finalizers.md, run as written there: the
-- spec reads the controller out of the doc.  Against a fake API that stages
-- what production brings (a cache that lags behind our own writes, a
-- conflict, an object that vanishes mid-way), a conflict or a NotFound is
-- never a failed reconcile and a cleanup never runs twice for one deletion;
-- then against the server, the whole life of an object.
local helpers = require("helpers")
local errors = require("luna.errors")
local S = require("10-lua-helpers.support")
local json = S.json

local DOC = "lua/luna/finalizers.md"
local F = "example.com/copy-cleanup"

-- The controller block of the doc (the one that starts with `local luna`).
local function doc_controller()
  local text = assert(helpers.read_file(DOC))
  for block in text:gmatch("```lua\n(.-)```") do
    if block:find('^local luna = require "luna"') then return block end
  end
  error("no controller block in " .. DOC)
end

local function copy(v) return v ~= nil and json.decode(json.encode(v)) or nil end

-- A fake API server with a cache that can be set apart from it.  Objects
-- are ConfigMaps by "ns/name"; every write bumps resourceVersion.
local function fake()
  local srv = { objects = {}, cache = {}, calls = {}, deletes = {} }
  local function key(ns, name) return ns .. "/" .. name end
  local function call(what) srv.calls[#srv.calls + 1] = what end
  local function not_found(k) return nil, errors.new("NotFound", k .. " not found", 404) end
  local function bump(obj)
    obj.metadata.resourceVersion = tostring(tonumber(obj.metadata.resourceVersion or "0") + 1)
  end

  function srv.put(obj)
    srv.objects[key(obj.metadata.namespace, obj.metadata.name)] = copy(obj)
  end
  function srv.sync() srv.cache = copy(srv.objects) or {} end   -- the watch caught up

  local luna = {
    finalizers = require("luna.finalizers"),
    is_not_found = errors.is_not_found,
    is_conflict = errors.is_conflict,
    controller = function(spec) return spec end,
  }
  function luna.cache(kind)
    assert(kind == "v1/ConfigMap")
    return { get = function(_, ns, name) return copy(srv.cache[key(ns, name)]) end }
  end
  function luna.get(kind, ns, name)
    call("get " .. name)
    local obj = srv.objects[key(ns, name)]
    if not obj then return not_found(key(ns, name)) end
    return copy(obj)
  end
  function luna.patch(kind, ns, name, patch, opts)
    call("patch " .. name)
    assert(opts and opts.type == "merge")
    if srv.vanish then srv.objects[key(ns, name)] = nil; srv.vanish = false end
    local obj = srv.objects[key(ns, name)]
    if not obj then return not_found(key(ns, name)) end
    local rv = patch.metadata and patch.metadata.resourceVersion
    if srv.conflict or (rv and rv ~= obj.metadata.resourceVersion) then
      srv.conflict = false
      return nil, errors.new("Conflict", "the object has been modified", 409)
    end
    obj.metadata.finalizers = copy(patch.metadata.finalizers)
    bump(obj)
    if obj.metadata.deletionTimestamp and #obj.metadata.finalizers == 0 then
      srv.objects[key(ns, name)] = nil
    end
    return copy(obj)
  end
  function luna.delete(kind, ns, name)
    call("delete " .. name)
    srv.deletes[name] = (srv.deletes[name] or 0) + 1
    if srv.delete_error then return nil, srv.delete_error end
    local obj = srv.objects[key(ns, name)]
    if not obj then return not_found(key(ns, name)) end
    if obj.metadata.finalizers and #obj.metadata.finalizers > 0 then
      obj.metadata.deletionTimestamp = "2026-11-25T00:00:00Z"
      bump(obj)
    else
      srv.objects[key(ns, name)] = nil
    end
    return true
  end
  function luna.apply(obj, opts)
    call("apply " .. obj.metadata.name)
    assert(opts.field_manager == "copier")
    local k = key(obj.metadata.namespace, obj.metadata.name)
    local have = srv.objects[k]
    obj = copy(obj)
    obj.metadata.resourceVersion = have and have.metadata.resourceVersion or "0"
    bump(obj)
    srv.objects[k] = obj
    return copy(obj)
  end

  local env = setmetatable({ require = function(name)
    assert(name == "luna", name)
    return luna
  end }, { __index = _G })
  local chunk = assert(loadstring(doc_controller(), "=" .. DOC))
  setfenv(chunk, env)
  srv.controller = chunk()
  function srv.reconcile(name)
    srv.calls = {}
    return srv.controller.reconcile({ namespace = "ns", name = name, key = "ns/" .. name })
  end
  return srv
end

local function cm(name, extra)
  local md = { name = name, namespace = "ns", resourceVersion = "1",
               labels = { ["example.com/copy"] = "yes" } }
  for k, v in pairs(extra or {}) do md[k] = v end
  return { apiVersion = "v1", kind = "ConfigMap", metadata = md, data = { a = "1" } }
end

describe("the finalizer pattern of finalizers.md, on a staged API", function()
  it("adds the finalizer, then makes the copy", function()
    local srv = fake()
    srv.put(cm("a"))
    srv.sync()
    assert.is_nil(srv.reconcile("a"))
    assert.same({ F }, srv.objects["ns/a"].metadata.finalizers)
    assert.same({ a = "1" }, srv.objects["ns/a-copy"].data)
  end)

  it("looks again after a conflict on the finalizer patch, without an error", function()
    local srv = fake()
    srv.put(cm("a"))
    srv.sync()
    srv.objects["ns/a"].metadata.resourceVersion = "2"  -- someone wrote after the cache read
    local res, err = srv.reconcile("a")
    assert.is_nil(err)
    assert.same({ requeue = true }, res)
    assert.is_nil(srv.objects["ns/a"].metadata.finalizers)
    srv.sync()
    assert.is_nil(srv.reconcile("a"))
    assert.same({ F }, srv.objects["ns/a"].metadata.finalizers)
  end)

  it("cleans up once per deletion, though the cache still shows the finalizer it removed", function()
    local srv = fake()
    srv.put(cm("a", { finalizers = { F } }))
    srv.sync()
    assert.is_nil(srv.reconcile("a"))                  -- live: makes the copy
    assert.is_table(srv.objects["ns/a-copy"])
    -- the user deletes it; the cache sees the deletionTimestamp
    assert.is_table(srv.objects["ns/a"])
    srv.objects["ns/a"].metadata.deletionTimestamp = "2026-11-25T00:00:00Z"
    srv.sync()
    local res, err = srv.reconcile("a")
    assert.same({ nil, nil }, { res, err })
    assert.equal(1, srv.deletes["a-copy"])
    assert.is_nil(srv.objects["ns/a"], "the finalizer is off: the object is gone")
    assert.is_nil(srv.objects["ns/a-copy"])
    -- the key comes back before the watch event: the cache is stale
    res, err = srv.reconcile("a")
    assert.same({ nil, nil }, { res, err })
    assert.equal(1, srv.deletes["a-copy"], "the cleanup ran again on a stale cache")
    assert.same({ "get a" }, srv.calls)
  end)

  it("does nothing when the server shows the finalizer gone while another holds the object", function()
    local srv = fake()
    srv.put(cm("a", { finalizers = { F, "other.io/keep" }, deletionTimestamp = "2026-11-25T00:00:00Z" }))
    srv.sync()
    srv.objects["ns/a"].metadata.finalizers = { "other.io/keep" } -- removed by our last write
    local res, err = srv.reconcile("a")
    assert.same({ nil, nil }, { res, err })
    assert.is_nil(srv.deletes["a-copy"])
  end)

  it("retries a conflicting finalizer removal without an error, the cleanup being idempotent", function()
    local srv = fake()
    srv.put(cm("a", { finalizers = { F }, deletionTimestamp = "2026-11-25T00:00:00Z" }))
    srv.put(cm("a-copy", { labels = {} }))
    srv.sync()
    srv.conflict = true
    local res, err = srv.reconcile("a")
    assert.is_nil(err)
    assert.same({ requeue = true }, res)
    assert.is_not_nil(srv.objects["ns/a"])
    res, err = srv.reconcile("a")                      -- the copy is gone already: NotFound is done
    assert.same({ nil, nil }, { res, err })
    assert.equal(2, srv.deletes["a-copy"])
    assert.is_nil(srv.objects["ns/a"])
  end)

  it("takes an object that vanished before the finalizer patch as done", function()
    local srv = fake()
    srv.put(cm("a", { finalizers = { F }, deletionTimestamp = "2026-11-25T00:00:00Z" }))
    srv.sync()
    srv.vanish = true
    local res, err = srv.reconcile("a")
    assert.same({ nil, nil }, { res, err })
  end)

  it("fails the reconcile when the cleanup fails for real, keeping the finalizer", function()
    local srv = fake()
    srv.put(cm("a", { finalizers = { F }, deletionTimestamp = "2026-11-25T00:00:00Z" }))
    srv.sync()
    srv.delete_error = errors.new("NoKindMatch", 'no matches for kind "ConfigMap"', 0)
    local res, err = srv.reconcile("a")
    assert.is_nil(res)
    assert.equal("NoKindMatch", err.reason)
    assert.same({ F }, srv.objects["ns/a"].metadata.finalizers)
  end)
end)

describe("the finalizer pattern of finalizers.md, against the server #integration", function()
  local rt = require("11-runtime.support")
  local env
  after_each(function() if env then env:stop() end env = nil end)

  it("copies, then on deletion removes the copy and the finalizer, with no failed reconcile", function()
    local token = rt.token()
    local code, n = doc_controller():gsub('%["example%.com/copy"%] = "yes"',
                                          '["example.com/copy"] = "' .. token .. '"')
    assert.equal(1, n)
    env = rt.start{ sources = { ["copier.lua"] = code } }
    local path = env.srv:ns_path("configmaps")
    rt.create(env, path, { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "orig", labels = { ["example.com/copy"] = token } }, data = { k = "v" } })
    env:wait(function()
      local c = env:get(path .. "/orig-copy")
      local o = env:get(path .. "/orig")
      return c and c.data.k == "v" and o.metadata.finalizers and o.metadata.finalizers[1] == F
    end, 20, "the copy and the finalizer")
    assert.equal(200, (env.srv:request("DELETE", path .. "/orig")))
    env:wait(function() return env:get(path .. "/orig") == nil and env:get(path .. "/orig-copy") == nil end,
             20, "the original and its copy gone")
    env.luna:read_line(0.5)
    assert.is_nil(rt.find(env, rt.msg("reconcile failed")), "no failed reconcile")
  end)
end)
