-- host/base/json.h used directly from C (spec/fixtures/json_tool.c): events and
-- their offsets, chunking, lookups, the writer and copying through it.
local helpers = require("helpers")

local tool = helpers.fixtures .. "/json_tool"

local function run(args, input)
  local dir = helpers.tmpdir()
  local path = dir .. "/in.json"
  helpers.write_file(path, input or "")
  local out, rc = helpers.run(tool .. " " .. args .. " < " .. path)
  assert.equal(0, rc, out)
  return out
end

local function write(tokens)
  local quoted = {}
  for i, t in ipairs(tokens) do quoted[i] = "'" .. t:gsub("'", "'\\''") .. "'" end
  return (helpers.run(tool .. " write " .. table.concat(quoted, " "))):gsub("\n$", "")
end

describe("host/base/json.h", function()
  describe("parser events", function()
    local doc = '{"a":[1,-2,3.5,"x\\u00e9"],"b":{"c":null,"d":true},"e":18446744073709551615,' ..
                '"f":-0,"g":123456789012345678901234567890,"h":-9223372036854775808}'
    local want = table.concat({
      "object_start 0 1",
      "key 1 4 a",
      "array_start 1 6",
      "number 2 7 1 int 1",
      "number 2 10 -2 int -2",
      "number 2 14 3.5 double 3.5",
      "string 2 24 xé",
      "array_end 1 25",
      "key 1 29 b",
      "object_start 1 31",
      "key 2 34 c",
      "null 2 39",
      "key 2 43 d",
      "true 2 48",
      "object_end 1 49",
      "key 1 53 e",
      "number 1 74 18446744073709551615 uint 18446744073709551615",
      "key 1 78 f",
      "number 1 81 -0 double -0",
      "key 1 85 g",
      "number 1 116 123456789012345678901234567890 bigint 1.2345678901234568e+29",
      "key 1 120 h",
      "number 1 141 -9223372036854775808 int -9223372036854775808",
      "object_end 0 142",
      "ok 142",
    }, "\n") .. "\n"

    it("carry type, depth, end offset, exact text and number kind", function()
      assert.equal(want, run("events", doc))
    end)

    it("are the same for every chunk size", function()
      for _, size in ipairs({ 1, 2, 3, 7, 64 }) do
        assert.equal(want, run("events " .. size, doc))
      end
    end)

    it("stop at the first error with its offset, after the valid prefix", function()
      assert.equal("array_start 0 1\nnumber 1 2 1 int 1\nerror protocol malformed JSON at byte 3: " ..
                   "lexical error: invalid char in json text\n", run("events 1", "[1,x]"))
      assert.equal("array_start 0 1\nerror protocol invalid UTF-8 at byte 3\n",
                   run("events 2", '["a\255"]'))
    end)

    it("bound depth and size", function()
      assert.matches("error too_big nesting deeper than 2 at byte 3", run("events max_depth=2", "[[[]]]"))
      assert.matches("error too_big document larger than 4 bytes at byte 4", run("events max_size=4", "[1,2]"))
      assert.matches("ok 5", run("events max_size=5", "[1,2]"))
    end)

    it("stream values with multiple, each bounded by max_size", function()
      local out = run("events 3 multiple max_size=8", '{"a":1}\n{"b":2}\n[3]\n')
      assert.matches("object_end 0 7\n", out)
      assert.matches("object_end 0 15\n", out)
      assert.matches("array_end 0 19\nok 20\n$", out)
    end)
  end)

  describe("lookup", function()
    local doc = '{"metadata":{"name":"x","labels":{"a.b/c":"d"}},' ..
                '"items":[{"k":1},{"k":2,"z":[3,4]}],"n":-5}'
    local cases = {
      { "metadata.name", "string text=x" },
      { "metadata.labels", 'object_start start=33 end=46 raw={"a.b/c":"d"}' },
      { "items.1.z", "array_start start=76 end=81 raw=[3,4]" },
      { "items.1.z.1", "number text=4 int 4" },
      { "items.0", 'object_start start=57 end=64 raw={"k":1}' },
      { "n", "number text=-5 int -5" },
      { "items.5", "error not_found no value at the path" },
      { "metadata.nope", "error not_found no value at the path" },
      { "metadata.name.deeper", "error not_found no value at the path" },
      { "items.x", "error not_found no value at the path" },
    }
    for _, c in ipairs(cases) do
      it("finds " .. c[1], function()
        assert.equal(c[2] .. "\n", run("lookup '" .. c[1] .. "'", doc))
      end)
    end

    it("stops reading once the value is found", function()
      assert.equal("string text=x\n", run("lookup metadata.name", '{"metadata":{"name":"x"}} garbage'))
    end)

    it("reports malformed input read before the value", function()
      assert.matches("^error protocol malformed JSON at byte 13",
                     run("lookup metadata.name", '{"metadata":{x}}'))
    end)

    it("refuses a value that does not fit the caller's buffer", function()
      assert.matches("^error too_big value of 70 bytes does not fit in 64",
                     run("lookup s", '{"s":"' .. string.rep("y", 70) .. '"}'))
    end)
  end)

  describe("writer", function()
    it("writes nested documents with commas and colons in place", function()
      assert.equal('{"a":1,"b":[true,false,null,0.1,18446744073709551615,-9223372036854775808],' ..
                   '"c":"x\\"y"}',
                   write({ "{", "k:a", "i:1", "k:b", "[", "t", "f", "n", "d:0.1",
                           "u:18446744073709551615", "i:-9223372036854775808", "]", "k:c", 's:x"y', "}" }))
      assert.equal('[{"z":1},2]', write({ "[", 'r:{"z":1}', "i:2", "]" }))
      assert.equal('[1e+20,-0,2.5,9007199254740992]',
                   write({ "[", "d:1e20", "d:-0", "d:2.5", "d:9007199254740993", "]" }))
    end)

    it("escapes control characters and keeps UTF-8", function()
      assert.equal('["\\n\\u0001é"]', write({ "[", "x:0a01c3a9", "]" }))
    end)

    it("refuses misuse and bad values", function()
      assert.equal("error invalid a value where an object key is due", write({ "{", "s:x" }))
      assert.equal("error invalid an object key where a value is due", write({ "[", "k:x" }))
      assert.equal("error invalid a second top-level value", write({ "[", "]", "[", "]" }))
      assert.equal("error invalid array end does not close the open container", write({ "{", "]" }))
      assert.equal("error invalid object end does not close the open container", write({ "{", "k:a", "}" }))
      assert.equal("error invalid incomplete document", write({ "[", "i:1" }))
      assert.equal("error invalid incomplete document", write({}))
      assert.equal("error invalid NaN cannot be written as JSON", write({ "[", "d:nan", "]" }))
      assert.equal("error invalid infinity cannot be written as JSON", write({ "d:inf" }))
      assert.equal("error invalid string is not valid UTF-8 (byte 1)", write({ "[", "x:41ff", "]" }))
    end)
  end)

  it("copies documents event by event, leaving a subtree out", function()
    local input = '{"metadata":{"name":"a","managedFields":[{"manager":"m","f":{"x":{}}}],' ..
                  '"uid":"u"},"data":{"k":"v\\n\\u00e9","n":1.50}}\n' ..
                  '{"metadata":{"managedFields":{}},"x":[]}\n{"bad":\n'
    assert.equal('{"metadata":{"name":"a","uid":"u"},"data":{"k":"v\\né","n":1.50}}\n' ..
                 '{"metadata":{},"x":[]}\n' ..
                 "error protocol unexpected end of input at byte 8\n", run("strip", input))
  end)
end)
