-- attack: a watch table whose __index rewrites owns while the host reads the kind (the heap overflow of issue 10)
-- expect: refused
-- error: invalid kind
local luna = require "luna"
local o = { "v1/ConfigMap" }
return luna.controller {
  name = "1-watch-index-trap",
  owns = o,
  watch = setmetatable({}, { __index = function(_, k)
    if k == "kind" or k == 1 then o[1] = "v1/Secret"; o[2] = "v1/Secret"; o[3] = "v1/Secret" return "v1/ConfigMap" end
  end }),
  reconcile = function() end,
}
