-- No controller starves beside controllers whose reconciles are long
-- stretches of script code.  After such a stretch the dispatcher holds
-- every start back for a breather (host/controller/controller.c,
-- LONG_STRETCH), then lets one start: the controllers that lost their turn
-- wait in the deferred line and must get those starts in the line's order.
-- They did not (a turn lost to a breather was not counted as a deferral,
-- so the line's head never came to wait): the start went to whichever
-- controller libev called first, and on a loaded machine 8 of the class 3
-- attack files' 15 controllers, the canary among them, never started in
-- 30 s.  Here half the controllers spin 80 to 180 ms of CPU time and fail,
-- on any machine a long stretch, and half fail at once; all retry with
-- backoff.  The log's order is the order things ran in (one loop thread),
-- so the spec counts reconciles, it does not time them.
local support = require("12-isolation.support")

local N = 14

describe("dispatch beside long stretches of script code #integration", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function()
    if p then support.stop_host(p) end
    support.stop(srv)
  end)

  it("gives every controller its turn before any controller has many", function()
    support.fresh_namespace(srv)
    local files = {}
    for i = 1, N do
      local spin = i % 2 == 0 and 0 or 0.08 + (i % 3) * 0.05
      files[("c%02d.lua"):format(i)] = ([[
local luna = require "luna"
return luna.controller {
  name = "c%02d", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { app = "target" } },
  reconcile = function(req)
    local t = os.clock()
    while os.clock() - t < %g do end
    luna.log.info("ran", { c = "c%02d" })
    error("failed on purpose")
  end,
}
]]):format(i, spin, i)
    end
    srv:create_cm("target-a", nil, { app = "target" })
    srv:create_cm("target-b", nil, { app = "target" })
    p = support.run(srv, files, { "--log-level", "info", "--reconcile-time-limit", "2",
                                  "--reconcile-instruction-limit", "0" })
    support.wait_line(p, { "caches synced" }, 60)
    -- unfair, the last controller's first reconcile came after some 300
    -- of the others' (and most of a minute): waited for, not timed out on
    for i = 1, N do support.wait_line(p, { "INFO ran", ("c=c%02d"):format(i) }, 240) end
    local before, first = 0, {}
    local firsts = 0
    for _, line in ipairs(p.out) do
      local c = line:match("INFO ran .*c=(c%d+)")
      if c then
        if not first[c] then
          first[c] = true
          firsts = firsts + 1
          if firsts == N then break end
        end
        before = before + 1
      end
    end
    -- in turn: each start after a breather goes to the line's head once
    -- it has waited three turns, so every controller starts within a few
    -- rounds of the line (22 reconciles in the runs that checked this)
    assert.is_true(before <= 4 * N,
      before .. " reconciles ran before the last controller's first")
  end)
end)
