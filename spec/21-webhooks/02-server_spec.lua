-- luna run serves the admission webhooks its files declare over HTTPS:
-- AdmissionReview v1 in and out with the request's uid; validate answers
-- allowed, denied (message, code) and warnings; mutate answers a base64
-- JSON patch that turns the original into the mutated object; an error or
-- a budget stop answers by failurePolicy; bad bodies get 400/413; SIGHUP
-- swaps the code and a broken file leaves the old webhooks serving; the
-- certificate files are re-read; metrics count the requests.
local helpers = require("helpers")
local core = require("luna.core")
local S = require("21-webhooks.support")
local json = core.json

local SIGHUP = 1

local function controller(version, extra)
  return ([[
local luna = require "luna"
local RULES = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "configmaps" },
                  operations = { "CREATE", "UPDATE" } } }
return luna.controller {
  name = "quiet",
  watch = { "v1/ConfigMap", namespace = "luna-webhook-spec-none" },
  reconcile = function() end,
  webhooks = {
    luna.webhook {
      name = "cm.validate.example.com",
      rules = RULES,
      validate = function(req)
        local data = req.object and req.object.data or {}
        if data.bad then return false, "bad data in " .. req.name end
        if data.code then return { allowed = false, message = "teapot", code = 418 } end
        if data.boom then error("kaboom") end
        if data.binary then return false, "\255 not UTF-8" end
        if data.spin then while true do end end
        return { warnings = { %q .. " saw " .. req.operation .. " by " .. req.user_info.username } }
      end,
    },
    luna.webhook {
      name = "cm.ignore.example.com",
      rules = RULES,
      failure_policy = "Ignore",
      timeout_seconds = 1,
      validate = function(req) while true do end end,
    },
    luna.webhook {
      name = "cm.mutate.example.com",
      rules = RULES,
      reinvocation_policy = "IfNeeded",
      mutate = function(req, obj)
        obj.data = obj.data or {}
        obj.data["a/b~c"] = "slash and tilde"
        obj.data.remove_me = nil
        obj.metadata.labels = obj.metadata.labels or {}
        obj.metadata.labels["example.com/injected"] = "yes"
        obj.list = obj.list or {}
        table.remove(obj.list, 1)
        obj.list[#obj.list + 1] = { name = "added" }
      end,
    },
  },
}
%s
]]):format(version, extra or "")
end

local review, post = S.review, S.post

local make_cert = S.make_cert

local function install(certs, work, prefix)
  local out, rc = helpers.run(("cp %s/%s.crt %s/tls.crt.new && cp %s/%s.key %s/tls.key.new && "
    .. "mv %s/tls.key.new %s/tls.key && mv %s/tls.crt.new %s/tls.crt")
    :format(work, prefix, certs, work, prefix, certs, certs, certs, certs, certs))
  assert(rc == 0, out)
end

local function metrics(addr)
  return helpers.run(("env -u LD_PRELOAD curl -sk http://%s/metrics"):format(addr))
end

