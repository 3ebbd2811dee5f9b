-- widget-conversion: converts Widgets between example.com/v1alpha1 and v1,
-- the hub widget.lua reconciles (docs/webhooks.md, "Conversion").
--
-- v1alpha1 called the pod count spec.size; v1 calls it spec.replicas.
-- Everything else (spec.image, status, fields this file does not know)
-- is the same in both and passes through, so a round trip loses nothing.
--
-- deploy/crd-widgets.yaml serves v1 only. To serve v1alpha1 too, add it to
-- the CRD's versions (served: true, storage: false) and apply the patch
-- `luna webhooks manifest --only conversion controllers` prints, which
-- points the CRD's conversion at this converter.
local luna = require "luna"

return luna.webhooks {
  luna.converter {
    group = "example.com",
    kind = "Widget",
    hub = "v1",
    versions = {
      v1alpha1 = {
        to_hub = function(w)
          if w.spec then
            w.spec.replicas = w.spec.size
            w.spec.size = nil
          end
          return w
        end,
        from_hub = function(w)
          if w.spec then
            w.spec.size = w.spec.replicas
            w.spec.replicas = nil
          end
          return w
        end,
      },
    },
  },
}
