-- core.metrics: the text exposition format 0.0.4 — escaping, number
-- formatting, histogram series, ordering, HELP/TYPE — read back with the
-- strict parser in spec/support/exposition.lua.
local helpers = require("helpers") -- luacheck: ignore
local core = require("luna.core")
local expo = require("support.exposition")

local function render(reg)
  local text = reg:render()
  local parsed = expo.parse(text)
  expo.check_histograms(parsed)
  return parsed, text
end

local function lines(text)
  local out = {}
  for line in text:gmatch("([^\n]*)\n") do out[#out + 1] = line end
  return out
end

describe("exposition escaping", function()
  it("escapes backslash and newline in HELP, and leaves quotes alone", function()
    local reg = core.metrics.new()
    reg:counter{ name = "x_total", help = 'C:\\dir "quoted"\nsecond line' }:labels():inc()
    local parsed, text = render(reg)
    assert.equal('# HELP x_total C:\\\\dir "quoted"\\nsecond line', lines(text)[1])
    assert.equal('C:\\dir "quoted"\nsecond line', parsed.families.x_total.help)
  end)

  it("escapes backslash, double quote and newline in label values", function()
    local reg = core.metrics.new()
    local fam = reg:counter{ name = "x_total", labels = { "v" } }
    local value = 'a\\b "c"\nd'
    fam:labels(value):add(3)
    local parsed, text = render(reg)
    assert.equal('x_total{v="a\\\\b \\"c\\"\\nd"} 3', lines(text)[3])
    assert.equal(3, expo.get(parsed, "x_total", { v = value }))
  end)

  it("passes UTF-8 label values and HELP through unescaped", function()
    local reg = core.metrics.new()
    reg:gauge{ name = "g", help = "Grüße ✓", labels = { "city" } }:labels("Zürich 東京"):set(1)
    local parsed, text = render(reg)
    assert.matches('g{city="Zürich 東京"} 1\n', text, 1, true)
    assert.equal("Grüße ✓", parsed.families.g.help)
  end)

  it("writes a family without labels without braces, and a histogram's le alone", function()
    local reg = core.metrics.new()
    reg:gauge{ name = "plain" }:labels():set(7)
    reg:histogram{ name = "h", buckets = { 1 } }:labels():observe(0.5)
    local _, text = render(reg)
    assert.same({
      "# HELP h ", "# TYPE h histogram",
      'h_bucket{le="1"} 1', 'h_bucket{le="+Inf"} 1', "h_sum 0.5", "h_count 1",
      "# HELP plain ", "# TYPE plain gauge", "plain 7",
    }, lines(text))
  end)
end)

describe("exposition numbers", function()
  local cases = {
    { 0, "0" }, { -0.0, "0" }, { 1, "1" }, { -1, "-1" }, { 42, "42" },
    { 1e6, "1000000" }, { 123456789012, "123456789012" }, { -987654321, "-987654321" },
    { 999999999999999, "999999999999999" }, { 1e15, "1000000000000000" },
    { 2 ^ 53, "9007199254740992" }, { -2 ^ 53, "-9007199254740992" },
    { 1e17, "1e+17" }, { 123456789012345678, "1.2345678901234568e+17" }, { 1e21, "1e+21" }, { 1.5e300, "1.5e+300" },
    { 0.1, "0.1" }, { 0.1 + 0.2, "0.30000000000000004" }, { 2.5, "2.5" },
    { -0.25, "-0.25" }, { 1e-8, "1e-08" }, { 0.0001, "0.0001" }, { 0.00001, "1e-05" },
    { 1 / 3, "0.3333333333333333" }, { 123.456, "123.456" },
    { math.huge, "+Inf" }, { -math.huge, "-Inf" }, { 0 / 0, "NaN" },
  }
  for _, case in ipairs(cases) do
    it(string.format("formats %.17g as %s", case[1], case[2]), function()
      assert.equal(case[2], core.metrics.format_value(case[1]))
    end)
  end

  it("prints gauge values exactly as format_value does", function()
    local reg = core.metrics.new()
    local fam = reg:gauge{ name = "g", labels = { "i" } }
    for i, case in ipairs(cases) do fam:labels(string.format("%02d", i)):set(case[1]) end
    local parsed = render(reg)
    for i, case in ipairs(cases) do
      local sample
      for _, s in ipairs(parsed.families.g.samples) do
        if s.labels.i == string.format("%02d", i) then sample = s end
      end
      assert.equal(case[2], sample.line:match(" (%S+)$"))
    end
  end)

  it("round-trips doubles: what it prints reads back as the same number", function()
    local seed = 7
    local function rand()
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed / 2147483648
    end
    for _ = 1, 2000 do
      local v = (rand() - 0.5) * 10 ^ math.floor(rand() * 40 - 20)
      local text = core.metrics.format_value(v)
      assert.equal(v, tonumber(text), text)
      if v == math.floor(v) and math.abs(v) <= 2 ^ 53 then
        assert.is_nil(text:find("e", 1, true), "integral value with an exponent: " .. text)
      end
    end
  end)
end)

describe("exposition histograms", function()
  it("writes cumulative buckets up to +Inf, then _sum and _count", function()
    local reg = core.metrics.new()
    local h = reg:histogram{ name = "lat_seconds", help = "latency", labels = { "op" },
      buckets = { 0.1, 0.5, 1, 5 } }
    local get = h:labels("get")
    for _, v in ipairs({ 0.05, 0.1, 0.3, 0.5, 0.7, 2, 9, 100 }) do get:observe(v) end
    local parsed, text = render(reg)
    assert.same({
      "# HELP lat_seconds latency", "# TYPE lat_seconds histogram",
      'lat_seconds_bucket{op="get",le="0.1"} 2',   -- 0.05, 0.1 (le is inclusive)
      'lat_seconds_bucket{op="get",le="0.5"} 4',   -- + 0.3, 0.5
      'lat_seconds_bucket{op="get",le="1"} 5',     -- + 0.7
      'lat_seconds_bucket{op="get",le="5"} 6',     -- + 2
      'lat_seconds_bucket{op="get",le="+Inf"} 8',  -- + 9, 100
      'lat_seconds_sum{op="get"} 112.65',
      'lat_seconds_count{op="get"} 8',
    }, lines(text))
    assert.equal(8, expo.get(parsed, "lat_seconds_count", { op = "get" }))
    assert.same({ count = 8, sum = 112.65, buckets = { 2, 4, 5, 6, 8 } }, get:histogram())
  end)

  it("counts negative observations in the first bucket and NaN in +Inf only", function()
    local reg = core.metrics.new()
    local h = reg:histogram{ name = "h", buckets = { 0, 1 } }:labels()
    h:observe(-5)
    h:observe(0 / 0)
    local parsed = render(reg)
    assert.equal(1, expo.get(parsed, "h_bucket", { le = "0" }))
    assert.equal(1, expo.get(parsed, "h_bucket", { le = "1" }))
    assert.equal(2, expo.get(parsed, "h_bucket", { le = "+Inf" }))
    local sum = expo.get(parsed, "h_sum")
    assert.is_true(sum ~= sum, "NaN sum")
  end)

  it("uses client_golang's default buckets when none are given", function()
    local reg = core.metrics.new()
    local h = reg:histogram{ name = "d" }
    assert.same({ .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10 }, h:buckets())
    h:labels():observe(3)
    local parsed = render(reg)
    local les = {}
    for _, s in ipairs(expo.samples(parsed, "d_bucket")) do les[#les + 1] = s.labels.le end
    assert.same({ "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5",
      "10", "+Inf" }, les)
  end)
end)

describe("exposition order", function()
  it("sorts families by name whatever the registration order", function()
    local reg = core.metrics.new()
    for _, name in ipairs({ "zeta", "alpha_total", "mid", "Alpha", "alpha" }) do
      reg:gauge{ name = name }:labels():set(1)
    end
    local parsed = render(reg)
    assert.same({ "Alpha", "alpha", "alpha_total", "mid", "zeta" }, parsed.order)
  end)

  it("sorts series by label values, label by label, and keeps that order stable", function()
    local reg = core.metrics.new()
    local fam = reg:counter{ name = "c_total", labels = { "a", "b" } }
    for _, t in ipairs({ { "b", "1" }, { "ab", "0" }, { "a", "z" }, { "a", "" }, { "", "x" },
                         { "a", "b" } }) do
      fam:labels(t[1], t[2]):inc()
    end
    local parsed, first = render(reg)
    local got = {}
    for _, s in ipairs(parsed.families.c_total.samples) do
      got[#got + 1] = s.labels.a .. "|" .. s.labels.b
    end
    assert.same({ "|x", "a|", "a|b", "a|z", "ab|0", "b|1" }, got)
    -- updates do not move series; a new series goes to its place
    fam:labels("a", "b"):add(5)
    local _, second = render(reg)
    assert.equal(first:gsub('a="a",b="b"} 1', 'a="a",b="b"} 6'), second)
    fam:labels("aa", "q"):inc()
    parsed = render(reg)
    assert.equal("aa", parsed.families.c_total.samples[5].labels.a)
  end)

  it("writes HELP then TYPE once per family, before its samples, and skips families without series", function()
    local reg = core.metrics.new()
    reg:counter{ name = "empty_total", labels = { "x" } }
    reg:gauge{ name = "g", help = "gee", labels = { "k" } }:labels("1"):set(1)
    reg:find("g"):labels("2"):set(2)
    local parsed, text = render(reg)
    assert.same({ "g" }, parsed.order)
    assert.same({ "# HELP g gee", "# TYPE g gauge", 'g{k="1"} 1', 'g{k="2"} 2' }, lines(text))
    assert.equal("gauge", parsed.families.g.type)
  end)

  it("renders nothing for an empty registry", function()
    assert.equal("", core.metrics.new():render())
  end)
end)

describe("exposition read back", function()
  it("matches a model of random updates to counters, gauges and histograms", function()
    local reg = core.metrics.new()
    local c = reg:counter{ name = "ops_total", labels = { "kind", "code" } }
    local g = reg:gauge{ name = "level", labels = { "tank" } }
    local h = reg:histogram{ name = "size_bytes", labels = { "kind" }, buckets = { 10, 100, 1000 } }
    local model = { c = {}, g = {}, h = {} }
    local seed = 99
    local function rand(n)
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n + 1
    end
    local kinds = { "get", "put", 'we"ird', "new\nline", "back\\slash" }
    for _ = 1, 3000 do
      local op = rand(3)
      local kind = kinds[rand(#kinds)]
      if op == 1 then
        local code = tostring(100 * rand(5))
        local by = rand(4) == 1 and rand(100) / 8 or 1
        if by == 1 then c:labels(kind, code):inc() else c:labels(kind, code):add(by) end
        local key = kind .. "\0" .. code
        model.c[key] = (model.c[key] or 0) + by
      elseif op == 2 then
        local v = (rand(2001) - 1001) / 4
        g:labels(kind):set(v)
        model.g[kind] = v
      else
        local v = rand(2000)
        h:labels(kind):observe(v)
        local m = model.h[kind] or { sum = 0, count = 0, b = { 0, 0, 0, 0 } }
        model.h[kind] = m
        m.sum, m.count = m.sum + v, m.count + 1
        for i, bound in ipairs({ 10, 100, 1000, math.huge }) do
          if v <= bound then m.b[i] = m.b[i] + 1 end
        end
      end
    end
    local parsed = render(reg)
    local n = 0
    for key, v in pairs(model.c) do
      local kind, code = key:match("^(.-)%z(.*)$")
      assert.equal(v, expo.get(parsed, "ops_total", { kind = kind, code = code }))
      n = n + 1
    end
    assert.equal(n, #parsed.families.ops_total.samples)
    for kind, v in pairs(model.g) do
      assert.equal(v, expo.get(parsed, "level", { tank = kind }))
    end
    for kind, m in pairs(model.h) do
      assert.equal(m.count, expo.get(parsed, "size_bytes_count", { kind = kind }))
      assert.equal(m.sum, expo.get(parsed, "size_bytes_sum", { kind = kind }))
      for i, le in ipairs({ "10", "100", "1000", "+Inf" }) do
        assert.equal(m.b[i], expo.get(parsed, "size_bytes_bucket", { kind = kind, le = le }))
      end
    end
  end)

  it("renders and parses back 20,000 series", function()
    local reg = core.metrics.new()
    local fam = reg:counter{ name = "many_total", labels = { "ns", "name" } }
    for i = 1, 20000 do fam:labels("ns" .. i % 50, "obj-" .. i):add(i) end
    local parsed = render(reg)
    local samples = parsed.families.many_total.samples
    assert.equal(20000, #samples)
    assert.equal(777, expo.get(parsed, "many_total", { ns = "ns27", name = "obj-777" }))
    for i = 2, #samples do
      local a, b = samples[i - 1].labels, samples[i].labels
      assert.is_true(a.ns < b.ns or (a.ns == b.ns and a.name < b.name))
    end
  end)
end)

describe("the spec's exposition parser", function()
  -- The parser is what the other specs trust: it must reject bad input.
  local bad = {
    { "no newline at the end", "x 1" },
    { "bad escape in HELP", "# HELP x a\\tb\n" },
    { "bad escape in a label", 'x{a="\\t"} 1\n' },
    { "unterminated label", 'x{a="b} 1\n' },
    { "repeated label", 'x{a="1",a="2"} 1\n' },
    { "bad value", "x one\n" },
    { "hex value", "x 0x10\n" },
    { "second TYPE", "# TYPE x gauge\n# TYPE x gauge\n" },
    { "TYPE after samples", "x 1\n# TYPE x gauge\n" },
    { "not contiguous", "a 1\nb 1\na{x=\"1\"} 2\n" },
    { "repeated series", "a 1\na 2\n" },
    { "histogram le on _sum", '# TYPE h histogram\nh_sum{le="1"} 1\n' },
  }
  for _, case in ipairs(bad) do
    it("rejects " .. case[1], function()
      assert.has_error(function() expo.parse(case[2]) end)
    end)
  end

  it("rejects histograms whose buckets are not cumulative or miss +Inf", function()
    local not_cumulative = '# TYPE h histogram\nh_bucket{le="1"} 5\nh_bucket{le="+Inf"} 3\n' ..
      "h_sum 1\nh_count 3\n"
    assert.has_error(function() expo.check_histograms(expo.parse(not_cumulative)) end)
    local no_inf = '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n'
    assert.has_error(function() expo.check_histograms(expo.parse(no_inf)) end)
  end)
end)
