-- luna run serves the CRD converters its files declare (luna.converter)
-- over HTTPS: a ConversionReview v1 in, the converted objects out with the
-- request's uid and result Success, through the hub in both directions
-- and between two spokes; luna sets apiVersion and refuses a converter
-- that changes the kind or metadata other than labels and annotations
-- (result Failure naming the converter, the object and the field); an
-- error or a budget stop answers Failure within the deadline; a malformed
-- review gets 400; --shadow serves conversions as they are; SIGHUP swaps
-- the converters and a broken file leaves the old ones serving; metrics
-- count the requests by path.
local helpers = require("helpers")
local core = require("luna.core")
local S = require("21-webhooks.support")
local json = core.json

local SIGHUP = 1
local PATH = "/convert/widgets.example.com"

-- v1alpha1 has spec.size (a string "N"), v1 spec.replicas (a number),
-- v2 spec.scale.replicas; the hub is v1.  spec.trap in an object makes a
-- converter misbehave as it says.
local function converters(mark)
  return ([[
local luna = require "luna"

local function trap(obj)
  local t = obj.spec and obj.spec.trap
  if t == "boom" then error("kaboom") end
  if t == "binary" then error("bytes \255\254 not UTF-8") end
  if t == "spin" then while true do end end
  if t == "rename" then obj.metadata.name = "other" end
  if t == "finalizer" then obj.metadata.finalizers = { "example.com/x" } end
  if t == "kind" then obj.kind = "Gadget" end
  if t == "number" then return 42 end
  if t == "badlabel" then obj.metadata.labels = { ["bad key!"] = "x" } end
  if t == "hog" then
    local keep, i = {}, 0
    while true do i = i + 1; keep[i] = string.rep("x", 4096) .. i end
  end
end

return luna.webhooks {
  luna.converter {
    group = "example.com",
    kind = "Widget",
    hub = "v1",
    versions = {
      v1alpha1 = {
        to_hub = function(obj)
          local odd = trap(obj)
          if odd ~= nil then return odd end
          obj.spec.replicas = tonumber(obj.spec.size)
          obj.spec.size = nil
          obj.metadata.annotations = obj.metadata.annotations or {}
          obj.metadata.annotations["example.com/converted-by"] = %q
          return obj
        end,
        from_hub = function(obj)
          trap(obj)
          obj.spec.size = tostring(obj.spec.replicas)
          obj.spec.replicas = nil
          -- nothing returned: the changed copy is the answer
        end,
      },
      v2 = {
        to_hub = function(obj)
          return { apiVersion = "ignored/v9", kind = obj.kind, metadata = obj.metadata,
                   spec = { replicas = obj.spec.scale.replicas } }
        end,
        from_hub = function(obj)
          trap(obj)
          obj.spec = { scale = { replicas = obj.spec.replicas } }
          return obj
        end,
      },
    },
    timeout_seconds = 2,
  },
}
]]):format(mark)
end

local function widget(version, name, spec, extra)
  local o = { apiVersion = "example.com/" .. version, kind = "Widget",
              metadata = { name = name, namespace = "default", uid = "uid-" .. name,
                           resourceVersion = "7", labels = { app = name } },
              spec = spec }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

local function review(uid, desired, objects)
  return json.encode({
    apiVersion = "apiextensions.k8s.io/v1", kind = "ConversionReview",
    request = { uid = uid, desiredAPIVersion = desired, objects = json.array(objects) },
  })
end

local function convert(addr, ca, uid, desired, objects)
  local status, body = S.post(addr, ca, PATH, review(uid, desired, objects))
  assert.equal(200, status, body)
  local r = json.decode(body)
  assert.equal("apiextensions.k8s.io/v1", r.apiVersion)
  assert.equal("ConversionReview", r.kind)
  assert.equal(uid, r.response.uid)
  return r.response
end

