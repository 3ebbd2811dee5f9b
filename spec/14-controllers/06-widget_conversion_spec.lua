-- controllers/widget-conversion.lua served by luna run: ConversionReviews
-- between example.com/v1alpha1 (spec.size) and v1 (spec.replicas), both
-- directions, several objects at once, a round trip that loses nothing,
-- and the CRD conversion patch `luna webhooks manifest` prints for it.
local helpers = require("helpers")
local json = require("luna.core").json
local S = require("21-webhooks.support")

local FILE = "controllers/widget-conversion.lua"
local PATH = "/convert/widgets.example.com"

local function widget(version, name, spec, status)
  return { apiVersion = "example.com/" .. version, kind = "Widget",
           metadata = { name = name, namespace = "default", uid = "uid-" .. name,
                        generation = 3, labels = { team = "a" } },
           spec = spec, status = status }
end

describe("widget converter", function()
  local proc, addr

  local function convert(uid, desired, objects)
    local status, body = S.post(addr, nil, PATH, json.encode({
      apiVersion = "apiextensions.k8s.io/v1", kind = "ConversionReview",
      request = { uid = uid, desiredAPIVersion = desired, objects = json.array(objects) } }))
    assert.equal(200, status, body)
    local r = json.decode(body).response
    assert.equal(uid, r.uid)
    assert.equal("Success", r.result.status, json.encode(r.result))
    return r.convertedObjects
  end

  setup(function()
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/widget-conversion.lua", assert(helpers.read_file(FILE)))
    proc = helpers.spawn({ helpers.luna, "run", "--dev-server", "--seed", "deploy/crd-widgets.yaml", dir })
    local _
    _, addr = proc:expect("webhook server listening address=(%S+)", 20)
  end)

  teardown(function()
    if proc then proc:stop() end
  end)

  it("converts v1alpha1 Widgets to v1: size becomes replicas, the rest as it was", function()
    local out = convert("up", "example.com/v1", {
      widget("v1alpha1", "a", { image = "nginx:1.27", size = 3 }),
      widget("v1alpha1", "b", { image = "busybox", size = 0, extra = { keep = true } },
             { readyReplicas = 0, observedGeneration = 3 }),
    })
    assert.equal(2, #out)
    assert.equal("example.com/v1", out[1].apiVersion)
    assert.same({ image = "nginx:1.27", replicas = 3 }, out[1].spec)
    assert.same({ image = "busybox", replicas = 0, extra = { keep = true } }, out[2].spec)
    assert.same({ readyReplicas = 0, observedGeneration = 3 }, out[2].status)
    assert.equal("uid-b", out[2].metadata.uid)
    assert.same({ team = "a" }, out[2].metadata.labels)
  end)

  it("converts v1 Widgets to v1alpha1, and back to what they were", function()
    local v1 = { widget("v1", "c", { image = "nginx:1.27", replicas = 2 },
                        { readyReplicas = 2, observedGeneration = 3 }),
                 widget("v1", "d", { image = "nginx:1.27" }) }
    local old = convert("down", "example.com/v1alpha1", v1)
    assert.equal("example.com/v1alpha1", old[1].apiVersion)
    assert.same({ image = "nginx:1.27", size = 2 }, old[1].spec)
    assert.same({ image = "nginx:1.27" }, old[2].spec)
    local back = convert("back", "example.com/v1", old)
    assert.equal(S.canon(v1[1]), S.canon(back[1]))
    assert.equal(S.canon(v1[2]), S.canon(back[2]))
  end)

  it("is registered by the CRD patch the manifest prints", function()
    local out, rc = helpers.run(("%s webhooks manifest --only conversion controllers 2>&1"):format(helpers.luna))
    assert.equal(0, rc, out)
    assert.truthy(out:find('  name: "widgets.example.com"', 1, true), out)
    assert.truthy(out:find('path: "/convert/widgets.example.com"', 1, true), out)
    assert.truthy(out:find("strategy: Webhook", 1, true), out)
  end)
end)
