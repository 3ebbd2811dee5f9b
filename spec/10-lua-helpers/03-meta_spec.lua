-- luna.meta: owner references (controller-runtime's rules), labels and
-- annotations.
local meta = require("luna.meta")
local S = require("10-lua-helpers.support")
local json = S.json

local function cm(ns, name, uid, extra)
  local o = S.decode(string.format(
    [[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"uid":%q,"resourceVersion":"5"%s}}]],
    name, uid, ns and string.format([[,"namespace":%q]], ns) or ""))
  for k, v in pairs(extra or {}) do o.metadata[k] = v end
  return o
end

local function deploy(ns, name, uid)
  return S.decode(string.format(
    [[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"namespace":%q,"uid":%q}}]],
    name, ns, uid))
end

local function node(name, uid)
  return S.decode(string.format(
    [[{"apiVersion":"v1","kind":"Node","metadata":{"name":%q,"uid":%q}}]], name, uid))
end

describe("luna.meta.owner_reference", function()
  it("builds a reference from apiVersion, kind, name and uid", function()
    assert.same({ apiVersion = "apps/v1", kind = "Deployment", name = "web", uid = "u-1" },
                meta.owner_reference(deploy("ns", "web", "u-1")))
  end)

  it("sets controller and blockOwnerDeletion from the options", function()
    local ref = meta.owner_reference(deploy("ns", "web", "u-1"),
                                     { controller = true, block_owner_deletion = true })
    assert.is_true(ref.controller)
    assert.is_true(ref.blockOwnerDeletion)
    ref = meta.owner_reference(deploy("ns", "web", "u-1"), { controller = false })
    assert.is_false(ref.controller)
    assert.is_nil(ref.blockOwnerDeletion)
  end)

  it("raises on an incomplete owner or bad options", function()
    local d = deploy("ns", "web", "u-1")
    S.raises("owner must be a table, got nil", function() meta.owner_reference(nil) end)
    S.raises("owner Deployment web has no metadata.uid", function()
      d.metadata.uid = nil; meta.owner_reference(d) end)
    d = deploy("ns", "web", "u-1")
    S.raises("owner has no metadata.name", function() d.metadata.name = ""; meta.owner_reference(d) end)
    S.raises("owner has no kind", function() meta.owner_reference({ apiVersion = "v1", metadata = {} }) end)
    S.raises("owner has no apiVersion", function() meta.owner_reference({ kind = "X" }) end)
    d = deploy("ns", "web", "u-1")
    S.raises("unknown owner reference option 'blockOwnerDeletion'", function()
      meta.owner_reference(d, { blockOwnerDeletion = true }) end)
    S.raises("owner reference option 'controller' must be a boolean", function()
      meta.owner_reference(d, { controller = 1 }) end)
    S.raises("owner reference options must be a table", function() meta.owner_reference(d, true) end)
  end)
end)

