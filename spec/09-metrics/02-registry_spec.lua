-- core.metrics: registering families, validating input, updating, removing
-- series and families, function series (gauge callbacks), and what may
-- not happen during a render.
local helpers = require("helpers") -- luacheck: ignore
local core = require("luna.core")
local expo = require("support.exposition")

local function parse(reg)
  local parsed = expo.parse(reg:render())
  expo.check_histograms(parsed)
  return parsed
end

describe("metrics registration", function()
  local reg
  before_each(function() reg = core.metrics.new() end)

  for _, name in ipairs({ "", "1abc", "a-b", "a b", "é" }) do
    it("rejects the metric name " .. string.format("%q", name), function()
      assert.has_error(function() reg:counter{ name = name } end)
    end)
  end

  it("accepts colons and underscores in metric names", function()
    assert.equal("ns:sub_x_total", reg:counter{ name = "ns:sub_x_total" }:name())
    assert.equal("_x", reg:gauge{ name = "_x" }:name())
  end)

  for _, label in ipairs({ "", "__reserved", "1a", "a-b", "a:b" }) do
    it("rejects the label name " .. string.format("%q", label), function()
      assert.has_error(function() reg:counter{ name = "c", labels = { label } } end)
    end)
  end

  it("rejects duplicate label names and le on histograms only", function()
    assert.has_error(function() reg:gauge{ name = "g", labels = { "a", "a" } } end,
      'metrics g: duplicate label "a"')
    assert.has_error(function() reg:histogram{ name = "h", labels = { "le" } } end,
      'metrics h: label "le" is reserved for histogram buckets')
    assert.same({ "le" }, reg:gauge{ name = "g2", labels = { "le" } }:label_names())
  end)

  it("takes up to 16 labels and 256 buckets", function()
    local labels, values, buckets = {}, {}, {}
    for i = 1, 16 do labels[i] = "l" .. i; values[i] = "v" .. i end
    for i = 1, 256 do buckets[i] = i end
    local h = reg:histogram{ name = "wide", labels = labels, buckets = buckets }
    h:labels(unpack(values)):observe(300)
    local parsed = parse(reg)
    local want = { le = "+Inf" }
    for i = 1, 16 do want["l" .. i] = "v" .. i end
    assert.equal(1, expo.get(parsed, "wide_bucket", want))
    assert.equal(257, #expo.samples(parsed, "wide_bucket"))
    labels[17] = "l17"
    assert.has_error(function() reg:counter{ name = "c", labels = labels } end)
    buckets[257] = 257
    assert.has_error(function() reg:histogram{ name = "h", buckets = buckets } end)
    values[17] = "v17"
    assert.has_error(function() h:labels(unpack(values)) end, "metrics: 17 label values (at most 16)")
  end)

  it("rejects bad bucket lists", function()
    assert.has_error(function() reg:histogram{ name = "h", buckets = { 1, 1 } } end,
      "metrics h: buckets must be strictly increasing (bucket 2 is 1 after 1)")
    assert.has_error(function() reg:histogram{ name = "h", buckets = { 2, 1 } } end)
    assert.has_error(function() reg:histogram{ name = "h", buckets = { 1, 0 / 0 } } end)
    assert.has_error(function() reg:histogram{ name = "h", buckets = { 1, math.huge, 2 } } end)
    assert.has_error(function() reg:histogram{ name = "h", buckets = { -math.huge, 1 } } end)
    assert.has_error(function() reg:histogram{ name = "h", buckets = {} } end)
    assert.has_error(function() reg:histogram{ name = "h", buckets = { 1, "2" } } end)
    assert.has_error(function() reg:counter{ name = "c", buckets = { 1 } } end)
  end)

  it("drops an explicit trailing +Inf bucket", function()
    local h = reg:histogram{ name = "h", buckets = { 1, 2, math.huge } }
    assert.same({ 1, 2 }, h:buckets())
    h:labels():observe(5)
    assert.equal(1, expo.get(parse(reg), "h_bucket", { le = "+Inf" }))
    assert.equal(3, #expo.samples(parse(reg), "h_bucket"))
  end)

  it("rejects unknown fields and wrong types in the description", function()
    assert.has_error(function() reg:counter{ name = "c", lables = { "x" } } end,
      "metrics: unknown field 'lables' in description")
    assert.has_error(function() reg:counter{ name = 5 } end)
    assert.has_error(function() reg:counter{ name = "c", help = 1 } end)
    assert.has_error(function() reg:counter{ name = "c", labels = "x" } end)
    assert.has_error(function() reg:counter{ name = "c", labels = { 1 } } end)
    assert.has_error(function() reg:counter("c") end)
    assert.has_error(function() reg:counter{ name = "c", help = "bad \255 utf8" } end)
  end)

  it("returns the registered family for an identical description", function()
    local a = reg:counter{ name = "c_total", help = "h", labels = { "x" } }
    local b = reg:counter{ name = "c_total", help = "h", labels = { "x" } }
    a:labels("1"):inc()
    b:labels("1"):inc()
    assert.equal(2, a:labels("1"):value())
    assert.equal(1, reg:count())
  end)

  it("refuses a different description under a registered name", function()
    reg:histogram{ name = "h", help = "h", labels = { "x" }, buckets = { 1, 2 } }
    local msg = "metrics h: already registered with a different type, help, labels or buckets"
    assert.has_error(function() reg:gauge{ name = "h", help = "h", labels = { "x" } } end, msg)
    assert.has_error(function()
      reg:histogram{ name = "h", help = "other", labels = { "x" }, buckets = { 1, 2 } }
    end, msg)
    assert.has_error(function()
      reg:histogram{ name = "h", help = "h", labels = { "y" }, buckets = { 1, 2 } }
    end, msg)
    assert.has_error(function()
      reg:histogram{ name = "h", help = "h", labels = { "x" }, buckets = { 1, 3 } }
    end, msg)
  end)

  it("refuses names that collide with a histogram's series", function()
    reg:histogram{ name = "req" }
    assert.has_error(function() reg:counter{ name = "req_count" } end,
      "metrics req_count: its series would collide with those of req")
    assert.has_error(function() reg:gauge{ name = "req_bucket" } end)
    reg:gauge{ name = "size_sum" }
    assert.has_error(function() reg:histogram{ name = "size" } end,
      "metrics size: its series would collide with those of size_sum")
    assert.equal("gauge", reg:gauge{ name = "req_total" }:type())
  end)

  it("finds and unregisters families by name", function()
    local fam = reg:counter{ name = "c_total", help = "x" }
    fam:labels():inc()
    assert.equal("x", reg:find("c_total"):help())
    assert.is_nil(reg:find("nope"))
    assert.is_true(reg:unregister("c_total"))
    assert.is_false(reg:unregister("c_total"))
    assert.is_nil(reg:find("c_total"))
    assert.is_false(fam:registered())
    assert.equal("", reg:render())
    -- the name is free again, for any description
    assert.equal("gauge", reg:gauge{ name = "c_total" }:type())
  end)
end)

describe("metrics series", function()
  local reg
  before_each(function() reg = core.metrics.new() end)

  it("checks the label values: count, type, NUL bytes and UTF-8", function()
    local fam = reg:counter{ name = "c", labels = { "a", "b" } }
    assert.has_error(function() fam:labels("x") end, "metrics c: 1 label values for 2 labels")
    assert.has_error(function() fam:labels("x", "y", "z") end)
    assert.has_error(function() fam:labels("x", 1) end,
      "metrics: label value #2 must be a string, got number")
    assert.has_error(function() fam:labels("x", "a\0b") end,
      "metrics: a label value must not contain NUL bytes")
    assert.has_error(function() fam:labels("x", "\192\128") end,  -- overlong NUL
      "metrics c: a label value is not valid UTF-8")
    assert.has_error(function() fam:labels("x", "\237\160\128") end) -- a surrogate
    assert.has_error(function() fam:labels("x", "\244\144\128\128") end) -- > U+10FFFF
    assert.same({ "x", "ö" }, fam:labels("x", "ö"):labels())
    assert.same({ "", "" }, fam:labels("", ""):labels())
  end)

  it("returns the same series for the same values", function()
    local fam = reg:gauge{ name = "g", labels = { "k" } }
    fam:labels("a"):set(5)
    fam:labels("a"):add(1)
    assert.equal(6, fam:labels("a"):value())
    assert.equal(1, fam:count())
  end)

  it("lets counters only go up", function()
    local c = reg:counter{ name = "c" }:labels()
    c:inc()
    c:add(2.5)
    c:add(0)
    assert.has_error(function() c:add(-1) end)
    assert.has_error(function() c:add(0 / 0) end)
    assert.has_error(function() c:set(10) end, "metrics c: set on a counter")
    assert.has_error(function() c:dec() end, "metrics c: dec on a counter")
    assert.has_error(function() c:observe(1) end, "metrics c: observe on a counter")
    assert.has_error(function() c:add("1") end)
    assert.equal(3.5, c:value())
  end)

  it("lets gauges go anywhere", function()
    local g = reg:gauge{ name = "g" }:labels()
    g:set(10)
    g:dec()
    g:add(-20)
    g:inc()
    assert.equal(-10, g:value())
    g:set(math.huge)
    assert.equal("+Inf", expo.parse(reg:render()).families.g.samples[1].line:match("%S+$"))
    assert.has_error(function() g:observe(1) end, "metrics g: observe on a gauge")
  end)

  it("lets histograms only observe", function()
    local h = reg:histogram{ name = "h" }:labels()
    assert.has_error(function() h:inc() end, "metrics h: inc on a histogram")
    assert.has_error(function() h:set(1) end)
    assert.has_error(function() h:value() end)
    assert.has_error(function() h:observe("x") end)
    assert.has_error(function() reg:counter{ name = "c" }:labels():histogram() end)
  end)
end)

describe("metrics removal", function()
  local reg
  before_each(function() reg = core.metrics.new() end)

  it("removes a series from the output; its handle lives on, unexported", function()
    local fam = reg:counter{ name = "c_total", labels = { "ctl" } }
    local a, b = fam:labels("a"), fam:labels("b")
    a:add(5)
    b:add(7)
    assert.is_true(a:remove())
    assert.is_false(a:remove())
    assert.is_false(a:listed())
    a:inc() -- harmless
    local parsed = parse(reg)
    assert.is_nil(expo.get(parsed, "c_total", { ctl = "a" }))
    assert.equal(7, expo.get(parsed, "c_total", { ctl = "b" }))
    -- asking again makes a fresh series at zero
    local again = fam:labels("a")
    assert.is_true(again:listed())
    assert.equal(0, again:value())
    assert.equal(6, a:value())
  end)

  it("removes by label values, by one label's value, and all at once", function()
    local fam = reg:gauge{ name = "g", labels = { "ctl", "res" } }
    for _, ctl in ipairs({ "x", "y" }) do
      for _, res in ipairs({ "ok", "err" }) do fam:labels(ctl, res):set(1) end
    end
    assert.is_true(fam:remove("x", "ok"))
    assert.is_false(fam:remove("x", "ok"))
    assert.has_error(function() fam:remove("x") end, "metrics g: 1 label values for 2 labels")
    assert.equal(1, fam:remove_matching("ctl", "x"))
    assert.equal(0, fam:remove_matching("nolabel", "x"))
    assert.equal(2, fam:count())
    fam:clear()
    assert.equal(0, fam:count())
    assert.equal("", reg:render())
  end)

  it("removes a controller's series across families", function()
    local total = reg:counter{ name = "t_total", labels = { "controller", "result" } }
    local time = reg:histogram{ name = "t_seconds", labels = { "controller" } }
    local other = reg:gauge{ name = "q", labels = { "name" } }
    total:labels("gone", "ok"):inc()
    total:labels("gone", "err"):inc()
    total:labels("stays", "ok"):inc()
    time:labels("gone"):observe(1)
    other:labels("gone"):set(1)
    assert.equal(3, reg:remove_matching("controller", "gone"))
    local parsed = parse(reg)
    assert.same({ "q", "t_total" }, parsed.order)
    assert.equal(1, expo.get(parsed, "t_total", { controller = "stays", result = "ok" }))
    assert.equal(1, expo.get(parsed, "q", { name = "gone" }))
  end)

  it("detaches families on unregister: handles work, nothing new is created", function()
    local fam = reg:counter{ name = "c_total", labels = { "x" } }
    local child = fam:labels("1")
    assert.is_true(fam:unregister())
    assert.is_false(fam:unregister())
    assert.is_false(child:listed())
    child:inc()
    assert.equal(1, child:value())
    assert.has_error(function() fam:labels("2") end, "metrics c_total: family is not registered")
    assert.equal(0, fam:count())
  end)

  it("keeps families and series usable after the registry's other handles are gone", function()
    local fam = core.metrics.new():counter{ name = "c_total", labels = { "x" } }
    collectgarbage()
    collectgarbage()
    local child = fam:labels("1") -- the family keeps its registry alive
    child:inc()
    assert.is_true(fam:registered())
    assert.equal(1, child:value())
  end)
end)

describe("metrics function series", function()
  local reg
  before_each(function() reg = core.metrics.new() end)

  it("reads the value at each render", function()
    local objects = 3
    local fam = reg:gauge{ name = "objects", labels = { "resource" } }
    fam:func(function() return objects end, "pods")
    assert.equal(3, expo.get(parse(reg), "objects", { resource = "pods" }))
    objects = 12.5
    assert.equal(12.5, expo.get(parse(reg), "objects", { resource = "pods" }))
  end)

  it("supports counters, not histograms", function()
    local n = 0
    reg:counter{ name = "reads_total" }:func(function() n = n + 1; return n end)
    assert.equal(1, expo.get(parse(reg), "reads_total"))
    assert.equal(2, expo.get(parse(reg), "reads_total"))
    assert.has_error(function()
      reg:histogram{ name = "h" }:func(function() return 1 end)
    end, "metrics h: a histogram cannot be a function")
  end)

  it("refuses to replace an existing series, and value updates on a function", function()
    local fam = reg:gauge{ name = "g", labels = { "k" } }
    fam:labels("plain"):set(1)
    assert.has_error(function() fam:func(function() return 2 end, "plain") end,
      'metrics g: series {k="plain"} already exists')
    local f = fam:func(function() return 2 end, "fn")
    assert.has_error(function() fam:func(function() return 3 end, "fn") end)
    assert.has_error(function() fam:labels("fn") end, 'metrics g: series {k="fn"} is a function')
    assert.has_error(function() f:set(1) end, "metrics g: set on a function series")
    assert.equal(2, f:value())
  end)

  it("exports NaN and logs when the function fails or returns no number", function()
    local fam = reg:gauge{ name = "g", labels = { "k" } }
    fam:func(function() error("boom") end, "raises")
    fam:func(function() return "12" end, "string")
    fam:func(function() end, "nothing")
    fam:labels("fine"):set(1)
    local parsed = parse(reg)
    for _, k in ipairs({ "raises", "string", "nothing" }) do
      local v = expo.get(parsed, "g", { k = k })
      assert.is_true(v ~= v, k .. " is NaN")
    end
    assert.equal(1, expo.get(parsed, "g", { k = "fine" }))
  end)

  it("releases the function when its series goes away", function()
    local alive = setmetatable({}, { __mode = "k" })
    local fam = reg:gauge{ name = "g", labels = { "k" } }
    local function add(k)
      local fn = function() return 1 end
      alive[fn] = k
      fam:func(fn, k)
    end
    add("removed"); add("cleared"); add("kept")
    local function count()
      collectgarbage(); collectgarbage()
      local names = {}
      for _, k in pairs(alive) do names[#names + 1] = k end
      table.sort(names)
      return names
    end
    assert.same({ "cleared", "kept", "removed" }, count())
    fam:remove("removed")
    assert.same({ "cleared", "kept" }, count())
    fam:remove_matching("k", "cleared")
    assert.same({ "kept" }, count())
    reg:unregister("g")
    assert.same({}, count())
  end)

  it("releases functions when the registry is collected", function()
    local alive = setmetatable({}, { __mode = "k" })
    do
      local r = core.metrics.new()
      local fn = function() return 1 end
      alive[fn] = true
      r:gauge{ name = "g" }:func(fn)
    end
    collectgarbage(); collectgarbage(); collectgarbage()
    assert.is_nil(next(alive))
  end)

  it("refuses structural changes from inside a render, and survives them", function()
    local fam = reg:gauge{ name = "g", labels = { "k" } }
    local victim = fam:labels("victim")
    victim:set(1)
    local errors = {}
    local function try(what, f)
      local ok, err = pcall(f)
      if not ok then errors[#errors + 1] = what .. ": " .. tostring(err) end
    end
    fam:func(function()
      try("render", function() reg:render() end)
      try("create", function() fam:labels("new") end)
      try("remove", function() victim:remove() end)
      try("remove_matching", function() reg:remove_matching("k", "victim") end)
      try("clear", function() fam:clear() end)
      try("unregister", function() fam:unregister() end)
      try("register", function() reg:gauge{ name = "other" } end)
      victim:set(2) -- updating a value is fine
      return 7
    end, "cb")
    local parsed = parse(reg)
    assert.equal(7, #errors)
    assert.matches("^render: .*metrics: render called from a metric function", errors[1])
    assert.equal(7, expo.get(parsed, "g", { k = "cb" }))
    assert.is_true(victim:listed())
    assert.is_nil(reg:find("other"))
    assert.equal(2, fam:count())
    assert.equal(2, expo.get(parse(reg), "g", { k = "victim" }))
  end)
end)
