-- Class 4 of issue 10: one C call cannot run unbounded.  The sandbox's
-- string.find/match/gmatch/gsub are a matcher of our own that counts its
-- steps against the watchdog; table.sort counts its comparisons; plain
-- finds are linear; what a C call builds lives on the Lua heap, under the
-- memory cap.
local core = require("luna.core")
local helpers = require("helpers")
local support = require("12-isolation.support")
local attacks = require("12-isolation.attack_files")

local P = core.pattern

local function pack(...) return { n = select("#", ...), ... } end

-- Calls string[fn] and P[fn] alike: same results, or both raise.
local function same(fn, ...)
  local ok1, r1 = pcall(function(...) return pack(string[fn](...)) end, ...)
  local ok2, r2 = pcall(function(...) return pack(P[fn](...)) end, ...)
  assert.equal(ok1, ok2, fn .. " raised on one side only: " .. tostring(ok1 and r2 or r1))
  if ok1 then assert.same(r1, r2) end
end

local function gmatch_all(f, s, p)
  local out = {}
  for a, b in f(s, p) do out[#out + 1] = { a, b } end
  return out
end

describe("the sandbox's pattern matcher #unit", function()
  local cases = {
    { "hello world", "o" }, { "hello world", "o", 6 }, { "hello", "l+" }, { "hello", "^h" }, { "hello", "o$" },
    { "hello", "" }, { "hello", "", 10 }, { "hello", "", -2 }, { "a.b", ".", 1, true }, { "key=val", "(%w+)=(%w+)" },
    { "key=val", "()=()" }, { "  trim  ", "^%s*(.-)%s*$" }, { "f(a(b)c)d", "%b()" }, { "THE (quick) fox", "%f[%a]%a+" },
    { "hello", "(l)%1" }, { "]", "[]]" }, { "a-b", "[a-]" }, { "a^b", "[%^]" }, { "abc", "[^a]+" }, { "a\0b", "%z" },
    { "abc", "%" }, { "abc", "[a" }, { "abc", "(a" }, { "abc", "a)" }, { "abc", "%1" }, { "abc", "%b" }, { "abc", "%fa" },
    { "aaab", "a-b" }, { "12.5e3", "^[+-]?%d+%.?%d*[eE]?%d*$" }, { "abc", ".-", 2 }, { "abc", "b", -10 }, { "", "^$" },
    { "x$y", "$y" }, { "ab", "()%1" }, { "ABC def", "%u+" }, { "tab\there", "%c" }, { "0x1F", "%x+", 3 },
  }
  it("finds and matches like LuaJIT's string library", function()
    for _, c in ipairs(cases) do
      same("find", unpack(c, 1, 4))
      same("match", c[1], c[2], c[3])
    end
  end)

  it("substitutes like LuaJIT's string library", function()
    local gs = {
      { "hello world", "o", "0" }, { "hello world", "(o)", "[%1]" }, { "hello", "", "-" }, { "abc", "%w", "%0%0" },
      { "abc", "%w", "%%" }, { "abc", "%w", "%2" }, { "abc", "b", { b = "B" } }, { "abc", "b", {} },
      { "abc", "b", function() return false end }, { "abc", "(b)", function(x) return x:upper() end },
      { "abc", "b", function() return {} end }, { "abc", "%w", "x", 2 }, { "abc", "^a", "X" }, { "abc", "x*", "-" },
      { "abc", "b", 5 }, { "hello world", "(%w+) (%w+)", "%2 %1" }, { "abc", "b", true },
    }
    for _, c in ipairs(gs) do same("gsub", c[1], c[2], c[3], c[4]) end
  end)

  it("iterates like LuaJIT's gmatch", function()
    for _, c in ipairs({ { "hello world from lua", "%a+" }, { "k=v, a=b", "(%w+)=(%w+)" }, { "abc", "" },
                         { "abc", "^a" }, { "a,b,,c", "([^,]*)" }, { "abc", "()" } }) do
      assert.same(gmatch_all(string.gmatch, c[1], c[2]), gmatch_all(P.gmatch, c[1], c[2]))
    end
  end)

  it("agrees with LuaJIT on 20,000 random patterns", function()
    math.randomseed(42)
    local atoms = { "a", "b", ".", "%a", "%d", "[ab]", "[^a]", "%s", "(", ")", "()", "%1", "x", "%b()", "%f[%w]", "$", "^" }
    local quant = { "", "", "*", "+", "-", "?" }
    local subj = { "a", "b", "1", " ", "(", ")", "x", "ab" }
    for _ = 1, 20000 do
      local p, s = {}, {}
      for _ = 1, math.random(1, 6) do p[#p + 1] = atoms[math.random(#atoms)] .. quant[math.random(#quant)] end
      for _ = 1, math.random(0, 12) do s[#s + 1] = subj[math.random(#subj)] end
      p, s = table.concat(p), table.concat(s)
      same("find", s, p)
      same("gsub", s, p, "<%0>")
      same("find", s, p, math.random(-5, 8))
      local ok1, g1 = pcall(gmatch_all, string.gmatch, s, p)
      local ok2, g2 = pcall(gmatch_all, P.gmatch, s, p)
      assert.equal(ok1, ok2)
      if ok1 then assert.same(g1, g2) end
    end
  end)

  it("reads patterns by length: a NUL byte is a character (LuaJIT stops the pattern there)", function()
    assert.equal("\0", P.match("a\0b", "\0"))
    assert.equal(2, (P.find("a\0b", "%z")))
  end)

  it("refuses patterns that nest too deep instead of using the C stack", function()
    local ok, err = pcall(P.match, ("a"):rep(300), ("a?"):rep(300) .. ("a"):rep(300))
    assert.is_false(ok)
    assert.matches("pattern too complex", err)
  end)

  it("sorts like table.sort: numbers, strings, with an order, with __lt", function()
    math.randomseed(7)
    for n = 0, 60 do
      local a, b, c = {}, {}, {}
      for i = 1, n do a[i] = math.random(10) b[i] = tostring(math.random(20)) c[i] = math.random(100) end
      P.sort(a)
      P.sort(b)
      P.sort(c, function(x, y) return x > y end)
      for i = 2, n do
        assert.is_true(a[i - 1] <= a[i])
        assert.is_true(b[i - 1] <= b[i])
        assert.is_true(c[i - 1] >= c[i])
      end
    end
    local mt = { __lt = function(x, y) return x.v < y.v end }
    local t = {}
    for i = 1, 50 do t[i] = setmetatable({ v = (i * 37) % 50 }, mt) end
    P.sort(t)
    for i = 2, 50 do assert.is_true(t[i - 1].v <= t[i].v) end
    assert.has_error(function() P.sort({ 1, "x", 2 }) end)
  end)
end)

describe("one long C call #integration", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)
  before_each(function() support.fresh_namespace(srv) end)
  after_each(function()
    if p then support.stop_host(p) end
    p = nil
  end)

  it("stops the issue's backtracking find with the watchdog while /healthz answers", function()
    srv:create_cm("one")
    p = support.run(srv, { ["a.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "slow", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    if req.name == "one" then return ("a"):rep(2e4):find(".-.-.-b") end
    print("slow reconciled", req.name)
  end,
}
]] }, { "--health-probe-bind-address", "127.0.0.1:0" })
    local port = support.wait_line(p, { "health probe server listening" }, 20):match(":(%d+)%s*$")
      or support.wait_line(p, { "health probe server listening" }, 20):match("address=[^%s]*:(%d+)")
    for attempt = 1, 2 do
      local line = support.wait_line(p, { "reconcile failed", "controller=slow", "attempt=" .. attempt }, 60)
      assert.matches("reconcile exceeded its %a+ budget", line)
      assert.matches("stopped=", line)
      local out = helpers.run("env -u LD_PRELOAD curl -s -m 10 http://127.0.0.1:" .. port .. "/healthz")
      assert.equal("ok", out)
    end
    srv:create_cm("two")
    support.wait_line(p, { "slow reconciled two" }, 60)
  end)
end)

describe("class 4 attack files #integration", function()
  local srv
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)

  it("are survived, next to a canary", function()
    support.fresh_namespace(srv)
    local runs = attacks.list("4")
    assert.is_true(#runs >= 10)
    attacks.run(srv, runs)
  end)
end)