describe("luna.meta.set_owner", function()
  it("creates ownerReferences as a JSON array", function()
    local o = cm("ns", "c", "c-1")
    assert.is_true(meta.set_owner(o, deploy("ns", "web", "u-1"), { controller = true, block_owner_deletion = true }))
    assert.is_true(json.is_array(o.metadata.ownerReferences))
    assert.same(S.decode([[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u-1",
      "controller":true,"blockOwnerDeletion":true}]]), o.metadata.ownerReferences[1])
    assert.equal(1, #o.metadata.ownerReferences)
  end)

  it("creates metadata when the object has none", function()
    local o = { apiVersion = "v1", kind = "ConfigMap" }
    assert.is_true(meta.set_owner(o, node("n1", "n-1")))
    assert.equal("n1", o.metadata.ownerReferences[1].name)
  end)

  it("reports no change when the same reference is set again", function()
    local o = cm("ns", "c", "c-1")
    local d = deploy("ns", "web", "u-1")
    assert.is_true(meta.set_owner(o, d, { controller = true }))
    assert.is_false(meta.set_owner(o, d, { controller = true }))
    assert.equal(1, #o.metadata.ownerReferences)
  end)

  it("replaces a reference to the same owner uid", function()
    local o = cm("ns", "c", "c-1")
    local d = deploy("ns", "web", "u-1")
    meta.set_owner(o, d)
    assert.is_true(meta.set_owner(o, d, { controller = true, block_owner_deletion = true }))
    assert.equal(1, #o.metadata.ownerReferences)
    assert.is_true(o.metadata.ownerReferences[1].controller)
  end)

  it("replaces a stale reference to an owner recreated under the same name", function()
    local o = cm("ns", "c", "c-1")
    meta.set_owner(o, deploy("ns", "web", "old"), { controller = true })
    assert.is_true(meta.set_owner(o, deploy("ns", "web", "new"), { controller = true }))
    assert.equal(1, #o.metadata.ownerReferences)
    assert.equal("new", o.metadata.ownerReferences[1].uid)
  end)

  it("keeps references to other owners, in order", function()
    local o = cm("ns", "c", "c-1")
    meta.set_owner(o, deploy("ns", "a", "u-a"))
    meta.set_owner(o, deploy("ns", "b", "u-b"))
    assert.is_true(meta.set_owner(o, deploy("ns", "a", "u-a"), { block_owner_deletion = true }))
    local refs = o.metadata.ownerReferences
    assert.equal(2, #refs)
    assert.same({ "a", "b" }, { refs[1].name, refs[2].name })
    assert.is_true(refs[1].blockOwnerDeletion)
  end)

  it("drops duplicate references to the same owner", function()
    local o = cm("ns", "c", "c-1")
    o.metadata.ownerReferences = S.decode([==[[
      {"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u-1"},
      {"apiVersion":"v1","kind":"Node","name":"n","uid":"n-1"},
      {"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"old"}]]==])
    assert.is_true(meta.set_owner(o, deploy("ns", "web", "u-1")))
    assert.equal(2, #o.metadata.ownerReferences)
    assert.same({ "u-1", "n-1" }, { o.metadata.ownerReferences[1].uid, o.metadata.ownerReferences[2].uid })
  end)

  it("matches a recreated owner by group, not by version", function()
    local o = cm("ns", "c", "c-1")
    meta.set_owner(o, S.decode([[{"apiVersion":"apps/v1beta1","kind":"Deployment",
      "metadata":{"name":"web","namespace":"ns","uid":"old"}}]]))
    meta.set_owner(o, S.decode([[{"apiVersion":"extensions/v1beta1","kind":"Deployment",
      "metadata":{"name":"web","namespace":"ns","uid":"other"}}]]))
    assert.equal(2, #o.metadata.ownerReferences)
    meta.set_owner(o, deploy("ns", "web", "new"))
    assert.equal(2, #o.metadata.ownerReferences)
    assert.equal("apps/v1", o.metadata.ownerReferences[1].apiVersion)
    assert.equal("extensions/v1beta1", o.metadata.ownerReferences[2].apiVersion)
  end)

  it("refuses a second controller owner", function()
    local o = cm("ns", "c", "c-1")
    assert.is_true(meta.set_owner(o, deploy("ns", "a", "u-a"), { controller = true }))
    local changed, err = meta.set_owner(o, deploy("ns", "b", "u-b"), { controller = true })
    assert.is_nil(changed)
    assert.equal("AlreadyOwned", err.reason)
    assert.equal(0, err.code)
    assert.equal("AlreadyOwned: ConfigMap ns/c is already owned by another Deployment controller a",
                 tostring(err))
    assert.equal(1, #o.metadata.ownerReferences)
    assert.equal("a", meta.controller_of(o).name)
  end)

  it("allows a non-controller reference next to a controller", function()
    local o = cm("ns", "c", "c-1")
    meta.set_owner(o, deploy("ns", "a", "u-a"), { controller = true })
    assert.is_true(meta.set_owner(o, deploy("ns", "b", "u-b")))
    assert.equal(2, #o.metadata.ownerReferences)
  end)

  it("refuses an owner in another namespace", function()
    local o = cm("ns", "c", "c-1")
    local changed, err = meta.set_owner(o, deploy("other", "web", "u-1"), { controller = true })
    assert.is_nil(changed)
    assert.equal("InvalidOwnerReference", err.reason)
    assert.equal("cross-namespace owner references are disallowed: owner Deployment other/web, " ..
                 "object ConfigMap ns/c", err.message)
    assert.is_nil(o.metadata.ownerReferences)
  end)

  it("refuses a namespaced owner for a cluster-scoped object", function()
    local o = node("n1", "n-1")
    local changed, err = meta.set_owner(o, deploy("ns", "web", "u-1"))
    assert.is_nil(changed)
    assert.equal("InvalidOwnerReference", err.reason)
    assert.matches("cluster-scoped Node n1 must not have a namespace-scoped owner", err.message, 1, true)
    assert.is_nil(o.metadata.ownerReferences)
  end)

  it("allows cluster-scoped owners for namespaced and cluster-scoped objects", function()
    local o = cm("ns", "c", "c-1")
    assert.is_true(meta.set_owner(o, node("n1", "n-1"), { controller = true }))
    local n2 = node("n2", "n-2")
    assert.is_true(meta.set_owner(n2, node("n1", "n-1")))
  end)

  it("raises on wrong argument types", function()
    S.raises("object must be a table, got string", function() meta.set_owner("x", node("n", "u")) end)
    S.raises("owner must be a table, got nil", function() meta.set_owner({}, nil) end)
    S.raises("has no metadata.uid", function() meta.set_owner({}, { apiVersion = "v1", kind = "Node", metadata = { name = "n" } }) end)
  end)
end)

describe("luna.meta owner queries", function()
  local o, a, b
  before_each(function()
    o = cm("ns", "c", "c-1")
    a = deploy("ns", "a", "u-a")
    b = deploy("ns", "b", "u-b")
    meta.set_owner(o, a)
    meta.set_owner(o, b, { controller = true })
  end)

  it("controller_of returns the controller reference or nil", function()
    assert.equal("u-b", meta.controller_of(o).uid)
    assert.is_nil(meta.controller_of(cm("ns", "x", "x-1")))
    assert.is_nil(meta.controller_of({ metadata = { ownerReferences = json.null } }))
    S.raises("object must be a table", function() meta.controller_of(nil) end)
  end)

  it("is_owned_by matches by uid", function()
    assert.is_true(meta.is_owned_by(o, a))
    assert.is_true(meta.is_owned_by(o, b))
    assert.is_false(meta.is_owned_by(o, deploy("ns", "a", "recreated")))
    assert.is_false(meta.is_owned_by(cm("ns", "x", "x-1"), a))
    S.raises("owner must be a table", function() meta.is_owned_by(o, "a") end)
  end)

  it("is_owned_by matches by group, kind and name for an owner without uid", function()
    assert.is_true(meta.is_owned_by(o, { apiVersion = "apps/v2", kind = "Deployment", metadata = { name = "a" } }))
    assert.is_false(meta.is_owned_by(o, { apiVersion = "v1", kind = "Deployment", metadata = { name = "a" } }))
    assert.is_false(meta.is_owned_by(o, { apiVersion = "apps/v1", kind = "Deployment", metadata = {} }))
  end)

  it("is_controlled_by holds only for the controller", function()
    assert.is_true(meta.is_controlled_by(o, b))
    assert.is_false(meta.is_controlled_by(o, a))
  end)

  it("remove_owner removes the reference and leaves [] after the last", function()
    assert.is_true(meta.remove_owner(o, b))
    assert.is_false(meta.remove_owner(o, b))
    assert.is_nil(meta.controller_of(o))
    assert.is_true(meta.remove_owner(o, a))
    assert.equal([[{"ownerReferences":[]}]], S.encode({ ownerReferences = o.metadata.ownerReferences }))
    assert.is_false(meta.remove_owner(cm("ns", "x", "x-1"), a))
  end)

  it("remove_owner leaves [] after the last also for a list built in Lua", function()
    local built = { metadata = { ownerReferences = {
      { apiVersion = "apps/v1", kind = "Deployment", name = "a", uid = "u-a" },
    } } }
    assert.is_true(meta.remove_owner(built, a))
    assert.equal([[{"ownerReferences":[]}]],
                 S.encode({ ownerReferences = built.metadata.ownerReferences }))
  end)
end)

describe("luna.meta labels and annotations", function()
  it("reads labels, nil when absent", function()
    local o = S.decode([[{"metadata":{"labels":{"app":"web"}}}]])
    assert.equal("web", meta.label(o, "app"))
    assert.is_nil(meta.label(o, "tier"))
    assert.is_nil(meta.label({}, "app"))
    assert.is_nil(meta.label({ metadata = { labels = json.null } }, "app"))
  end)

  it("creates metadata.labels and reports changes", function()
    local o = {}
    assert.is_true(meta.set_label(o, "app.kubernetes.io/name", "web"))
    assert.is_false(meta.set_label(o, "app.kubernetes.io/name", "web"))
    assert.is_true(meta.set_label(o, "app.kubernetes.io/name", "api"))
    assert.equal([[{"metadata":{"labels":{"app.kubernetes.io/name":"api"}}}]], S.encode(o))
    assert.is_true(meta.set_label(o, "app.kubernetes.io/name", nil))
    assert.is_false(meta.set_label(o, "app.kubernetes.io/name", nil))
    assert.equal([[{"metadata":{"labels":{}}}]], S.encode(o))
    assert.is_false(meta.set_label({}, "x", nil))
  end)

  it("accepts the empty label value", function()
    local o = {}
    assert.is_true(meta.set_label(o, "flag", ""))
    assert.equal("", meta.label(o, "flag"))
  end)

  it("raises on invalid label keys and values", function()
    local o = {}
    S.raises("invalid label key \"bad key\"", function() meta.set_label(o, "bad key", "v") end)
    S.raises("invalid label key \"a/b/c\": must contain at most one '/'", function() meta.set_label(o, "a/b/c", "v") end)
    S.raises("invalid label key \"/x\": prefix part must be non-empty", function() meta.set_label(o, "/x", "v") end)
    S.raises("invalid label key \"Example.com/x\": prefix part", function() meta.set_label(o, "Example.com/x", "v") end)
    S.raises("name part must be no more than 63 characters", function() meta.set_label(o, string.rep("a", 64), "v") end)
    S.raises("invalid label key \"x/\": name part must be non-empty", function() meta.set_label(o, "x/", "v") end)
    S.raises("label key must be a string, got number", function() meta.set_label(o, 1, "v") end)
    S.raises("invalid value for label \"app\": \"-web\" must consist", function() meta.set_label(o, "app", "-web") end)
    S.raises("must be no more than 63 characters", function() meta.set_label(o, "app", string.rep("v", 64)) end)
    S.raises("invalid value for label \"app\": must be a string", function() meta.set_label(o, "app", 5) end)
    S.raises("object must be a table", function() meta.set_label(nil, "app", "v") end)
    S.raises("label key must be a string", function() meta.label(o, nil) end)
    assert.is_nil(o.metadata)
  end)

  it("accepts label keys at the limits", function()
    local o = {}
    local prefix = string.rep("a", 63) .. "." .. string.rep("b", 63) .. "." .. string.rep("c", 63) .. "." .. string.rep("d", 61)
    assert.equal(253, #prefix)
    assert.is_true(meta.set_label(o, prefix .. "/" .. string.rep("n", 63), string.rep("v", 63)))
    S.raises("prefix part must be no more than 253 characters", function()
      meta.set_label(o, prefix .. "e/n", "v") end)
  end)

  it("sets and reads annotations with any string value", function()
    local o = S.decode([[{"metadata":{"name":"x"}}]])
    local value = "line 1\nline 2 { \"json\": true }"
    assert.is_true(meta.set_annotation(o, "example.com/config", value))
    assert.is_false(meta.set_annotation(o, "example.com/config", value))
    assert.equal(value, meta.annotation(o, "example.com/config"))
    assert.is_true(meta.set_annotation(o, "example.com/config", nil))
    assert.is_nil(meta.annotation(o, "example.com/config"))
    S.raises("value for annotation \"a\" must be a string, got boolean", function() meta.set_annotation(o, "a", true) end)
    S.raises("invalid annotation key", function() meta.set_annotation(o, "a b", "v") end)
  end)
end)
