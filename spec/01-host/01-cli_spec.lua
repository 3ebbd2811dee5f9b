-- The luna command line: version, help, argument errors, loading controllers.
local helpers = require("helpers")

local function controller_dir(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  return dir
end

local VALID = [[
local luna = require "luna"
return luna.controller {
  name = "demo",
  watch = "v1/ConfigMap",
  reconcile = function(req) end,
}
]]

describe("luna CLI", function()
  it("prints its version", function()
    local out, rc = helpers.run(helpers.luna .. " --version")
    assert.equal(0, rc)
    assert.matches("^luna %d+%.%d+%.%d+\n$", out)
  end)

  it("prints help on --help and exits 0", function()
    local out, rc = helpers.run(helpers.luna .. " --help")
    assert.equal(0, rc)
    assert.matches("usage: luna", out)
    assert.matches("run %[options%] DIR", out)
  end)

  it("rejects an unknown command with usage and exit 2", function()
    local out, rc = helpers.run(helpers.luna .. " frobnicate")
    assert.equal(2, rc)
    assert.matches("unknown command 'frobnicate'", out)
  end)

  it("rejects run without a directory", function()
    local out, rc = helpers.run(helpers.luna .. " run")
    assert.equal(2, rc)
    assert.matches("expected one controllers directory", out)
  end)

  it("rejects an unknown log level", function()
    local out, rc = helpers.run(helpers.luna .. " run --log-level loud /tmp")
    assert.equal(2, rc)
    assert.matches("unknown log level 'loud'", out)
  end)

  it("loads and validates valid controllers", function()
    local dir = controller_dir({ ["a.lua"] = VALID })
    local out = helpers.run(helpers.luna .. " run " .. dir)
    assert.matches("controllers loaded dir=" .. dir:gsub("%-", "%%-") .. " count=1", out)
  end)

  it("reports a syntax error with file and line and exits 1", function()
    local dir = controller_dir({ ["a.lua"] = VALID, ["b.lua"] = "return {\n  name = 'x'\n" })
    local out, rc = helpers.run(helpers.luna .. " run " .. dir)
    assert.equal(1, rc)
    assert.matches("controller load failed file=" .. dir:gsub("%-", "%%-") .. "/b.lua", out)
    assert.matches("b.lua:3: '}' expected %(to close '{' at line 1%)", out)
  end)

  it("reports a runtime error at load with a traceback", function()
    local dir = controller_dir({ ["a.lua"] = "local x = nil\nreturn x.field\n" })
    local out, rc = helpers.run(helpers.luna .. " run " .. dir)
    assert.equal(1, rc)
    assert.matches("a.lua:2: attempt to index", out)
    assert.matches("stack traceback", out)
  end)

  it("reports an invalid controller spec with the file's line", function()
    local dir = controller_dir({ ["a.lua"] = [[
local luna = require "luna"
local c = luna.controller { name = "demo", wacth = "v1/ConfigMap", reconcile = function() end }
return c
]] })
    local out, rc = helpers.run(helpers.luna .. " run " .. dir)
    assert.equal(1, rc)
    assert.matches("a.lua:2: controller has unknown field 'wacth' %(did you mean 'watch'%?%)", out)
  end)

  it("names the file when a tail-called luna.controller rejects the spec", function()
    local dir = controller_dir({ ["a.lua"] = [[
return require("luna").controller { name = "Bad Name", watch = "v1/ConfigMap", reconcile = function() end }
]] })
    local out, rc = helpers.run(helpers.luna .. " run " .. dir)
    assert.equal(1, rc)
    assert.matches("a.lua:1: controller field 'name' must be a lowercase DNS%-style name", out)
  end)

  it("rejects a file that does not return a controller", function()
    local dir = controller_dir({ ["a.lua"] = "return 42\n" })
    local out, rc = helpers.run(helpers.luna .. " run " .. dir)
    assert.equal(1, rc)
    assert.matches("must return luna.controller{...}, got number", out)
  end)

  it("rejects a directory with no controller files", function()
    local dir = helpers.tmpdir()
    local out, rc = helpers.run(helpers.luna .. " run " .. dir)
    assert.equal(1, rc)
    assert.matches("no %*%.lua controller files", out)
  end)

  it("rejects a missing directory with a clear error", function()
    local out, rc = helpers.run(helpers.luna .. " run /nonexistent/luna-dir")
    assert.equal(1, rc)
    assert.matches("/nonexistent/luna%-dir: cannot read directory", out)
  end)

  it("writes JSON log lines with --log-format=json", function()
    local dir = controller_dir({ ["a.lua"] = VALID })
    local out = helpers.run(helpers.luna .. " run --log-format json " .. dir)
    local line = out:match('{[^\n]*"msg":"controllers loaded"[^\n]*}')
    assert.is_not_nil(line, out)
    local cjson = require("cjson")
    local rec = cjson.decode(line)
    assert.equal("info", rec.level)
    assert.equal(1, rec.count)
    assert.matches("^%d%d%d%d%-%d%d%-%d%dT", rec.ts)
  end)
end)
