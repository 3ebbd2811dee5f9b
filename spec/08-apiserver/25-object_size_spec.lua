-- How large a stored object may be (issue 24, class 3: the dev server has
-- kube-apiserver's bounds).  A request body may be 3 MiB (spec 17), but
-- what is stored is bounded more tightly, and a controller that writes
-- past it must see on the dev server what it would see in a cluster:
--   - a ConfigMap's data and binaryData together, and a Secret's data
--     (stringData folded in), at most 1 MiB (core.MaxSecretSize): 422;
--   - a custom resource is stored as its JSON in one etcd request, at most
--     1.5 MiB (etcd's --max-request-bytes): past it kube-apiserver tries
--     again without managedFields, then answers etcd's error as a 500.
-- Runs against the dev server, or the cluster in KUBECONFIG.
local client = require("support.apiserver_client")
local helpers = require("helpers")

local MiB = 1024 * 1024

local function crd(group)
  return { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
    metadata = { name = "bigs." .. group },
    spec = { group = group, scope = "Namespaced",
      versions = { { name = "v1", served = true, storage = true,
        schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } } },
      names = { plural = "bigs", singular = "big", kind = "Big", listKind = "BigList" } } }
end

describe("stored object size", function()
  local srv
  setup(function() srv = client.start() end)
  teardown(function() srv:stop() end)

  local function post_cm(name, data, binary)
    return srv:request("POST", srv:ns_path("configmaps"), { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = name }, data = data, binaryData = binary })
  end

  it("takes a ConfigMap of exactly 1 MiB of data and binaryData", function()
    -- 512 KiB of text and 512 KiB of bytes (base64 of 'A's: 'QUFB...')
    local code, _, raw = post_cm("at-limit", { a = ("x"):rep(MiB / 2) },
      { b = ("QUFB"):rep(MiB / 2 / 3) .. "QUE=" })
    assert(code == 201, tostring(code) .. " " .. tostring(raw):sub(1, 300))
  end)

  it("refuses a ConfigMap one byte past 1 MiB with kube's 422, counting binaryData's bytes", function()
    for _, case in ipairs({
      { "text", { a = ("x"):rep(MiB + 1) } },
      { "split", { a = ("x"):rep(MiB / 2) }, { b = ("QUFB"):rep(MiB / 2 / 3) .. "QUFB" } },
    }) do
      local code, st = post_cm("over-" .. case[1], case[2], case[3])
      assert.equal(422, code, case[1])
      assert.equal("Invalid", st.reason)
      assert.equal('ConfigMap "over-' .. case[1] .. '" is invalid: []: Too long: may not be more than 1048576 bytes',
        st.message)
      assert.same({ { reason = "FieldValueTooLong", field = "[]",
                      message = "Too long: may not be more than 1048576 bytes" } }, st.details.causes)
      assert.equal(404, (srv:request("GET", srv:ns_path("configmaps", "over-" .. case[1]))))
    end
  end)

  it("refuses an update that grows a ConfigMap past 1 MiB, the object unchanged", function()
    srv:create_cm("grows", { a = ("x"):rep(MiB - 10) })
    local code, st = srv:request("PATCH", srv:ns_path("configmaps", "grows"),
      { data = { b = ("y"):rep(11) } }, { content_type = "application/merge-patch+json" })
    assert.equal(422, code)
    assert.equal('ConfigMap "grows" is invalid: []: Too long: may not be more than 1048576 bytes', st.message)
    local _, cm = srv:request("GET", srv:ns_path("configmaps", "grows"))
    assert.is_nil(cm.data.b)
  end)

  it("refuses a Secret whose data, with stringData folded in, is past 1 MiB", function()
    local function post_secret(name, data, string_data)
      return srv:request("POST", srv:ns_path("secrets"), { apiVersion = "v1", kind = "Secret",
        metadata = { name = name }, data = data, stringData = string_data })
    end
    -- 768 KiB of bytes in data and 512 KiB of text in stringData
    local code, st = post_secret("over", { a = ("QUFB"):rep(768 * 1024 / 3) }, { b = ("x"):rep(MiB / 2) })
    assert.equal(422, code)
    assert.equal('Secret "over" is invalid: data: Too long: may not be more than 1048576 bytes', st.message)
    -- a stringData key replaces data's: 768 KiB in all
    code = post_secret("replaced", { a = ("QUFB"):rep(768 * 1024 / 3) }, { a = ("x"):rep(MiB / 2),
      c = ("z"):rep(256 * 1024) })
    assert.equal(201, code)
    -- a stringData key is a data key, validated as one
    code, st = post_secret("badkey", nil, { ["no/slash"] = "v" })
    assert.equal(422, code)
    assert.matches("data[no/slash]: Invalid value: \"no/slash\": a valid config key must consist",
      st.message, 1, true)
  end)

  describe("a custom resource", function()
    local group, path
    setup(function()
      group = srv.ns .. ".luna.example.com"
      assert.equal(201, (srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group))))
      path = "/apis/" .. group .. "/v1/namespaces/" .. srv.ns .. "/bigs"
      helpers.eventually(function() return srv:request("GET", path) == 200 end, 30, "the CRD served")
    end)
    teardown(function()
      srv:request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/bigs." .. group)
    end)

    local function big(name, spec)
      return { apiVersion = group .. "/v1", kind = "Big", metadata = { name = name }, spec = spec }
    end

    it("is stored up to etcd's 1.5 MiB request and refused past it with etcd's 500", function()
      local code, _, raw = srv:request("POST", path, big("fits", { s = ("x"):rep(1500 * 1024) }))
      assert(code == 201, tostring(code) .. " " .. tostring(raw):sub(1, 300))
      code, _, raw = srv:request("POST", path, big("too-big", { s = ("x"):rep(1600 * 1024) }))
      assert(code == 500, tostring(code) .. " " .. tostring(raw):sub(1, 300))
      local st = require("cjson").decode(raw)
      assert.equal("etcdserver: request is too large", st.message)
      assert.is_nil(st.reason)
      assert.equal(404, (srv:request("GET", path .. "/too-big")))
      -- an update that grows it past the bound: refused, the object unchanged
      code = srv:request("PATCH", path .. "/fits", { spec = { t = ("y"):rep(100 * 1024) } },
        { content_type = "application/merge-patch+json" })
      assert.equal(500, code)
      local _, obj = srv:request("GET", path .. "/fits")
      assert.is_nil(obj.spec.t)
    end)

    it("is stored without its managedFields when only they make it too large", function()
      -- 16,000 fields of 60-character names: about 1.1 MB of object, and
      -- as much again of managedFields (one entry a field)
      local spec = {}
      for i = 1, 16000 do spec[("f%059d"):format(i)] = 1 end
      local code, obj, raw = srv:request("POST", path, big("many", spec))
      assert(code == 201, tostring(code) .. " " .. tostring(raw):sub(1, 300))
      assert.is_nil(obj.metadata.managedFields)
      local _, got = srv:request("GET", path .. "/many")
      assert.is_nil(got.metadata.managedFields)
      assert.equal(1, got.spec[("f%059d"):format(16000)])
    end)
  end)
end)
