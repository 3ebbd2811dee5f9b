-- The Lua memory cap: a reconcile that takes the state's heap past
-- --lua-memory-limit fails (stopped=memory), the heap is collected, and the
-- host keeps reconciling the other keys and controllers.  A hog that grows
-- in steps meets its controller's share first (half the heap by default:
-- 24-memory_per_controller_spec.lua); one huge request meets the heap cap.
local support = require("12-isolation.support")

-- Allocates 8 MiB on every reconcile: it only succeeds if the heap the
-- failed reconcile filled was given back.
local OTHER = [[
local luna = require "luna"
return luna.controller {
  name = "other", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local s = string.rep("x", 8 * 1024 * 1024)
    print("other reconciled", req.name, #s)
  end,
}
]]

local function hog(body)
  return ([[
local luna = require "luna"
return luna.controller {
  name = "hog", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    if req.name ~= "hog" then print("hog reconciled", req.name) return end
    %s
  end,
}
]]):format(body)
end

describe("the Lua memory limit", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)
  before_each(function() support.fresh_namespace(srv) end)
  after_each(function() if p then p:stop() end p = nil end)

  local function stopped(body, expect)
    srv:create_cm("ok")
    srv:create_cm("hog")
    p = support.run(srv, { ["hog.lua"] = hog(body), ["other.lua"] = OTHER },
      { "--lua-memory-limit", "48" })
    local ns = srv.ns
    local line = support.wait_line(p, { "reconcile failed", "controller=hog", "key=" .. ns .. "/hog" }, 20)
    assert.matches("stopped=memory", line)
    assert.matches(expect or "reconcile exceeded the Lua memory limit of controller hog %(24 MiB%)", line)
    support.wait_line(p, { "hog reconciled ok" })
    -- the retry fails again, and the other controller still gets its 8 MiB
    support.wait_line(p, { "reconcile failed", "key=" .. ns .. "/hog", "attempt=3" }, 20)
    srv:create_cm("later")
    support.wait_line(p, { "hog reconciled later" })
    support.wait_line(p, { "other reconciled later 8388608" })
    assert.same({}, support.lines(p, { "reconcile failed", "controller=other" }))
    assert.is_true(p:alive())
    return line
  end

  -- The message starts with the script line that was running (line 6 of
  -- hog() is the body's first), as a raised error's does.
  it("fails a reconcile that grows a table without bound, at its line", function()
    local line = stopped([[
    local t = {}
    while true do t[#t + 1] = { #t, tostring(#t) } end]])
    assert.matches('error="[^"]*hog%.lua:7: reconcile exceeded the Lua memory limit', line)
  end)

  it("fails a reconcile that asks for a huge string in one C call, at the calling line", function()
    local line = stopped([[
    local s = string.rep("x", 1024 * 1024 * 1024)
    print("hog got", #s)]], "reconcile exceeded the Lua memory limit %(48 MiB%)")
    assert.same({}, support.lines(p, { "hog got" }))
    -- string.rep (C) was running: the line is the script's that called it
    assert.matches('error="[^"]*hog%.lua:6: reconcile exceeded the Lua memory limit %(48 MiB%)', line)
  end)

  it("fails it even when a pcall catches the memory error", function()
    stopped([[
    local ok = pcall(function()
      local t = {}
      while true do t[#t + 1] = string.rep("y", 1000) .. #t end
    end)
    print("survived pcall", ok)]])
    assert.same({}, support.lines(p, { "survived pcall" }))
  end)

  it("fails a controller file that allocates without bound at load", function()
    local out, rc = support.load_only({ ["a.lua"] = [[
local t = {}
while true do t[#t + 1] = string.rep("z", 4096) .. #t end
]] }, { "--lua-memory-limit", "32" })
    assert.equal(1, rc)
    assert.matches("a%.lua: controller file exceeded the Lua memory limit of [^ ]*a%.lua %(16 MiB%)", out)
  end)
end)

describe("the watchdog's C API", function()
  it("budgets, nesting, resume, heap cap and accounting; frees at lua_close (LeakSanitizer)", function()
    local helpers = require("helpers")
    local out, rc = helpers.run_leak_checked(
      helpers.fixtures .. "/watchdog_c")
    assert.equal(0, rc, out)
    assert.matches("watchdog_c: all ok", out)
    assert.not_matches("LeakSanitizer", out)
  end)
end)
