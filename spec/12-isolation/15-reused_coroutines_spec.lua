-- Reconcile coroutines are reused (reconcile.c keeps the coroutine of a
-- reconcile that returned normally for the next one of its controller).
-- Reuse must not open a door: an idle or reused coroutine still belongs to
-- the host (no script resumes it), a coroutine that raised is never run
-- again, and each reconcile starts from an empty stack.
local support = require("12-isolation.support")

describe("reused reconcile coroutines #integration", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)
  before_each(function() support.fresh_namespace(srv) end)
  after_each(function()
    if p then
      p:kill(15)
      local rc = p:wait(20)
      local out = table.concat(p.out, "\n")
      p:stop()
      assert.equal(0, rc, out)
      assert.is_nil(out:find("Sanitizer", 1, true), out)
    end
    p = nil
  end)

  it("are reused only after a normal return, stay the host's, and start empty", function()
    for i = 1, 6 do srv:create_cm("cm-" .. i) end
    p = support.run(srv, { ["a.lua"] = [[
local luna = require "luna"
local seq, threads, failed = 0, {}, false
return luna.controller {
  name = "reuse", watch = { "v1/ConfigMap", namespace = "@NS@" }, workers = 1,
  reconcile = function(req, ...)
    seq = seq + 1
    local me = coroutine.running()
    -- every coroutine a reconcile ever ran on, idle or this one, refuses a script's resume
    for co in pairs(threads) do
      local ok, err = pcall(coroutine.resume, co)
      if ok or not tostring(err):find("belongs to the host", 1, true) then
        print("resume allowed", tostring(err))
      end
    end
    threads[me] = true
    print(("run seq=%d name=%s thread=%s extra=%d"):format(seq, req.name,
      (tostring(me):gsub("%s", "")), select("#", ...)))
    if req.name == "cm-3" and not failed then
      failed = true
      error("boom")
    end
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    cm.data = { mutated = "yes" }
    print(("done seq=%d name=%s"):format(seq, req.name))
  end,
}
]] })
    -- every key done, cm-3 twice (it raised once)
    for i = 1, 6 do support.wait_line(p, { "done seq=", "name=cm-" .. i }, 30) end
    local runs = {}
    for _, line in ipairs(support.lines(p, { "run seq=" })) do
      local seq, name, thread, extra = line:match("run seq=(%d+) name=(%S+) thread=(%S+) extra=(%d+)")
      runs[tonumber(seq)] = { name = name, thread = thread, extra = tonumber(extra) }
    end
    assert.equal(0, #support.lines(p, { "resume allowed" }), table.concat(p.out, "\n"))
    local raised, shared = nil, 0
    for seq, run in ipairs(runs) do
      assert.equal(0, run.extra)       -- reconcile(req) and nothing left on the stack
      if run.name == "cm-3" and not raised then raised = seq end
      if seq > 1 and runs[seq - 1].thread == run.thread then shared = shared + 1 end
    end
    assert.truthy(raised, table.concat(p.out, "\n"))
    -- the coroutine that raised is not run again
    for seq = raised + 1, #runs do assert.not_equal(runs[raised].thread, runs[seq].thread) end
    -- with one worker, the others reuse one coroutine
    assert.truthy(shared >= 3, table.concat(p.out, "\n"))
  end)
end)
