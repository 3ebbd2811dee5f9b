-- Metadata-only informers (PartialObjectMetadata): the cache holds
-- apiVersion, kind and metadata of each object and follows the watch; a
-- full informer of the same kind is another informer.  Runs against the
-- dev server, or the cluster in KUBECONFIG.
local helpers = require("helpers")
local core = require("luna.core")

local S = require("07-informer.support")

local BIG = string.rep("QUFB", 1024) -- 4 KiB of base64

describe("metadata-only informer #integration", function()
  local srv, env
  S.server_each_test(nil, function(s, e) srv, env = s, e end)

  local function secret(name, value)
    local code, obj = srv:request("POST", srv:ns_path("secrets"), { apiVersion = "v1", kind = "Secret",
      metadata = { name = name, labels = { md = "spec" }, annotations = { a = "b" } },
      data = { big = value or BIG } })
    assert.equal(201, code)
    return obj
  end
  local function decoded(inf, name)
    local o = inf:get(srv.ns .. "/" .. name)
    return o and core.json.decode(o:json()), o
  end

  -- synced by a watch list (the default) and by a LIST (a PartialObjectMetadataList)
  for _, mode in ipairs({ "auto", "off" }) do
  it("caches apiVersion, kind and metadata only, and follows the watch (watch_list=" .. mode .. ")", function()
    local a = secret("md-a")
    local inf = env:informer{ kind = "v1/Secret", namespace = srv.ns, labels = { md = "spec" },
      metadata_only = true, watch_list = mode }
    helpers.eventually(function() return inf:has_synced() end, 10, "sync")
    assert.matches("metadata%-only$", inf:key())
    local got, obj = decoded(inf, "md-a")
    assert.same({ apiVersion = "v1", kind = "Secret", metadata = got.metadata }, got)
    assert.equal(a.metadata.uid, obj:uid())
    assert.equal(a.metadata.resourceVersion, obj:resource_version())
    assert.same({ md = "spec" }, obj:labels())
    assert.equal("b", got.metadata.annotations.a)
    assert.is_nil(got.metadata.managedFields)
    assert.is_true(#obj:json() < 1024)

    -- watch: an add, a change of the data only (a new resourceVersion), a delete
    secret("md-b")
    helpers.eventually(function() return inf:get(srv.ns .. "/md-b") ~= nil end, 10, "md-b added")
    assert.is_nil(decoded(inf, "md-b").data)
    local code, put = srv:request("PUT", srv:ns_path("secrets", "md-a"), { apiVersion = "v1", kind = "Secret",
      metadata = { name = "md-a", labels = { md = "spec" }, resourceVersion = a.metadata.resourceVersion },
      data = { big = "Y2hhbmdlZA==" } })
    assert.equal(200, code)
    helpers.eventually(function()
      return inf:get(srv.ns .. "/md-a"):resource_version() == put.metadata.resourceVersion
    end, 10, "md-a updated")
    assert.is_nil(decoded(inf, "md-a").metadata.annotations)
    assert.equal(200, (srv:request("DELETE", srv:ns_path("secrets", "md-b"))))
    helpers.eventually(function() return inf:get(srv.ns .. "/md-b") == nil end, 10, "md-b deleted")
    assert.is_true(inf:stats().watch_events >= 3)
    inf:release()
  end)
  end

  it("is a separate informer from a full one of the same kind", function()
    secret("both")
    local spec = { kind = "v1/Secret", namespace = srv.ns, labels = { md = "spec" } }
    local full = env:informer(spec)
    spec.metadata_only = true
    local meta = env:informer(spec)
    local again = env:informer(spec)
    assert.equal(2, env:count())
    assert.equal(meta:key(), again:key())
    assert.are_not.equal(full:key(), meta:key())
    helpers.eventually(function() return full:has_synced() and meta:has_synced() end, 10, "sync")
    assert.equal(BIG, decoded(full, "both").data.big)
    assert.is_nil(decoded(meta, "both").data)
    assert.equal(2, meta:stats().refs)
    again:release()
    meta:release()
    full:release()
    assert.equal(0, env:count())
  end)
end)
