-- attack: return a table dressed as a controller (same __metatable string)
-- expect: refused
-- error: must return luna.controller
return setmetatable({ name = "1-forged-controller", watch = "v1/ConfigMap", reconcile = function() end },
  { __metatable = "luna.controller", __index = function() while true do end end })
