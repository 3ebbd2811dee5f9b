-- KEP-5866 shard selectors (host/base/shard.h): the FNV-1a 64 hash the API
-- server uses, the shardRange grammar, matching, and the equal split of the
-- hash space among replicas.
local core = require("luna.core")
local shard = core.shard

local TOP = "0x10000000000000000"

-- 64-bit hex strings compare as numbers when they have the same width;
-- widen "0x" + 16 digits to 17 so 2^64 compares too.
local function wide(h) return ("%017s"):format(h:sub(3)):gsub(" ", "0") end

local function uid(i)
  return ("%08x-%04x-4%03x-8%03x-%012x"):format(i * 2654435761 % 2^32, i % 65536,
    i % 4096, (i * 7) % 4096, i * 40503)
end

describe("shard hash", function()
  -- The published FNV-1a 64-bit test vectors (isthe.com/chongo/tech/comp/fnv).
  local vectors = {
    { "", "0xcbf29ce484222325" },
    { "a", "0xaf63dc4c8601ec8c" },
    { "b", "0xaf63df4c8601f1a5" },
    { "foobar", "0x85944171f73967e8" },
    { "chongo was here!\n", "0x46810940eff5f915" },
  }
  for _, v in ipairs(vectors) do
    it(("hashes %q as %s"):format(v[1], v[2]), function()
      assert.equal(v[2], shard.hash(v[1]))
    end)
  end

  it("hashes bytes, NUL and high bytes included", function()
    assert.are_not.equal(shard.hash("a"), shard.hash("a\0"))
    assert.are_not.equal(shard.hash("\255"), shard.hash("\127"))
  end)
end)

