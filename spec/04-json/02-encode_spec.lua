-- core.json.encode: Lua values to JSON text, round trips, and refusals.
local core = require("luna.core")
local json = core.json

local function encode_err(v, opts)
  local s, err = json.encode(v, opts)
  assert.is_nil(s, "encoded as " .. tostring(s))
  assert.equal("InvalidValue", err.reason)
  assert.matches("^InvalidValue: ", tostring(err))
  return err.message
end

-- Deep equality that also compares array marks and cdata values.
local function same(a, b, path)
  path = path or "$"
  if type(a) ~= type(b) then return false, path .. ": " .. type(a) .. " vs " .. type(b) end
  if type(a) == "table" then
    if json.is_array(a) ~= json.is_array(b) then return false, path .. ": array mark" end
    for k, v in pairs(a) do
      local ok, where = same(v, b[k], path .. "." .. tostring(k))
      if not ok then return false, where end
    end
    for k in pairs(b) do
      if a[k] == nil then return false, path .. "." .. tostring(k) .. " missing" end
    end
    return true
  end
  if type(a) == "number" and a == 0 and b == 0 and 1 / a ~= 1 / b then
    return false, path .. ": sign of zero"
  end
  if a ~= b then return false, path .. ": " .. tostring(a) .. " vs " .. tostring(b) end
  return true
end

local function round_trip(s)
  local v = assert(json.decode(s))
  local out = assert(json.encode(v))
  local again = assert(json.decode(out))
  local ok, where = same(v, again)
  assert.is_true(ok, where)
  return out, v
end

