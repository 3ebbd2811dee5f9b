-- /metrics of the container, as a Prometheus in the cluster scrapes it:
-- over the pod network, HTTPS on the Deployment's metrics port, answered
-- only for a token the API server authenticates and RBAC lets get
-- /metrics; the probes stay plain HTTP for the kubelet.
local C = require("17-container.support")

local skip = C.skip_reason()

describe("metrics over the container network #container", function()
  if skip then
    pending(skip)
    return
  end

  local api, pod

  setup(function()
    api = C.apiserver()
    api:make_objects(2)
    pod = C.pod(api, C.configmap({ ["recorder.lua"] = C.recorder(api.ns, "v1") }))
    pod:await("controller started", 60)
  end)

  teardown(function()
    if api then api:stop() end
  end)

  it("listens securely on the Deployment's metrics port, with a self-signed certificate", function()
    local rec = pod:await("metrics server listening", 1)
    assert.is_true(rec.secure) -- a JSON boolean (typed JSON logs)
    assert.equal("self-signed", rec.cert)
    assert.matches(":" .. C.port("metrics") .. "$", rec.address)
    -- plain HTTP gets no answer from the TLS port
    local code = pod:http(C.port("metrics"), "/metrics", { token = api.scrapers.allowed })
    assert.not_equal(200, code)
  end)

  it("answers an allowed scraper, and 401/403 to the others", function()
    local code, body = pod:http(C.port("metrics"), "/metrics", { https = true })
    assert.same({ 401, "Unauthorized\n" }, { code, body })
    code, body = pod:http(C.port("metrics"), "/metrics", { https = true, token = "made-up" })
    assert.same({ 401, "Unauthorized\n" }, { code, body })
    code, body = pod:http(C.port("metrics"), "/metrics", { https = true, token = api.scrapers.denied })
    assert.same({ 403, "Authorization denied for user " .. api.scrapers.denied_user .. "\n" }, { code, body })
    local parsed = pod:metrics()
    assert.equal(1, C.metric(parsed, "leader_election_master_status", { name = "luna" }))
    assert.is_true((C.metric(parsed, "controller_runtime_reconcile_total",
      { controller = "recorder", result = "requeue_after" }) or 0) >= 2)
  end)

  it("keeps the probes plain and open for the kubelet", function()
    assert.equal(200, (pod:http(C.port("health"), "/healthz")))
    assert.equal(200, (pod:http(C.port("health"), "/readyz")))
  end)
end)
