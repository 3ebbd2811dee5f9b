-- The editor definitions (lua/luna/stubs/*.lua, LuaLS ---@meta files that
-- `luna stubs DIR` writes out) describe exactly what a controller script
-- can reach: every name the real runtime exposes through require (asked of
-- a running `luna run` over its test control channel: script/sandbox.h
-- luna_sandbox_list_api) is declared, and every declared name exists.
-- The same holds for the fields of the tables a script writes or reads
-- (the controller spec and its sources, limits and rate_limit; reconcile's
-- request and result; errors), asked of the runtime the same way: the
-- lists its validation and its reconcile use (test_control.h `api`).
-- Entries of data tables named in capitals (errors.KNOWN_REASONS, ...) are
-- described by their table's type, not one by one; methods of the objects
-- calls return (cache:get, ...) are declared on classes and not walked.
local helpers = require("helpers")
local cjson = require("cjson")

local STUBS = "lua/luna/stubs"
local KIT_ONLY = { ["luna.testing.lua"] = true } -- the kit's definitions, not the script API

local function stub_files()
  local out = helpers.run("cd " .. STUBS .. " && LC_ALL=C ls -1 *.lua")
  local names = {}
  for n in out:gmatch("[^\n]+") do names[#names + 1] = n end
  return names
end

-- Declared names: "luna.get", "luna.meta.label", "luna.log.debug", ...
local function declared()
  local names = {}
  for _, file in ipairs(stub_files()) do
    if not KIT_ONLY[file] then
      local src = assert(helpers.read_file(STUBS .. "/" .. file))
      local module = assert(src:match("^%-%-%-@meta ([%w%.]+)"), file .. ": no ---@meta NAME")
      local alias = module:match("([%w_]+)$")
      names[module] = true
      local classes = {} -- local tables of functions assigned to fields: alias -> { fn names }
      for cls, fn in src:gmatch("\nfunction ([%w_]+)%.([%w_]+)%(") do
        if cls ~= alias then
          classes[cls] = classes[cls] or {}
          table.insert(classes[cls], fn)
        end
      end
      for path in src:gmatch("\nfunction " .. alias .. "%.([%w_.]+)%(") do
        names[module .. "." .. path] = true
      end
      for path, rhs in src:gmatch("\n" .. alias .. "%.([%w_.]+) = ([^\n]*)") do
        names[module .. "." .. path] = true
        for _, fn in ipairs(classes[rhs] or {}) do names[module .. "." .. path .. "." .. fn] = true end
      end
    end
  end
  return names
end

-- The ---@field names of the classes a group of fields is described by.
local FIELD_CLASSES = {
  spec = { "luna.ControllerSpec" },
  ["spec.source"] = { "luna.Source", "luna.WatchesSource" },
  ["spec.limits"] = { "luna.Limits" },
  ["spec.rate_limit"] = { "luna.RateLimit" },
  request = { "luna.Request" },
  result = { "luna.Requeue" },
  error = { "luna.Error" },
}

-- { ["luna.Request"] = { name = true, ... }, ... } over every stub file.
local function declared_classes()
  local classes = {}
  for _, file in ipairs(stub_files()) do
    local src = assert(helpers.read_file(STUBS .. "/" .. file))
    local current
    for line in (src .. "\n"):gmatch("([^\n]*)\n") do
      local cls = line:match("^%-%-%-@class ([%w_.]+)")
      if cls then
        current = {}
        classes[cls] = current
      elseif current and line:match("^%-%-%-@field ") then
        local field = line:match("^%-%-%-@field ([%a_][%w_]*)")
        if field then current[field] = true end -- [1] (a source's kind) is positional
      elseif not line:match("^%-%-%-") then
        current = nil
      end
    end
  end
  return classes
end

-- What the runtime exposes: { ["luna.get"] = "function", ... } and
-- { spec = { "name", ... }, request = { ... }, ... }.
local function exposed()
  local dir = helpers.tmpdir()
  local out_file = dir .. "/api.json"
  helpers.write_file(dir .. "/c.lua", [[
return require("luna").controller { name = "c", watch = "v1/ConfigMap", reconcile = function() end }
]])
  helpers.write_file(dir .. "/api_test.lua", ([[
it("lists the API", function()
  local env = require("luna.testing").start{}
  local f = assert(io.open(%q, "w"))
  f:write(require("luna.core").json.encode(env:command("api")))
  f:close()
end)
]]):format(out_file))
  local out, rc = helpers.run(helpers.luna .. " test " .. dir)
  if rc ~= 0 then error("luna test failed:\n" .. out) end
  local text = helpers.read_file(out_file)
  if not text then error("luna test wrote no " .. out_file .. ":\n" .. out) end
  local answer = cjson.decode(text)
  return answer.api, answer.fields
end

describe("the LuaLS definitions", function()
  it("describe every name a script can reach, and nothing else", function()
    local api, decl = exposed(), declared()
    local count = 0
    for _ in pairs(api) do count = count + 1 end
    assert.is_true(count > 100, "the walk found only " .. count .. " names")
    for _, name in ipairs { "luna.get", "luna.cache", "luna.log.info", "luna.meta.set_owner",
                            "luna.core.json.decode", "luna.errors.is_not_found", "luna.is_not_found" } do
      assert.equal("function", api[name], name)
    end
    local undescribed, missing = {}, {}
    for name, ty in pairs(api) do
      local parent_leaf = name:match("%.([%w_]+)%.[^.]+$")
      local in_data_table = parent_leaf and parent_leaf:match("^[%u_]+$")
      if not in_data_table and not decl[name] then undescribed[#undescribed + 1] = name .. " (" .. ty .. ")" end
    end
    for name in pairs(decl) do
      if api[name] == nil then missing[#missing + 1] = name end
    end
    table.sort(undescribed)
    table.sort(missing)
    assert.same({}, undescribed, "exposed by the runtime but not in " .. STUBS)
    assert.same({}, missing, "described in " .. STUBS .. " but not exposed")
  end)

  it("describe every field of the tables a script writes or reads, and nothing else", function()
    local _, fields = exposed()
    local classes = declared_classes()
    local groups = {}
    for group in pairs(fields) do groups[#groups + 1] = group end
    table.sort(groups)
    local known = {}
    for group in pairs(FIELD_CLASSES) do known[#known + 1] = group end
    table.sort(known)
    assert.same(known, groups, "the runtime's groups of fields")
    for _, want in ipairs { "spec.every", "spec.jitter", "spec.watch", "spec.rate_limit", "spec.rate_limit.burst",
                            "spec.limits.seconds", "spec.source.map", "request.periodic", "request.attempt",
                            "result.requeue_after", "result.priority", "spec.priority_queue", "error.reason",
                            "error.where" } do
      local group, field = want:match("^(.*)%.([%w_]+)$")
      local found = false
      for _, f in ipairs(fields[group] or {}) do found = found or f == field end
      assert.is_true(found, want .. " not among the runtime's fields")
    end
    local undescribed, missing = {}, {}
    for group, list in pairs(fields) do
      local described, runtime = {}, {}
      for _, cls in ipairs(FIELD_CLASSES[group]) do
        assert.is_not_nil(classes[cls], "no ---@class " .. cls .. " in " .. STUBS)
        for f in pairs(classes[cls]) do described[f] = cls end
      end
      for _, f in ipairs(list) do
        runtime[f] = true
        if not described[f] then undescribed[#undescribed + 1] = group .. "." .. f end
      end
      for f, cls in pairs(described) do
        if not runtime[f] then missing[#missing + 1] = cls .. "." .. f .. " (" .. group .. ")" end
      end
    end
    table.sort(undescribed)
    table.sort(missing)
    assert.same({}, undescribed, "fields the runtime knows but " .. STUBS .. " does not describe")
    assert.same({}, missing, "fields described in " .. STUBS .. " that the runtime does not know")
  end)

  it("are written out by luna stubs DIR, byte for byte", function()
    local dir = helpers.tmpdir() .. "/defs"
    local out, rc = helpers.run(helpers.luna .. " stubs " .. dir)
    assert.equal(0, rc, out)
    assert.matches("wrote %d+ definition files", out)
    for _, name in ipairs(stub_files()) do
      assert.equal(helpers.read_file(STUBS .. "/" .. name), helpers.read_file(dir .. "/" .. name), name)
    end
    out, rc = helpers.run(helpers.luna .. " stubs")
    assert.equal(2, rc)
    assert.matches("usage:", out)
  end)
end)
