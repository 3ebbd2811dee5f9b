-- A kind the API server does not serve (a typo, a CRD not installed yet):
-- the controller that needs it waits and is reported loudly (an error log
-- line naming controller and kind, luna_controller_kinds_not_served, and
-- /readyz), every other controller runs, and it starts without a restart
-- once the kind is served.  A reload checks kinds as startup does and says
-- so in its result ("reload done" result=..., luna_reloads_total{result}).
local helpers = require("helpers")
local expo = require("support.exposition")
local rt = require("11-runtime.support")

local SIGHUP = 1

local function http_get(url)
  local tmp = helpers.tmpdir()
  local out = helpers.run(("env -u LD_PRELOAD curl -s -S --max-time 10 -o %s/b -w '%%{http_code}' '%s'")
    :format(tmp, url))
  return tonumber(out:match("(%d%d%d)%s*$")), helpers.read_file(tmp .. "/b") or ""
end

-- plain HTTP metrics (the default is HTTPS with scrapes reviewed by the
-- API server): these specs read them with curl
local PROBES = { "--metrics-secure=false", "--metrics-bind-address=127.0.0.1:0",
                 "--health-probe-bind-address=127.0.0.1:0" }

-- The servers' base URLs: metrics and probes listen on their own addresses.
local function base_url(env)
  local m = rt.wait(env, rt.msg("metrics server listening"), 20, "the metrics server")
  local h = rt.wait(env, rt.msg("health probe server listening"), 20, "the probe server")
  return { metrics = "http://" .. m.address, probes = "http://" .. h.address }
end

local function metric(url, name, labels)
  local code, body = http_get(url.metrics .. "/metrics")
  assert(code == 200, "GET /metrics: " .. tostring(code))
  return expo.get(expo.parse(body), name, labels)
end

-- A controller of ConfigMaps labelled for this run; `extra` goes into the
-- spec table; each reconcile logs "<name> reconciled".
local function controller(name, token, extra)
  return rt.source([[
local luna = require "luna"
return luna.controller {
  name = "@NAME@",
  watch = { "@WATCH@", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  @EXTRA@
  reconcile = function(req) luna.log.info("@NAME@ reconciled", { name = req.name }) end,
}
]], { NAME = name, TOKEN = token, WATCH = (extra and extra.watch) or "v1/ConfigMap",
      EXTRA = (extra and extra.fields) or "" })
end

local function crd(group)
  return { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
    metadata = { name = "things." .. group },
    spec = { group = group, scope = "Namespaced",
      versions = { { name = "v1", served = true, storage = true,
        schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } } },
      names = { plural = "things", singular = "thing", kind = "Thing", listKind = "ThingList" } } }
end

