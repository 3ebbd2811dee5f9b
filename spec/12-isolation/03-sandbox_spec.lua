-- The script sandbox: exactly the globals and library functions docs/isolation.md
-- lists, strict globals, read-only API tables, text-only load, a require
-- limited to luna's modules and the controllers directory, print to the
-- log.  Most checks run while a controller file loads (no cluster needed);
-- the reconcile checks run `luna run` against the dev server.
local cjson = require("cjson")
local support = require("12-isolation.support")

-- Each case: name, code (a function body), and either a pattern the error
-- must match or { ok = value } for what the body must return (tostring).
local REFUSED = {
  { "os.exit", "os.exit(3)", "os%.exit is not available to luna scripts" },
  { "os.execute", "os.execute('true')", "os%.execute is not available" },
  { "os.remove", "os.remove('/tmp/x')", "os%.remove is not available" },
  { "os.rename", "os.rename('/tmp/x', '/tmp/y')", "os%.rename is not available" },
  { "os.tmpname", "os.tmpname()", "os%.tmpname is not available" },
  { "os.setlocale", "os.setlocale('C')", "os%.setlocale is not available" },
  { "io.read", "io.read()", "undefined global 'io' %(io is not available to luna scripts%)" },
  { "io.open", "io.open('/etc/passwd')", "undefined global 'io'" },
  { "dofile", "dofile('/etc/passwd')", "undefined global 'dofile'" },
  { "loadfile", "loadfile('/etc/passwd')", "undefined global 'loadfile'" },
  { "require.ffi", "require('ffi')", "module 'ffi' is not available to luna scripts" },
  { "require.jit", "require('jit')", "module 'jit' is not available" },
  { "require.io", "require('io')", "module 'io' is not available" },
  { "require.jit.util", "require('jit.util')", "module 'jit%.util' is not available" },
  { "require.luna.api", "require('luna.api')", "module 'luna%.api' is not available" },
  { "require.luna.util", "require('luna.util')", "module 'luna%.util' is not available" },
  { "require.missing", "require('socket')", "module 'socket' not found: no file .-/socket%.lua" },
  { "require.path", "require('../etc/passwd')", "invalid module name '%.%./etc/passwd'" },
  { "debug.sethook", "debug.sethook(print, '', 1)", "debug%.sethook is not available" },
  { "debug.getinfo", "debug.getinfo(1)", "debug%.getinfo is not available" },
  { "debug.getregistry", "debug.getregistry()", "debug%.getregistry is not available" },
  { "debug.getupvalue", "debug.getupvalue(print, 1)", "debug%.getupvalue is not available" },
  { "string.dump", "string.dump(print)", "string%.dump is not available" },
  { "method.dump", "('x'):dump()", "attempt to call method 'dump'" },
  { "getfenv", "getfenv(1)", "undefined global 'getfenv'" },
  { "setfenv", "setfenv(1, {})", "undefined global 'setfenv'" },
  { "collectgarbage", "collectgarbage('stop')", "undefined global 'collectgarbage'" },
  { "newproxy", "newproxy(true)", "undefined global 'newproxy'" },
  { "module", "module('x')", "undefined global 'module'" },
  { "package", "package.loadlib('x', 'y')", "undefined global 'package'" },
  { "jit", "jit.on()", "undefined global 'jit'" },
  { "ffi", "ffi.C.exit(1)", "undefined global 'ffi'" },
  { "load.binary", "assert(load(string.char(27) .. 'LJ' .. string.char(2)))",
    "binary chunks cannot be loaded" },
  { "load.binary.mode", "assert(load('return 1', 'x', 'b'))", "binary chunks cannot be loaded" },
  { "load.reader", "load(function() return nil end)", "string expected %(luna scripts load text" },
  { "undefined.read", "return undefined_name", "undefined global 'undefined_name'" },
  { "global.assign", "x = 1", "assignment to global 'x': luna scripts cannot set globals" },
  { "global.function", "function helper() end", "assignment to global 'helper'" },
  { "global.builtin", "print = nil", "assignment to global 'print'" },
  { "G.assign", "_G.y = 1", "assignment to global 'y'" },
  { "G.rawset", "rawset(_G, 'y', 1)", "rawset: the table is read%-only" },
  { "luna.get", "luna.get = nil", "luna%.get is read%-only" },
  { "luna.log.info", "luna.log.info = print", "luna%.log%.info is read%-only" },
  { "luna.rawset", "rawset(luna, 'get', 1)", "rawset: the table is read%-only" },
  { "luna.setmetatable", "setmetatable(luna, {})", "cannot change a protected metatable" },
  { "string.format", "string.format = nil", "string%.format is read%-only" },
  { "meta.set_owner", "require('luna.meta').set_owner = nil", "luna%.meta%.set_owner is read%-only" },
  { "core.json.write", "require('luna.core').json.encode = nil", "luna%.core%.json%.encode is read%-only" },
  { "load.strict", "return load('return undefined_z')()", "undefined global 'undefined_z'" },
}

