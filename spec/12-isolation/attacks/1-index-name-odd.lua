-- attack: an index name with a slash and a newline (indexes are named <controller>/<name>)
-- expect: refused
-- error: index name
local luna = require "luna"
return luna.controller {
  name = "1-index-name-odd", watch = { "v1/ConfigMap", namespace = "@NS@" },
  indexes = { ["../other\nlevel=error"] = function() return "x" end },
  reconcile = function() end,
}