describe("a kind the server does not serve #integration", function()
  local env, crd_path
  after_each(function()
    if crd_path then env.srv:request("DELETE", crd_path) end
    crd_path = nil
    if env then env:stop() end
    env = nil
  end)

  it("stops only its own controller, loudly, until the kind is served", function()
    local token = rt.token()
    local group = "nope-" .. token .. ".example.com"
    env = rt.start{ wait = false, args = PROBES, sources = {
      ["a.lua"] = controller("plain", token),
      ["b.lua"] = controller("needs-thing", token, { fields = ('owns = { "%s/v1/Thing" },'):format(group) }),
    } }
    local url = base_url(env)
    rt.wait(env, rt.msg("controller started", { controller = "plain" }), 20, "plain started")
    rt.cm(env, "one", {}, { [rt.LABEL] = token })
    rt.wait(env, rt.msg("plain reconciled", { name = "one" }), 20, "plain reconciles")

    local kind = group .. "/v1/Thing"
    local rec = rt.wait(env, rt.msg("controller kind not served", { controller = "needs-thing", kind = kind }),
                        20, "the error naming the controller and kind")
    assert.equal("error", rec.level)
    assert.matches('no matches for kind "Thing" in version "' .. group:gsub("%p", "%%%0") .. '/v1"', rec.error)
    assert.is_nil(rt.find(env, rt.msg("controller started", { controller = "needs-thing" })))
    assert.is_nil(rt.find(env, rt.msg("needs-thing reconciled")))
    assert.is_nil(rt.find(env, rt.msg("caches synced")))

    local code, body = http_get(url.probes .. "/readyz/informers-synced")
    assert.equal(500, code)
    assert.matches('controller needs%-thing: ' .. kind:gsub("%p", "%%%0") ..
                   ' not served %(no matches for kind "Thing"', body)
    assert.is_nil(body:find("controller plain", 1, true), body)
    assert.equal(1, metric(url, "luna_controller_kinds_not_served", { controller = "needs-thing" }))
    assert.equal(0, metric(url, "luna_controller_kinds_not_served", { controller = "plain" }))

    -- installed later: found without a restart, and the controller starts
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things." .. group
    assert.equal(201, (env.srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                       crd(group))))
    rt.wait(env, rt.msg("controller kind served", { controller = "needs-thing", kind = kind }), 30,
            "the kind served")
    rt.wait(env, rt.msg("controller started", { controller = "needs-thing" }), 30, "needs-thing started")
    rt.wait(env, rt.msg("needs-thing reconciled", { name = "one" }), 30, "needs-thing reconciles")
    rt.wait(env, rt.msg("caches synced"), 10, "caches synced")
    assert.same({ 200, "ok" }, { http_get(url.probes .. "/readyz/informers-synced") })
    assert.equal(0, metric(url, "luna_controller_kinds_not_served", { controller = "needs-thing" }))
  end)

  it("is checked by a reload as at startup, and said in its result", function()
    local token = rt.token()
    env = rt.start{ args = PROBES, sources = { ["a.lua"] = controller("stamper", token) } }
    local url = base_url(env)
    assert.same({ 200, "ok" }, { http_get(url.probes .. "/readyz") })

    -- a typo'd kind: the reload is applied, and reported as unresolved
    helpers.write_file(env.dir .. "/a.lua", controller("stamper", token, { watch = "v1/ConfigMaps" }))
    env.luna:kill(SIGHUP)
    local done = rt.wait(env, rt.msg("reload done"), 30, "the reload's result")
    assert.equal("error", done.level)
    assert.equal("unresolved", done.result)
    assert.equal('stamper: v1/ConfigMaps not served (no matches for kind "ConfigMaps" in version "v1")',
                 done.unresolved)
    rt.wait(env, rt.msg("controller kind not served", { controller = "stamper", kind = "v1/ConfigMaps" }),
            10, "the controller's error")
    local code, body = http_get(url.probes .. "/readyz/informers-synced")
    assert.equal(500, code)
    assert.matches("controller stamper: v1/ConfigMaps not served", body, 1, true)
    assert.equal(1, metric(url, "luna_reloads_total", { result = "unresolved" }))
    assert.equal(0, metric(url, "luna_reloads_total", { result = "success" }))
    assert.equal(1, metric(url, "luna_controller_kinds_not_served", { controller = "stamper" }))

    -- fixed: success, ready, reconciling again
    helpers.write_file(env.dir .. "/a.lua", controller("stamper", token))
    env.luna:kill(SIGHUP)
    local fixed = rt.wait_count(env, rt.msg("reload done"), 2, 30, "the second reload")[2]
    assert.same({ "info", "success" }, { fixed.level, fixed.result })
    assert.is_nil(fixed.unresolved)
    rt.cm(env, "after", {}, { [rt.LABEL] = token })
    rt.wait(env, rt.msg("stamper reconciled", { name = "after" }), 20, "the fixed controller reconciles")
    assert.same({ 200, "ok" }, { http_get(url.probes .. "/readyz/informers-synced") })
    assert.equal(1, metric(url, "luna_reloads_total", { result = "success" }))
    assert.equal(0, metric(url, "luna_controller_kinds_not_served", { controller = "stamper" }))
  end)

  it("reports a typo'd kind at startup while the other controllers run", function()
    local token = rt.token()
    env = rt.start{ wait = false, args = PROBES, sources = {
      ["a.lua"] = controller("typo", token, { watch = "v1/Namespaces" }),
      ["b.lua"] = controller("fine", token),
    } }
    local url = base_url(env)
    rt.wait(env, rt.msg("controller kind not served", { controller = "typo", kind = "v1/Namespaces" }), 20,
            "the typo reported")
    rt.wait(env, rt.msg("controller started", { controller = "fine" }), 20, "the other controller runs")
    local code, body = http_get(url.probes .. "/readyz")
    assert.equal(500, code)
    assert.matches('controller typo: v1/Namespaces not served (no matches for kind "Namespaces" in version "v1")',
                   body, 1, true)
  end)
end)
