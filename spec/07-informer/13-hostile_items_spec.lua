-- Issue 24, class 1: one object the decoder cannot take (nested deeper than
-- kube-apiserver accepts, a number out of double range) is refused alone;
-- the rest of the LIST page and the watch stream are applied.  The bounds
-- are at least kube-apiserver v1.37's (docs/informers.md, "Hostile bytes").
local core = require("luna.core")
local json = core.json

-- An object whose nesting, itself counted, is `depth` (the deep part in
-- spec, nested objects or arrays).
local function deep_item(name, depth, arrays)
  local n = depth - 1 -- the object itself holds spec
  local open, close = arrays and "[" or '{"a":', arrays and "]" or "}"
  return '{"apiVersion":"luna.dev/v1","kind":"Deep","metadata":{"name":"' .. name ..
    '","namespace":"default","uid":"u-' .. name .. '","resourceVersion":"7"},"spec":' ..
    open:rep(n) .. "1" .. close:rep(n) .. "}"
end

local function item(name, spec)
  return '{"apiVersion":"luna.dev/v1","kind":"Deep","metadata":{"name":"' .. name ..
    '","namespace":"default","uid":"u-' .. name .. '","resourceVersion":"7"},"spec":' ..
    (spec or '{"x":1}') .. "}"
end

local function list_body(items)
  return '{"apiVersion":"luna.dev/v1","kind":"DeepList","metadata":{"resourceVersion":"9"},' ..
    '"items":[' .. table.concat(items, ",") .. "]}"
end

local function watch_body(events)
  local out = {}
  for _, e in ipairs(events) do
    out[#out + 1] = '{"type":"' .. e[1] .. '","object":' .. e[2] .. "}\n"
  end
  return table.concat(out)
end

-- Feeds text in chunks of `size` bytes; returns the events, or fails the
-- test with the stream's error.
local function feed_all(s, text, size)
  local events = {}
  for i = 1, #text, size do
    local got, err = s:feed(text:sub(i, i + size - 1))
    assert(got, err and err.message)
    for _, e in ipairs(got) do events[#events + 1] = e end
  end
  return events
end

local function summary(events)
  local out = {}
  for _, e in ipairs(events) do
    if e.type == "BAD" then
      out[#out + 1] = "BAD " .. e.event .. " " .. (e.namespace or "") .. "/" .. (e.name or "")
    else
      out[#out + 1] = e.type .. " " .. e.object:key()
    end
  end
  return out
end

local function stream(mode)
  return core.object_stream.new{ mode = mode, api_version = "luna.dev/v1", kind = "Deep" }
end

describe("object stream bounds (hostile items)", function()
  it("takes objects nested as deep as kube-apiserver accepts, in a LIST and a watch", function()
    for _, arrays in ipairs({ false, true }) do
      local s = stream("list")
      local ev = feed_all(s, list_body({ deep_item("d1100", 1100, arrays),
        deep_item("d10000", 10000, arrays) }), 65536)
      assert(s:finish())
      assert.same({ "LISTED default/d1100", "LISTED default/d10000" }, summary(ev))
      assert.equal(0, s:bad())
      -- the cached bytes are the object's, whole
      assert.equal(#deep_item("d10000", 10000, arrays), #ev[2].object:json())
      local w = stream("watch")
      ev = feed_all(w, watch_body({ { "ADDED", deep_item("d10000", 10000, arrays) } }), 4096)
      assert(w:finish())
      assert.same({ "ADDED default/d10000" }, summary(ev))
    end
  end)

  it("takes the numbers kube-apiserver accepts", function()
    local s = stream("list")
    local nums = { "18446744073709551617", "-0", "1e-400", "123456789012345678901234567890",
      "1.7976931348623157e308", "-9223372036854775809" }
    local items = {}
    for i, n in ipairs(nums) do items[i] = item("n" .. i, '{"x":' .. n .. "}") end
    local ev = feed_all(s, list_body(items), 7)
    assert(s:finish())
    assert.equal(#nums, #ev)
    for i, n in ipairs(nums) do
      assert.matches('"x":' .. n:gsub("%-", "%%-"), ev[i].object:json())
    end
  end)

  it("takes a 3 MiB string (more than kube-apiserver's request limit)", function()
    local s = stream("watch")
    local big = string.rep("x", 3 * 1024 * 1024)
    local ev = feed_all(s, watch_body({ { "ADDED", item("big", '{"s":"' .. big .. '"}') } }), 1048576)
    assert(s:finish())
    assert.same({ "ADDED default/big" }, summary(ev))
  end)

  it("refuses one item of a LIST page past the bounds and applies the others", function()
    for _, size in ipairs({ 1048576, 1000, 3 }) do
      local s = stream("list")
      local ev = feed_all(s, list_body({ item("a"), deep_item("deep", 10001),
        deep_item("deeparr", 10001, true), item("big", '{"x":1e400}'),
        item("neg", '{"x":[-1e400]}'), item("b") }), size)
      assert(s:finish())
      assert.same({ "LISTED default/a", "BAD LISTED default/deep", "BAD LISTED default/deeparr",
        "BAD LISTED default/big", "BAD LISTED default/neg", "LISTED default/b" }, summary(ev))
      assert.matches("nesting deeper", ev[2].reason)
      assert.matches("number out of double range", ev[4].reason)
      assert.equal(2, s:items())
      assert.equal(4, s:bad())
      assert.equal("9", s:list_resource_version())
    end
  end)

  it("skips a watch event past the bounds and keeps the stream", function()
    local s = stream("watch")
    local ev = feed_all(s, watch_body({ { "ADDED", item("a") },
      { "ADDED", deep_item("deep", 20000) }, { "MODIFIED", item("a", '{"x":-1e999}') },
      { "MODIFIED", item("a", '{"x":2}') }, { "DELETED", deep_item("deep", 10001) },
      { "ADDED", item("b") } }), 4093)
    assert(s:finish())
    assert.same({ "ADDED default/a", "BAD ADDED default/deep", "BAD MODIFIED default/a",
      "MODIFIED default/a", "BAD DELETED default/deep", "ADDED default/b" }, summary(ev))
    assert.equal(2, json.decode(ev[4].object:json()).spec.x)
  end)

  it("still refuses input that is not JSON, whole", function()
    local s = stream("list")
    local text = list_body({ item("a"), deep_item("deep", 10001) }):gsub('"a":1}', '"a":1]', 1)
    local ok, err
    ok, err = s:feed(text)
    if ok then ok, err = s:finish() end
    assert.is_nil(ok)
    assert.equal("InvalidStream", err.reason)
  end)
end)
