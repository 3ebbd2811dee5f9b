-- attack: budgets as strings ("0", "inf") hoping a tonumber somewhere reads them
-- expect: refused
-- error: controller field 'limits.seconds' must be a number > 0 and <=
local luna = require "luna"
return luna.controller {
  name = "1-limits-string", watch = { "v1/ConfigMap", namespace = "@NS@" },
  limits = { seconds = "0" },
  reconcile = function() while true do end end,
}
