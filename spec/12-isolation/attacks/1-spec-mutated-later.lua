-- attack: keep the spec's tables and change them from reconcile after the host accepted them
-- expect: runs
-- reached: spec tables changed
local luna = require "luna"
local labels, owns, limits, rl, preds = {}, { "v1/Secret" }, { seconds = 0.05 }, { qps = 50 }, {}
local spec = {
  name = "1-spec-mutated-later", watch = { "v1/ConfigMap", namespace = "@NS@", labels = labels },
  owns = owns, limits = limits, rate_limit = rl, predicates = preds,
  reconcile = function(req)
    labels[{}] = 1; labels.app = 42
    owns[1] = { setmetatable({}, { __index = function() while true do end end }) }; owns[5] = 1
    setmetatable(limits, { __index = function() error("trap") end }); limits.seconds = -1
    rl.qps = 0 / 0; rl.base_delay = -5
    preds[1] = 42
    local c = luna.controller { name = "x-other", watch = "v1/Secret", reconcile = function() end }
    print("spec tables changed", pcall(function() c.watch = "v1/Pod" end))
  end,
}
return luna.controller(spec)
