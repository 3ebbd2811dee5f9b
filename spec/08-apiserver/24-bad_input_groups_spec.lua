-- Bad input gets what kube-apiserver gives (issue #29), for one writable
-- kind of every API group kube-apiserver serves by default: (a) a
-- top-level field of the wrong JSON type is 400 BadRequest with the Go
-- decoder's message; (b) an invalid metadata.name is 422 Invalid with a
-- cause on metadata.name; (c) where cheap, a required field left out is
-- 422 Invalid with kube's causes.  The expectations were read off the
-- real server (`make test-kube`); every row runs on both servers.
local client = require("support.apiserver_client")
local helpers = require("helpers")
local cjson = require("cjson")

-- A PEM certificate request, base64 (a CertificateSigningRequest's
-- spec.request must parse as one on kube-apiserver).
local function csr_pem(dir)
  local out, rc = helpers.run(string.format(
    "{ env -u LD_PRELOAD openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes " ..
    "-keyout %s/k.pem -subj /CN=luna-spec -out %s/r.pem; } >/dev/null 2>&1; env -u LD_PRELOAD base64 -w0 %s/r.pem",
    dir, dir, dir))
  assert(rc == 0 and #out > 100, "openssl: " .. out)
  return out
end

local SUBDOMAIN = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"
-- Services and StatefulSets (their names become DNS labels)
local LABEL = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters"

-- One row per group: gv, resource, namespaced, kind; wrong = {field, value,
-- message} (message: the 400's text after "KIND in version ... as a KIND: ");
-- valid(name, ctx) = a body kube accepts but for its name; bad = the causes
-- of valid("Bad_Name") ({field, reason, contains}); missing(name, ctx) and
-- missing_causes: (c), where cheap.
local ROWS = {
  { group = "core", gv = "v1", res = "services", ns = true, kind = "Service",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field Service.spec of type v1.ServiceSpec" },
    valid = function() return { spec = { ports = { { port = 80 } } } } end,
    bad = { { "metadata.name", "FieldValueInvalid", LABEL } },
    missing = function() return { spec = { selector = { app = "x" } } } end,
    missing_causes = { { "spec.ports", "FieldValueRequired", "Required value" } } },
  { group = "apiregistration.k8s.io", gv = "apiregistration.k8s.io/v1", res = "apiservices",
    kind = "APIService",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field APIService.spec of type v1.APIServiceSpec" },
    valid = function() return { spec = { group = "luna.example.com", version = "v1",
      groupPriorityMinimum = 100, versionPriority = 10,
      service = { namespace = "default", name = "api" } } } end,
    bad = { { "metadata.name", "FieldValueInvalid",
      'Invalid value: "Bad_Name": must be `spec.version+"."+spec.group`: "v1.luna.example.com"' } },
    missing_name = function() return "v1.luna-missing.example.com" end,
    missing = function() return { spec = { group = "luna-missing.example.com", version = "v1",
      groupPriorityMinimum = 100 } } end,
    missing_causes = { { "spec.versionPriority", "FieldValueInvalid",
                         "Invalid value: 0: must be positive and less than 1000" } } },
  { group = "apps", gv = "apps/v1", res = "statefulsets", ns = true, kind = "StatefulSet",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field StatefulSet.spec of type v1.StatefulSetSpec" },
    valid = function() return { spec = { selector = { matchLabels = { app = "x" } },
      template = { metadata = { labels = { app = "x" } },
                   spec = { containers = { { name = "c", image = "example/app:1" } } } } } } end,
    bad = { { "metadata.name", "FieldValueInvalid", LABEL } } },
  { group = "events.k8s.io", gv = "events.k8s.io/v1", res = "events", ns = true, kind = "Event",
    wrong = { "regarding", "x", "json: cannot unmarshal string into Go struct field Event.regarding of type v1.ObjectReference" },
    valid = function(_, ctx) return { eventTime = "2026-01-01T00:00:00.000000Z", reason = "R", action = "A",
      reportingController = "example.com/c", reportingInstance = "i", type = "Normal",
      regarding = { kind = "Pod", name = "p", namespace = ctx.ns } } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } } },
  { group = "authentication.k8s.io", gv = "authentication.k8s.io/v1", res = "tokenreviews",
    kind = "TokenReview", create_only = true,
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field TokenReview.spec of type v1.TokenReviewSpec" },
    valid = function() return { spec = { token = "nope" } } end,
    -- a review is not stored: kube-apiserver answers whatever its name
    bad_code = 201 },
  { group = "authorization.k8s.io", gv = "authorization.k8s.io/v1", res = "selfsubjectaccessreviews",
    kind = "SelfSubjectAccessReview", create_only = true,
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field SelfSubjectAccessReview.spec of type v1.SelfSubjectAccessReviewSpec" },
    valid = function() return { spec = { resourceAttributes = { verb = "get", resource = "pods" } } } end,
    -- a SelfSubjectAccessReview's metadata must be empty
    bad = { { "metadata", "FieldValueInvalid", ': must be empty' } },
    missing_unnamed = true,
    missing = function() return { spec = {} } end,
    missing_causes = { { "spec", "FieldValueInvalid",
      "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified" } } },
  { group = "autoscaling", gv = "autoscaling/v2", res = "horizontalpodautoscalers", ns = true,
    kind = "HorizontalPodAutoscaler",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field HorizontalPodAutoscaler.spec of type v2.HorizontalPodAutoscalerSpec" },
    valid = function() return { spec = { scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment",
      name = "x" }, minReplicas = 1, maxReplicas = 3 } } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } },
    missing = function() return { spec = { minReplicas = 1, maxReplicas = 3 } } end,
    missing_causes = { { "spec.scaleTargetRef.kind", "FieldValueRequired", "Required value" },
                       { "spec.scaleTargetRef.name", "FieldValueRequired", "Required value" },
                       { "spec.scaleTargetRef.apiVersion", "FieldValueInvalid",
                         'Invalid value: "": apiVersion must specify API group' } } },
  { group = "batch", gv = "batch/v1", res = "cronjobs", ns = true, kind = "CronJob",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field CronJob.spec of type v1.CronJobSpec" },
    valid = function() return { spec = { schedule = "*/5 * * * *", jobTemplate = { spec = { template = {
      spec = { restartPolicy = "Never", containers = { { name = "c", image = "example/app:1" } } } } } } } } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } },
    missing = function() return { spec = { jobTemplate = { spec = { template = {
      spec = { restartPolicy = "Never", containers = { { name = "c", image = "example/app:1" } } } } } } } } end,
    missing_causes = { { "spec.schedule", "FieldValueRequired", "Required value" } } },
  { group = "certificates.k8s.io", gv = "certificates.k8s.io/v1", res = "certificatesigningrequests",
    kind = "CertificateSigningRequest",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field CertificateSigningRequest.spec of type v1.CertificateSigningRequestSpec" },
    valid = function(_, ctx) return { spec = { request = ctx.pem, signerName = "example.com/s",
      usages = { "digital signature" } } } end,
    -- a CSR's name is a path segment: "Bad_Name" is taken
    bad_name = "bad/name", bad = { { "metadata.name", "FieldValueInvalid", "may not contain '/'" } },
    missing = function(_, ctx) return { spec = { request = ctx.pem, usages = { "digital signature" } } } end,
    missing_causes = { { "spec.signerName", "FieldValueRequired", "Required value" } } },
  { group = "networking.k8s.io", gv = "networking.k8s.io/v1", res = "ingressclasses", kind = "IngressClass",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field IngressClass.spec of type v1.IngressClassSpec" },
    valid = function() return { spec = { controller = "example.com/ingress" } } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } },
    missing = function() return { spec = {} } end,
    missing_causes = { { "spec.controller", "FieldValueRequired", "Required value" } } },
  { group = "policy", gv = "policy/v1", res = "poddisruptionbudgets", ns = true, kind = "PodDisruptionBudget",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field PodDisruptionBudget.spec of type v1.PodDisruptionBudgetSpec" },
    valid = function() return { spec = { minAvailable = 1, selector = { matchLabels = { app = "x" } } } } end,
    -- a PDB's name is a path segment: "Bad_Name" is taken
    bad_name = "bad/name", bad = { { "metadata.name", "FieldValueInvalid", "may not contain '/'" } } },
  { group = "rbac.authorization.k8s.io", gv = "rbac.authorization.k8s.io/v1", res = "rolebindings", ns = true,
    kind = "RoleBinding", bad_name = "bad/name",
    wrong = { "subjects", "x", "json: cannot unmarshal string into Go struct field RoleBinding.subjects of type []v1.Subject" },
    valid = function() return { subjects = { { kind = "User", name = "alice" } },
      roleRef = { apiGroup = "rbac.authorization.k8s.io", kind = "Role", name = "r" } } end,
    bad = { { "metadata.name", "FieldValueInvalid", "may not contain '/'" } },
    missing = function() return { subjects = { { kind = "User", name = "alice" } },
      roleRef = { apiGroup = "rbac.authorization.k8s.io", kind = "Role" } } end,
    missing_causes = { { "roleRef.name", "FieldValueRequired", "Required value" } } },
  { group = "storage.k8s.io", gv = "storage.k8s.io/v1", res = "storageclasses", kind = "StorageClass",
    wrong = { "provisioner", 1, "json: cannot unmarshal number into Go struct field StorageClass.provisioner of type string" },
    valid = function() return { provisioner = "example.com/p" } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } },
    missing = function() return { parameters = { a = "1" } } end,
    missing_causes = { { "provisioner", "FieldValueRequired", "Required value" } } },
  { group = "admissionregistration.k8s.io", gv = "admissionregistration.k8s.io/v1",
    res = "validatingadmissionpolicybindings", kind = "ValidatingAdmissionPolicyBinding",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field ValidatingAdmissionPolicyBinding.spec of type v1.ValidatingAdmissionPolicyBindingSpec" },
    valid = function() return { spec = { policyName = "p", validationActions = { "Deny" } } } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } },
    missing = function() return { spec = { validationActions = { "Deny" } } } end,
    missing_causes = { { "spec.policyName", "FieldValueRequired", "Required value" } } },
  { group = "apiextensions.k8s.io", gv = "apiextensions.k8s.io/v1", res = "customresourcedefinitions",
    kind = "CustomResourceDefinition",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field CustomResourceDefinition.spec of type v1.CustomResourceDefinitionSpec" },
    valid = function() return { spec = { group = "bad.example.com", scope = "Namespaced",
      names = { plural = "things", kind = "Thing" },
      versions = { { name = "v1", served = true, storage = true,
                     schema = { openAPIV3Schema = { type = "object" } } } } } } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN },
            { "metadata.name", "FieldValueInvalid", 'Invalid value: "Bad_Name": must be spec.names.plural+"."+spec.group' } } },
  { group = "scheduling.k8s.io", gv = "scheduling.k8s.io/v1", res = "priorityclasses", kind = "PriorityClass",
    wrong = { "description", 1, "json: cannot unmarshal number into Go struct field PriorityClass.description of type string" },
    valid = function() return { value = 10 } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } } },
  { group = "coordination.k8s.io", gv = "coordination.k8s.io/v1", res = "leases", ns = true, kind = "Lease",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field Lease.spec of type v1.LeaseSpec" },
    valid = function() return { spec = { holderIdentity = "a" } } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } } },
  { group = "node.k8s.io", gv = "node.k8s.io/v1", res = "runtimeclasses", kind = "RuntimeClass",
    wrong = { "handler", 1, "json: cannot unmarshal number into Go struct field RuntimeClass.handler of type string" },
    valid = function() return { handler = "runc" } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } },
    missing = function() return {} end,
    missing_causes = { { "handler", "FieldValueRequired", "Required value" } } },
  { group = "discovery.k8s.io", gv = "discovery.k8s.io/v1", res = "endpointslices", ns = true,
    kind = "EndpointSlice",
    wrong = { "endpoints", "x", "json: cannot unmarshal string into Go struct field EndpointSlice.endpoints of type []v1.Endpoint" },
    valid = function() return { addressType = "IPv4", endpoints = { { addresses = { "10.0.0.1" } } } } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } },
    missing = function() return { endpoints = { { addresses = { "10.0.0.1" } } } } end,
    missing_causes = { { "addressType", "FieldValueRequired", "Required value" } } },
  { group = "resource.k8s.io", gv = "resource.k8s.io/v1", res = "deviceclasses", kind = "DeviceClass",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field DeviceClass.spec of type v1.DeviceClassSpec" },
    valid = function() return { spec = {} } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } } },
  { group = "flowcontrol.apiserver.k8s.io", gv = "flowcontrol.apiserver.k8s.io/v1",
    res = "prioritylevelconfigurations", kind = "PriorityLevelConfiguration",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field PriorityLevelConfiguration.spec of type v1.PriorityLevelConfigurationSpec" },
    valid = function() return { spec = { type = "Limited", limited = { nominalConcurrencyShares = 1,
      limitResponse = { type = "Reject" } } } } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } },
    missing = function() return { spec = { limited = { nominalConcurrencyShares = 1,
      limitResponse = { type = "Reject" } } } } end,
    missing_causes = { { "spec.limited", "FieldValueForbidden", "Forbidden" },
                       { "spec.type", "FieldValueRequired", "Required value" } } },
  { group = "storagemigration.k8s.io", gv = "storagemigration.k8s.io/v1",
    res = "storageversionmigrations", kind = "StorageVersionMigration",
    wrong = { "spec", "x", "json: cannot unmarshal string into Go struct field StorageVersionMigration.spec of type v1.StorageVersionMigrationSpec" },
    valid = function() return { spec = { resource = { group = "apps", resource = "deployments" } } } end,
    bad = { { "metadata.name", "FieldValueInvalid", SUBDOMAIN } } },
}

