-- /healthz and /readyz of `luna run` (kube-apiserver's body format),
-- the servers' addresses and errors, and the production flags.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local S = require("15-production.support")

local function get(url, method)
  local code, body = S.get(url, method)
  return code, body
end

local GADGETS = [[
local luna = require "luna"
return luna.controller { name = "gadgets", watch = "%s/v1/Gadget",
                         reconcile = function() end }
]]

local CONFIGMAPS = [[
local luna = require "luna"
return luna.controller { name = "cms", watch = { "v1/ConfigMap", namespace = %q },
                         reconcile = function() end }
]]

describe("luna run probes", function()
  local srv, luna

  before_each(function() srv = client.start() end)
  after_each(function()
    if luna then luna:stop() end
    luna = nil
    srv:stop()
  end)

  it("is live at once, ready only once the informers have synced", function()
    -- the controller watches a kind the server does not serve yet
    local group = srv.ns .. ".example.com"
    luna = S.start(srv, S.controllers({ ["g.lua"] = GADGETS:format(group) }))
    luna:await("informer kind not served", 10)
    local code, body = S.get(luna.health .. "/healthz")
    assert.same({ 200, "ok" }, { code, body })
    code, body = S.get(luna.health .. "/readyz")
    assert.equal(500, code)
    -- the reason names the controller, the kind and what discovery said
    local waiting = ('controller gadgets: %s/v1/Gadget not served (no matches for kind "Gadget" in ' ..
                     'version "%s/v1": the server does not serve that group-version)'):format(group, group)
    assert.equal("[+]loop ok\n[-]informers-synced failed: " .. waiting .. "\n" ..
                 "[+]leader-or-standby ok\n[+]controllers-current ok\nreadyz check failed\n", body)
    code, body = S.get(luna.health .. "/readyz/informers-synced")
    assert.same({ 500, "[-]informers-synced failed: " .. waiting .. "\n" }, { code, body })
    assert.same({ 200, "ok" }, { get(luna.health .. "/readyz/leader-or-standby") })
    assert.same({ 200, "ok" }, { get(luna.health .. "/readyz?exclude=informers-synced") })
    code, body = S.get(luna.health .. "/readyz?verbose&exclude=informers-synced")
    assert.equal(200, code)
    assert.matches("[+]informers-synced excluded: ok", body, 1, true)
    assert.equal(404, (S.get(luna.health .. "/readyz/no-such-check")))

    local crd = { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
      metadata = { name = "gadgets." .. group },
      spec = { group = group, scope = "Namespaced",
        versions = { { name = "v1", served = true, storage = true,
          schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } } },
        names = { plural = "gadgets", singular = "gadget", kind = "Gadget", listKind = "GadgetList" } } }
    assert.equal(201, (srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)))
    helpers.eventually(function() return S.get(luna.health .. "/readyz") == 200 end, 20, "ready")
    assert.same({ 200, "ok" }, { get(luna.health .. "/readyz") })
    code, body = S.get(luna.health .. "/readyz?verbose")
    assert.same({ 200, "[+]loop ok\n[+]informers-synced ok\n[+]leader-or-standby ok\n" ..
                       "[+]controllers-current ok\nreadyz check passed\n" },
                { code, body })
    assert.same({ 200, "ok" }, { get(luna.health .. "/healthz/loop") })
    srv:request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets." .. group)
  end)

  it("serves metrics and probes on their own addresses: 404 elsewhere, 405 for other methods", function()
    luna = S.start(srv, S.controllers({ ["c.lua"] = CONFIGMAPS:format(srv.ns) }),
                   { args = { "--health-probe-bind-address=localhost:0" } })
    assert.are_not.equal(luna.metrics, luna.health)
    luna:await("caches synced", 10)
    assert.equal(200, (S.get(luna.metrics .. "/metrics")))
    assert.equal(404, (S.get(luna.metrics .. "/healthz")))
    assert.equal(404, (S.get(luna.health .. "/metrics")))
    assert.equal(200, (S.get(luna.health .. "/healthz")))
    local code, body = S.get(luna.health .. "/nothing-here")
    assert.same({ 404, "404 page not found\n" }, { code, body })
    local headers
    code, body, headers = S.get(luna.metrics .. "/metrics", "POST")
    assert.same({ 405, "method not allowed\n" }, { code, body })
    assert.matches("Allow: GET, HEAD", headers, 1, true)
    assert.equal(405, (S.get(luna.health .. "/readyz", "DELETE")))
    assert.equal(200, (S.get(luna.health .. "/readyz", "HEAD")))
  end)

  -- A client that opens connections and never ends a request holds each
  -- until the idle timeout, and one that trickles a byte now and then holds
  -- it for ever: one address gets at most 16 of a server's 64 connections,
  -- so the kubelet's probes, from another address, are still answered.
  it("keeps answering other addresses while one holds every connection it can", function()
    luna = S.start(srv, S.controllers({ ["c.lua"] = CONFIGMAPS:format(srv.ns) }),
                   { args = { "--health-probe-bind-address=127.0.0.1:0" } })
    luna:await("caches synced", 10)
    local port = assert(luna.health:match(":(%d+)$"))
    local holder = helpers.spawn({ "bash", "-c", ([[
      trap '' PIPE
      for i in $(seq 64); do
        exec {fd}<>/dev/tcp/127.0.0.1/%s || exit 1
        printf 'GET /healthz HTTP/1.1
Host: x
' >&$fd
      done
      echo held
      exec sleep 600]]):format(port) })
    holder:expect("held", 10)
    local url = ("http://127.0.0.1:%s/healthz"):format(port)
    assert.equal(200, (S.get(url, nil, { interface = "127.0.0.2", max_time = 1 })))
    assert.equal(0, (S.get(url, nil, { interface = "127.0.0.1", max_time = 1 })), "a 17th from the holder's address")
    holder:stop()
    helpers.eventually(function() return S.get(url, nil, { interface = "127.0.0.1" }) == 200 end, 10,
                       "the holder's address served again once it let go")
  end)

  it("runs without servers when both addresses are 0", function()
    local dir = S.controllers({ ["c.lua"] = CONFIGMAPS:format(srv.ns) })
    local p = helpers.spawn({ helpers.luna, "run", "--kubeconfig", S.kubeconfig_for(srv),
      "--metrics-bind-address=0", "--health-probe-bind-address", "0", dir })
    p:expect("controller started", 15)
    p:kill()
    assert.equal(0, p:wait(10))
    local out = p:drain(1)
    assert.is_nil(out:find("listening", 1, true), out)
  end)

  it("exits 1 naming the address when it cannot listen", function()
    local port = srv.url:match(":(%d+)$")
    local dir = S.controllers({ ["c.lua"] = CONFIGMAPS:format(srv.ns) })
    local out, rc = helpers.run(("%s run --kubeconfig %s --metrics-bind-address=127.0.0.1:%s %s")
      :format(helpers.luna, S.kubeconfig_for(srv), port, dir))
    assert.equal(1, rc)
    assert.matches('startup failed error="metrics server: cannot listen on 127.0.0.1:' .. port ..
                   ': Address already in use"', out, 1, true)
  end)
