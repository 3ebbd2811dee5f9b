-- Content negotiation for GET, LIST and WATCH: PartialObjectMetadata
-- (what metadata-only informers ask for), and the 406 for what the server
-- cannot send.  The same assertions hold on kube-apiserver (KUBECONFIG).
local client = require("support.apiserver_client")
local helpers = require("helpers")

local AS = "application/json;as=%s;g=meta.k8s.io;v=%s"
local function accept(as, v) return "Accept: " .. AS:format(as, v or "v1") end
local MEDIA = "only the following media types are accepted: application/json, application/yaml, " ..
  "application/vnd.kubernetes.protobuf"
-- go-restful's, on a built-in type's route, before kube negotiates
local ROUTE_ONE = "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, " ..
  "application/vnd.kubernetes.protobuf"
local ROUTE_LIST = ROUTE_ONE .. ", application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
-- kube pretty-prints for a User-Agent of curl: the byte-level checks say who they are
local UA = "User-Agent: luna-spec"

describe("PartialObjectMetadata #integration", function()
  local srv
  setup(function() srv = client.start() end)
  teardown(function() srv:stop() end)

  local function secret(name, labels)
    local code, obj = srv:request("POST", srv:ns_path("secrets"), { apiVersion = "v1", kind = "Secret",
      metadata = { name = name, labels = labels, annotations = { note = "kept" } },
      data = { big = string.rep("QUFB", 1024) } })
    assert.equal(201, code)
    return obj
  end

  local function same_metadata(full, partial)
    -- kube copies ObjectMeta whole (managedFields included)
    assert.same(full.metadata, partial.metadata)
    assert.is_nil(partial.data)
  end

  it("lists as a PartialObjectMetadataList, items as PartialObjectMetadata", function()
    local a, b = secret("pom-a", { pom = "yes" }), secret("pom-b", { pom = "yes" })
    local code, list, raw, headers = srv:request("GET", srv:ns_path("secrets") .. "?labelSelector=pom%3Dyes",
      nil, { headers = { accept("PartialObjectMetadataList"), UA } })
    assert.equal(200, code, raw)
    assert.matches("[Cc]ontent%-[Tt]ype: application/json\r?\n", headers)
    assert.equal("PartialObjectMetadataList", list.kind)
    assert.equal("meta.k8s.io/v1", list.apiVersion)
    assert.is_string(list.metadata.resourceVersion)
    assert.equal(2, #list.items)
    assert.matches('^{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{', raw)
    for i, want in ipairs({ a, b }) do
      local item = list.items[i]
      assert.equal("PartialObjectMetadata", item.kind)
      assert.equal("meta.k8s.io/v1", item.apiVersion)
      same_metadata(want, item)
    end
    assert.matches('"items":%[{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"pom%-a"', raw)
  end)

  it("pages a metadata list with continue and remainingItemCount", function()
    for i = 1, 3 do secret("page-" .. i, { page = "yes" }) end
    local code, list = srv:request("GET", srv:ns_path("secrets") .. "?labelSelector=page%3Dyes&limit=2",
      nil, { headers = { accept("PartialObjectMetadataList") } })
    assert.equal(200, code)
    assert.equal(2, #list.items)
    assert.is_string(list.metadata.continue)
    local code2, rest = srv:request("GET", srv:ns_path("secrets") .. "?labelSelector=page%3Dyes&limit=2&continue=" ..
      list.metadata.continue, nil, { headers = { accept("PartialObjectMetadataList") } })
    assert.equal(200, code2)
    assert.equal("page-3", rest.items[1].metadata.name)
    assert.equal("PartialObjectMetadata", rest.items[1].kind)
  end)

  it("answers an empty metadata list with items null", function()
    local code, _, raw = srv:request("GET", srv:ns_path("secrets") .. "?labelSelector=none%3Dhere",
      nil, { headers = { accept("PartialObjectMetadataList"), UA } })
    assert.equal(200, code)
    assert.matches('"items":null}', raw, 1, true)
  end)

  it("speaks meta.k8s.io/v1beta1 too", function()
    secret("beta", { beta = "yes" })
    local code, list = srv:request("GET", srv:ns_path("secrets") .. "?labelSelector=beta%3Dyes", nil,
      { headers = { accept("PartialObjectMetadataList", "v1beta1") } })
    assert.equal(200, code)
    assert.equal("meta.k8s.io/v1beta1", list.apiVersion)
    assert.equal("meta.k8s.io/v1beta1", list.items[1].apiVersion)
  end)

  it("gets one object as PartialObjectMetadata", function()
    local full = secret("one")
    local code, obj, raw = srv:request("GET", srv:ns_path("secrets", "one"), nil,
      { headers = { accept("PartialObjectMetadata"), UA } })
    assert.equal(200, code)
    assert.equal("PartialObjectMetadata", obj.kind)
    assert.equal("meta.k8s.io/v1", obj.apiVersion)
    same_metadata(full, obj)
    assert.matches('^{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"one"', raw)
  end)

  it("refuses a list asked for as one object and one object asked for as a list, with 406", function()
    secret("mismatch")
    local code, st = srv:request("GET", srv:ns_path("secrets"), nil, { headers = { accept("PartialObjectMetadata") } })
    assert.equal(406, code)
    assert.same({ "Status", "Failure", "NotAcceptable", 406,
      "you requested PartialObjectMetadata, but the requested object is a list (*core.SecretList)" },
      { st.kind, st.status, st.reason, st.code, st.message })
    code, st = srv:request("GET", srv:ns_path("secrets", "mismatch"), nil,
      { headers = { accept("PartialObjectMetadataList") } })
    assert.equal(406, code)
    assert.equal("you requested PartialObjectMetadataList, but the requested object is not a list (*core.Secret)",
      st.message)
    -- the object is read first: a missing one is a 404
    code = srv:request("GET", srv:ns_path("secrets", "absent"), nil, { headers = { accept("PartialObjectMetadataList") } })
    assert.equal(404, code)
    code, st = srv:request("GET", "/apis/apps/v1/namespaces/" .. srv.ns .. "/deployments", nil,
      { headers = { accept("PartialObjectMetadata") } })
    assert.equal(406, code)
    assert.equal("you requested PartialObjectMetadata, but the requested object is a list (*apps.DeploymentList)",
      st.message)
  end)

  it("refuses a conversion it cannot make with 406, unless the Accept falls back", function()
    for _, h in ipairs({ accept("Foo"), accept("PartialObjectMetadata", "v2"),
                         "Accept: application/json;as=PartialObjectMetadata",
                         "Accept: application/json;as=PartialObjectMetadata;g=example.com;v=v1",
                         "Accept: application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
                         "Accept: application/json;stream=other", "Accept: application/json;sv=v2" }) do
      local code, st = srv:request("GET", srv:ns_path("secrets"), nil, { headers = { h } })
      assert.equal(406, code, h)
      assert.same({ "NotAcceptable", MEDIA }, { st.reason, st.message }, h)
      code, st = srv:request("GET", srv:ns_path("secrets", "nothing-here"), nil, { headers = { h } })
      assert.equal(406, code, "GET one: " .. h)
      assert.equal(MEDIA, st.message, "GET one: " .. h)
    end
    -- a media type the route does not produce: go-restful answers first
    for _, h in ipairs({ "Accept: text/html", "Accept: application/*", "Accept: text/html, application/*;q=0.5" }) do
      local code, st = srv:request("GET", srv:ns_path("secrets"), nil, { headers = { h } })
      assert.equal(406, code, h)
      assert.same({ "NotAcceptable", ROUTE_LIST, {} }, { st.reason, st.message, st.details }, h)
      code, st = srv:request("GET", srv:ns_path("secrets", "nothing-here"), nil, { headers = { h } })
      assert.equal(406, code, "GET one: " .. h)
      assert.equal(ROUTE_ONE, st.message, "GET one: " .. h)
    end
    -- a later clause kube can serve wins: the plain list
    local code, list = srv:request("GET", srv:ns_path("secrets"), nil,
      { headers = { "Accept: " .. AS:format("Foo", "v1") .. ", application/json" } })
    assert.equal(200, code)
    assert.equal("SecretList", list.kind)
    -- a higher q wins over order
    code, list = srv:request("GET", srv:ns_path("secrets"), nil,
      { headers = { "Accept: application/json;q=0.5, " .. AS:format("PartialObjectMetadataList", "v1") } })
    assert.equal(200, code)
    assert.equal("PartialObjectMetadataList", list.kind)
    -- wildcards match json
    code, list = srv:request("GET", srv:ns_path("secrets"), nil,
      { headers = { "Accept: */*;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1" } })
    assert.equal(200, code)
    assert.equal("PartialObjectMetadataList", list.kind)
  end)

  it("watches as PartialObjectMetadata", function()
    local code, list = srv:request("GET", srv:ns_path("secrets"))
    assert.equal(200, code)
    local w = srv:watch(srv:ns_path("secrets") .. "?watch=true&resourceVersion=" .. list.metadata.resourceVersion,
      { accept("PartialObjectMetadata") })
    local full = secret("watched")
    local ev = w:until_event(function(e) return e.object and e.object.metadata.name == "watched" end, 10)
    w:stop()
    assert.is_not_nil(ev, "no event for the new secret")
    assert.equal("ADDED", ev.type)
    assert.equal("PartialObjectMetadata", ev.object.kind)
    assert.equal("meta.k8s.io/v1", ev.object.apiVersion)
    same_metadata(full, ev.object)
    -- bookmarks too (the initial-events-end one comes at once)
    w = srv:watch(srv:ns_path("secrets") .. "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan" ..
      "&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dnothing", { accept("PartialObjectMetadata") })
    ev = w:event(10)
    w:stop()
    assert.is_not_nil(ev, "no bookmark")
    assert.same({ "BOOKMARK", "PartialObjectMetadata", "meta.k8s.io/v1", { ["k8s.io/initial-events-end"] = "true" } },
      { ev.type, ev.object.kind, ev.object.apiVersion, ev.object.metadata.annotations })
    assert.is_string(ev.object.metadata.resourceVersion)
  end)

  it("ends a watch asked for PartialObjectMetadataList at its first object, sending nothing", function()
    -- kube cannot convert one object to a list, nor then encode it as it is
    local code, list = srv:request("GET", srv:ns_path("secrets"))
    assert.equal(200, code)
    local w = srv:watch(srv:ns_path("secrets") .. "?watch=true&resourceVersion=" .. list.metadata.resourceVersion,
      { accept("PartialObjectMetadataList") })
    secret("watched-list")
    local ev = w:event(10)
    assert.is_nil(ev)
    assert.is_true(w:ends(5))
    w:stop()
  end)

  it("converts custom resources, names their Go type unstructured, and serves them no protobuf", function()
    local group = srv.ns .. ".example.com"
    local crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    local code = srv:request("POST", crd, { apiVersion = "apiextensions.k8s.io/v1",
      kind = "CustomResourceDefinition", metadata = { name = "gizmos." .. group },
      spec = { group = group, scope = "Namespaced", names = { plural = "gizmos", singular = "gizmo",
        kind = "Gizmo", listKind = "GizmoList" }, versions = { { name = "v1", served = true, storage = true,
        schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } } } } })
    assert.equal(201, code)
    finally(function() srv:request("DELETE", crd .. "/gizmos." .. group) end)
    local path = "/apis/" .. group .. "/v1/namespaces/" .. srv.ns .. "/gizmos"
    -- a new CRD's resource is served a moment after it is Established
    helpers.eventually(function()
      return srv:request("POST", path, { apiVersion = group .. "/v1", kind = "Gizmo",
        metadata = { name = "gz" }, spec = { size = 3 } }) == 201
    end, 30, "the custom resource to be served")
    local lcode, list = srv:request("GET", path, nil, { headers = { accept("PartialObjectMetadataList") } })
    assert.equal(200, lcode)
    assert.equal("PartialObjectMetadataList", list.kind)
    assert.equal("PartialObjectMetadata", list.items[1].kind)
    assert.equal("gz", list.items[1].metadata.name)
    assert.is_nil(list.items[1].spec)
    local st
    code, st = srv:request("GET", path, nil, { headers = { accept("PartialObjectMetadata") } })
    assert.equal(406, code)
    assert.equal("you requested PartialObjectMetadata, but the requested object is a list " ..
      "(*unstructured.UnstructuredList)", st.message)
    -- Unstructured passes for a list until its items are read
    code, st = srv:request("GET", path .. "/gz", nil, { headers = { accept("PartialObjectMetadataList") } })
    assert.equal(500, code)
    assert.same({ "Failure", "content is not a list" }, { st.status, st.message })
    assert.is_nil(st.reason)
    -- no go-restful here: kube's own negotiation answers
    code, st = srv:request("GET", path, nil, { headers = { "Accept: text/html" } })
    assert.equal(406, code)
    assert.equal(MEDIA, st.message)
    -- (kube writes this Status in protobuf, the dev server in JSON)
    local pcode, _, praw = srv:request("GET", path, nil, { headers = { "Accept: application/vnd.kubernetes.protobuf" } })
    assert.equal(406, pcode)
    assert.matches(MEDIA, praw, 1, true)
    code = srv:request("GET", path, nil,
      { headers = { "Accept: application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1" } })
    assert.equal(200, code)
  end)

  it("refuses a watch in YAML, which does not stream", function()
    -- (kube writes this Status in YAML, the dev server in JSON)
    local code, _, raw = srv:request("GET", srv:ns_path("secrets") .. "?watch=true&timeoutSeconds=1", nil,
      { headers = { "Accept: application/yaml" } })
    assert.equal(406, code)
    assert.matches("NotAcceptable", raw, 1, true)
    assert.matches("application/json;stream=watch", raw, 1, true)
  end)
end)