local ALLOWED = {
  { "getmetatable.luna", "return getmetatable(luna)", { ok = "false" } },
  { "getmetatable.string", "return getmetatable('')", { ok = "nil" } },
  { "getmetatable.error", "return getmetatable(luna.errors.new('NotFound', 'x', 404))", { ok = "nil" } },
  { "getmetatable.own", "local mt = {} return getmetatable(setmetatable({}, mt)) == mt", { ok = "true" } },
  { "load", "return load('return 1 + 1')()", { ok = "2" } },
  { "load.env", "return load('return x', 'c', 't', { x = 5 })()", { ok = "5" } },
  { "loadstring", "return loadstring('return _G')() == _G", { ok = "true" } },
  { "require.same", "return require('luna') == luna", { ok = "true" } },
  { "require.string", "return require('string') == string", { ok = "true" } },
  { "require.module", "return require('lib.util').hi()", { ok = "hi from lib.util" } },
  { "require.once", "return require('lib.util') == require('lib.util')", { ok = "true" } },
  { "require.predicates", "return type(require('luna.predicates').generation_changed)",
    { ok = "function" } },
  { "predicates.any", "return type(require('luna.predicates').any(function() return true end))",
    { ok = "function" } },
  { "core.loop", "return require('luna.core').loop", { ok = "nil" } },
  { "core.runtime", "return require('luna.core').runtime", { ok = "nil" } },
  { "core.json", "return require('luna.core').json.encode({ a = 1 })", { ok = '{"a":1}' } },
  { "core.crypto", "return require('luna.core').crypto.sha256('abc'):sub(1, 8)", { ok = "ba7816bf" } },
  { "luna.pairs", "local n = 0 for _ in pairs(luna) do n = n + 1 end return n > 20", { ok = "true" } },
  { "luna.ipairs", "local n = 0 for _ in ipairs({ 1, 2, 3 }) do n = n + 1 end return n", { ok = "3" } },
  { "string.method", "return ('ab'):rep(3)", { ok = "ababab" } },
  { "os.time", "return type(os.time()) .. type(os.clock()) .. type(os.date('%Y'))",
    { ok = "numbernumberstring" } },
  { "coroutine", "return coroutine.wrap(function() coroutine.yield(7) end)()", { ok = "7" } },
  { "xpcall", "return select(2, xpcall(function() error('e', 0) end, function(m) return m .. '!' end))",
    { ok = "e!" } },
}

-- The exact globals, and the exact fields of each library (docs/isolation.md).
local GLOBALS = "_G _VERSION assert bit coroutine debug error getmetatable ipairs load " ..
  "loadstring math next os pairs pcall print rawequal rawget rawset require select " ..
  "setmetatable string table tonumber tostring type unpack xpcall"
local LIBS = {
  string = "byte char find format gmatch gsub len lower match rep reverse sub upper",
  table = "concat insert maxn remove sort",
  math = "abs acos asin atan atan2 ceil cos cosh deg exp floor fmod frexp huge ldexp log " ..
    "log10 max min modf pi pow rad random randomseed sin sinh sqrt tan tanh",
  bit = "arshift band bnot bor bswap bxor lshift rol ror rshift tobit tohex",
  coroutine = "create isyieldable resume running status wrap yield",
  os = "clock date difftime getenv time",
  debug = "traceback",
}