end)

describe("luna run production flags", function()
  local function run(args)
    return helpers.run(helpers.luna .. " run " .. args .. " /nonexistent")
  end

  it("reject malformed addresses and durations with exit 2", function()
    local cases = {
      { "--metrics-bind-address=8080", 'address "8080": want HOST:PORT (":8080")' },
      { "--health-probe-bind-address=:99999", 'address ":99999": port out of range' },
      { "--metrics-bind-address=::1:80", "an IPv6 host needs brackets" },
      { "--metrics-bind-address=[::1:80", "unclosed '['" },
      { "--leader-elect-lease-duration=soon", "want a positive duration" },
      { "--shutdown-grace-period=-1", "want a positive duration" },
      { "--leader-elect-retry-period=0", "want a positive duration" },
      { "--leader-elect=maybe", "want true or false" },
      { "--leader-elect-lease-duration=10s --leader-elect-renew-deadline=10",
        "lease duration (10 s) must be greater than the renew deadline (10 s)" },
      { "--leader-elect-renew-deadline=2 --leader-elect-retry-period=2s",
        "renew deadline (2 s) must be greater than 1.2 x the retry period (2 s)" },
    }
    for _, c in ipairs(cases) do
      local out, rc = run(c[1])
      assert.equal(2, rc, c[1] .. ": " .. out)
      assert.matches(c[2], out, 1, true)
    end
  end)

  it("accept Go durations and booleans, and --watch", function()
    -- valid flags get as far as loading the (missing) directory: exit 1
    local out, rc = run("--leader-elect=false --watch --leader-elect-lease-duration=1m " ..
      "--leader-elect-renew-deadline=45s --leader-elect-retry-period=1500ms " ..
      "--shutdown-grace-period=1m30s --leader-election-id=x --leader-election-namespace=y " ..
      "--metrics-bind-address=[::1]:0 --health-probe-bind-address=0")
    assert.equal(1, rc, out)
    assert.matches("/nonexistent: cannot read directory", out, 1, true)
  end)

  it("are in the usage text", function()
    local out = helpers.run(helpers.luna .. " --help")
    for _, flag in ipairs({ "--leader-elect ", "--leader-election-id", "--leader-election-namespace",
        "--leader-elect-lease-duration", "--leader-elect-renew-deadline", "--leader-elect-retry-period",
        "--metrics-bind-address", "--health-probe-bind-address", "--shutdown-grace-period", "--watch" }) do
      assert.matches(flag, out, 1, true)
    end
  end)
end)