describe("shard selector text", function()
  it("parses one range and prints the server's canonical text", function()
    local text = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
    local s = assert(shard.parse(text))
    assert.same({ { field = "uid", start = "0x0000000000000000", ["end"] = "0x8000000000000000" } },
      s.ranges)
    assert.equal(text, s.text)
  end)

  it("parses the top of the space, 2^64, as an end", function()
    local s = assert(shard.parse(
      "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"))
    assert.equal("namespace", s.ranges[1].field)
    assert.equal(TOP, s.ranges[1]["end"])
  end)

  it("joins ranges with || and keeps their order", function()
    local text = "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"
      .. " || shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')"
    local s = assert(shard.parse(text))
    assert.equal(2, #s.ranges)
    assert.equal("0xc000000000000000", s.ranges[1].start)
    assert.equal(text, s.text)
  end)

  it("takes blanks between tokens, double quotes and parentheses, and prints them away", function()
    local s = assert(shard.parse(
      "  ( shardRange ( object.metadata.uid ,\"0x00000000000000ff\",'0xabcdef0123456789' )||"
      .. "(shardRange(object.metadata.uid,'0x0000000000000001','0x0000000000000002')))  "))
    assert.equal("shardRange(object.metadata.uid, '0x00000000000000ff', '0xabcdef0123456789') || "
      .. "shardRange(object.metadata.uid, '0x0000000000000001', '0x0000000000000002')", s.text)
  end)

  it("gives false for no selector", function()
    assert.is_false(shard.parse(""))
    assert.is_false(shard.parse(nil))
  end)

  it("round-trips: parse(print(s)) prints the same", function()
    for n = 1, 9 do
      local parts = {}
      for i = 0, n - 1 do
        local a, b = shard.split_range(i, n)
        parts[#parts + 1] = ("shardRange(object.metadata.uid, '%s', '%s')"):format(a, b)
      end
      local text = table.concat(parts, " || ")
      local s = assert(shard.parse(text))
      assert.equal(text, s.text)
      assert.equal(text, assert(shard.parse(s.text)).text)
    end
  end)

  -- The API server's own messages (k8s.io/apiserver/pkg/sharding, v1.37).
  local Z, H = "'0x0000000000000000'", "'0x8000000000000000'"
  local function r(field, a, b) return ("shardRange(%s, %s, %s)"):format(field, a, b) end
  local UID = "object.metadata.uid"
  local bad = {
    { "   ", "empty shard selector is not allowed; omit the parameter for unfiltered lists" },
    { r("object.metadata.name", Z, H),
      'unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace' },
    { r("metadata.uid", Z, H), 'unsupported field path "metadata.uid"' },
    { r(UID, "'0x0'", H),
      'hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)' },
    { r(UID, Z, "'0x8'"), 'hexEnd must be a 0x-prefixed 16-digit hex value, got "0x8" (did you mean "0x0000000000000008"?)' },
    { r(UID, Z, "'0x800000000000000000'"), 'hexEnd: hex value too long (18 chars, max 17): "800000000000000000"' },
    { r(UID, "'0xABCDEF0123456789'", "'" .. TOP .. "'"), 'hexStart: invalid hex character "A" in "0xABCDEF0123456789"' },
    { r(UID, Z, "'0x20000000000000000'"),
      "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got \"0x20000000000000000\"" },
    { r(UID, "'0X0000000000000000'", H), "hexStart must have '0x' prefix, got \"0X0000000000000000\"" },
    { r(UID, "'0x'", H), "hexStart: hex value is required after '0x'" },
    { r(UID, "0x0", H), "hexStart must be a string literal (e.g. '0xff')" },
    { r(UID, H, H), "shard range start 0x8000000000000000 must be less than end 0x8000000000000000" },
    { r(UID, H, Z), "shard range start 0x8000000000000000 must be less than end 0x0000000000000000" },
    { r(UID, "'" .. TOP .. "'", "'" .. TOP .. "'"), "shard range start 0x10000000000000000 must be less than end" },
    { "shardRange(object.metadata.uid, " .. Z .. ")", "shardRange() requires exactly 3 arguments, got 2" },
    { "shardRange()", "shardRange() requires exactly 3 arguments, got 0" },
    { r("'object.metadata.uid'", Z, H), "shardRange() first argument: expected field path" },
    { r(UID, Z, H) .. " || " .. r("object.metadata.namespace", H, "'" .. TOP .. "'"),
      'all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace"' },
    { r(UID, Z, H) .. " && " .. r(UID, H, "'" .. TOP .. "'"),
      'unsupported function "_&&_"; only shardRange() and || are allowed' },
    { "shardrange(object.metadata.uid, " .. Z .. ", " .. H .. ")",
      'unsupported function "shardrange"; only shardRange() and || are allowed' },
    { "true", 'unexpected expression "true"; expected shardRange() call or || operator' },
    { r(UID, Z, H) .. " |", "CEL parse error: " },
    { r(UID, Z, H) .. " ||", "CEL parse error: " },
    { "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'", "CEL parse error: " },
    { "shardRange(object.metadata.uid, '0x0000000000000000, '0x8000000000000000')", "CEL parse error: " },
    { "(" .. r(UID, Z, H), "CEL parse error: " },
  }
  for _, c in ipairs(bad) do
    it(("refuses %q"):format(c[1]), function()
      local s, err = shard.parse(c[1])
      assert.is_nil(s)
      assert.truthy(err:find(c[2], 1, true), err)
    end)
  end
end)

describe("shard matching", function()
  it("selects by the uid's hash, start inclusive, end exclusive", function()
    local h = shard.hash("some-uid") -- 0x…: its own one-value range
    -- [h, h+1) selects it; [0, h) does not.
    local function succ(x)
      local digits = {}
      for c in x:sub(3):gmatch(".") do digits[#digits + 1] = tonumber(c, 16) end
      local i = #digits
      while i >= 1 do
        digits[i] = digits[i] + 1
        if digits[i] < 16 then break end
        digits[i] = 0
        i = i - 1
      end
      local out = {}
      for _, d in ipairs(digits) do out[#out + 1] = ("%x"):format(d) end
      return (i == 0 and "0x1" or "0x") .. table.concat(out)
    end
    local after = succ(h)
    local one = ("shardRange(object.metadata.uid, '%s', '%s')"):format(h, after)
    local below = ("shardRange(object.metadata.uid, '0x0000000000000000', '%s')"):format(h)
    local above = ("shardRange(object.metadata.uid, '%s', '%s')"):format(after, TOP)
    assert.is_true(shard.matches(one, "ns", "some-uid"))
    assert.is_false(shard.matches(below, "ns", "some-uid"))
    -- unless the hash is the top value, the range above it does not hold it
    if after ~= TOP then assert.is_false(shard.matches(above, "ns", "some-uid")) end
    assert.is_true(shard.matches(below .. " || " .. one, "ns", "some-uid"))
  end)

  it("selects by namespace, a cluster-scoped object hashing as \"\"", function()
    local h = shard.hash("default")
    assert.equal("0xebada5168620c5fe", h)
    local upper = "shardRange(object.metadata.namespace, '0x8000000000000000', '" .. TOP .. "')"
    local lower = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"
    assert.is_true(shard.matches(upper, "default", "x"))
    assert.is_false(shard.matches(lower, "default", "x"))
    -- "" hashes to 0xcbf2…: the upper half
    assert.is_true(shard.matches(upper, nil, "x"))
    assert.is_true(shard.matches(upper, "", "x"))
  end)

  it("puts every uid in exactly one member's range of a split", function()
    for _, n in ipairs({ 1, 2, 3, 5, 7 }) do
      local members = {}
      for i = 1, n do members[i] = "replica-" .. i end
      local sels = {}
      for i = 1, n do sels[i] = assert(shard.split(members, members[i])) end
      for k = 1, 400 do
        local hits = 0
        for i = 1, n do
          if shard.matches(sels[i], "ns", uid(k)) then hits = hits + 1 end
        end
        assert.equal(1, hits, ("uid %s in %d ranges of %d"):format(uid(k), hits, n))
      end
    end
  end)

  it("spreads random uids about evenly over 3 members", function()
    local members = { "a", "b", "c" }
    local counts = { 0, 0, 0 }
    local sels = {}
    for i = 1, 3 do sels[i] = shard.split(members, members[i]) end
    math.randomseed(7)
    for _ = 1, 3000 do
      local u = ("%08x-%04x-%04x-%04x-%012x"):format(math.random(0, 2^31), math.random(0, 65535),
        math.random(0, 65535), math.random(0, 65535), math.random(0, 2^40))
      for i = 1, 3 do
        if shard.matches(sels[i], "ns", u) then counts[i] = counts[i] + 1 end
      end
    end
    for i = 1, 3 do assert.is_true(counts[i] > 850 and counts[i] < 1150, tostring(counts[i])) end
  end)
end)

describe("shard split", function()
  it("covers the space with contiguous ranges, from 0 to 2^64", function()
    for _, n in ipairs({ 1, 2, 3, 4, 5, 6, 7, 10, 16, 100, 1000 }) do
      local prev_end = "0x0000000000000000"
      for i = 0, n - 1 do
        local a, b = shard.split_range(i, n)
        assert.equal(prev_end, a, ("member %d of %d starts where %d ended"):format(i, n, i - 1))
        assert.is_true(wide(a) < wide(b), ("member %d of %d is not empty"):format(i, n))
        prev_end = b
      end
      assert.equal(TOP, prev_end)
    end
  end)

  it("gives the KEP's 2- and 4-shard splits", function()
    assert.same({ "0x0000000000000000", "0x8000000000000000" }, { shard.split_range(0, 2) })
    assert.same({ "0x8000000000000000", TOP }, { shard.split_range(1, 2) })
    assert.same({ "0x4000000000000000", "0x8000000000000000" }, { shard.split_range(1, 4) })
    assert.same({ "0xc000000000000000", TOP }, { shard.split_range(3, 4) })
  end)

  it("splits 3 ways at floor(i·2^64/3)", function()
    assert.same({ "0x0000000000000000", "0x5555555555555555" }, { shard.split_range(0, 3) })
    assert.same({ "0x5555555555555555", "0xaaaaaaaaaaaaaaaa" }, { shard.split_range(1, 3) })
    assert.same({ "0xaaaaaaaaaaaaaaaa", TOP }, { shard.split_range(2, 3) })
  end)

  it("ranks members by sorted identity, whatever order they come in", function()
    local a = shard.split({ "pod-b", "pod-a", "pod-c" }, "pod-b")
    local b = shard.split({ "pod-c", "pod-b", "pod-a" }, "pod-b")
    assert.equal(a, b)
    assert.equal("shardRange(object.metadata.uid, '0x5555555555555555', '0xaaaaaaaaaaaaaaaa')", a)
    assert.equal("shardRange(object.metadata.namespace, '0x0000000000000000', '0x5555555555555555')",
      shard.split({ "pod-c", "pod-b", "pod-a" }, "pod-a", "namespace"))
  end)

  it("refuses a member set it cannot split the same way everywhere", function()
    local s, err = shard.split({ "a", "b" }, "c")
    assert.is_nil(s)
    assert.matches('"c" is not among the members', err)
    s, err = shard.split({ "a", "b", "a" }, "b")
    assert.is_nil(s)
    assert.matches('"a" is listed twice', err)
    s, err = shard.split({ "a", "a" }, "a")
    assert.is_nil(s)
    assert.matches('"a" is listed twice', err)
    s, err = shard.split({ "a", "" }, "a")
    assert.is_nil(s)
    assert.matches("empty identity", err)
    s, err = shard.split({}, "a")
    assert.is_nil(s)
    assert.matches("1 to 2%^32%-1 members", err)
  end)
end)
