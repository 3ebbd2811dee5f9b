-- The NDJSON framer (host/base/ndjson.c) through core.http.ndjson.
local core = require("luna.core")

-- A framer collecting its lines into a table.
local function framer(max_line)
  local lines = {}
  local f = core.http.ndjson{ max_line = max_line, on_line = function(l) lines[#lines + 1] = l end }
  return f, lines
end

-- Feeds text cut at the given offsets (each a position after which to cut).
local function feed_cut(f, text, cuts)
  local start = 1
  for _, at in ipairs(cuts) do
    assert(f:feed(text:sub(start, at)))
    start = at + 1
  end
  assert(f:feed(text:sub(start)))
end

local SAMPLE = '{"a":1}\n{"b":"grüße 日本"}\r\n\n{"c":[1,2,3]}\n'
local SAMPLE_LINES = { '{"a":1}', '{"b":"grüße 日本"}', '{"c":[1,2,3]}' }

describe("core.http.ndjson", function()
  it("delivers each complete line of one chunk", function()
    local f, lines = framer()
    assert.is_true(f:feed(SAMPLE))
    assert.same(SAMPLE_LINES, lines)
    assert.is_true(f:finish())
  end)

  it("holds a partial line until its newline arrives", function()
    local f, lines = framer()
    assert.is_true(f:feed('{"a":'))
    assert.same({}, lines)
    assert.is_true(f:feed('1}'))
    assert.same({}, lines)
    assert.is_true(f:feed('\n{"b"'))
    assert.same({ '{"a":1}' }, lines)
  end)

  it("frames the same lines whatever the split point of two chunks", function()
    for at = 0, #SAMPLE do
      local f, lines = framer()
      feed_cut(f, SAMPLE, { at })
      assert.same(SAMPLE_LINES, lines, "split after byte " .. at)
      assert.is_true(f:finish())
    end
  end)

  it("frames a stream fed one byte at a time", function()
    local f, lines = framer()
    for i = 1, #SAMPLE do assert.is_true(f:feed(SAMPLE:sub(i, i))) end
    assert.same(SAMPLE_LINES, lines)
  end)

  it("frames many lines cut at pseudo-random points, across many chunks per line", function()
    local parts, expect = {}, {}
    for i = 1, 200 do
      local line = string.format('{"i":%d,"pad":"%s","u":"ü日"}', i, string.rep("x", (i * 37) % 300))
      expect[#expect + 1] = line
      parts[#parts + 1] = line .. ((i % 3 == 0) and "\r\n" or "\n")
    end
    local text = table.concat(parts)
    local f, lines = framer()
    local seed, pos = 12345, 1
    while pos <= #text do
      seed = (seed * 1103515245 + 12345) % 2147483648
      local n = seed % 40 -- includes empty chunks
      assert.is_true(f:feed(text:sub(pos, pos + n - 1)))
      pos = pos + n
    end
    assert.same(expect, lines)
    assert.is_true(f:finish())
  end)

  it("keeps multi-byte UTF-8 characters split across chunks intact", function()
    local f, lines = framer()
    local text = '{"k":"日本語"}\n'
    local kanji = text:find("日", 1, true)
    feed_cut(f, text, { kanji, kanji + 1, kanji + 4 })
    assert.same({ '{"k":"日本語"}' }, lines)
  end)

  it("strips one \\r before the newline and keeps other \\r and NUL bytes", function()
    local f, lines = framer()
    assert.is_true(f:feed("a\rb\r\n\r\r\nc\0d\n"))
    assert.same({ "a\rb", "\r", "c\0d" }, lines)
  end)

  it("skips empty lines, with or without \\r", function()
    local f, lines = framer()
    assert.is_true(f:feed("\n\n\r\n"))
    assert.is_true(f:feed("x\n\n"))
    assert.same({ "x" }, lines)
  end)

  it("accepts a line of exactly max_line bytes, also with \\r\\n split between chunks", function()
    local f, lines = framer(8)
    assert.is_true(f:feed("12345678\n"))
    assert.is_true(f:feed("abcdefgh\r"))
    assert.is_true(f:feed("\n"))
    assert.same({ "12345678", "abcdefgh" }, lines)
  end)

  it("rejects a complete line longer than max_line with TooBig", function()
    local f, lines = framer(8)
    local ok, err = f:feed("ok\n123456789\nlater\n")
    assert.is_nil(ok)
    assert.equal("TooBig", err.reason)
    assert.equal("line exceeds 8 bytes", err.message)
    assert.same({ "ok" }, lines) -- lines before the long one were delivered
  end)

  it("rejects an over-long line before its newline arrives", function()
    local f, lines = framer(8)
    assert.is_true(f:feed("12345678"))
    assert.is_true(f:feed("\r")) -- could still be "12345678\r\n"
    local ok, err = f:feed("x")
    assert.is_nil(ok)
    assert.equal("TooBig", err.reason)
    assert.same({}, lines)
  end)

  it("stays failed after an error and calls back no more", function()
    local f, lines = framer(4)
    assert.is_nil((f:feed("too long line\n")))
    local ok, err = f:feed("ok\n")
    assert.is_nil(ok)
    assert.equal("TooBig", err.reason)
    assert.matches("already failed", err.message)
    assert.same({}, lines)
  end)

  it("reports a partial last line at end of stream as Truncated", function()
    local f, lines = framer()
    assert.is_true(f:feed('{"a":1}\n{"b":'))
    local ok, err = f:finish()
    assert.is_nil(ok)
    assert.equal("Truncated", err.reason)
    assert.equal("stream ended inside a line (5 bytes after the last newline)", err.message)
    assert.same({ '{"a":1}' }, lines)
  end)

  it("finishes cleanly when nothing or only a \\r is buffered", function()
    local f = framer()
    assert.is_true(f:feed("a\n"))
    assert.is_true(f:finish())
    local g = framer()
    assert.is_true(g:feed("a\n\r"))
    assert.is_true(g:finish())
  end)

  it("propagates an error raised by on_line and stops", function()
    local n = 0
    local f = core.http.ndjson{ on_line = function(l)
      n = n + 1
      if l == "bad" then error("handler failed on " .. l) end
    end }
    local ok, err = pcall(f.feed, f, "good\nbad\nnever\n")
    assert.is_false(ok)
    assert.matches("handler failed on bad", err)
    assert.equal(2, n)
  end)

  it("refuses to be fed from its own on_line", function()
    local f
    f = core.http.ndjson{ on_line = function() f:feed("x\n") end }
    local ok, err = pcall(f.feed, f, "a\n")
    assert.is_false(ok)
    assert.matches("called from its own on_line", err)
  end)

  it("raises on misuse", function()
    assert.has_error(function() core.http.ndjson{} end)
    assert.has_error(function() core.http.ndjson{ on_line = print, max_line = -1 } end)
    local f = framer()
    assert.has_error(function() f:feed({}) end)
    assert.has_error(function() f.feed(nil, "x") end)
  end)
end)
