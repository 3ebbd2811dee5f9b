-- SIGTERM while reconciles are in flight: luna stops taking keys, lets the
-- running reconciles finish their API calls, and exits 0.  The reconciles
-- are held in flight by the dev server's delay-path fault.
local client = require("support.apiserver_client")
local rt = require("11-runtime.support")

if client.real() then
  describe("shutdown with reconciles in flight", function()
    pending(client.DEV_ONLY .. "needs the delay-path fault injection")
  end)
  return
end

local DRAIN = [[
local luna = require "luna"
return luna.controller {
  name = "drain",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  workers = 3,
  reconcile = function(req)
    local obj, err = luna.get("v1/ConfigMap", req.namespace, "held")
    if not obj then return nil, err end
    luna.log.info("finished call", { rv = obj.metadata.resourceVersion })
  end,
}
]]

describe("shutdown with reconciles in flight #integration", function()
  it("lets in-flight reconciles finish, starts no new ones, and exits 0", function()
    local token = rt.token()
    local env = rt.start{ sources = { ["drain.lua"] = rt.source(DRAIN, { TOKEN = token }) },
                          server_args = { "--faults", "delay=1.5,delay-path=/configmaps/held" } }
    rt.cm(env, "held", {})
    for i = 1, 4 do rt.cm(env, "k-" .. i, {}, { [rt.LABEL] = token }) end
    -- three in flight (workers = 3), the fourth key waiting in the queue
    rt.wait_count(env, rt.msg("reconcile start", { controller = "drain" }), 3, 15, "three in flight")
    rt.wait_count(env, rt.msg("enqueue", { controller = "drain" }), 4, 15, "four keys queued")
    local out = env:stop() -- SIGTERM; asserts exit status 0
    assert.matches("shutdown complete", out, 1, true)

    local recs = rt.records(env)
    local order = {}
    for i, r in ipairs(recs) do
      if r.msg == "shutdown requested" then order.requested = i end
      if r.msg == "shutdown complete" then order.complete = i end
    end
    assert.is_not_nil(order.requested)
    assert.is_not_nil(order.complete)
    local starts = rt.all(env, rt.msg("reconcile start", { controller = "drain" }))
    assert.equal(3, #starts, "no reconcile starts after SIGTERM")
    local done = 0
    for i, r in ipairs(recs) do
      if r.msg == "reconcile done" and r.controller == "drain" then
        done = done + 1
        assert.is_true(order.requested < i and i < order.complete,
          "each in-flight reconcile finishes during the drain")
      end
    end
    assert.equal(3, done)
    assert.equal(3, #rt.all(env, rt.msg("finished call")))
    assert.is_nil(rt.find(env, rt.msg("reconcile abandoned")))
    assert.is_nil(rt.find(env, rt.msg("reconcile failed")))
  end)
end)