describe("core.json.encode", function()
  it("writes scalars", function()
    assert.equal("true", json.encode(true))
    assert.equal("false", json.encode(false))
    assert.equal("null", json.encode(json.null))
    assert.equal("null", json.encode(nil))
    assert.equal('"x"', json.encode("x"))
  end)

  describe("numbers", function()
    it("writes integral values up to 2^53 without a decimal point", function()
      assert.equal("1", json.encode(1))
      assert.equal("1", json.encode(1.0))
      assert.equal("-42", json.encode(-42))
      assert.equal("1000000000000000", json.encode(1e15))
      assert.equal("9007199254740992", json.encode(2 ^ 53))
      assert.equal("-9007199254740992", json.encode(-2 ^ 53))
      assert.equal("0", json.encode(0))
      assert.equal("-0", json.encode(-0.0))
    end)

    it("writes other doubles in the shortest form that reads back exactly", function()
      assert.equal("0.1", json.encode(0.1))
      assert.equal("1e+300", json.encode(1e300))
      assert.equal("1e+20", json.encode(1e20))
      assert.equal("2.5", json.encode(2.5))
      assert.equal("0.3333333333333333", json.encode(1 / 3))
      assert.equal("5e-324", json.encode(4.9406564584124654e-324))
      assert.equal("1.7976931348623157e+308", json.encode(1.7976931348623157e308))
    end)

    it("round-trips random doubles bit for bit", function()
      local seed = 7
      local function rnd() seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 end
      for _ = 1, 2000 do
        local x = (rnd() - 0.5) * 10 ^ math.floor(rnd() * 600 - 300)
        local s = assert(json.encode(x))
        assert.equal(x, json.decode(s), s)
      end
    end)

    it("writes int64_t and uint64_t cdata as exact digits", function()
      assert.equal("9007199254740993", json.encode(9007199254740993LL))
      assert.equal("9223372036854775807", json.encode(9223372036854775807LL))
      assert.equal("-9223372036854775808", json.encode(-9223372036854775807LL - 1))
      assert.equal("18446744073709551615", json.encode(18446744073709551615ULL))
      assert.equal("[5]", json.encode({ 5LL }))
    end)

    it("refuses NaN and infinities", function()
      assert.matches("NaN cannot be written as JSON at %$", encode_err(0 / 0))
      assert.matches("infinity cannot be written as JSON at %$%.a%[2%]",
                     encode_err({ a = { 1, math.huge } }))
      assert.matches("infinity", encode_err(-math.huge))
    end)
  end)

  describe("strings", function()
    it("escapes quotes, backslashes and control characters", function()
      assert.equal([["a\"b\\c\n\r\t\b\f\u0000\u0001\u001f"]],
                   json.encode('a"b\\c\n\r\t\b\f\0\1\31'))
      assert.equal('"/é😀\127"', json.encode("/é😀\127"))
    end)

    it("refuses invalid UTF-8", function()
      assert.matches("string is not valid UTF%-8 %(byte 1%) at %$%.k", encode_err({ k = "a\255" }))
      assert.matches("not valid UTF%-8", encode_err("\237\160\128"))
      assert.matches("object key is not valid UTF%-8", encode_err({ ["\192\175"] = 1 }))
    end)
  end)

  describe("tables", function()
    it("writes sequences as arrays and string-keyed tables as objects", function()
      assert.equal("[1,2,3]", json.encode({ 1, 2, 3 }))
      assert.equal('{"a":1}', json.encode({ a = 1 }))
      assert.equal('[[],{"x":[true]}]', json.encode({ json.array(), { x = { true } } }))
    end)

    it("writes an unmarked empty table as {} and marked ones as marked", function()
      assert.equal("{}", json.encode({}))
      assert.equal("[]", json.encode(json.array({})))
      assert.equal("[]", json.encode(json.array()))
      assert.equal("{}", json.encode(json.object({})))
      assert.equal('{"a":[],"b":{}}' == json.encode({ a = json.array(), b = {} })
                   or '{"b":{},"a":[]}' == json.encode({ a = json.array(), b = {} }), true)
    end)

    it("lets markers be switched but not replace another metatable", function()
      local t = json.array({})
      assert.equal(t, json.object(t))
      assert.is_true(json.is_object(t))
      assert.equal("{}", json.encode(t))
      assert.has_error(function() json.array(setmetatable({}, {})) end)
      assert.has_error(function() json.array(1) end)
    end)

    it("refuses holes, mixed keys and non-string keys", function()
      assert.matches("array has a hole", encode_err({ 1, nil, 3 }))
      assert.matches("array has a string key %(keys must be 1..n%) at %$", encode_err({ 1, a = 2 }))
      assert.matches("object key must be a string, got a boolean", encode_err({ [true] = 1 }))
      assert.matches("object key must be a string, got a number", encode_err({ [2] = "x" }))
      assert.matches("object key must be a string, got a number", encode_err({ [1.5] = "x" }))
      assert.matches("object key must be a string", encode_err(json.object({ 1 })))
      assert.matches("array has a string key", encode_err(json.array({ a = 1 })))
      assert.matches("array has a hole", encode_err(json.array({ [2] = 1 })))
    end)

    it("refuses values JSON has no form for, naming the path", function()
      assert.matches("cannot encode a function at %$", encode_err(print))
      assert.matches("cannot encode a function at %$%.spec%.items%[2%]",
                     encode_err({ spec = { items = { 1, print } } }))
      assert.matches('cannot encode a thread at %$%["a b"%]', encode_err({ ["a b"] = coroutine.create(print) }))
      assert.matches("cannot encode a userdata", encode_err({ io.stdout }))
      assert.matches("cdata value other than int64_t/uint64_t",
                     encode_err({ require("ffi").new("int[1]") }))
    end)

    it("detects cycles and allows shared subtables", function()
      local t = { a = {} }
      t.a.back = t
      assert.matches("cycle: a table contains itself at %$%.a%.back", encode_err(t))
      local list = { 1 }
      list[2] = list
      assert.matches("cycle", encode_err(list))
      local shared = { x = 1 }
      local s = assert(json.encode({ shared, shared }))
      assert.equal('[{"x":1},{"x":1}]', s)
    end)

    it("bounds nesting at 1000 levels, or at max_depth", function()
      local deep = {}
      local cur = deep
      for _ = 1, 999 do cur[1] = {}; cur = cur[1] end
      assert.is_string(json.encode(deep))
      cur[1] = {}
      assert.matches("nesting deeper than 1000", encode_err(deep))
      assert.equal("[[1]]", json.encode({ { 1 } }, { max_depth = 2 }))
      assert.matches("nesting deeper than 2 at %$%[1%]%[1%]", encode_err({ { { 1 } } }, { max_depth = 2 }))
    end)

    it("ignores metamethods", function()
      local t = setmetatable({ a = 1 }, { __index = function() return "x" end,
                                          __pairs = function() error("no") end })
      assert.equal('{"a":1}', json.encode(t))
    end)
  end)

  describe("round trips", function()
    it("keeps objects, arrays, nesting and empty containers", function()
      round_trip('{"a":{"b":{"c":[1,[2,[3,{}]],[]]}},"e":{},"f":[]}')
      round_trip('[[],[[]],{},[{}],{"x":[]}]')
      assert.equal("[]", round_trip("[]"))
      assert.equal("{}", round_trip("{}"))
    end)

    it("keeps unicode and escapes", function()
      local out = round_trip('["\\u00e9\\u20ac\\ud83d\\ude00", "tab\\there", "q\\"b\\\\s", "\\u0000\\u001f"]')
      assert.equal('["é€😀","tab\\there","q\\"b\\\\s","\\u0000\\u001f"]', out)
    end)

    it("keeps big integers exact", function()
      for _, s in ipairs({ "9007199254740993", "-9007199254740993", "9223372036854775807",
                           "-9223372036854775808", "18446744073709551615", "9007199254740992" }) do
        assert.equal(s, round_trip(s))
        assert.equal("[" .. s .. "]", round_trip("[" .. s .. "]"))
      end
    end)

    it("keeps negative zero and floats", function()
      assert.equal("-0", round_trip("-0"))
      assert.equal("0.1", round_trip("0.1"))
      assert.equal("1e+300", round_trip("1e300"))
      assert.equal("[1.5,-2.25e-10,123456.789]", round_trip("[1.5,-2.25e-10,123456.789]"))
    end)

    it("keeps null and booleans", function()
      assert.equal("[null,true,false]", round_trip("[null,true,false]"))
      assert.equal('{"a":null}', round_trip('{"a":null}'))
    end)

    it("keeps a realistic ConfigMap", function()
      local cm = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"prod",' ..
        '"uid":"7c1e4a52-3f1b-4b6e-9a7d-0c5e8f2d1a34","resourceVersion":"123456789",' ..
        '"labels":{"app.kubernetes.io/name":"shop"},"managedFields":[{"manager":"helm",' ..
        '"fieldsV1":{"f:data":{".":{},"f:a":{}}}}]},"data":{"a":"line 1\\nline \\"2\\""}}'
      local _, v = round_trip(cm)
      assert.equal("shop", v.metadata.labels["app.kubernetes.io/name"])
      assert.same({}, v.metadata.managedFields[1].fieldsV1["f:data"]["."])
      assert.equal('line 1\nline "2"', v.data.a)
    end)
  end)

  it("raises on misuse of its options", function()
    assert.has_error(function() json.encode({}, 1) end)
    assert.has_error(function() json.encode({}, { max_depth = "x" }) end)
  end)
end)
