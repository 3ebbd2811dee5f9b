-- widget-conversion.lua on the real runtime: the converter called directly
-- with ConversionReview objects, then through the API server, which calls
-- it when a Widget is written or read in the version it is not stored in
-- (docs/webhooks.md: "Conversion", "Testing webhooks").
local testing = require "luna.testing"

-- The Widget CRD serving v1alpha1 beside v1 (deploy/crd-widgets.yaml
-- serves v1 alone until the cluster runs the converter).
local function crd()
  local schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } }
  return { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
    metadata = { name = "widgets.example.com" },
    spec = { group = "example.com", scope = "Namespaced",
      names = { kind = "Widget", listKind = "WidgetList", plural = "widgets", singular = "widget" },
      versions = {
        { name = "v1", served = true, storage = true, schema = schema },
        { name = "v1alpha1", served = true, storage = false, schema = schema },
      } } }
end

local function widget(version, name, spec)
  return { apiVersion = "example.com/" .. version, kind = "Widget",
    metadata = { name = name, namespace = "default", labels = { team = "a" } }, spec = spec }
end

describe("widget converter", function()
  it("converts v1alpha1 spec.size to v1 spec.replicas and back, several objects at once", function()
    local env = testing.start{ controllers = { "widget-conversion.lua" } }
    local res = env:convert("widgets.example.com",
      { widget("v1alpha1", "a", { size = 2, image = "nginx:1.27" }), widget("v1alpha1", "b", { size = 0 }) },
      "example.com/v1")
    assert.is_true(res.ok, res.message)
    assert.same({ "example.com/v1", "example.com/v1" }, { res.objects[1].apiVersion, res.objects[2].apiVersion })
    assert.same({ replicas = 2, image = "nginx:1.27" }, res.objects[1].spec)
    assert.same({ replicas = 0 }, res.objects[2].spec)
    assert.same({ team = "a" }, res.objects[1].metadata.labels)
    local back = env:convert("/convert/widgets.example.com", res.objects, "example.com/v1alpha1")
    assert.is_true(back.ok, back.message)
    assert.same({ size = 2, image = "nginx:1.27" }, back.objects[1].spec)
    assert.has_error(function() env:convert("gadgets.example.com", {}, "example.com/v1") end,
      "convert: no converter gadgets.example.com is loaded (loaded: widgets.example.com)")
  end)

  it("the API server calls it: a Widget written in v1alpha1 is stored and read as v1", function()
    local env = testing.start{ controllers = { "widget-conversion.lua" } }
    env:seed(crd())
    env:register_webhooks()  -- what start{ webhooks = true } does, once the CRD is there
    env:create(widget("v1alpha1", "w1", { size = 3, image = "nginx:1.27" }))
    assert.same({ size = 3, image = "nginx:1.27" }, env:get("example.com/v1alpha1/Widget", "default", "w1").spec)
    assert.same({ replicas = 3, image = "nginx:1.27" }, env:get("example.com/v1/Widget", "default", "w1").spec)
    env:patch("example.com/v1/Widget", "default", "w1", { spec = { replicas = 5 } })
    assert.equal(5, env:get("example.com/v1alpha1/Widget", "default", "w1").spec.size)
  end)
end)