local function metrics(addr)
  return helpers.run(("env -u LD_PRELOAD curl -sk http://%s/metrics"):format(addr))
end

describe("conversion webhooks", function()
  local proc, addr, ca, dir, maddr

  setup(function()
    dir = helpers.tmpdir()
    local certs, work = helpers.tmpdir(), helpers.tmpdir()
    ca = S.make_cert(work, "one")
    assert(os.rename(work .. "/one.crt", certs .. "/tls.crt"))
    assert(os.rename(work .. "/one.key", certs .. "/tls.key"))
    helpers.write_file(dir .. "/convert.lua", converters("r1"))
    -- --shadow: conversion is not an admission decision, served as it is
    proc = helpers.spawn({ helpers.luna, "run", "--dev-server", "--metrics-secure=false",
                           "--shadow", "--reconcile-instruction-limit=0",
                           "--controller-memory-limit=16",
                           "--webhook-cert-path", certs, dir })
    local _
    _, maddr = proc:expect("metrics server listening address=(%S+)", 20)
    _, addr = proc:expect("webhook server listening address=(%S+) cert=files webhooks=1", 20)
    proc:expect("webhook registered webhook=widgets.example.com path=" .. PATH:gsub("%p", "%%%0") ..
                " type=conversion", 5)
  end)

  teardown(function()
    if proc then proc:stop() end
  end)

  it("converts several objects to the hub, keeping metadata and setting apiVersion", function()
    local r = convert(addr, ca, "uid-up", "example.com/v1", {
      widget("v1alpha1", "a", { size = "3" }),
      widget("v1alpha1", "b", { size = "5", colour = "red" }),
      widget("v1", "c", { replicas = 9 }),
    })
    assert.equal("Success", r.result.status, json.encode(r.result))
    assert.equal(3, #r.convertedObjects)
    local a, b, c = r.convertedObjects[1], r.convertedObjects[2], r.convertedObjects[3]
    assert.equal("example.com/v1", a.apiVersion)
    assert.equal("Widget", a.kind)
    assert.same({ replicas = 3 }, a.spec)
    assert.same({ replicas = 5, colour = "red" }, b.spec)
    assert.equal("b", b.metadata.name)
    assert.equal("uid-b", b.metadata.uid)
    assert.equal("7", b.metadata.resourceVersion)
    assert.same({ app = "b" }, b.metadata.labels)
    assert.equal("r1", b.metadata.annotations["example.com/converted-by"])
    -- already in the desired version: as it came
    assert.equal(S.canon(widget("v1", "c", { replicas = 9 })), S.canon(c))
  end)

  it("converts from the hub, and between two spokes through it", function()
    local r = convert(addr, ca, "uid-down", "example.com/v1alpha1", {
      widget("v1", "d", { replicas = 4 }),
      widget("v2", "e", { scale = { replicas = 6 } }),
    })
    assert.equal("Success", r.result.status, json.encode(r.result))
    assert.equal(2, #r.convertedObjects)
    assert.equal("example.com/v1alpha1", r.convertedObjects[1].apiVersion)
    assert.same({ size = "4" }, r.convertedObjects[1].spec)
    assert.equal("example.com/v1alpha1", r.convertedObjects[2].apiVersion)
    assert.same({ size = "6" }, r.convertedObjects[2].spec)

    r = convert(addr, ca, "uid-v2", "example.com/v2", { widget("v1alpha1", "f", { size = "2" }) })
    assert.equal("Success", r.result.status, json.encode(r.result))
    assert.equal("example.com/v2", r.convertedObjects[1].apiVersion)
    assert.same({ scale = { replicas = 2 } }, r.convertedObjects[1].spec)

    -- an empty list is a conversion of nothing
    r = convert(addr, ca, "uid-none", "example.com/v2", {})
    assert.equal("Success", r.result.status)
    assert.equal(0, #r.convertedObjects)
  end)

  it("answers Failure naming the converter, the object and the reason", function()
    for _, case in ipairs({
      { "boom", "kaboom" },
      { "rename", "changed metadata.name" },
      { "finalizer", "changed metadata.finalizers" },
      { "kind", 'changed kind from "Widget" to "Gadget"' },
      { "number", "returned a number" },
      { "badlabel", 'metadata.labels key "bad key!"' },
      -- a reason JSON cannot carry as it is: its stray bytes become '?'
      { "binary", "bytes ?? not UTF-8" },
    }) do
      local r = convert(addr, ca, "uid-" .. case[1], "example.com/v1", {
        widget("v1alpha1", "fine", { size = "1" }),
        widget("v1alpha1", "bad", { size = "1", trap = case[1] }),
      })
      assert.equal("Failure", r.result.status, case[1])
      local m = r.result.message
      assert.truthy(m:find("converter widgets.example.com failed", 1, true), m)
      assert.truthy(m:find("objects[1] (default/bad)", 1, true), m)
      assert.truthy(m:find("to_hub (v1alpha1 to v1)", 1, true), m)
      assert.truthy(m:find(case[2], 1, true), case[2] .. " in " .. m)
      assert.same({}, r.convertedObjects)
    end
    proc:expect("conversion failed converter=widgets.example.com uid=uid%-boom", 5)

    -- what the converter does not serve
    local r = convert(addr, ca, "uid-gv", "example.com/v3", { widget("v1", "g", {}) })
    assert.equal("Failure", r.result.status)
    assert.truthy(r.result.message:find('desiredAPIVersion "example.com/v3" is not one of ' ..
                                        "example.com/{v1,v1alpha1,v2}", 1, true), r.result.message)
    r = convert(addr, ca, "uid-og", "example.com/v1", { widget("v1", "g", {}, { kind = "Gadget" }) })
    assert.equal("Failure", r.result.status)
    assert.truthy(r.result.message:find('objects[0] (default/g) has kind "Gadget", not Widget', 1, true),
                  r.result.message)
    r = convert(addr, ca, "uid-ov", "example.com/v1",
                { widget("v1", "g", {}, { apiVersion = "other.io/v1" }) })
    assert.equal("Failure", r.result.status)
    assert.truthy(r.result.message:find('has apiVersion "other.io/v1"', 1, true), r.result.message)
  end)

  it("stops a converter at its time and memory budgets and answers Failure before the deadline", function()
    local t0 = helpers.now()
    local r = convert(addr, ca, "uid-spin", "example.com/v1alpha1",
                      { widget("v1", "slow", { replicas = 1, trap = "spin" }) })
    local took = helpers.now() - t0
    assert.equal("Failure", r.result.status)
    assert.truthy(r.result.message:find("converter widgets.example.com stopped", 1, true),
                  r.result.message)
    assert.truthy(r.result.message:find("time budget", 1, true), r.result.message)
    -- timeout_seconds 2: a budget of 1.5 s, answered well before 2 s
    assert.truthy(took < 2, took)
    proc:expect("conversion failed converter=widgets.example.com uid=uid%-spin .*stopped=true", 5)

    -- past the file's share of the Lua heap (--controller-memory-limit 16)
    r = convert(addr, ca, "uid-hog", "example.com/v2", { widget("v1", "hog", { replicas = 1, trap = "hog" }) })
    assert.equal("Failure", r.result.status)
    assert.truthy(r.result.message:find("converter widgets.example.com stopped: converter exceeded the Lua memory limit", 1, true),
                  r.result.message)
    -- and it still converts
    r = convert(addr, ca, "uid-after", "example.com/v1", { widget("v1alpha1", "h", { size = "1" }) })
    assert.equal("Success", r.result.status)
  end)

  it("refuses malformed reviews with 400 and the reason", function()
    for _, case in ipairs({
      { '{"apiVersion":', "malformed ConversionReview" },
      { '{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{"uid":"x"}}',
        "ConversionReview apiVersion must be apiextensions.k8s.io/v1, got apiextensions.k8s.io/v1beta1" },
      { '{"apiVersion":"apiextensions.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}}',
        "kind must be ConversionReview" },
      { '{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{}}',
        "ConversionReview has no request.uid" },
      { '{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x","objects":[]}}',
        "ConversionReview has no request.desiredAPIVersion" },
      { '{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",' ..
        '"request":{"uid":"x","desiredAPIVersion":"example.com/v1","objects":{}}}',
        "ConversionReview request.objects must be an array, got an object" },
      -- the admission envelope's classes (12-isolation/28), one check for both
      { '[1]', "a ConversionReview is a JSON object, got an array" },
      { '{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",' ..
        '"request":{"uid":"x","desiredAPIVersion":"example.com/v1","objects":[],"objects":[{}]}}',
        "ConversionReview repeats the key request.objects" },
      { '{"apiVersion":"apiextensions.k8s.io/v1\\nx","kind":"ConversionReview","request":{"uid":"x"}}',
        "ConversionReview apiVersion must be apiextensions.k8s.io/v1, got apiextensions.k8s.io/v1?x" },
      { '{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",' ..
        '"request":{"uid":"x","desiredAPIVersion":7,"objects":[]}}',
        "ConversionReview request.desiredAPIVersion must be a string, got a number" },
      { '{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":"x"}',
        "ConversionReview request must be an object, got a string" },
      { '{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"' ..
        ("u"):rep(300) .. '"}}', "ConversionReview request.uid is longer than 255 bytes" },
    }) do
      local status, body = S.post(addr, ca, PATH, case[1])
      assert.equal(400, status, case[1])
      assert.truthy(body:find(case[2], 1, true), case[2] .. " in " .. body)
    end
    -- an AdmissionReview path is not a converter's, nor the reverse
    local status = S.post(addr, ca, "/convert/gadgets.example.com",
                          review("u", "example.com/v1", {}))
    assert.equal(404, status)
    local big = helpers.tmpdir() .. "/big"
    helpers.write_file(big, '{"pad":"' .. string.rep("x", 8 * 1024 * 1024) .. '"}')
    status = S.post(addr, ca, PATH, "@" .. big)
    assert.equal(413, status)
  end)

  it("counts conversions in controller-runtime's metrics, by path", function()
    local text = metrics(maddr)
    local path = PATH
    assert.truthy(text:find(('controller_runtime_webhook_requests_total{webhook="%s",code="200"}'):format(path), 1, true), text)
    assert.truthy(text:find(('controller_runtime_webhook_requests_total{webhook="%s",code="400"} 12'):format(path), 1, true), text)
    assert.truthy(text:find(('controller_runtime_webhook_latency_seconds_count{webhook="%s"}'):format(path), 1, true), text)
    assert.truthy(text:find(('controller_runtime_webhook_requests_in_flight{webhook="%s"} 0'):format(path), 1, true), text)
  end)

  it("swaps converters on SIGHUP and keeps them when a file breaks", function()
    helpers.write_file(dir .. "/convert.lua", converters("r2"))
    proc:kill(SIGHUP)
    helpers.eventually(function()
      local r = convert(addr, ca, "uid-r2", "example.com/v1", { widget("v1alpha1", "i", { size = "1" }) })
      return r.convertedObjects[1].metadata.annotations["example.com/converted-by"] == "r2"
    end, 20, "the r2 converter")
    helpers.write_file(dir .. "/convert.lua", converters("r3"):gsub('hub = "v1",', 'hub = "v1", colour = 1,'))
    proc:kill(SIGHUP)
    proc:expect("reload failed", 20)
    local r = convert(addr, ca, "uid-r3", "example.com/v1", { widget("v1alpha1", "j", { size = "1" }) })
    assert.equal("r2", r.convertedObjects[1].metadata.annotations["example.com/converted-by"])
  end)
end)
