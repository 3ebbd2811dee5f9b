-- core.json.decoder: the incremental parser fed in pieces gives what a whole
-- decode gives, for single documents and for streams of values.
local core = require("luna.core")
local json = core.json

local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then
    if type(a) == "number" and a == 0 and b == 0 then return 1 / a == 1 / b end
    return a == b
  end
  if json.is_array(a) ~= json.is_array(b) then return false end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local seed = 4242
local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return 1 + seed % n end

-- Feeds s to decoder d in chunks whose sizes come from next_size().
local function feed_all(d, s, next_size)
  local i, got = 1, {}
  while i <= #s do
    local n = next_size()
    local r, err = d:feed(s:sub(i, i + n - 1))
    if r == nil then return nil, err end
    if type(r) == "table" then for _, v in ipairs(r) do got[#got + 1] = v end end
    i = i + n
  end
  return got
end

local docs = {
  '{"a":[1,2.5,"x\\u00e9y",{"b":null}],"c":true,"d":"\\ud83d\\ude00","e":{},"f":[]}',
  '[9007199254740993,-9223372036854775808,18446744073709551615,-0,1e300,0.1]',
  '"just a string with \\"escapes\\" and \\n newlines and ünïcödé"',
  "12345678",
  "  true  ",
  string.rep('{"k":[', 50) .. '"deep"' .. string.rep("]}", 50),
  '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","labels":{"a":"b"},' ..
    '"managedFields":[{"manager":"kubectl","fieldsV1":{"f:data":{".":{},"f:x":{}}}}]},' ..
    '"data":{"x":"line1\\nline2","big":"' .. string.rep("0123456789", 300) .. '"}}',
}

describe("core.json.decoder", function()
  for n, doc in ipairs(docs) do
    it("gives the whole-decode result fed byte by byte and in random chunks (doc " .. n .. ")", function()
      local whole = json.decode(doc)
      assert.is_not_nil(whole)
      local d = json.decoder()
      assert.is_not_nil(feed_all(d, doc, function() return 1 end))
      assert.is_true(same(whole, d:finish()))
      for _ = 1, 20 do
        d = json.decoder()
        assert.is_not_nil(feed_all(d, doc, function() return rnd(17) end))
        assert.is_true(same(whole, d:finish()))
      end
    end)
  end

  it("builds members pending across feeds, past the early-table thresholds", function()
    local parts = {}
    for i = 1, 300 do parts[i] = string.format('"k%d":[%d,{"v":%d}]', i, i, i) end
    local doc = "{" .. table.concat(parts, ",") .. "}"
    local d = json.decoder()
    feed_all(d, doc, function() return rnd(7) end)
    local v = d:finish()
    assert.is_true(same(json.decode(doc), v))
    assert.equal(150, v.k150[2].v)
  end)

  it("reports the same errors with the same offsets as a whole decode", function()
    for _, bad in ipairs({ '{"a":[1,2,x]}', '"\\ud800 "', '{"a":"\255"}', "[1,2", '{"a":1} 2' }) do
      local _, werr = json.decode(bad)
      local d = json.decoder()
      local got, err = feed_all(d, bad, function() return 1 end)
      if got then got, err = d:finish() end
      assert.is_nil(got, bad)
      assert.equal(werr.message, err.message)
    end
  end)

  it("stays failed after an error and can be reset", function()
    local d = json.decoder()
    assert.is_nil(d:feed("[1,}"))
    local v, err = d:feed("]")
    assert.is_nil(v)
    assert.matches("malformed JSON at byte 3", err.message)
    d:reset()
    assert.is_true(d:feed("[1,"))
    assert.is_true(d:feed("2]"))
    assert.is_true(same(json.array({ 1, 2 }), d:finish()))
    local _, ferr = d:finish()
    assert.matches("already finished", ferr.message)
  end)

  it("counts the bytes fed", function()
    local d = json.decoder()
    d:feed("[1, ")
    d:feed("2]")
    assert.equal(6, d:offset())
  end)

  it("refuses truncated input at finish", function()
    local d = json.decoder()
    assert.is_true(d:feed('{"a":[1,'))
    local v, err = d:finish()
    assert.is_nil(v)
    assert.matches("unexpected end of input at byte 8", err.message)
  end)

  describe("with multiple = true", function()
    local stream = '{"type":"ADDED","object":{"n":1}}\n{"type":"MODIFIED","object":{"n":2}}\n' ..
                   '{"type":"DELETED","object":{"n":3}}\n[]\n"s"\n7'

    it("returns the values each chunk completes, in order", function()
      for _, size in ipairs({ 1, 2, 5, 13, 1000 }) do
        local d = json.decoder({ multiple = true })
        local got = feed_all(d, stream, function() return size end)
        for _, v in ipairs(assert(d:finish())) do got[#got + 1] = v end -- the final 7
        assert.equal(6, #got)
        assert.equal("ADDED", got[1].type)
        assert.equal(2, got[2].object.n)
        assert.equal("DELETED", got[3].type)
        assert.is_true(json.is_array(got[4]))
        assert.equal("s", got[5])
        assert.equal(7, got[6])
      end
    end)

    it("accepts an empty stream and values without separators", function()
      local d = json.decoder({ multiple = true })
      assert.same({}, d:feed("  \n "))
      assert.same({}, d:finish())
      d = json.decoder({ multiple = true })
      local r = d:feed('{"a":1}{"a":2}[3]')
      assert.equal(3, #r)
    end)

    it("bounds each value, not the stream, with max_size", function()
      local d = json.decoder({ multiple = true, max_size = 20 })
      for _ = 1, 10 do assert.equal(1, #d:feed('{"n":"0123456789"}\n')) end
      local r, err = d:feed('{"n":"01234567890123456789"}')
      assert.is_nil(r)
      assert.matches("document larger than 20 bytes", err.message)
    end)

    it("fails on a malformed value after good ones", function()
      local d = json.decoder({ multiple = true })
      assert.equal(1, #d:feed('{"a":1}\n'))
      local r, err = d:feed('{"a":}\n')
      assert.is_nil(r)
      assert.matches("malformed JSON at byte 13", err.message)
    end)

    it("refuses a token cut short after the last value, and starts clean after reset", function()
      for _, c in ipairs({ { '"ab', "unexpected end of input at byte 11" },
                           { '"\\u00', "malformed JSON at byte 12" },
                           { "tru", "malformed JSON at byte 10" } }) do
        local d = json.decoder({ multiple = true })
        assert.equal(1, #d:feed('{"a":1} ' .. c[1]))
        local v, err = d:finish()
        assert.is_nil(v, c[1])
        assert.matches(c[2], err.message)
        -- the cut token is not carried into the next document
        d:reset()
        local r = assert(d:feed('{"b":2}'))
        assert.equal(2, r[1].b)
        assert.same({}, assert(d:finish()))
      end
    end)

    it("refuses a truncated last value", function()
      local d = json.decoder({ multiple = true })
      assert.equal(1, #d:feed('{"a":1}\n{"a":'))
      local v, err = d:finish()
      assert.is_nil(v)
      assert.matches("unexpected end of input at byte 13", err.message)
    end)
  end)

  it("raises on misuse", function()
    assert.has_error(function() json.decoder("x") end)
    assert.has_error(function() json.decoder():feed({}) end)
  end)
end)
