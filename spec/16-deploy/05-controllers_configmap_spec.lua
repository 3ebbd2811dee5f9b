-- The controllers ConfigMap: deploy/sync-controllers.sh (`make deploy-sync`)
-- writes controllers/kustomization.yaml from controllers/*.lua, kustomize
-- turns it into the luna-controllers ConfigMap with one key per script, and
-- the committed file list matches the scripts in the tree.
local helpers = require("helpers")
local support = require("16-deploy.support")

local SYNC = "deploy/sync-controllers.sh"

local function controllers_dir(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  return dir
end

-- The ConfigMap kustomize builds from a copy of deploy/ whose controllers/
-- holds files (name -> content).
local function configmap(files)
  local root = helpers.tmpdir()
  support.must(("mkdir -p %s/controllers && cp -R deploy %s/"):format(root, root))
  for name, body in pairs(files) do helpers.write_file(root .. "/controllers/" .. name, body) end
  support.must(SYNC .. " " .. root .. "/controllers")
  return support.one(support.kustomize(root .. "/deploy"), "ConfigMap")
end

describe("the generated controllers ConfigMap", function()
  it("holds every controller file, byte for byte, under its file name", function()
    local dir, files = support.tree_with_controllers()
    local cm = support.one(support.kustomize(dir .. "/deploy"), "ConfigMap")
    assert.equal("luna-controllers", cm.metadata.name)
    assert.equal("luna", cm.metadata.namespace)
    assert.same(files, cm.data)
  end)

  it("keeps its name when a script changes, so the change is applied in place", function()
    local a = configmap({ ["x.lua"] = "return 1\n" })
    local b = configmap({ ["x.lua"] = "return 2\n" })
    assert.equal(a.metadata.name, b.metadata.name)
    assert.equal("return 1\n", a.data["x.lua"])
    assert.equal("return 2\n", b.data["x.lua"])
  end)

  it("takes only *.lua files, not the specs next to them (*_test.lua)", function()
    local cm = configmap({ ["a.lua"] = "return 1\n", ["README.md"] = "no", ["b.lua.orig"] = "no",
                           ["a_test.lua"] = "no" })
    assert.same({ ["a.lua"] = "return 1\n" }, cm.data)
  end)

  it("is empty, not an error, when there are no scripts", function()
    local cm = configmap({})
    assert.is_nil(next(cm.data or {}))
  end)
end)

describe("deploy/sync-controllers.sh", function()
  it("lists the scripts in name order", function()
    local dir = controllers_dir({ ["b.lua"] = "", ["a-1.lua"] = "", ["A.lua"] = "", ["c.txt"] = "" })
    support.must(SYNC .. " " .. dir)
    local list = helpers.read_file(dir .. "/kustomization.yaml"):match("files:\n(.*)$")
    assert.equal("  - A.lua\n  - a-1.lua\n  - b.lua\n", list)
  end)

  it("with --check, exits 0 when up to date and 1 with a diff when not", function()
    local dir = controllers_dir({ ["a.lua"] = "" })
    local out, rc = support.sh(SYNC .. " --check " .. dir)
    assert.equal(1, rc)
    assert.matches("kustomization.yaml is out of date with .*: run make deploy%-sync", out)
    support.must(SYNC .. " " .. dir)
    local before = helpers.read_file(dir .. "/kustomization.yaml")
    out, rc = support.sh(SYNC .. " --check " .. dir)
    assert.equal(0, rc, out)
    helpers.write_file(dir .. "/b.lua", "")
    out, rc = support.sh(SYNC .. " --check " .. dir)
    assert.equal(1, rc)
    assert.matches("%+  %- b%.lua", out)
    assert.equal(before, helpers.read_file(dir .. "/kustomization.yaml"), "--check wrote the file")
  end)

  it("rejects a file name that is not a valid ConfigMap key", function()
    local dir = controllers_dir({ ["my controller.lua"] = "", ["ok.lua"] = "" })
    local out, rc = support.sh(SYNC .. " " .. dir)
    assert.equal(2, rc)
    assert.matches("'my controller%.lua' is not a valid ConfigMap key", out)
    assert.is_nil(helpers.read_file(dir .. "/kustomization.yaml"))
  end)

  it("rejects scripts over the 1 MiB a ConfigMap holds", function()
    local dir = controllers_dir({ ["a.lua"] = ("-"):rep(600000), ["b.lua"] = ("-"):rep(448577) })
    local out, rc = support.sh(SYNC .. " " .. dir)
    assert.equal(2, rc)
    assert.matches("total 1048577 bytes, over the 1 MiB", out)
    os.remove(dir .. "/b.lua")
    helpers.write_file(dir .. "/b.lua", ("-"):rep(448576))
    out, rc = support.sh(SYNC .. " " .. dir)
    assert.equal(0, rc, out)
  end)

  it("rejects a missing directory and extra arguments", function()
    local out, rc = support.sh(SYNC .. " /nonexistent/luna-controllers")
    assert.equal(2, rc)
    assert.matches("/nonexistent/luna%-controllers: not a directory", out)
    out, rc = support.sh(SYNC .. " a b")
    assert.equal(2, rc)
    assert.matches("usage:", out)
  end)
end)

describe("controllers/kustomization.yaml", function()
  it("lists exactly controllers/*.lua (run make deploy-sync after adding or removing one)", function()
    local committed = assert(helpers.read_file("controllers/kustomization.yaml"),
      "no controllers/kustomization.yaml: run make deploy-sync")
    local _, names = support.controllers()
    if #names > 0 then
      local out, rc = support.sh(SYNC .. " --check controllers")
      assert.equal(0, rc, out)
    else
      -- The example controllers are not in this tree yet: the committed list
      -- must still be exactly what the script writes for files of those names.
      local listed = {}
      for name in (committed:match("files:\n(.*)$") or ""):gmatch("  %- (%S+)\n") do
        listed[name] = ""
      end
      assert.is_not_nil(next(listed), "the committed list names no controllers")
      local dir = controllers_dir(listed)
      support.must(SYNC .. " " .. dir)
      assert.equal(helpers.read_file(dir .. "/kustomization.yaml"), committed)
    end
  end)
end)
