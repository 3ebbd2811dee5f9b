-- attack: use io, os.execute and debug.sethook from reconcile
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "sandbox-reconcile-io", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function()
    pcall(function() os.execute("kill -9 1") end)
    pcall(function() debug.sethook() end)
    return io.open("/etc/shadow")
  end,
}