describe("webhook server", function()
  local proc, addr, ca1, ca2, dir, certs, work, maddr, haddr

  setup(function()
    dir, certs, work = helpers.tmpdir(), helpers.tmpdir(), helpers.tmpdir()
    ca1 = make_cert(work, "one")
    ca2 = make_cert(work, "two")
    install(certs, work, "one")
    helpers.write_file(dir .. "/ctl.lua", controller("v1"))
    proc = helpers.spawn({ helpers.luna, "run", "--dev-server", "--metrics-secure=false",
                           "--webhook-cert-path", certs, dir })
    local _
    _, maddr = proc:expect("metrics server listening address=(%S+)", 20)
    _, haddr = proc:expect("health probe server listening address=(%S+)", 20)
    _, addr = proc:expect("webhook server listening address=(%S+) cert=files", 20)
  end)

  teardown(function()
    if proc then proc:stop() end
  end)

  it("validates: allowed with warnings, denied with message and code", function()
    local status, body = post(addr, ca1, "/validate/cm.validate.example.com",
      review("uid-1", { metadata = { name = "ok" }, data = { k = "v" } }))
    assert.equal(200, status, body)
    local r = json.decode(body)
    assert.equal("admission.k8s.io/v1", r.apiVersion)
    assert.equal("AdmissionReview", r.kind)
    assert.equal("uid-1", r.response.uid)
    assert.is_true(r.response.allowed)
    assert.same({ "v1 saw CREATE by alice" }, r.response.warnings)

    status, body = post(addr, ca1, "/validate/cm.validate.example.com",
      review("uid-2", { metadata = { name = "nope" }, data = { bad = "1" } }))
    r = json.decode(body)
    assert.equal("uid-2", r.response.uid)
    assert.is_false(r.response.allowed)
    assert.equal(403, r.response.status.code)
    assert.equal("bad data in nope", r.response.status.message)

    status, body = post(addr, ca1, "/validate/cm.validate.example.com",
      review("uid-3", { metadata = { name = "tea" }, data = { code = "1" } }))
    r = json.decode(body)
    assert.is_false(r.response.allowed)
    assert.equal(418, r.response.status.code)
  end)

  it("mutates: the patch applied to the original is the mutated object", function()
    local object = { metadata = { name = "m", labels = { keep = "1" } },
                     data = { remove_me = "x", k = "v" },
                     list = json.array({ { name = "first" }, { name = "second" } }) }
    local status, body = post(addr, ca1, "/mutate/cm.mutate.example.com", review("uid-m", object))
    assert.equal(200, status, body)
    local r = json.decode(body).response
    assert.equal("uid-m", r.uid)
    assert.is_true(r.allowed)
    assert.equal("JSONPatch", r.patchType)
    local raw = helpers.run(("printf %%s '%s' | base64 -d"):format(r.patch))
    local ops = json.decode(raw)
    local patched = S.apply(json.decode(json.encode(object)), ops)
    local want = json.decode(json.encode(object))
    want.data.remove_me = nil
    want.data["a/b~c"] = "slash and tilde"
    want.metadata.labels["example.com/injected"] = "yes"
    want.list = json.array({ { name = "second" }, { name = "added" } })
    assert.equal(S.canon(want), S.canon(patched))
    assert.truthy(raw:find('"/data/a~1b~0c"', 1, true), raw)
  end)

  it("answers by failurePolicy when the function errors or runs out of time", function()
    local status, body = post(addr, ca1, "/validate/cm.validate.example.com",
      review("uid-e", { metadata = { name = "e" }, data = { boom = "1" } }))
    assert.equal(200, status)
    local r = json.decode(body).response
    assert.equal("uid-e", r.uid)
    assert.is_false(r.allowed)
    assert.equal(500, r.status.code)
    assert.truthy(r.status.message:find("kaboom", 1, true), r.status.message)

    status, body = post(addr, ca1, "/validate/cm.validate.example.com",
      review("uid-u", { metadata = { name = "u" }, data = { binary = "1" } }))
    assert.equal(200, status)
    r = json.decode(body).response
    assert.equal("uid-u", r.uid)
    assert.is_false(r.allowed)
    assert.equal(500, r.status.code)
    assert.truthy(r.status.message:find("cannot be encoded", 1, true), r.status.message)

    status, body = post(addr, ca1, "/validate/cm.ignore.example.com",
      review("uid-i", { metadata = { name = "i" } }))
    assert.equal(200, status)
    r = json.decode(body).response
    assert.is_true(r.allowed)
    assert.truthy(r.warnings[1]:find("failurePolicy Ignore", 1, true), r.warnings[1])
    assert.truthy(r.warnings[1]:find("budget", 1, true), r.warnings[1])
    proc:expect("webhook failed .*uid=uid%-i", 5)
  end)

  it("refuses bad bodies with a clear status", function()
    local status, body = post(addr, ca1, "/validate/cm.validate.example.com", '{"apiVersion":')
    assert.equal(400, status)
    assert.truthy(body:find("malformed AdmissionReview", 1, true), body)
    -- the envelope right, the rest not JSON: the call's decode says so
    for _, bad in ipairs({
      '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"a":',
      '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}} trailing',
      '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"a":"\xff"}}}',
    }) do
      status, body = post(addr, ca1, "/validate/cm.validate.example.com", bad)
      assert.equal(400, status, bad)
      assert.truthy(body:find("malformed AdmissionReview", 1, true), body)
    end
    proc:expect("webhook request refused.*status=400", 5)
    status, body = post(addr, ca1, "/validate/cm.validate.example.com",
      '{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}')
    assert.equal(400, status)
    assert.truthy(body:find("apiVersion must be admission.k8s.io/v1", 1, true), body)
    status, body = post(addr, ca1, "/validate/cm.validate.example.com",
      '{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"x"}}')
    assert.equal(400, status)
    assert.truthy(body:find("kind must be AdmissionReview", 1, true), body)
    status = post(addr, ca1, "/validate/nobody.example.com", review("u", { metadata = { name = "x" } }))
    assert.equal(404, status)
    status = post(addr, ca1, "/validate/cm.validate.example.com", "{}", "PUT")
    assert.equal(405, status)
    local big = helpers.tmpdir() .. "/big"
    helpers.write_file(big, '{"pad":"' .. string.rep("x", 8 * 1024 * 1024) .. '"}')
    status, body = post(addr, ca1, "/validate/cm.validate.example.com", "@" .. big)
    assert.equal(413, status)
    assert.truthy(body:find("too large", 1, true), body)
    -- and the server still answers
    status = post(addr, ca1, "/validate/cm.validate.example.com",
      review("uid-after", { metadata = { name = "ok" } }))
    assert.equal(200, status)
  end)

  it("is a readiness check once it serves", function()
    local out = helpers.run(("env -u LD_PRELOAD curl -s http://%s/readyz/webhook-server"):format(haddr))
    assert.equal("ok", out)
  end)

  it("counts requests in controller-runtime's metrics", function()
    local text = metrics(maddr)
    assert.truthy(text:find('controller_runtime_webhook_requests_total{webhook="/validate/cm.validate.example.com",code="200"}', 1, true), text)
    assert.truthy(text:find('controller_runtime_webhook_requests_total{webhook="/validate/cm.validate.example.com",code="400"}', 1, true))
    assert.truthy(text:find('controller_runtime_webhook_latency_seconds_count{webhook="/mutate/cm.mutate.example.com"} 1', 1, true))
    assert.truthy(text:find('controller_runtime_webhook_requests_in_flight{webhook="/validate/cm.validate.example.com"} 0', 1, true))
  end)

  it("swaps the code on SIGHUP and keeps it when a file breaks", function()
    helpers.write_file(dir .. "/ctl.lua", controller("v2"))
    proc:kill(SIGHUP)
    helpers.eventually(function()
      local _, body = post(addr, ca1, "/validate/cm.validate.example.com",
        review("uid-r", { metadata = { name = "ok" } }))
      local r = json.decode(body)
      return r and r.response.warnings and r.response.warnings[1]:find("^v2 ") ~= nil
    end, 20, "the v2 webhook")
    helpers.write_file(dir .. "/ctl.lua", controller("v3", "luna.webhook { name = 'x' }"))
    proc:kill(SIGHUP)
    proc:expect("reload failed", 20)
    local _, body = post(addr, ca1, "/validate/cm.validate.example.com",
      review("uid-r2", { metadata = { name = "ok" } }))
    assert.equal("v2 saw CREATE by alice", json.decode(body).response.warnings[1])
  end)

  it("serves a new certificate when the files change", function()
    install(certs, work, "two")
    helpers.eventually(function()
      local status = post(addr, ca2, "/validate/cm.validate.example.com",
        review("uid-c", { metadata = { name = "ok" } }))
      return status == 200
    end, 25, "the new certificate")
  end)
end)
