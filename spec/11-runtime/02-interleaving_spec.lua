-- Reconciles are coroutines: one waiting on a slow API call does not hold
-- up the others, `workers` bounds how many are in flight, and a key is
-- never reconciled twice at once.  The slow call is the dev server's
-- delay-path fault, so this runs against the dev server only.
local client = require("support.apiserver_client")
local rt = require("11-runtime.support")

if client.real() then
  describe("reconcile interleaving", function()
    pending(client.DEV_ONLY .. "needs the delay-path fault injection")
  end)
  return
end

-- "slow" waits on a GET of the ConfigMap "held" (the delayed path);
-- every other key GETs itself, which answers at once.
local INTERLEAVE = [[
local luna = require "luna"
return luna.controller {
  name = "interleave",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  workers = 4,
  reconcile = function(req)
    local target = req.name == "slow" and "held" or req.name
    local obj, err = luna.get("v1/ConfigMap", req.namespace, target)
    if not obj then return nil, err end
    luna.log.info("got", { object = obj.metadata.name, rv = obj.metadata.resourceVersion })
  end,
}
]]

-- Every reconcile waits on the delayed GET.
local BOUNDED = [[
local luna = require "luna"
return luna.controller {
  name = "bounded",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@BOUNDED@" } },
  workers = 2,
  reconcile = function(req)
    local obj, err = luna.get("v1/ConfigMap", req.namespace, "held")
    if not obj then return nil, err end
  end,
}
]]

describe("reconcile interleaving #integration", function()
  local env, token, bounded, ns

  local function faults(spec)
    local code = env.srv:request("PUT", "/luna/v1/faults", spec, { content_type = "text/plain" })
    assert.equal(200, code)
  end

  setup(function()
    token, bounded = rt.token(), rt.token()
    env = rt.start{
      sources = { ["interleave.lua"] = rt.source(INTERLEAVE, { TOKEN = token }),
                  ["bounded.lua"] = rt.source(BOUNDED, { BOUNDED = bounded }) },
      server_args = { "--admin" },
    }
    ns = env.srv.ns
    rt.cm(env, "held", { x = "1" })
  end)
  teardown(function()
    faults("")
    env:stop()
  end)

  -- Index of the first record pred accepts (log order), or nil.
  local function index_of(pred, from)
    local recs = rt.records(env)
    for i = from or 1, #recs do
      if pred(recs[i]) then return i end
    end
  end

  it("finishes other keys while one reconcile waits on a slow API call", function()
    -- long enough that creating the fast objects fits in it on a busy machine
    faults("delay=5,delay-path=/configmaps/held")
    local label = { [rt.LABEL] = token }
    rt.cm(env, "slow", {}, label)
    rt.wait(env, rt.msg("reconcile start", { controller = "interleave", key = ns .. "/slow" }), 10,
      "slow reconcile start")
    for i = 1, 3 do rt.cm(env, "fast-" .. i, {}, label) end
    -- an event for the in-flight key waits for it to finish
    local code = env.srv:request("PATCH", env.srv:ns_path("configmaps", "slow"),
      { data = { again = "yes" } }, { content_type = "application/merge-patch+json" })
    assert.equal(200, code)

    local done = function(name)
      return rt.msg("reconcile done", { controller = "interleave", key = ns .. "/" .. name })
    end
    rt.wait_count(env, done("slow"), 2, 40, "both slow reconciles")
    local slow_start = index_of(rt.msg("reconcile start", { controller = "interleave", key = ns .. "/slow" }))
    local slow_done = index_of(done("slow"))
    for i = 1, 3 do
      local d = index_of(done("fast-" .. i))
      assert.is_not_nil(d, "fast-" .. i .. " done")
      assert.is_true(slow_start < d and d < slow_done,
        "fast-" .. i .. " finished while slow was waiting")
    end
    -- the delayed call still returned the object
    local got = rt.find(env, rt.msg("got", { key = ns .. "/slow" }))
    assert.equal("held", got.object)
    -- the second reconcile of slow started only after the first was done
    local second = index_of(rt.msg("reconcile start", { controller = "interleave", key = ns .. "/slow" }),
      slow_start + 1)
    assert.is_true(second > slow_done, "never twice at once")
    assert.equal(0, #rt.all(env, rt.msg("reconcile failed", { controller = "interleave" })))
  end)

  it("keeps at most `workers` reconciles in flight", function()
    faults("delay=0.3,delay-path=/configmaps/held")
    for i = 1, 6 do rt.cm(env, "w-" .. i, {}, { [rt.LABEL] = bounded }) end
    rt.wait_count(env, rt.msg("reconcile done", { controller = "bounded" }), 6, 20, "six reconciles")
    local inflight, max, starts = {}, 0, 0
    local n = 0
    for _, r in ipairs(rt.records(env)) do
      if r.controller == "bounded" and r.reconcile_id then
        if r.msg == "reconcile start" then
          starts = starts + 1
          inflight[r.reconcile_id] = true
          n = n + 1
          max = math.max(max, n)
        elseif (r.msg == "reconcile done" or r.msg == "reconcile failed" or r.msg == "requeue after")
            and inflight[r.reconcile_id] then
          inflight[r.reconcile_id] = nil
          n = n - 1
        end
      end
    end
    assert.equal(6, starts)
    assert.equal(0, n)
    assert.equal(2, max)
  end)
end)
