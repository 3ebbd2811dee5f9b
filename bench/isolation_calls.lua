-- bench/isolation_calls.lua — what the sandbox's own string patterns and
-- table.sort cost against LuaJIT's, and how long a backtracking pattern
-- runs in each (the reason they exist: LuaJIT's run in one C call the
-- watchdog cannot interrupt).  The interpreter as luna runs it: JIT off.
--
--   calls_pattern   seconds per call: a greedy find over 1 MB, a gsub of
--                   every character of 1 MB, a split with gmatch, the
--                   backtracking ("a"):rep(n):find(".-.-.-b") for small n
--   calls_sort      seconds per sort: 2M numbers, 500k strings, 100k with
--                   an order function
--   calls_cstack    microseconds per caught "C stack overflow"
--
-- Run: LUNA_BUILD=build luajit bench/isolation_calls.lua
-- Prints `bench <name> key=value ...` lines (ratio = ours / LuaJIT).
local build = os.getenv("LUNA_BUILD") or "build"
package.cpath = build .. "/lua/?.so;" .. package.cpath
jit.off()
local P = require("luna.core").pattern

local function best(f, n)
  local b = math.huge
  for _ = 1, n or 3 do
    local t = os.clock()
    f()
    b = math.min(b, os.clock() - t)
  end
  return b
end

local function line(name, fields)
  local parts = { "bench " .. name }
  for _, kv in ipairs(fields) do parts[#parts + 1] = kv[1] .. "=" .. kv[2] end
  print(table.concat(parts, " "))
end

local big = ("x"):rep(1e6) .. "y"
local words = ("alpha beta gamma delta "):rep(40000)
for _, case in ipairs({
  { "find_greedy_1MB", function(f) f.find(big, "x*y") end },
  { "gsub_1MB", function(f) f.gsub(big, "x", "z") end },
  { "gmatch_words_920kB", function(f) for _ in f.gmatch(words, "%a+") do end end },
  { "backtrack_n200", function(f) f.find(("a"):rep(200), ".-.-.-b") end },
  { "backtrack_n400", function(f) f.find(("a"):rep(400), ".-.-.-b") end },
}) do
  local lj = best(function() case[2](string) end)
  local ours = best(function() case[2](P) end)
  line("calls_pattern", { { "case", case[1] }, { "luajit_s", ("%.4f"):format(lj) },
    { "ours_s", ("%.4f"):format(ours) }, { "ratio", ("%.2f"):format(ours / lj) } })
end

local function numbers(n) local t = {} for i = 1, n do t[i] = (i * 7919) % 1000003 end return t end
local function strings(n) local t = {} for i = 1, n do t[i] = tostring((i * 7919) % 1000003) end return t end
for _, case in ipairs({
  { "numbers_2M", function() return numbers(2e6) end, nil },
  { "strings_500k", function() return strings(5e5) end, nil },
  { "order_fn_100k", function() return numbers(1e5) end, function(a, b) return a > b end },
}) do
  local lj = best(function() local t = case[2]() table.sort(t, case[3]) end, 1)
  local ours = best(function() local t = case[2]() P.sort(t, case[3]) end, 1)
  line("calls_sort", { { "case", case[1] }, { "luajit_s", ("%.3f"):format(lj) },
    { "ours_s", ("%.3f"):format(ours) }, { "ratio", ("%.2f"):format(ours / lj) } })
end

local n = 200
local t = best(function()
  for _ = 1, n do
    pcall(function() local function g() return (P.gsub("x", "x", g)) end return g() end)
  end
end, 1)
line("calls_cstack", { { "overflows", n }, { "us_each", ("%.0f"):format(t / n * 1e6) } })
