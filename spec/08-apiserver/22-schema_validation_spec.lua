-- Validation of built-in kinds by their types, as kube-apiserver does it
-- where a controller author notices: a value of the wrong JSON type is 400
-- BadRequest with the Go decoder's message; a required field left out, a
-- string outside its enum and a change of an immutable field are 422
-- Invalid with kube's causes.  The dev server's checks are generated from
-- the pinned release's types (docs/dev-server.md, `make apischema`); every
-- test runs against both servers, one sample per group.
local client = require("support.apiserver_client")

-- JSON bodies are written out where an empty list matters (cjson would
-- send {} for an empty table).
local function deployment(name, pod_spec, labels)
  labels = labels or '{"app":"' .. name .. '"}'
  return '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"' .. name .. '"},' ..
    '"spec":{"selector":{"matchLabels":' .. labels .. '},"template":{"metadata":{"labels":' ..
    labels .. '},"spec":' .. pod_spec .. '}}}'
end

-- A 400 BadRequest with exactly message.
local function bad_request(code, st, message)
  assert.equal(400, code)
  assert.equal("BadRequest", st.reason)
  assert.equal(message, st.message)
end

-- A 422 Invalid whose causes are exactly causes ({field, reason, message};
-- message = false: any message starting with prefix).
local function invalid(code, st, causes)
  assert.equal(422, code)
  assert.equal("Invalid", st.reason)
  local got = {}
  for _, c in ipairs(st.details and st.details.causes or {}) do
    got[#got + 1] = { field = c.field, reason = c.reason, message = c.message }
  end
  assert.equal(#causes, #got, "causes: " .. require("cjson").encode(got))
  for i, want in ipairs(causes) do
    assert.equal(want.field, got[i].field)
    assert.equal(want.reason, got[i].reason)
    if want.prefix then
      assert.equal(want.prefix, got[i].message:sub(1, #want.prefix))
    else
      assert.equal(want.message, got[i].message)
    end
  end
end

describe("apiserver schema validation", function()
  local srv
  setup(function() srv = client.start() end)
  teardown(function() srv:stop() end)

  -- Whether group_version serves resource (kinds other helpers add to the
  -- dev server run once it serves them).
  local function served(group_version, resource)
    local path = group_version == "v1" and "/api/v1" or "/apis/" .. group_version
    local code, list = srv:request("GET", path)
    if code ~= 200 or not list then return false end
    for _, r in ipairs(list.resources or {}) do
      if r.name == resource then return true end
    end
    return false
  end

  describe("core", function()
    it("refuses a Pod without containers: spec.containers Required value", function()
      local code, st = srv:request("POST", srv:ns_path("pods"),
        '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"empty"},"spec":{"containers":[]}}')
      invalid(code, st, { { field = "spec.containers", reason = "FieldValueRequired",
                            message = "Required value" } })
      assert.equal(404, (srv:request("GET", srv:ns_path("pods", "empty"))))
    end)

    it("refuses a Service port given as a string with the decoder's 400", function()
      local code, st = srv:request("POST", srv:ns_path("services"),
        { apiVersion = "v1", kind = "Service", metadata = { name = "web" },
          spec = { ports = { { port = "80" } } } })
      bad_request(code, st, 'Service in version "v1" cannot be handled as a Service: json: ' ..
        'cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32')
    end)

    it("refuses a change to an immutable ConfigMap's data or its immutable flag", function()
      local code = srv:request("POST", srv:ns_path("configmaps"),
        { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "frozen" },
          data = { a = "1" }, immutable = true })
      assert.equal(201, code)
      local ucode, st = srv:request("PATCH", srv:ns_path("configmaps", "frozen"),
        { data = { a = "2" } }, { content_type = "application/merge-patch+json" })
      invalid(ucode, st, { { field = "data", reason = "FieldValueForbidden",
                             message = "Forbidden: field is immutable when `immutable` is set" } })
      local fcode, fst = srv:request("PATCH", srv:ns_path("configmaps", "frozen"),
        { immutable = false }, { content_type = "application/merge-patch+json" })
      invalid(fcode, fst, { { field = "immutable", reason = "FieldValueForbidden",
                              message = "Forbidden: field is immutable when `immutable` is set" } })
      local _, cm = srv:request("GET", srv:ns_path("configmaps", "frozen"))
      assert.same({ a = "1" }, cm.data)
      assert.is_true(cm.immutable)
    end)

    it("takes a Secret PUT without type (kube defaults it) and refuses a change of type", function()
      local path = srv:ns_path("secrets")
      assert.equal(201, (srv:request("POST", path, { apiVersion = "v1", kind = "Secret",
        metadata = { name = "typed" }, data = { a = "MQ==" } })))
      local code = srv:request("PUT", path .. "/typed", { apiVersion = "v1", kind = "Secret",
        metadata = { name = "typed" }, data = { a = "Mg==" } })
      assert.equal(200, code)
      local tcode, st = srv:request("PUT", path .. "/typed", { apiVersion = "v1", kind = "Secret",
        metadata = { name = "typed" }, type = "example.com/custom", data = { a = "Mg==" } })
      invalid(tcode, st, { { field = "type", reason = "FieldValueInvalid",
        message = 'Invalid value: "example.com/custom": field is immutable' } })
    end)
  end)

  describe("apps", function()
    local path
    setup(function() path = srv:ns_path("deployments", nil, "apps/v1") end)

    it("refuses replicas given as a string with the decoder's 400", function()
      local code, st = srv:request("POST", path, { apiVersion = "apps/v1", kind = "Deployment",
        metadata = { name = "typed" }, spec = { replicas = "3" } })
      bad_request(code, st, 'Deployment in version "v1" cannot be handled as a Deployment: json: ' ..
        'cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32')
    end)

    it("refuses a container without a name: Required value at its index", function()
      local code, st = srv:request("POST", path,
        deployment("noname", '{"containers":[{"name":"a","image":"a"},{"image":"b"}]}'))
      invalid(code, st, { { field = "spec.template.spec.containers[1].name",
                            reason = "FieldValueRequired", message = "Required value" } })
    end)

    it("refuses an imagePullPolicy outside its enum, naming the supported values", function()
      local code, st = srv:request("POST", path, deployment("pull",
        '{"containers":[{"name":"a","image":"a","imagePullPolicy":"Sometimes"}]}'))
      invalid(code, st, { { field = "spec.template.spec.containers[0].imagePullPolicy",
        reason = "FieldValueNotSupported", message = 'Unsupported value: "Sometimes": ' ..
        'supported values: "Always", "IfNotPresent", "Never"' } })
    end)

    it("refuses a change of spec.selector: field is immutable", function()
      local pod = '{"containers":[{"name":"a","image":"a"}]}'
      assert.equal(201, (srv:request("POST", path, deployment("sel", pod))))
      local code, st = srv:request("PUT", path .. "/sel",
        deployment("sel", pod, '{"app":"other"}'))
      invalid(code, st, { { field = "spec.selector", reason = "FieldValueInvalid",
        message = 'Invalid value: {"matchLabels":{"app":"other"}}: field is immutable' } })
      local _, d = srv:request("GET", path .. "/sel")
      assert.same({ app = "sel" }, d.spec.selector.matchLabels)
    end)

    it("refuses a merge patch that makes replicas a string: 422 on field patch", function()
      local pod = '{"containers":[{"name":"a","image":"a"}]}'
      assert.equal(201, (srv:request("POST", path, deployment("patched", pod))))
      local code, st = srv:request("PATCH", path .. "/patched", { spec = { replicas = "3" } },
        { content_type = "application/merge-patch+json" })
      assert.equal(422, code)
      assert.equal("Invalid", st.reason)
      local c = st.details.causes
      assert.equal(1, #c)
      assert.equal("patch", c[1].field)
      assert.equal("FieldValueInvalid", c[1].reason)
      local tail = "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas " ..
                   "of type int32"
      assert.equal(tail, c[1].message:sub(-#tail))
      local _, d = srv:request("GET", path .. "/patched")
      assert.are_not.equal("3", d.spec.replicas)
    end)

    it("fills a container port's protocol with its +default, TCP", function()
      local code, d = srv:request("POST", path, deployment("ports",
        '{"containers":[{"name":"a","image":"a","ports":[{"containerPort":80}]}]}'))
      assert.equal(201, code)
      assert.equal("TCP", d.spec.template.spec.containers[1].ports[1].protocol)
    end)
  end)

  describe("batch", function()
    it("refuses a Job's backoffLimit given as a string, and a Job without containers", function()
      local path = srv:ns_path("jobs", nil, "batch/v1")
      local code, st = srv:request("POST", path, { apiVersion = "batch/v1", kind = "Job",
        metadata = { name = "typed" }, spec = { backoffLimit = "6" } })
      bad_request(code, st, 'Job in version "v1" cannot be handled as a Job: json: cannot ' ..
        'unmarshal string into Go struct field JobSpec.spec.backoffLimit of type int32')
      local rcode, rst = srv:request("POST", path, '{"apiVersion":"batch/v1","kind":"Job",' ..
        '"metadata":{"name":"nocontainers"},"spec":{"template":{"spec":' ..
        '{"restartPolicy":"Never","containers":[]}}}}')
      invalid(rcode, rst, { { field = "spec.template.spec.containers", reason = "FieldValueRequired",
                              message = "Required value" } })
    end)
  end)

  describe("rbac", function()
    local base
    setup(function() base = "/apis/rbac.authorization.k8s.io/v1/namespaces/" .. srv.ns end)

    it("refuses a rule without verbs: rules[0].verbs Required value", function()
      local code, st = srv:request("POST", base .. "/roles", '{"apiVersion":' ..
        '"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"noverbs"},' ..
        '"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":[]}]}')
      invalid(code, st, { { field = "rules[0].verbs", reason = "FieldValueRequired",
                            prefix = "Required value" } })
    end)

    it("refuses a change of a RoleBinding's roleRef: field is immutable", function()
      local rb = { apiVersion = "rbac.authorization.k8s.io/v1", kind = "RoleBinding",
        metadata = { name = "rb" }, subjects = { { kind = "User", name = "alice" } },
        roleRef = { apiGroup = "rbac.authorization.k8s.io", kind = "Role", name = "a" } }
      assert.equal(201, (srv:request("POST", base .. "/rolebindings", rb)))
      local code, st = srv:request("PATCH", base .. "/rolebindings/rb", { roleRef = { name = "b" } },
        { content_type = "application/merge-patch+json" })
      invalid(code, st, { { field = "roleRef", reason = "FieldValueInvalid",
        -- kube prints its internal RoleRef, which has no JSON tags
        message = 'Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"Role",' ..
                  '"Name":"b"}: field is immutable' } })
    end)
  end)

  describe("coordination", function()
    it("refuses a Lease's leaseDurationSeconds given as a string", function()
      local code, st = srv:request("POST", srv:ns_path("leases", nil, "coordination.k8s.io/v1"),
        { apiVersion = "coordination.k8s.io/v1", kind = "Lease", metadata = { name = "l" },
          spec = { holderIdentity = "a", leaseDurationSeconds = "15" } })
      bad_request(code, st, 'Lease in version "v1" cannot be handled as a Lease: json: cannot ' ..
        'unmarshal string into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32')
    end)
  end)

  describe("events", function()
    it("refuses an Event whose eventTime is not a string", function()
      local code, st = srv:request("POST", srv:ns_path("events", nil, "events.k8s.io/v1"),
        { apiVersion = "events.k8s.io/v1", kind = "Event", metadata = { name = "e" },
          eventTime = 12, reason = "R", action = "A", reportingController = "x/y",
          reportingInstance = "i", type = "Normal", regarding = { kind = "Pod", name = "p" } })
      bad_request(code, st, 'Event in version "v1" cannot be handled as a Event: json: ' ..
        'cannot unmarshal number into Go struct field Event.eventTime of type string')
    end)
  end)

  describe("apiextensions", function()
    it("refuses a CRD version whose served is not a bool", function()
      local code, st = srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
          metadata = { name = "things.schema.example.com" },
          spec = { group = "schema.example.com", scope = "Namespaced",
            names = { plural = "things", kind = "Thing" },
            versions = { { name = "v1", served = "yes", storage = true,
              schema = { openAPIV3Schema = { type = "object" } } } } } })
      bad_request(code, st, 'CustomResourceDefinition in version "v1" cannot be handled as a ' ..
        'CustomResourceDefinition: json: cannot unmarshal string into Go struct field ' ..
        'CustomResourceDefinitionVersion.spec.versions.served of type bool')
    end)
  end)

  -- Kinds the dev server serves once they land (the generated tables
  -- already cover every built-in kind): each runs where it is served.
  describe("kinds served later", function()
    it("refuses a StorageClass parameters change: field is immutable", function()
      if not served("storage.k8s.io/v1", "storageclasses") then
        return pending("storage.k8s.io/v1 storageclasses not served")
      end
      local path = "/apis/storage.k8s.io/v1/storageclasses"
      local name = srv.ns .. "-sc"
      assert.equal(201, (srv:request("POST", path, { apiVersion = "storage.k8s.io/v1",
        kind = "StorageClass", metadata = { name = name }, provisioner = "example.com/p",
        parameters = { a = "1" } })))
      local code, st = srv:request("PATCH", path .. "/" .. name, { parameters = { a = "2" } },
        { content_type = "application/merge-patch+json" })
      srv:request("DELETE", path .. "/" .. name)
      -- declarative validation (beta for StorageClass) shows no value
      invalid(code, st, { { field = "parameters", reason = "FieldValueInvalid",
        message = "Invalid value: null: field is immutable" } })
    end)

    it("refuses an Ingress path without pathType's enum", function()
      if not served("networking.k8s.io/v1", "ingresses") then
        return pending("networking.k8s.io/v1 ingresses not served")
      end
      local code, st = srv:request("POST", srv:ns_path("ingresses", nil, "networking.k8s.io/v1"),
        { apiVersion = "networking.k8s.io/v1", kind = "Ingress", metadata = { name = "i" },
          spec = { rules = { { http = { paths = { { path = "/", pathType = "Fuzzy",
            backend = { service = { name = "s", port = { number = 80 } } } } } } } } } })
      invalid(code, st, { { field = "spec.rules[0].http.paths[0].pathType",
        reason = "FieldValueNotSupported", message = 'Unsupported value: "Fuzzy": supported ' ..
        'values: "Exact", "ImplementationSpecific", "Prefix"' } })
    end)

    it("refuses an HPA's maxReplicas given as a string", function()
      if not served("autoscaling/v2", "horizontalpodautoscalers") then
        return pending("autoscaling/v2 horizontalpodautoscalers not served")
      end
      local code, st = srv:request("POST", srv:ns_path("horizontalpodautoscalers", nil, "autoscaling/v2"),
        { apiVersion = "autoscaling/v2", kind = "HorizontalPodAutoscaler", metadata = { name = "h" },
          spec = { maxReplicas = "3", scaleTargetRef = { apiVersion = "apps/v1",
            kind = "Deployment", name = "d" } } })
      bad_request(code, st, 'HorizontalPodAutoscaler in version "v2" cannot be handled as a ' ..
        'HorizontalPodAutoscaler: json: cannot unmarshal string into Go struct field ' ..
        'HorizontalPodAutoscalerSpec.spec.maxReplicas of type int32')
    end)

    it("refuses a PriorityClass value given as a string", function()
      if not served("scheduling.k8s.io/v1", "priorityclasses") then
        return pending("scheduling.k8s.io/v1 priorityclasses not served")
      end
      local code, st = srv:request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
        { apiVersion = "scheduling.k8s.io/v1", kind = "PriorityClass",
          metadata = { name = srv.ns .. "-pc" }, value = "high" })
      bad_request(code, st, 'PriorityClass in version "v1" cannot be handled as a PriorityClass: ' ..
        'json: cannot unmarshal string into Go struct field PriorityClass.value of type int32')
    end)
  end)
end)