local HARVEST = os.getenv("LUNA_HARVEST")

describe("bad input in every served group", function()
  local srv, ctx
  local made = {}   -- paths of cluster-scoped objects a row may have made
  setup(function()
    srv = client.start()
    ctx = { pem = csr_pem(helpers.tmpdir()), ns = srv.ns }
  end)
  teardown(function()
    for _, p in ipairs(made) do srv:request("DELETE", p) end
    srv:stop()
  end)

  local function served(gv, res)
    local code, list = srv:request("GET", gv == "v1" and "/api/v1" or "/apis/" .. gv)
    if code ~= 200 or not list then return false end
    for _, r in ipairs(list.resources or {}) do
      if r.name == res then return true end
    end
    return false
  end

  local function collection(row)
    local base = row.gv == "v1" and "/api/v1" or "/apis/" .. row.gv
    if row.ns then return base .. "/namespaces/" .. srv.ns .. "/" .. row.res end
    return base .. "/" .. row.res
  end

  local function post(row, name, body)
    body.apiVersion, body.kind = row.gv, row.kind
    body.metadata = name and { name = name } or nil
    local path = collection(row)
    if name and not row.ns and not row.create_only then made[#made + 1] = path .. "/" .. name end
    local code, st, raw = srv:request("POST", path, body)
    if HARVEST then
      local f = assert(io.open(HARVEST, "a"))
      f:write(row.group, "\t", name, "\t", tostring(code), "\t", raw, "\n")
      f:close()
    end
    return code, st or {}
  end

  -- A 422 Invalid whose causes are exactly causes ({field, reason, contains}).
  local function invalid(code, st, causes)
    local got = {}
    for _, c in ipairs(st.details and st.details.causes or {}) do
      got[#got + 1] = { field = c.field, reason = c.reason, message = c.message }
    end
    local seen = tostring(code) .. " " .. tostring(st.reason) .. " " .. cjson.encode(got)
    assert.equal(422, code, seen)
    assert.equal("Invalid", st.reason, seen)
    assert.equal(#causes, #got, seen)
    for i, want in ipairs(causes) do
      assert.equal(want[1], got[i].field, seen)
      assert.equal(want[2], got[i].reason, seen)
      assert.truthy(got[i].message and got[i].message:find(want[3], 1, true), seen)
    end
  end

  for _, row in ipairs(ROWS) do
    describe(row.group .. " " .. row.kind, function()
      local function skip_unserved()
        if served(row.gv, row.res) then return false end
        pending(row.gv .. " " .. row.res .. " not served by this server")
        return true
      end

      it("refuses " .. row.wrong[1] .. " of the wrong JSON type: 400 BadRequest", function()
        if skip_unserved() then return end
        local body = row.valid(srv.ns .. "-wrong", ctx)
        body[row.wrong[1]] = row.wrong[2]
        local code, st = post(row, srv.ns .. "-wrong", body)
        local seen = tostring(code) .. " " .. tostring(st.message)
        assert.equal(400, code, seen)
        assert.equal("BadRequest", st.reason, seen)
        assert.equal(string.format('%s in version "%s" cannot be handled as a %s: %s', row.kind,
          row.gv:match("[^/]+$"), row.kind, row.wrong[3]), st.message)
      end)

      it(row.bad_code and ("answers " .. row.bad_code .. " whatever the name, as kube does") or
         "refuses an invalid metadata.name: 422 Invalid", function()
        if skip_unserved() then return end
        local name = row.bad_name or "Bad_Name"
        local code, st = post(row, name, row.valid(name, ctx))
        if row.bad_code then
          assert.equal(row.bad_code, code, tostring(code) .. " " .. tostring(st.message))
          return
        end
        invalid(code, st, row.bad)
      end)

      if row.missing then
        it("refuses a body without a required field: 422 Invalid", function()
          if skip_unserved() then return end
          local name = row.missing_name and row.missing_name() or (srv.ns .. "-missing")
          if row.missing_unnamed then name = nil end
          local code, st = post(row, name, row.missing(name, ctx))
          invalid(code, st, row.missing_causes)
        end)
      end
    end)
  end

  -- kube-aggregator's ValidateAPIService: groupPriorityMinimum 1..20000,
  -- versionPriority 1..1000, both bounds taken (its messages say "less
  -- than" the bound, which is allowed)
  it("takes an APIService's priorities up to their bounds, and refuses past them", function()
    local row
    for _, r in ipairs(ROWS) do if r.res == "apiservices" then row = r end end
    local function with(gpm, vp, group)
      local body = row.valid(nil, ctx)
      body.spec.group, body.spec.groupPriorityMinimum, body.spec.versionPriority = group, gpm, vp
      return body
    end
    local g = srv.ns .. "-prio.example.com"
    local code, st = post(row, "v1." .. g, with(20000, 1000, g))
    assert.equal(201, code, tostring(st.message))
    g = srv.ns .. "-past.example.com"
    code, st = post(row, "v1." .. g, with(20001, 1001, g))
    invalid(code, st, {
      { "spec.groupPriorityMinimum", "FieldValueInvalid", "Invalid value: 20001: must be positive and less than 20000" },
      { "spec.versionPriority", "FieldValueInvalid", "Invalid value: 1001: must be positive and less than 1000" } })
  end)

  -- A path-segment name has no length limit in kube; the dev server keys
  -- objects by "namespace/name" in fixed buffers, so it refuses a name
  -- longer than 506 bytes instead of cutting it short in a key, where two
  -- long names were one object (the second create replaced the first and
  -- neither could be read back).
  it("refuses a path-segment name longer than its keys hold, rather than merging two objects #devonly", function()
    if srv.real then return pending(client.DEV_ONLY .. "kube-apiserver sets no length on an RBAC name") end
    local path = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    local ok_name = srv.ns .. "-" .. ("a"):rep(506 - #srv.ns - 1)
    local code, got = srv:request("POST", path, { apiVersion = "rbac.authorization.k8s.io/v1",
      kind = "ClusterRole", metadata = { name = ok_name } })
    assert.equal(201, code, got and got.message)
    made[#made + 1] = path .. "/" .. ok_name
    assert.equal(200, (srv:request("GET", path .. "/" .. ok_name)))
    for _, suffix in ipairs { "x", "y" } do
      local st
      code, st = srv:request("POST", path, { apiVersion = "rbac.authorization.k8s.io/v1",
        kind = "ClusterRole", metadata = { name = ok_name .. ("b"):rep(200) .. suffix } })
      invalid(code, st or {}, { { "metadata.name", "FieldValueInvalid", "must be no more than 506 characters" } })
    end
  end)
end)
