-- Every verb's preconditions, answered as kube-apiserver's generic registry
-- answers them (k8s.io/apiserver registry/generic/registry/store.go,
-- registry/rest, endpoints/handlers): status code, reason, message and
-- details, the same against the dev server and a real one.  Where the dev
-- server was laxer (a custom resource updated without resourceVersion was
-- accepted), a controller passed `luna test` and failed on a cluster.
local client = require("support.apiserver_client")
local helpers = require("helpers")
local cjson = require("cjson")

local MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"

describe("apiserver preconditions", function()
  local srv, group, gpath
  setup(function()
    srv = client.start()
    group = srv.ns .. ".example.com"
    gpath = "/apis/" .. group .. "/v1/namespaces/" .. srv.ns .. "/gizmos"
    local code = srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
      apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
      metadata = { name = "gizmos." .. group },
      spec = { group = group, scope = "Namespaced",
        names = { plural = "gizmos", singular = "gizmo", kind = "Gizmo", listKind = "GizmoList" },
        versions = { { name = "v1", served = true, storage = true, subresources = { status = {} },
          schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } } } } })
    assert.equal(201, code)
    -- served once discovery has it (a real server establishes it shortly after)
    helpers.eventually(function() return (srv:request("GET", gpath)) == 200 end, 30, "gizmos served")
  end)
  teardown(function()
    srv:request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos." .. group)
    srv:stop()
  end)

  local function gizmo(name, rv)
    return { apiVersion = group .. "/v1", kind = "Gizmo",
             metadata = { name = name, resourceVersion = rv }, spec = { size = 1 } }
  end

  local function create_gizmo(name)
    local code, g = srv:request("POST", gpath, gizmo(name))
    assert.equal(201, code)
    return g
  end

  -- the Invalid answer to an update without resourceVersion: kube puts the
  -- resource where the kind belongs (store.go's own TODO)
  local function assert_rv_required(code, st, resource, grp, name)
    assert.equal(422, code)
    assert.equal("Invalid", st.reason)
    local qualified = grp ~= "" and (resource .. "." .. grp) or resource
    assert.equal(qualified .. ' "' .. name .. '" is invalid: metadata.resourceVersion: Invalid value: 0: ' ..
                 "must be specified for an update", st.message)
    assert.same({ name = name, group = grp ~= "" and grp or nil, kind = resource,
                  causes = { { reason = "FieldValueInvalid", field = "metadata.resourceVersion",
                               message = "Invalid value: 0: must be specified for an update" } } },
                st.details)
  end

  describe("update without resourceVersion", function()
    it("is refused for a custom resource, and for its /status", function()
      local g = create_gizmo("norv")
      local code, st = srv:request("PUT", gpath .. "/norv", gizmo("norv"))
      assert_rv_required(code, st, "gizmos", group, "norv")
      local scode, sst = srv:request("PUT", gpath .. "/norv/status",
        { apiVersion = group .. "/v1", kind = "Gizmo", metadata = { name = "norv" }, status = { ready = true } })
      assert_rv_required(scode, sst, "gizmos", group, "norv")
      -- nothing was written
      local _, now = srv:request("GET", gpath .. "/norv")
      assert.equal(g.metadata.resourceVersion, now.metadata.resourceVersion)
      -- with it, both go through
      local ucode, u = srv:request("PUT", gpath .. "/norv", gizmo("norv", g.metadata.resourceVersion))
      assert.equal(200, ucode)
      u.status = { ready = true }
      assert.equal(200, (srv:request("PUT", gpath .. "/norv/status", u)))
    end)

    it("is refused for a CustomResourceDefinition and a Lease, allowed for a ConfigMap", function()
      local _, crd = srv:request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos." .. group)
      crd.metadata.resourceVersion = nil
      local code, st = srv:request("PUT", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos." .. group, crd)
      assert_rv_required(code, st, "customresourcedefinitions", "apiextensions.k8s.io", "gizmos." .. group)
      local lpath = srv:ns_path("leases", nil, "coordination.k8s.io/v1")
      local lease = { apiVersion = "coordination.k8s.io/v1", kind = "Lease", metadata = { name = "l1" },
                      spec = { holderIdentity = "a" } }
      assert.equal(201, (srv:request("POST", lpath, lease)))
      lease.spec.holderIdentity = "b"
      local lcode, lst = srv:request("PUT", lpath .. "/l1", lease)
      assert_rv_required(lcode, lst, "leases", "coordination.k8s.io", "l1")
      srv:create_cm("uncond")
      local ccode, cm = srv:request("PUT", srv:ns_path("configmaps", "uncond"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "uncond" }, data = { k = "v2" } })
      assert.equal(200, ccode)
      assert.equal("v2", cm.data.k)
    end)

    it("is refused for a patch that removes the resourceVersion of a custom resource", function()
      create_gizmo("patchrv")
      local code, st = srv:request("PATCH", gpath .. "/patchrv",
        { metadata = { resourceVersion = cjson.null }, spec = { size = 2 } },
        { content_type = "application/merge-patch+json" })
      assert_rv_required(code, st, "gizmos", group, "patchrv")
    end)
  end)

  describe("update with a resourceVersion", function()
    it("answers a stale one with 409 Conflict", function()
      local g = create_gizmo("stale")
      local changed = gizmo("stale", g.metadata.resourceVersion)
      changed.spec.size = 2
      assert.equal(200, (srv:request("PUT", gpath .. "/stale", changed)))
      local code, st = srv:request("PUT", gpath .. "/stale", gizmo("stale", g.metadata.resourceVersion))
      assert.equal(409, code)
      assert.equal("Conflict", st.reason)
      assert.equal('Operation cannot be fulfilled on gizmos.' .. group .. ' "stale": ' .. MODIFIED, st.message)
      assert.same({ name = "stale", group = group, kind = "gizmos" }, st.details)
    end)

    it("answers a malformed one as kube's versioner does", function()
      create_gizmo("badrv")
      local code, st = srv:request("PUT", gpath .. "/badrv", gizmo("badrv", "abc"))
      -- a plain Go error in kube: a 500 Status without a reason
      assert.equal(500, code)
      assert.is_nil(st.reason)
      assert.equal('strconv.ParseUint: parsing "abc": invalid syntax', st.message)
      local pcode, pst = srv:request("PATCH", gpath .. "/badrv",
        { metadata = { resourceVersion = "99999999999999999999" } },
        { content_type = "application/merge-patch+json" })
      assert.equal(500, pcode)
      assert.equal('strconv.ParseUint: parsing "99999999999999999999": value out of range', pst.message)
    end)

    it("answers a stale one in a patch with 409 Conflict", function()
      local cm = srv:create_cm("patchstale")
      srv:request("PATCH", srv:ns_path("configmaps", "patchstale"), { data = { k = "2" } },
        { content_type = "application/merge-patch+json" })
      local code, st = srv:request("PATCH", srv:ns_path("configmaps", "patchstale"),
        { metadata = { resourceVersion = cm.metadata.resourceVersion }, data = { k = "3" } },
        { content_type = "application/merge-patch+json" })
      assert.equal(409, code)
      assert.equal('Operation cannot be fulfilled on configmaps "patchstale": ' .. MODIFIED, st.message)
    end)
  end)

  describe("uid in an update", function()
    it("is a precondition of a PUT (409, in kube's storage words)", function()
      local cm = srv:create_cm("uidput")
      local other = "00000000-0000-4000-8000-000000000000"
      local code, st = srv:request("PUT", srv:ns_path("configmaps", "uidput"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "uidput", uid = other } })
      assert.equal(409, code)
      assert.equal("Conflict", st.reason)
      assert.equal('Operation cannot be fulfilled on configmaps "uidput": StorageError: invalid object, ' ..
        "Code: 4, Key: /registry/configmaps/" .. srv.ns .. "/uidput, ResourceVersion: 0, AdditionalErrorMsg: " ..
        "Precondition failed: UID in precondition: " .. other .. ", UID in object meta: " .. cm.metadata.uid,
        st.message)
    end)

    it("is immutable in a patch (422)", function()
      create_gizmo("uidpatch")
      local code, st = srv:request("PATCH", gpath .. "/uidpatch",
        { metadata = { uid = "00000000-0000-4000-8000-000000000000" } },
        { content_type = "application/merge-patch+json" })
      assert.equal(422, code)
      assert.equal("Invalid", st.reason)
      assert.equal('Gizmo.' .. group .. ' "uidpatch" is invalid: metadata.uid: Invalid value: ' ..
        '"00000000-0000-4000-8000-000000000000": field is immutable', st.message)
    end)
  end)

  describe("create", function()
    it("refuses a resourceVersion that reads as a number, and drops any other", function()
      local code, st = srv:request("POST", srv:ns_path("configmaps"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "withrv", resourceVersion = "12" } })
      assert.equal(500, code)
      assert.is_nil(st.reason)
      assert.equal("resourceVersion should not be set on objects to be created", st.message)
      local zcode, z = srv:request("POST", srv:ns_path("configmaps"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "zerorv", resourceVersion = "0" } })
      assert.equal(201, zcode)
      assert.are_not.equal("0", z.metadata.resourceVersion)
      local dcode = srv:request("POST", srv:ns_path("configmaps") .. "?dryRun=All",
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "dryrv", resourceVersion = "12" } })
      assert.equal(201, dcode)
    end)

    it("is not allowed on a named URL (405)", function()
      local code, st = srv:request("POST", srv:ns_path("configmaps", "named"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "named" } })
      assert.equal(405, code)
      assert.equal("MethodNotAllowed", st.reason)
      assert.equal("the server does not allow this method on the requested resource", st.message)
    end)

    it("refuses another namespace in the body (400)", function()
      local code, st = srv:request("POST", srv:ns_path("configmaps"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "x", namespace = "elsewhere" } })
      assert.equal(400, code)
      assert.equal("the namespace of the provided object does not match the namespace sent on the request",
                   st.message)
    end)

    it("generates a name only when none is given", function()
      local code, cm = srv:request("POST", srv:ns_path("configmaps"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "given", generateName = "gen-" } })
      assert.equal(201, code)
      assert.equal("given", cm.metadata.name)
      assert.equal("gen-", cm.metadata.generateName)
    end)
  end)

  describe("PUT", function()
    it("refuses a body without a name, or with another one (400)", function()
      srv:create_cm("putname")
      local code, st = srv:request("PUT", srv:ns_path("configmaps", "putname"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = {} })
      assert.equal(400, code)
      assert.equal("the name of the object (putname based on URL) was undeterminable: name must be provided",
                   st.message)
      local ncode, nst = srv:request("PUT", srv:ns_path("configmaps", "putname"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "putname", namespace = "elsewhere" } })
      assert.equal(400, ncode)
      assert.equal("the namespace of the provided object does not match the namespace sent on the request",
                   nst.message)
    end)

    it("creates a missing object of a kind that allows it (201), else 404", function()
      local code, svc = srv:request("PUT", srv:ns_path("services", "made"),
        { apiVersion = "v1", kind = "Service", metadata = { name = "made" },
          spec = { ports = { { port = 80 } } } })
      assert.equal(201, code)
      assert.equal("made", svc.metadata.name)
      -- the status store inherits the strategy: its PUT creates too
      local scode = srv:request("PUT", srv:ns_path("services", "made-status") .. "/status",
        { apiVersion = "v1", kind = "Service", metadata = { name = "made-status" },
          spec = { ports = { { port = 80 } } } })
      assert.equal(201, scode)
      assert.equal(200, (srv:request("GET", srv:ns_path("services", "made-status"))))
      local rcode = srv:request("PUT", srv:ns_path("roles", "made", "rbac.authorization.k8s.io/v1"),
        { apiVersion = "rbac.authorization.k8s.io/v1", kind = "Role", metadata = { name = "made" } })
      assert.equal(201, rcode)
      local lcode = srv:request("PUT", srv:ns_path("leases", "made", "coordination.k8s.io/v1"),
        { apiVersion = "coordination.k8s.io/v1", kind = "Lease", metadata = { name = "made" } })
      assert.equal(201, lcode)
      local ccode, st = srv:request("PUT", srv:ns_path("configmaps", "absent"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "absent" } })
      assert.equal(404, ccode)
      assert.equal('configmaps "absent" not found', st.message)
      local gcode, gst = srv:request("PUT", gpath .. "/absent", gizmo("absent"))
      assert.equal(404, gcode)
      assert.equal('gizmos.' .. group .. ' "absent" not found', gst.message)
    end)

    it("refuses another kind or apiVersion in the body (400)", function()
      srv:create_cm("kinds")
      local code, st = srv:request("PUT", srv:ns_path("configmaps", "kinds"),
        { apiVersion = "v1", kind = "Secret", metadata = { name = "kinds" } })
      assert.equal(400, code)
      assert.equal("BadRequest", st.reason)
      local acode, ast = srv:request("PUT", srv:ns_path("configmaps", "kinds"),
        { apiVersion = "apps/v1", kind = "ConfigMap", metadata = { name = "kinds" } })
      assert.equal(400, acode)
      assert.equal("BadRequest", ast.reason)
    end)
  end)

  describe("the kind of a custom resource", function()
    it("is validated after the preconditions (422), and required (400)", function()
      local g = create_gizmo("kinds")
      local body = gizmo("kinds")
      body.kind = "Other"
      local code, st = srv:request("PUT", gpath .. "/kinds", body)
      assert_rv_required(code, st, "gizmos", group, "kinds")
      body.metadata.resourceVersion = g.metadata.resourceVersion
      local kcode, kst = srv:request("PUT", gpath .. "/kinds", body)
      assert.equal(422, kcode)
      assert.equal("Other." .. group .. ' "kinds" is invalid: kind: Invalid value: "Other": must be Gizmo', kst.message)
      assert.same({ name = "kinds", group = group, kind = "Other",
                    causes = { { reason = "FieldValueInvalid", field = "kind",
                                 message = 'Invalid value: "Other": must be Gizmo' } } }, kst.details)
      local pcode, pst = srv:request("POST", gpath,
        { apiVersion = group .. "/v1", kind = "Other", metadata = { name = "other" } })
      assert.equal(422, pcode)
      assert.equal("Other." .. group .. ' "other" is invalid: kind: Invalid value: "Other": must be Gizmo', pst.message)
      local raw = '{"apiVersion":"' .. group .. '/v1","metadata":{"name":"kinds"}}'
      local mcode, mst = srv:request("PUT", gpath .. "/kinds", raw)
      assert.equal(400, mcode)
      assert.equal("BadRequest", mst.reason)
      assert.equal("the object provided is unrecognized (must be of type Gizmo): Object 'Kind' is missing in '" ..
                   raw .. "' (" .. raw:sub(1, 30) .. " ...)", mst.message)
    end)
  end)

  describe("PATCH", function()
    it("answers a missing object with 404, even of a kind PUT creates", function()
      local code, st = srv:request("PATCH", srv:ns_path("services", "nope"), { metadata = { labels = { a = "b" } } },
        { content_type = "application/merge-patch+json" })
      assert.equal(404, code)
      assert.equal('services "nope" not found', st.message)
    end)

    it("refuses a patch that renames the object (400)", function()
      srv:create_cm("rename")
      local code, st = srv:request("PATCH", srv:ns_path("configmaps", "rename"), { metadata = { name = "other" } },
        { content_type = "application/merge-patch+json" })
      assert.equal(400, code)
      assert.equal("the name of the object (other) does not match the name on the URL (rename)", st.message)
      local ecode, est = srv:request("PATCH", srv:ns_path("configmaps", "rename"), { metadata = { name = "" } },
        { content_type = "application/merge-patch+json" })
      assert.equal(400, ecode)
      assert.equal("the name of the object (rename based on URL) was undeterminable: name must be provided",
                   est.message)
      local ncode, nst = srv:request("PATCH", srv:ns_path("configmaps", "rename"),
        { metadata = { namespace = "elsewhere" } }, { content_type = "application/merge-patch+json" })
      assert.equal(400, ncode)
      assert.equal("the namespace of the provided object does not match the namespace sent on the request",
                   nst.message)
    end)
  end)

  describe("DELETE", function()
    it("answers unmet preconditions with 409 in kube's words", function()
      local cm = srv:create_cm("delpre")
      local other = "00000000-0000-4000-8000-000000000000"
      local code, st = srv:request("DELETE", srv:ns_path("configmaps", "delpre"),
        { kind = "DeleteOptions", apiVersion = "v1", preconditions = { uid = other } })
      assert.equal(409, code)
      assert.equal('Operation cannot be fulfilled on ConfigMap "delpre": the UID in the precondition (' .. other ..
        ") does not match the UID in record (" .. cm.metadata.uid .. "). The object might have been deleted " ..
        "and then recreated", st.message)
      assert.same({ name = "delpre", kind = "ConfigMap" }, st.details)
      local rcode, rst = srv:request("DELETE", srv:ns_path("configmaps", "delpre"),
        { kind = "DeleteOptions", apiVersion = "v1", preconditions = { resourceVersion = "1" } })
      assert.equal(409, rcode)
      assert.equal('Operation cannot be fulfilled on ConfigMap "delpre": the ResourceVersion in the precondition ' ..
        "(1) does not match the ResourceVersion in record (" .. cm.metadata.resourceVersion .. "). The object " ..
        "might have been modified", rst.message)
      local g = create_gizmo("delpre")
      local gcode, gst = srv:request("DELETE", gpath .. "/delpre",
        { kind = "DeleteOptions", apiVersion = "v1", preconditions = { uid = other } })
      assert.equal(409, gcode)
      assert.equal('Operation cannot be fulfilled on Gizmo.' .. group .. ' "delpre": the UID in the precondition (' ..
        other .. ") does not match the UID in record (" .. g.metadata.uid .. "). The object might have been " ..
        "deleted and then recreated", gst.message)
      assert.equal(200, (srv:request("DELETE", srv:ns_path("configmaps", "delpre"),
        { kind = "DeleteOptions", apiVersion = "v1",
          preconditions = { uid = cm.metadata.uid, resourceVersion = cm.metadata.resourceVersion } })))
    end)

    it("checks the preconditions of each object a deletecollection deletes", function()
      local cm = srv:create_cm("dc", nil, { dc = "y" })
      srv:create_cm("dc-other")
      local other = "00000000-0000-4000-8000-000000000000"
      local path = srv:ns_path("configmaps") .. "?labelSelector=dc%3Dy"
      local code, st = srv:request("DELETE", path,
        { kind = "DeleteOptions", apiVersion = "v1", preconditions = { uid = other } })
      assert.equal(409, code)
      assert.equal('Operation cannot be fulfilled on ConfigMap "dc": the UID in the precondition (' .. other ..
        ") does not match the UID in record (" .. cm.metadata.uid .. "). The object might have been deleted " ..
        "and then recreated", st.message)
      assert.equal(200, (srv:request("GET", srv:ns_path("configmaps", "dc"))))
      local dcode, list = srv:request("DELETE", path,
        { kind = "DeleteOptions", apiVersion = "v1", preconditions = { uid = cm.metadata.uid } })
      assert.equal(200, dcode)
      assert.equal("ConfigMapList", list.kind)
      assert.equal(1, #list.items)
      assert.equal("dc", list.items[1].metadata.name)
      assert.equal(404, (srv:request("GET", srv:ns_path("configmaps", "dc"))))
      assert.equal(200, (srv:request("GET", srv:ns_path("configmaps", "dc-other"))))
    end)

    it("answers a missing object with 404", function()
      local code, st = srv:request("DELETE", srv:ns_path("configmaps", "never"))
      assert.equal(404, code)
      assert.equal('configmaps "never" not found', st.message)
    end)
  end)
end)
