-- What docs/isolation.md lists as the sandbox's contents (the block marked
-- `<!-- sandbox contents -->`) is exactly what a controller sees: its
-- globals and, for each library table, its fields, asked of a controller
-- running in `luna run --dev-server`.  So the list cannot drift from
-- host/script/sandbox.c.
local helpers = require("helpers")

local DOC = "docs/isolation.md"

-- A controller that logs every global name, and "lib.field" for each field
-- of a library table, sorted, in one line.
local CONTROLLER = [[
local luna = require "luna"
local names = {}
for k, v in pairs(_G) do
  if type(v) == "table" and k ~= "_G" then
    for f in pairs(v) do names[#names + 1] = k .. "." .. f end
  else
    names[#names + 1] = k
  end
end
table.sort(names)
local list = table.concat(names, " ")
return luna.controller {
  name = "sandbox-contents",
  watch = "v1/Namespace",
  reconcile = function(req) luna.log.info("sandbox contents", { names = list }) end,
}
]]

-- { ["assert"] = true, ["string.find"] = true, ... } from the doc's block:
-- a line of globals, then one "lib: field field ..." line per library.
local function documented()
  local text = assert(helpers.read_file(DOC))
  local block = text:match("<!%-%- sandbox contents %-%->\n```%w*\n(.-)```\n")
  assert.is_not_nil(block, DOC .. " has no block marked <!-- sandbox contents -->")
  local set = {}
  for line in block:gmatch("[^\n]+") do
    local lib, fields = line:match("^(%w+): (.+)$")
    if lib then
      set[lib] = true
      for f in fields:gmatch("%S+") do set[lib .. "." .. f] = true end
    else
      for g in line:gmatch("%S+") do set[g] = true end
    end
  end
  return set
end

local function seen_by_controller()
  local dir = helpers.tmpdir()
  helpers.write_file(dir .. "/sandbox_contents.lua", CONTROLLER)
  local p = helpers.spawn({ helpers.luna, "run", "--dev-server", "--log-format", "json",
    "--metrics-bind-address=0", "--health-probe-bind-address=0", dir }, { env = { KUBECONFIG = false } })
  local _, names = p:expect('"msg":"sandbox contents".-"names":"([^"]*)"', 30)
  p:stop()
  local set = {}
  for n in names:gmatch("%S+") do
    set[n] = true
    local lib = n:match("^(%w+)%.")
    if lib then set[lib] = true end
  end
  return set
end

local function missing(from, what)
  local out = {}
  for k in pairs(from) do if not what[k] then out[#out + 1] = k end end
  table.sort(out)
  return out
end

describe("the sandbox's documented contents #integration", function()
  it("are what a controller sees, no more, no less", function()
    local doc, real = documented(), seen_by_controller()
    assert.same({}, missing(real, doc)) -- a controller has it, the docs do not say
    assert.same({}, missing(doc, real)) -- the docs list it, a controller does not have it
    -- the host's keys that must never be there
    for _, name in ipairs { "io", "os.execute", "os.exit", "string.dump", "debug.getinfo",
                            "package", "ffi", "jit", "collectgarbage", "dofile" } do
      assert.is_nil(real[name], name)
    end
  end)

  it("are what README.md points at", function()
    local readme = assert(helpers.read_file("README.md"))
    assert.matches("docs/isolation.md#what-the-sandbox-holds", readme, 1, true)
    local iso = assert(helpers.read_file(DOC))
    assert.matches("\n## What the sandbox holds\n", iso, 1, true)
    assert.is_nil(iso:find("README.md lists what the sandbox holds", 1, true))
  end)
end)

