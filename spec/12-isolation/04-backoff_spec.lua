-- A script that errors on every key is retried per key with exponential
-- backoff (the workqueue's rate limiter), so it never spins: over two
-- seconds with a 5 ms base delay each key is tried about ten times
-- (5 ms, 10 ms, 20 ms, ... 1.28 s), where a retry loop without backoff
-- would run it thousands of times.  Other controllers are unaffected.
local helpers = require("helpers")
local support = require("12-isolation.support")

describe("a script that fails on every key", function()
  local srv, p
  setup(function()
    srv = support.server()
    support.fresh_namespace(srv)
  end)
  teardown(function()
    if p then p:stop() end
    support.stop(srv)
  end)

  it("is retried per key with exponential backoff and never spins", function()
    srv:create_cm("f1")
    srv:create_cm("f2")
    p = support.run(srv, {
      ["failing.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "failing", watch = { "v1/ConfigMap", namespace = "@NS@" },
  rate_limit = { base_delay = 0.005, max_delay = 60 },
  reconcile = function(req) error("always fails: " .. req.name) end,
}
]],
      ["good.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "good", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req) print("good reconciled", req.name) end,
}
]],
    })
    local ns = srv.ns
    support.wait_line(p, { "reconcile failed", "controller=failing", "key=" .. ns .. "/f1" })
    local stop = helpers.now() + 2
    while helpers.now() < stop do p:read_line(stop - helpers.now()) end

    for _, key in ipairs({ "f1", "f2" }) do
      local lines = support.lines(p, { "reconcile failed", "controller=failing", "key=" .. ns .. "/" .. key })
      -- ~10 expected; a retry loop without backoff would make thousands
      assert.is_true(#lines >= 5 and #lines <= 20, key .. ": " .. #lines .. " attempts")
      for i, line in ipairs(lines) do
        assert.matches("attempt=" .. i .. " ", line)
        assert.matches("always fails: " .. key, line)
      end
    end
    support.wait_line(p, { "good reconciled f1" })
    support.wait_line(p, { "good reconciled f2" })
    srv:create_cm("later")
    support.wait_line(p, { "good reconciled later" })
    assert.is_true(p:alive())
  end)
end)
