-- Class 3 of issue 10: C-level recursion is bounded.  Every library
-- function that calls back into Lua (string.gsub, table.sort,
-- coroutine.resume and wrap, xpcall handlers, print, string.format,
-- require) checks the C stack first; a chain of them ends with a
-- "C stack overflow" error in the script, never a segfault.
local support = require("12-isolation.support")
local attacks = require("12-isolation.attack_files")

local controller = support.controller

describe("C recursion through library functions #integration", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)
  before_each(function() support.fresh_namespace(srv) end)
  after_each(function()
    if p then support.stop_host(p, { "Sanitizer" }) end
    p = nil
  end)

  it("ends every chain with a clear error, and the host goes on", function()
    local chains = {
      gsub = 'local function f() return (("x"):gsub("x", f)) end return f()',
      gsubtable = 'local t t = setmetatable({}, { __index = function() return (("x"):gsub("x", t)) end }) return t.x',
      wrap = 'local function f() return coroutine.wrap(f)() end return f()',
      print = 'local mt = {} mt.__tostring = function(v) print(v) return "x" end print(setmetatable({}, mt))',
    }
    local files = {}
    for name, body in pairs(chains) do files[name .. ".lua"] = controller("c-" .. name, "    " .. body) end
    files["after.lua"] = controller("after", "    print('after reconciled', req.name)")
    srv:create_cm("one")
    p = support.run(srv, files)
    for name in pairs(chains) do
      local line = support.wait_line(p, { "reconcile failed", "controller=c-" .. name }, 60)
      assert.matches("C stack overflow: too many nested calls through library functions", line)
    end
    support.wait_line(p, { "after reconciled one" }, 30)
    srv:create_cm("two")
    support.wait_line(p, { "after reconciled two" }, 30)
  end)

  it("lets a script catch the overflow and go on", function()
    srv:create_cm("one")
    p = support.run(srv, { ["a.lua"] = controller("catch", [[
    local ok, err = pcall(function() local function f() return (("x"):gsub("x", f)) end return f() end)
    print("caught", ok, err)
]]) })
    local line = support.wait_line(p, { "caught false" }, 60)
    assert.matches("C stack overflow", line)
    support.wait_line(p, { "reconcile done", "controller=catch" }, 30)
  end)
end)

describe("class 3 attack files #integration", function()
  local srv
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)

  it("are survived, next to a canary", function()
    support.fresh_namespace(srv)
    local runs = attacks.list("3")
    assert.is_true(#runs >= 10)
    attacks.run(srv, runs)
  end)
end)