local function checks_file()
  local lines = {
    "local luna = require 'luna'",
    "local function check(name, f)",
    "  local ok, v = pcall(f)",
    "  print('CHECK', name, ok, tostring(v))",
    "end",
    "local function keys(t) local out = {} for k in pairs(t) do out[#out + 1] = k end",
    "  table.sort(out) return table.concat(out, ' ') end",
  }
  for _, list in ipairs({ REFUSED, ALLOWED }) do
    for _, c in ipairs(list) do
      lines[#lines + 1] = ("check(%q, function() %s end)"):format(c[1], c[2])
    end
  end
  lines[#lines + 1] = "check('globals', function() return keys(_G) end)"
  for name in pairs(LIBS) do
    lines[#lines + 1] = ("check('lib.%s', function() return keys(%s) end)"):format(name, name)
  end
  lines[#lines + 1] = "return luna.controller { name = 'checks', watch = 'v1/ConfigMap', " ..
    "reconcile = function() end }"
  return table.concat(lines, "\n") .. "\n"
end

describe("the sandbox", function()
  describe("at load", function()
    local results, out
    setup(function()
      out = support.load_only({
        ["checks.lua"] = checks_file(),
        ["lib/util.lua"] = "print('lib.util loaded')\n" ..
          "return { hi = function() return 'hi from lib.util' end }\n",
      })
      results = {}
      for line in out:gmatch("[^\n]+") do
        -- print's text is the message: bare, or a JSON string when it holds
        -- '=', '"' or a control character (docs/operations.md, "Logs")
        local quoted = line:match(' INFO ("CHECK .*") source=%S+$')
        local msg = quoted and cjson.decode(quoted) or line:match(" INFO (CHECK .-) source=%S+$")
        local name, ok, value = (msg or ""):match("^CHECK (%S+) (%S+) (.*)$")
        if name then results[name] = { ok = ok == "true", value = value } end
      end
    end)

    for _, c in ipairs(REFUSED) do
      it("refuses " .. c[1], function()
        local r = results[c[1]]
        assert.is_not_nil(r, "no result for " .. c[1] .. " in:\n" .. out)
        assert.is_false(r.ok, c[1] .. " was allowed: " .. r.value)
        assert.matches(c[3], r.value)
      end)
    end

    for _, c in ipairs(ALLOWED) do
      it("allows " .. c[1], function()
        local r = results[c[1]]
        assert.is_not_nil(r, "no result for " .. c[1] .. " in:\n" .. out)
        assert.is_true(r.ok, r.value)
        assert.equal(c[3].ok, r.value)
      end)
    end

    it("gives scripts exactly the documented globals", function()
      assert.equal(GLOBALS, results.globals and results.globals.value)
    end)

    for name, fields in pairs(LIBS) do
      it("gives scripts exactly the documented " .. name .. " functions", function()
        local r = results["lib." .. name]
        assert.is_true(r and r.ok, out)
        assert.equal(fields, r.value)
      end)
    end

    it("runs a required module once, and prints with the file and line", function()
      local n = 0
      for line in out:gmatch("[^\n]+") do
        if line:find("INFO lib.util loaded source=", 1, true) then
          n = n + 1
          assert.matches("source=%S+/lib/util%.lua:1$", line)
        end
      end
      assert.equal(1, n)
    end)
  end)

  it("refuses a controller file that defines a global, with file and line", function()
    local out, rc = support.load_only({ ["a.lua"] = "local luna = require 'luna'\n" ..
      "function helper() end\n" ..
      "return luna.controller { name = 'a', watch = 'v1/ConfigMap', reconcile = helper }\n" })
    assert.equal(1, rc)
    assert.matches("a%.lua:2: assignment to global 'helper': luna scripts cannot set globals, " ..
      "use a local %(local helper = %.%.%.%)", out)
  end)

  it("refuses a forged controller whose fields would run script code in the host", function()
    local out, rc = support.load_only({ ["a.lua"] = "return setmetatable({}, { __metatable = " ..
      "'luna.controller', __index = function() while true do end end })\n" })
    assert.equal(1, rc)
    assert.matches("a%.lua: the file must return luna%.controller{%.%.%.}, got table", out)
  end)

  it("gives every file its own environment", function()
    local body = "local luna = require 'luna'\nprint('ENV', '%s', tostring(_G), tostring(luna))\n" ..
      "return luna.controller { name = '%s', watch = 'v1/ConfigMap', reconcile = function() end }\n"
    local out = support.load_only({ ["a.lua"] = body:format("a", "a"), ["b.lua"] = body:format("b", "b") })
    local envs, lunas = {}, {}
    for file, env, luna in out:gmatch("ENV (%a) (table: %S+) (table: %S+)") do
      envs[file], lunas[file] = env, luna
    end
    assert.is_string(envs.a, out)
    assert.is_string(envs.b, out)
    assert.not_equal(envs.a, envs.b)
    -- each file has a state of its own, so not even the read-only view of
    -- luna is one object for two files
    assert.is_string(lunas.a, out)
    assert.is_string(lunas.b, out)
    assert.not_equal(lunas.a, lunas.b)
  end)

  describe("in reconcile", function()
    local srv, p
    setup(function()
      srv = support.server()
      support.fresh_namespace(srv)
      for _, name in ipairs({ "exit", "read", "exec", "tamper", "hello", "get" }) do
        srv:create_cm(name)
      end
      p = support.run(srv, {
        ["bad.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "bad", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    if req.name == "exit" then os.exit(3) end
    if req.name == "read" then return io.read("*a") end
    if req.name == "exec" then os.execute("sleep 30") end
    if req.name == "tamper" then luna.log.info = function() end end
    if req.name == "hello" then print("hello from", req.name) end
    if req.name == "get" then
      -- the API yields inside pcall and xpcall
      local ok, obj = pcall(luna.get, "v1/ConfigMap", req.namespace, req.name)
      local ok2, obj2 = xpcall(function() return luna.get("v1/ConfigMap", req.namespace, req.name) end,
        debug.traceback)
      print("got", ok and obj.metadata.name, ok2 and obj2.metadata.name)
    end
  end,
}
]],
        ["good.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "good", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req) luna.log.info("good reconciled", { name = req.name }) end,
}
]],
      })
    end)
    teardown(function()
      if p then p:stop() end
      support.stop(srv)
    end)

    local function failed(name)
      return support.wait_line(p, { "reconcile failed", "controller=bad", "key=" .. srv.ns .. "/" .. name })
    end

    it("fails a reconcile that calls os.exit; the host goes on", function()
      assert.matches("bad%.lua:5: os%.exit is not available to luna scripts", failed("exit"))
      assert.is_true(p:alive())
    end)

    it("fails a reconcile that calls io.read", function()
      assert.matches("bad%.lua:6: undefined global 'io'", failed("read"))
    end)

    it("fails a reconcile that calls os.execute", function()
      assert.matches("bad%.lua:7: os%.execute is not available", failed("exec"))
    end)

    it("fails a reconcile that overwrites the API; the API still works", function()
      assert.matches("bad%.lua:8: luna%.log%.info is read%-only", failed("tamper"))
      for _, name in ipairs({ "exit", "read", "exec", "tamper", "hello", "get" }) do
        support.wait_line(p, { "INFO good reconciled", "controller=good", "name=" .. name })
      end
    end)

    it("sends print to the log with controller, key and source", function()
      local line = support.wait_line(p, { "INFO hello from hello" })
      assert.matches(" controller=bad key=" .. srv.ns:gsub("%-", "%%-") .. "/hello reconcile_id=%x+ " ..
        "source=%S+/bad%.lua:9$", line)
    end)

    it("lets the API yield inside pcall and xpcall", function()
      support.wait_line(p, { "INFO got get get" })
    end)

    it("exits cleanly on SIGTERM afterwards", function()
      assert.is_true(p:alive())
      assert.equal(0, p:stop())
      p = nil
    end)
  end)
end)
