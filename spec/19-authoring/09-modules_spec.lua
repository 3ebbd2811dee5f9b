-- Modules shared between controllers (issue 30.1): files named
-- NAME.mod.lua in the controllers directory are modules, not controllers.
-- `require "NAME"` finds them; the name stays a flat file name, so the same
-- directory works in `luna run`, `luna test` (testing.start{controllers=}),
-- `make deploy-sync` and the ConfigMap the kubelet mounts.
local helpers = require("helpers")
local luna_env = require("support.luna_env")

-- sh, find, cp: not the ASan preload the specs run under
local SYNC = "env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS deploy/sync-controllers.sh"

local function tree(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do
    local sub = name:match("^(.*)/[^/]+$")
    if sub then helpers.run("env -u LD_PRELOAD mkdir -p '" .. dir .. "/" .. sub .. "'") end
    helpers.write_file(dir .. "/" .. name, body)
  end
  return dir
end

-- A controller named `name` that uses both modules at load time: it fails
-- to load unless require finds them.
local function user(name)
  return ([[
local luna = require "luna"
local shared = require "shared"
local util = require "lib.util"
assert(shared.greeting == "hello" and util.twice(2) == 4)
return luna.controller { name = %q, watch = { "v1/ConfigMap", namespace = "none" },
                         reconcile = function() end }
]]):format(name)
end

local MODULES = {
  ["shared.mod.lua"] = 'return { greeting = "hello" }\n',
  ["lib.util.mod.lua"] = "return { twice = function(x) return 2 * x end }\n",
}

local function with_modules(files)
  for k, v in pairs(MODULES) do files[k] = v end
  return files
end

describe("modules (NAME.mod.lua)", function()
  local env
  after_each(function() if env then env:stop() end env = nil end)

  it("are required by controllers and never loaded as controllers by `luna run`", function()
    env = luna_env.start{ sources = with_modules{ ["a.lua"] = user("a"), ["b.lua"] = user("b") } }
    local out = env.luna:drain(0.2)
    assert.matches("controllers loaded[^\n]*count=2", table.concat(env.luna.out, "\n"))
    assert.not_matches("controller load failed", out)
  end)

  it("refuse a name that two files answer (lib/util.lua and lib.util.mod.lua)", function()
    local dir = tree(with_modules{ ["a.lua"] = user("a"), ["lib/util.lua"] = "return {}\n" })
    local out, rc = helpers.run(helpers.luna .. " run --kubeconfig /nonexistent " .. dir .. " 2>&1")
    assert.equal(1, rc, out)
    assert.matches("module 'lib.util' is ambiguous: both " .. dir:gsub("%p", "%%%0") ..
                   "/lib.util.mod.lua and " .. dir:gsub("%p", "%%%0") .. "/lib/util.lua", out)
  end)

  it("are found by testing.start{controllers=...} in the listed files' directory", function()
    local dir = tree(with_modules{ ["a.lua"] = user("a"), ["a_test.lua"] = [[
local testing = require "luna.testing"
describe("a", function()
  it("starts with its modules", function()
    local env = testing.start{ controllers = { "a.lua" } }
    env:wait_idle()
  end)
end)
]] })
    local out, rc = helpers.run(helpers.luna .. " test " .. dir)
    assert.equal(0, rc, out)
    assert.matches("ok    a starts with its modules", out)
  end)

  it("become ConfigMap keys with deploy-sync and load from the kubelet's layout", function()
    local dir = tree(with_modules{ ["a.lua"] = user("a"), ["a_test.lua"] = "-- spec\n" })
    local out, rc = helpers.run(SYNC .. " " .. dir)
    assert.equal(0, rc, out)
    local list = helpers.read_file(dir .. "/kustomization.yaml"):match("files:\n(.*)$")
    assert.equal("  - a.lua\n  - lib.util.mod.lua\n  - shared.mod.lua\n", list)
    -- A configMap volume: the keys in a timestamped directory, ..data
    -- pointing at it, and one symlink per key at the top.
    local vol = helpers.tmpdir()
    local ts = vol .. "/..2026_11_29_06_00_00.000000001"
    helpers.run("env -u LD_PRELOAD mkdir '" .. ts .. "' && ln -s '" .. ts:match("[^/]+$") .. "' '" .. vol .. "/..data'")
    for key in list:gmatch("  %- (%S+)") do
      helpers.write_file(ts .. "/" .. key, assert(helpers.read_file(dir .. "/" .. key)))
      helpers.run("env -u LD_PRELOAD ln -s '..data/" .. key .. "' '" .. vol .. "/" .. key .. "'")
    end
    env = luna_env.start{ dir = vol }
    assert.matches("controllers loaded[^\n]*count=1", table.concat(env.luna.out, "\n"))
  end)

  it("refuse, with deploy-sync, a subdirectory the ConfigMap would drop", function()
    local dir = tree{ ["a.lua"] = "return 1\n", ["lib/util.lua"] = "return {}\n" }
    local out, rc = helpers.run(SYNC .. " " .. dir .. " 2>&1")
    assert.equal(2, rc, out)
    assert.matches("lib/util.lua: a ConfigMap holds no subdirectories: name the module " ..
                   "lib.util.mod.lua", out, 1, true)
    assert.is_nil(helpers.read_file(dir .. "/kustomization.yaml"))
  end)
end)
