-- core.json.decode: JSON text to Lua values, and every way it refuses input.
local core = require("luna.core")
local ffi = require("ffi")
local json = core.json

local function decode_err(s, opts)
  local v, err = json.decode(s, opts)
  assert.is_nil(v, "decoded " .. string.format("%q", s) .. " instead of failing")
  assert.equal("InvalidJSON", err.reason)
  assert.matches("^InvalidJSON: ", tostring(err))
  return err.message
end

describe("core.json.decode", function()
  it("maps objects, arrays and scalars", function()
    local v = assert(json.decode('{"s":"x","n":1.5,"i":-7,"t":true,"f":false,"z":null,' ..
                                 '"a":[1,"two",[3]],"o":{"k":"v"}}'))
    assert.equal("x", v.s)
    assert.equal(1.5, v.n)
    assert.equal(-7, v.i)
    assert.is_true(v.t)
    assert.is_false(v.f)
    assert.equal(json.null, v.z)
    assert.equal(3, #v.a)
    assert.equal("two", v.a[2])
    assert.equal(3, v.a[3][1])
    assert.equal("v", v.o.k)
  end)

  it("decodes top-level scalars", function()
    assert.equal("hi", json.decode('"hi"'))
    assert.equal(42, json.decode(" 42 "))
    assert.is_true(json.decode("true"))
    assert.equal(json.null, json.decode("null"))
  end)

  it("keeps JSON null as core.json.null, the NULL light userdata", function()
    local v = json.decode("[null]")
    assert.equal(1, #v)
    assert.equal("userdata", type(v[1]))
    assert.equal(json.null, v[1])
  end)

  it("marks arrays and leaves objects unmarked, so {} and [] stay apart", function()
    local v = json.decode('{"e":{},"a":[],"full":[1]}')
    assert.is_true(json.is_array(v.a))
    assert.is_true(json.is_array(v.full))
    assert.is_false(json.is_array(v.e))
    assert.is_nil(getmetatable(v.e))
    assert.equal(json.array_mt, getmetatable(v.a))
    assert.equal("[]", json.encode(v.a))
    assert.equal("{}", json.encode(v.e))
  end)

  describe("integers", function()
    it("are plain numbers up to 2^53 in magnitude", function()
      for _, s in ipairs({ "0", "9007199254740992", "-9007199254740992", "123456789" }) do
        local v = json.decode(s)
        assert.equal("number", type(v))
        assert.equal(tonumber(s), v)
      end
    end)

    it("beyond 2^53 become exact int64_t cdata", function()
      local cases = {
        ["9007199254740993"] = 9007199254740993LL,
        ["-9007199254740993"] = -9007199254740993LL,
        ["9223372036854775807"] = 9223372036854775807LL,
        ["-9223372036854775808"] = -9223372036854775807LL - 1,
      }
      for s, want in pairs(cases) do
        local v = json.decode(s)
        assert.equal("cdata", type(v))
        assert.is_true(ffi.istype("int64_t", v), s)
        assert.is_true(v == want, s)
      end
    end)

    it("from 2^63 to 2^64-1 become uint64_t cdata", function()
      local v = json.decode("18446744073709551615")
      assert.is_true(ffi.istype("uint64_t", v))
      assert.is_true(v == 18446744073709551615ULL)
      v = json.decode("9223372036854775808")
      assert.is_true(v == 9223372036854775808ULL)
    end)

    it("beyond 64 bits are refused rather than rounded", function()
      assert.matches("integer 18446744073709551616 does not fit in 64 bits at byte %d+",
                     decode_err("18446744073709551616"))
      assert.matches("does not fit in 64 bits", decode_err('{"a":[-9223372036854775809]}'))
    end)
  end)

  describe("floats", function()
    it("decode to the nearest double", function()
      assert.equal(0.1, json.decode("0.1"))
      assert.equal(1e300, json.decode("1e300"))
      assert.equal(-2.5e-3, json.decode("-2.5E-3"))
      assert.equal(1, json.decode("1.0"))
    end)

    it("keep the sign of negative zero", function()
      for _, s in ipairs({ "-0", "-0.0", "-0e1" }) do
        local v = json.decode(s)
        assert.equal(0, v)
        assert.equal(-math.huge, 1 / v, s)
      end
      assert.equal(math.huge, 1 / json.decode("0"))
    end)

    it("refuse values a double cannot hold", function()
      assert.matches("number out of range at byte 5", decode_err("1e400"))
      assert.matches("number out of range", decode_err("[-1e999]"))
    end)
  end)

  describe("strings", function()
    it("resolve escapes, including surrogate pairs, to UTF-8", function()
      assert.equal('"\\/\b\f\n\r\t', json.decode([["\"\\\/\b\f\n\r\t"]]))
      assert.equal("é", json.decode([["\u00e9"]]))
      assert.equal("€", json.decode([["\u20AC"]]))
      assert.equal("😀", json.decode([["\ud83d\ude00"]]))
      assert.equal("\240\159\152\128", json.decode([["\uD83D\uDE00"]]))
      assert.equal("a\0b", json.decode([["a\u0000b"]]))
    end)

    it("pass raw UTF-8 through", function()
      assert.equal("héllo wörld ✓ 😀", json.decode('"héllo wörld ✓ 😀"'))
    end)

    it("refuse unpaired surrogate escapes", function()
      assert.matches("high surrogate without a low one at byte 1", decode_err([["\ud800"]]))
      assert.matches("high surrogate without a low one at byte 3", decode_err([["ab\uD83Dx"]]))
      assert.matches("high surrogate without a low one", decode_err([["\ud800\u0041"]]))
      assert.matches("high surrogate without a low one", decode_err([["\ud800\n"]]))
      assert.matches("high surrogate without a low one", decode_err([["\ud800\ud800"]]))
      assert.matches("low surrogate without a high one at byte 1", decode_err([["\udc00"]]))
      assert.matches("low surrogate without a high one at byte 7", decode_err([["\u0041\udfff"]]))
    end)

    it("refuse invalid UTF-8 with the offset of the bad byte", function()
      assert.matches("invalid UTF%-8 at byte 1", decode_err('"\255"'))
      assert.matches("at byte 3", decode_err('"ab\192\175"'))          -- overlong '/'
      assert.matches("at byte 1", decode_err('"\237\160\128"'))        -- encoded surrogate
      assert.matches("at byte 1", decode_err('"\244\144\128\128"'))    -- above U+10FFFF
      assert.matches("at byte 1", decode_err('"\226\130"'))            -- truncated sequence
      assert.matches("at byte 2", decode_err('{"\128":1}'))            -- in a key
      assert.matches("invalid UTF%-8", decode_err('["\\u00e9x", "\237\160\128"]'))
    end)
  end)

  describe("malformed input", function()
    local cases = {
      { "", "unexpected end of input at byte 0" },
      { "   ", "unexpected end of input at byte 3" },
      { "{", "unexpected end of input at byte 1" },
      { '{"a":1', "unexpected end of input at byte 6" },
      { '"abc', "unexpected end of input at byte 4" },
      { "[1,2,3", "unexpected end of input at byte 6" },
      { '{"a":1,}', "malformed JSON at byte 7" },
      { "[1 2]", "malformed JSON at byte 3" },
      { "[1,]", "malformed JSON at byte 3" },
      { "[1,2,x]", "malformed JSON at byte 5" },
      { '{"a" 1}', "malformed JSON at byte 5" },
      { "{a:1}", "malformed JSON at byte 1" },
      { '{"a":1} x', "malformed JSON at byte 8" },
      { "[]]", "malformed JSON at byte 2" },
      { "1 2", "trailing garbage" },
      -- a token cut short after a complete value (yajl took it for nothing)
      { '{"i":"wb"}"', "unexpected end of input at byte 11" },
      -- JSON's blanks are space, tab, LF and CR only (yajl also took \v, \f)
      { '[1,\v2]', "malformed JSON at byte 3: invalid character" },
      { '{"a":1}\f', "malformed JSON at byte 7: invalid character" },
      { '"a\fb"', "malformed JSON at byte 2" },
      { '[1] "ab', "unexpected end of input at byte 7" },
      { '{"a":1}{"b":2}', "trailing garbage" },
      { "01", "malformed JSON at byte 1" },
      { "1.", "malformed JSON" },
      { ".5", "malformed JSON at byte 0" },
      { "-", "malformed JSON" },
      { "+1", "malformed JSON at byte 0" },
      { "NaN", "malformed JSON at byte 0" },
      { "Infinity", "malformed JSON at byte 0" },
      { "nul", "malformed JSON" },
      { "tru", "malformed JSON" },
      { "'a'", "malformed JSON at byte 0" },
      { [["\x"]], "malformed JSON" },
      { [["\u12"]], "malformed JSON" },
      { [["\u12G4"]], "malformed JSON" },
      { '"a\tb"', "malformed JSON" },
      { '"a\nb"', "malformed JSON" },
      { "// c\n1", "malformed JSON at byte 0" },
      { "[1,2]\0", "malformed JSON" },
    }
    for _, c in ipairs(cases) do
      it(string.format("refuses %q", c[1]), function()
        local msg = decode_err(c[1])
        assert.is_truthy(msg:find(c[2], 1, true), "got: " .. msg)
      end)
    end

    it("returns nil, err for every truncation of a document, never raising", function()
      local doc = '{"a":[1,2.5,"x\\u00e9y",{"b":null}],"c":true,"d":"\\ud83d\\ude00"}'
      assert.is_table(json.decode(doc))
      for i = 0, #doc - 1 do
        local ok, v, err = pcall(json.decode, doc:sub(1, i))
        assert.is_true(ok)
        assert.is_nil(v, "prefix " .. i)
        assert.matches("byte %d+", err.message)
      end
    end)

    it("survives random corruption without raising", function()
      local doc = '{"metadata":{"name":"x","labels":{"a":"b"}},"data":{"k":"v\\n\\u00e9"},' ..
                  '"n":[1,-2,3.5e3,true,false,null]}'
      local seed = 12345
      local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n end
      for _ = 1, 2000 do
        local b = { doc:byte(1, -1) }
        for _ = 1, 1 + rnd(3) do b[1 + rnd(#b)] = rnd(256) end
        local s = string.char(unpack(b))
        local ok, v, err = pcall(json.decode, s)
        assert.is_true(ok, s)
        if v == nil then assert.matches("byte %d+", err.message) end
      end
    end)
  end)

  describe("bounds", function()
    it("accepts 1000 levels of nesting and refuses 1001", function()
      assert.is_table(json.decode(string.rep("[", 1000) .. string.rep("]", 1000)))
      assert.matches("nesting deeper than 1000 at byte 1001",
                     decode_err(string.rep("[", 1001) .. string.rep("]", 1001)))
      assert.matches("nesting deeper than 1000",
                     decode_err(string.rep('{"a":', 1001) .. "1" .. string.rep("}", 1001)))
    end)

    it("takes a smaller max_depth", function()
      assert.is_table(json.decode("[[1]]", { max_depth = 2 }))
      assert.matches("nesting deeper than 2 at byte 3", decode_err("[[[1]]]", { max_depth = 2 }))
    end)

    it("takes a max_size", function()
      assert.is_table(json.decode("[1,2,3]", { max_size = 7 }))
      assert.matches("document larger than 6 bytes at byte 6", decode_err("[1,2,3]", { max_size = 6 }))
    end)

    it("raises on misuse of its arguments", function()
      assert.has_error(function() json.decode({}) end)
      assert.has_error(function() json.decode("1", "x") end)
      assert.has_error(function() json.decode("1", { max_depth = 0 }) end)
      assert.has_error(function() json.decode("1", { max_depth = 5000 }) end)
    end)
  end)

  it("builds large and deep documents correctly", function()
    local parts = {}
    for i = 1, 5000 do parts[i] = string.format('"k%d":%d', i, i) end
    local v = json.decode("{" .. table.concat(parts, ",") .. "}")
    for i = 1, 5000 do assert.equal(i, v["k" .. i]) end
    local arr = {}
    for i = 1, 3000 do arr[i] = tostring(i) end
    v = json.decode("[" .. table.concat(arr, ",") .. "]")
    assert.equal(3000, #v)
    for i = 1, 3000 do assert.equal(i, v[i]) end
    -- Deep nesting with members before and after each child.
    local s = string.rep('{"a":1,"b":[0,', 400) .. "7" .. string.rep('],"c":2}', 400)
    v = json.decode(s)
    for _ = 1, 400 do
      assert.equal(1, v.a)
      assert.equal(2, v.c)
      assert.equal(0, v.b[1])
      v = v.b[2]
    end
    assert.equal(7, v)
  end)
end)
