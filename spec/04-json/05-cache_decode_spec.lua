-- The cache's reader (luna_lua_json_push, what every lister get runs): a
-- direct reader for the bytes the informer already validated, falling back
-- to the full parser.  Whichever reads a document, the table must be the
-- one core.json.decode (bigint = "double") makes of it.
local core = require("luna.core")
local ffi = require("ffi")
local json = core.json

local function same(a, b, path)
  path = path or "$"
  if type(a) ~= type(b) then return false, path .. ": " .. type(a) .. " vs " .. type(b) end
  if type(a) == "number" then
    -- 1/a tells -0 from 0
    return a == b and 1 / a == 1 / b, path .. ": " .. a .. " vs " .. b
  end
  if type(a) == "cdata" then
    return ffi.typeof(a) == ffi.typeof(b) and a == b, path
  end
  if type(a) ~= "table" then return a == b, path .. ": " .. tostring(a) .. " vs " .. tostring(b) end
  if getmetatable(a) ~= getmetatable(b) then return false, path .. ": metatable" end
  for k, v in pairs(a) do
    local ok, where = same(v, b[k], path .. "." .. tostring(k))
    if not ok then return false, where end
  end
  for k in pairs(b) do
    if a[k] == nil then return false, path .. "." .. tostring(k) .. " missing" end
  end
  return true
end

local function check(s, want_fast)
  local got, fast = core.cache_decode(s)
  local want, err = json.decode(s, { bigint = "double" })
  assert.is_nil(err, "core.json.decode refuses " .. s:sub(1, 80))
  local ok, where = same(got, want)
  assert.truthy(ok, ("%s: %s"):format(s:sub(1, 80), tostring(where)))
  if want_fast ~= nil then
    assert.equal(want_fast, fast, (want_fast and "fast reader refused " or "fast reader took ") .. s:sub(1, 80))
  end
  return got
end

describe("cached objects as tables", function()
  it("reads what objects hold directly, the same tables as core.json.decode", function()
    local cm = check('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-1","namespace":"ns",' ..
      '"uid":"0b5e","resourceVersion":"12","labels":{"app":"x"},"finalizers":[],"ownerReferences":' ..
      '[{"kind":"A","controller":true,"blockOwnerDeletion":false}]},"data":{"key":"value"},' ..
      '"binaryData":null,"spec":{"replicas":3,"offset":-7,"zero":0,"limit":123456789012345}}', true)
    assert.equal("cm-1", cm.metadata.name)
    assert.equal(3, cm.spec.replicas)
    assert.equal(json.null, cm.binaryData)
    assert.truthy(json.is_array(cm.metadata.finalizers))
    assert.falsy(json.is_array(cm.data))
    for _, s in ipairs({
      '{}', '[]', '{"a":[]}', '{"a":{}}', '[[[]]]', '"str"', '0', '-0', '-1', 'true', 'false',
      'null', '[null,true,false]', ' { "a" : 1 ,\n\t"b" : [ 1 , 2 ] }\r\n',
      -- escapes, as Go writes them (\u0026 for &), surrogate pairs, a NUL
      '{"a":"\\u0026\\u003c\\u003e\\u00e9\\u20ac\\ud83d\\ude00"}',
      '{"a":"x\\"y\\\\z\\/\\b\\f\\n\\r\\t"}', '{"a":"\\u0000b"}', '{"k\\"ey":1}', '"é€😀"',
      '{"dup":1,"dup":2}',
      '{"s":"' .. string.rep("\\n", 10000) .. string.rep("x", 20000) .. '"}',
      string.rep("[", 100) .. string.rep("]", 100),
    }) do
      check(s, true)
    end
  end)

  it("builds large objects and arrays (past the pending limit) the same way", function()
    local members, items = {}, {}
    for i = 1, 300 do
      members[#members + 1] = ('"k%d":{"v":%d,"s":"x%d"}'):format(i, i, i)
      items[#items + 1] = ('[%d,"%d"]'):format(i, i)
    end
    local o = check("{" .. table.concat(members, ",") .. "}", true)
    assert.equal(300, o.k300.v)
    local a = check("[" .. table.concat(items, ",") .. "]", true)
    assert.equal(300, #a)
    assert.equal("150", a[150][2])
  end)

  it("hands out short strings from its string cache only when they are the same bytes", function()
    -- The reader keeps the Lua strings of short strings (up to 32 bytes) in
    -- 512 slots picked by a hash of the length and the first and last 8
    -- bytes.  Strings that differ only where that hash does not look (the
    -- middle of a long one), in length alone, or in one byte, thousands of
    -- them so that slots are shared and replaced, each read twice: every
    -- one must come back as its own bytes.
    local strs = {}
    for len = 1, 40 do
      for v = 0, 60 do
        local b = {}
        for i = 1, len do b[i] = string.char(97 + (i * 7 + v) % 26) end
        strs[#strs + 1] = table.concat(b)
        if len > 16 then -- the same first and last 8 bytes, another middle
          b[9] = string.char(65 + v % 26)
          strs[#strs + 1] = table.concat(b)
        end
      end
    end
    strs[#strs + 1] = string.rep("a", 8) .. "b" .. string.rep("a", 8)
    strs[#strs + 1] = string.rep("a", 8) .. "c" .. string.rep("a", 8)
    for round = 1, 2 do
      for i, str in ipairs(strs) do
        local doc = ('{"%s":"%s","k%d":["%s"]}'):format(str, str, i, str)
        local o = check(doc, true)
        assert.equal(str, o[str], doc)
        assert.equal(str, o["k" .. i][1], doc)
        -- a whole document shorter than 8 bytes past the string's start
        assert.equal(str, (check('"' .. str .. '"', true)), str)
      end
    end
    -- each get is a fresh table: changing one changes no other
    local a = check('{"metadata":{"name":"x","labels":{"app":"y"}}}', true)
    local b = check('{"metadata":{"name":"x","labels":{"app":"y"}}}', true)
    a.metadata.name, a.metadata.labels.app = "changed", "changed"
    assert.equal("x", b.metadata.name)
    assert.equal("y", b.metadata.labels.app)
  end)

  it("leaves other numbers, and anything it does not take, to the full parser", function()
    for _, s in ipairs({
      '1.5', '1e5', '-0.0', '1E-3', '1234567890123456', '9007199254740993',
      '-9223372036854775808', '18446744073709551615', '123456789012345678901234567890',
      '{"a":{"b":[1,2.5]}}', string.rep("[", 101) .. string.rep("]", 101),
      string.rep("[", 1000) .. string.rep("]", 1000),
    }) do
      check(s, false)
    end
    assert.equal(2 ^ 53 + 2, (check('9007199254740994', false)))
  end)

  it("reports malformed bytes as the full parser does", function()
    for _, s in ipairs({ '{"a":1}x', '{"a":1,}', '[1,]', '{"a"}', '{"a":01}', '"\\ud800"',
                         '"\\udc00"', '{"a":tru}', '', ' ', '[1 2]', '{"a":-}', '"a\tb"' }) do
      local v, msg = core.cache_decode(s)
      local _, err = json.decode(s, { bigint = "double" })
      assert.is_nil(v, s)
      assert.equal(err.message, msg, s)
    end
  end)
end)
