-- The watchdog: script code that runs too long without yielding is stopped
-- (instruction and time budgets), fails like any error, and the host keeps
-- reconciling the other keys and controllers.  Runs `luna run` against the
-- dev server (or the cluster in KUBECONFIG).
local helpers = require("helpers")
local support = require("12-isolation.support")

-- A controller that reconciles every ConfigMap of the spec namespace and
-- says so; the second one proves the host goes on.
local OTHER = [[
local luna = require "luna"
return luna.controller {
  name = "other", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req) print("other reconciled", req.name) end,
}
]]

local function spinner(body, extra)
  return ([[
local luna = require "luna"
return luna.controller {
  name = "spinner", watch = { "v1/ConfigMap", namespace = "@NS@" }, %s
  reconcile = function(req)
    if req.name ~= "spin" then print("spinner reconciled", req.name) return end
    %s
  end,
}
]]):format(extra or "", body)
end

describe("the watchdog", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)
  before_each(function() support.fresh_namespace(srv) end)
  after_each(function() if p then p:stop() end p = nil end)

  -- Runs the spinner and OTHER, creates "ok" and "spin", waits for the
  -- stop, then checks the host is alive and reconciles a key made later.
  local function stopped(body, opts)
    opts = opts or {}
    srv:create_cm("ok")
    srv:create_cm("spin")
    p = support.run(srv, { ["spinner.lua"] = spinner(body, opts.extra), ["other.lua"] = OTHER },
      opts.args or { "--reconcile-instruction-limit", "2000000" })
    local ns = srv.ns
    local line = support.wait_line(p, { "reconcile failed", "controller=spinner",
      "key=" .. ns .. "/spin" }, 20)
    support.wait_line(p, { "reconcile done", "controller=spinner", "key=" .. ns .. "/ok" })
    srv:create_cm("later")
    support.wait_line(p, { "spinner reconciled later" })
    support.wait_line(p, { "other reconciled later" })
    assert.is_true(p:alive())
    return line
  end

  it("stops `while true do end` and keeps reconciling the other keys", function()
    local line = stopped("while true do end")
    assert.matches("stopped=instructions", line)
    assert.matches("reconcile exceeded its instruction budget %(2000000 instructions without yielding%)",
      line)
    assert.matches("spinner%.lua:6:", line) -- where it was stopped
    assert.matches("attempt=1", line)
  end)

  it("stops it with the default budget too", function()
    local line = stopped("local n = 0 while true do n = n + 1 end", { args = {} })
    assert.matches("reconcile exceeded its instruction budget %(100000000 instructions", line)
  end)

  it("stops it again on every retry, with backoff between", function()
    srv:create_cm("spin")
    p = support.run(srv, { ["spinner.lua"] = spinner("while true do end") },
      { "--reconcile-instruction-limit", "1000000" })
    local key = "key=" .. srv.ns .. "/spin"
    for attempt = 1, 3 do
      local line = support.wait_line(p, { "reconcile failed", key, "attempt=" .. attempt })
      assert.matches("stopped=instructions", line)
    end
  end)

  it("cannot be swallowed by pcall: the next instruction raises again", function()
    local line = stopped([[
    local ok = pcall(function() while true do end end)
    print("survived pcall", ok)
    while true do end]])
    assert.matches("stopped=instructions", line)
    assert.same({}, support.lines(p, { "survived pcall" }))
  end)

  it("cannot be swallowed by a pcall in a loop", function()
    local line = stopped([[
    while true do pcall(function() while true do end end) end]])
    assert.matches("stopped=instructions", line)
  end)

  it("cannot be swallowed by an xpcall handler that loops", function()
    local line = stopped([[
    xpcall(function() while true do end end, function() while true do end end)
    print("survived xpcall")]])
    assert.matches("stopped=instructions", line)
    assert.same({}, support.lines(p, { "survived xpcall" }))
  end)

  it("stops a loop in a coroutine the reconcile created", function()
    local line = stopped([[
    local co = coroutine.wrap(function() while true do end end)
    local ok = pcall(co)
    print("survived coroutine", ok)]])
    assert.matches("stopped=instructions", line)
    assert.same({}, support.lines(p, { "survived coroutine" }))
  end)

  it("stops a loop after hot loops ran (no JIT-compiled trace escapes the hook)", function()
    -- With LuaJIT's compiler on, these loops are compiled after a few dozen
    -- iterations and a compiled loop never calls the count hook.
    local line = stopped([[
    local s = 0
    for round = 1, 50 do
      for i = 1, 2000 do s = s + i % 7 end
    end
    local i = 0
    while true do i = i + 1 end]], { args = { "--reconcile-instruction-limit", "20000000" } })
    assert.matches("stopped=instructions", line)
  end)

  it("stops a reconcile past its time budget (slow C calls, few instructions)", function()
    local line = stopped([[
    local s = string.rep("a", 100000)
    while true do s:find("b", 1, true) end]],
      { extra = "limits = { seconds = 0.3 },", args = { "--reconcile-instruction-limit", "0" } })
    assert.matches("stopped=time", line)
    assert.matches("reconcile exceeded its time budget %(0%.3 s without yielding%)", line)
  end)

  it("takes the controller's own instruction budget over the flag", function()
    local line = stopped("while true do end",
      { extra = "limits = { instructions = 300000 },", args = {} })
    assert.matches("%(300000 instructions without yielding%)", line)
  end)

  it("stops a predicate that loops; the event still goes through", function()
    srv:create_cm("a")
    p = support.run(srv, { ["pred.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "pred", watch = { "v1/ConfigMap", namespace = "@NS@" },
  predicates = { function(ev) while true do end end },
  reconcile = function(req) print("pred reconciled", req.name) end,
}
]], ["other.lua"] = OTHER }, { "--reconcile-instruction-limit", "1000000" })
    local line = support.wait_line(p, { "lua callback failed", "controller=pred", "what=predicate" })
    assert.matches("stopped=instructions", line)
    assert.matches("predicate exceeded its instruction budget", line)
    support.wait_line(p, { "pred reconciled a" })
    support.wait_line(p, { "other reconciled a" })
    assert.is_true(p:alive())
  end)

  it("stops a watches map function that loops", function()
    p = support.run(srv, { ["mapper.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "mapper", watch = { "v1/ConfigMap", namespace = "@NS@" },
  watches = { { "v1/Secret", namespace = "@NS@", map = function(o) while true do end end } },
  reconcile = function(req) print("mapper reconciled", req.name) end,
}
]], ["other.lua"] = OTHER }, { "--reconcile-instruction-limit", "1000000" })
    support.wait_line(p, { "controller started", "controller=mapper" })
    local code = srv:request("POST", srv:ns_path("secrets"),
      { apiVersion = "v1", kind = "Secret", metadata = { name = "s" } })
    assert.equal(201, code)
    local line = support.wait_line(p, { "lua callback failed", "controller=mapper",
      'what="watches map"' })
    assert.matches("stopped=instructions", line)
    srv:create_cm("b")
    support.wait_line(p, { "mapper reconciled b" })
    support.wait_line(p, { "other reconciled b" })
  end)

  it("stops an index function that loops; the object is still cached", function()
    srv:create_cm("c")
    p = support.run(srv, { ["indexed.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "indexed", watch = { "v1/ConfigMap", namespace = "@NS@" },
  indexes = { spin = function(o) while true do end end },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    print("indexed reconciled", req.name, cm and "cached" or "missing")
  end,
}
]], ["other.lua"] = OTHER }, { "--reconcile-instruction-limit", "1000000" })
    local line = support.wait_line(p, { "index function failed", "index=indexed/spin" })
    assert.matches("index function exceeded its instruction budget", line)
    support.wait_line(p, { "indexed reconciled c cached" })
    support.wait_line(p, { "other reconciled c" })
  end)

  it("refuses to start on a controller file that loops at load", function()
    local out, rc = support.load_only({ ["a.lua"] = "local n = 0\nwhile true do n = n + 1 end\n" },
      { "--reconcile-instruction-limit", "1000000" })
    assert.equal(1, rc)
    assert.matches("controller load failed", out)
    assert.matches("a%.lua: controller file exceeded its instruction budget %(1000000 instructions", out)
  end)

  it("rejects bad limit flags", function()
    for _, args in ipairs({ "--reconcile-instruction-limit lots", "--reconcile-time-limit -1",
                            "--lua-memory-limit 12x" }) do
      local out, rc = helpers.run(helpers.luna .. " run " .. args .. " /tmp")
      assert.equal(2, rc, out)
      assert.matches("wants a number >= 0", out)
    end
  end)
end)
