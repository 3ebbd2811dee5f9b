-- `luna rbac DIR` (lua/luna/rbac_cli.lua, runtime/rbac_sources.h): the
-- ClusterRole a controllers directory needs, from its sources (static) and
-- the calls its *_test.lua specs make the controllers do (recorded);
-- deterministic, each rule saying where it came from; --check compares a
-- file with it; bad input exits 2 (1 when the specs fail) and says why.
-- The shipped role, deploy/rbac-controllers.yaml, is what it prints for
-- controllers/ (spec/16-deploy/07-rbac_kube_spec.lua runs the controllers
-- with exactly that role against a real API server).
local helpers = require("helpers")

local function tree(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  return dir
end

-- stdout, stderr, exit status of `luna rbac ARGS`
local function rbac(args)
  local tmp = helpers.tmpdir()
  local _, rc = helpers.run(("{ %s rbac %s >%s/out 2>%s/err; }"):format(helpers.luna, args, tmp, tmp))
  return helpers.read_file(tmp .. "/out") or "", helpers.read_file(tmp .. "/err") or "", rc
end

-- The rules of a printed role: { ["group resource"] = "verb,verb" }.
local function rules(text)
  local out, group, resource = {}, nil, nil
  for line in text:gmatch("[^\n]+") do
    local g = line:match('^%- apiGroups: %["(.-)"%]$')
    if g then group = g end
    local r = line:match('^  resources: %["(.-)"%]$')
    if r then resource = r end
    local v = line:match("^  verbs: %[(.*)%]$")
    if v then out[group .. " " .. resource] = v:gsub('[" ]', "") end
  end
  return out
end

local SOURCES = [[
local luna = require "luna"
return luna.controller {
  name = "sources",
  watch = "v1/ConfigMap",
  owns = { "apps/v1/Deployment" },
  watches = { { "v1/Secret", map = function(o) return {} end } },
  reconcile = function(req) end,
}
]]

-- get on a read, patch on a write, an Event; no create: it never creates
local MARKER = [[
local luna = require "luna"
return luna.controller {
  name = "marker",
  watch = "v1/ConfigMap",
  reconcile = function(req)
    local cm = luna.get("v1/ConfigMap", req.namespace, req.name)
    if not cm or (cm.metadata.labels or {}).marked then return end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name, { metadata = { labels = { marked = "yes" } } })
    if err then return nil, err end
    luna.event(cm, "Normal", "Marked", "marked")
  end,
}
]]
local MARKER_TEST = [[
local testing = require "luna.testing"
describe("marker", function()
  it("marks", function()
    local env = testing.start{}
    env:create{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "a", namespace = "default" } }
    env:wait_idle()
    assert.equal("yes", env:get("v1/ConfigMap", "default", "a").metadata.labels.marked)
  end)
end)
]]

describe("luna rbac", function()
  it("gives list and watch on every watch, owns and watches kind, saying which", function()
    local out, err, rc = rbac("--static " .. tree{ ["sources.lua"] = SOURCES })
    assert.equal(0, rc, err)
    assert.same({
      [" configmaps"] = "list,watch",
      [" secrets"] = "list,watch",
      ["apps deployments"] = "list,watch",
    }, rules(out))
    assert.matches("\n# sources: watch v1/ConfigMap %-> list, watch\n%- apiGroups: %[\"\"%]\n  resources: %[\"configmaps\"%]", out)
    assert.matches("\n# sources: owns apps/v1/Deployment %-> list, watch\n", out)
    assert.matches("\n# sources: watches v1/Secret %-> list, watch\n", out)
    assert.matches("\nkind: ClusterRole\nmetadata:\n  name: luna%-controllers\nrules:\n", out)
  end)

  it("adds the verbs of the calls the specs make the controllers do, and no others", function()
    local dir = tree{ ["marker.lua"] = MARKER, ["marker_test.lua"] = MARKER_TEST }
    local out, err, rc = rbac(dir)
    assert.equal(0, rc, err)
    assert.same({
      [" configmaps"] = "get,list,watch,patch",
      ["events.k8s.io events"] = "create,patch",
    }, rules(out))
    assert.matches("\n# marker: calls %-> get, patch\n", out)
    assert.matches("\n# marker: Event series %(a repeated Event is patched%) %-> patch\n", out)
    -- the specs' report stays off stdout
    assert.not_matches("passed", out)
  end)

  it("gives create with patch for a server-side apply (an absent object is created)", function()
    local dir = tree{ ["applier.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "applier",
  watch = "v1/ConfigMap",
  reconcile = function(req)
    if req.name:find("^copy") then return end
    local _, err = luna.apply({ apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "copy-" .. req.name, namespace = req.namespace }, data = { a = "b" } },
      { field_manager = "applier", force = true })
    if err then return nil, err end
  end,
}
]], ["applier_test.lua"] = [[
local testing = require "luna.testing"
describe("applier", function()
  it("applies", function()
    local env = testing.start{}
    env:create{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "a", namespace = "default" } }
    env:wait_idle()
    assert.is_not_nil(env:get("v1/ConfigMap", "default", "copy-a"))
  end)
end)
]] }
    local out, err, rc = rbac(dir)
    assert.equal(0, rc, err)
    assert.same({ [" configmaps"] = "list,watch,create,patch" }, rules(out))
    assert.matches("\n# applier: server%-side apply %(creates the object when absent%) %-> create\n", out)
  end)

  it("prints the same bytes every time, with --name and --label", function()
    local dir = tree{ ["marker.lua"] = MARKER, ["marker_test.lua"] = MARKER_TEST, ["sources.lua"] = SOURCES }
    local args = "--name my-role --label b=2 --label a=1 " .. dir
    local one, err1, rc1 = rbac(args)
    local two, err2, rc2 = rbac(args)
    assert.equal(0, rc1, err1)
    assert.equal(0, rc2, err2)
    assert.equal(one, two)
    assert.matches('\nmetadata:\n  name: my%-role\n  labels:\n    a: "1"\n    b: "2"\nrules:\n', one)
    -- rules sorted by group, then resource
    local order = {}
    for g, r in one:gmatch('%- apiGroups: %["(.-)"%]\n  resources: %["(.-)"%]') do order[#order + 1] = g .. " " .. r end
    assert.same({ " configmaps", " secrets", "apps deployments", "events.k8s.io events" }, order)
  end)

  it("resolves a custom resource's kind from --seed, its plural from the CRD", function()
    local dir = tree{ ["w.lua"] = [[
local luna = require "luna"
return luna.controller { name = "w", watch = "example.com/v1/Widget", reconcile = function() end }
]] }
    local _, err, rc = rbac("--static " .. dir)
    assert.equal(2, rc)
    assert.matches("kind example.com/v1/Widget: not served by the dev server; pass the manifest of its CustomResourceDefinition with %-%-seed", err)
    local out, err2, rc2 = rbac("--static --seed deploy/crd-widgets.yaml " .. dir)
    assert.equal(0, rc2, err2)
    assert.same({ ["example.com widgets"] = "list,watch" }, rules(out))
  end)

  it("--check: 0 when the file holds exactly the output, 1 with a diff when not", function()
    local dir = tree{ ["sources.lua"] = SOURCES }
    local out = rbac("--static " .. dir)
    local file = helpers.tmpdir() .. "/role.yaml"
    helpers.write_file(file, out)
    local o1, e1, rc1 = rbac("--static --check " .. file .. " " .. dir)
    assert.equal(0, rc1, e1)
    assert.equal("", o1)
    helpers.write_file(file, (out:gsub('"list", "watch"%]', '"list", "watch", "delete"]', 1)))
    local o2, e2, rc2 = rbac("--static --check " .. file .. " " .. dir)
    assert.equal(1, rc2)
    assert.equal("", o2)
    assert.matches("differs from what `luna rbac` prints", e2)
    assert.matches('\n%-  verbs: %["list", "watch", "delete"%]\n%+  verbs: %["list", "watch"%]\n', e2)
  end)

  describe("refuses, saying why", function()
    it("bad usage (exit 2)", function()
      local cases = {
        { "", "usage: luna rbac" },
        { "--frobnicate x", "unknown option %-%-frobnicate" },
        { "--name", "%-%-name needs a value" },
        { "--name Bad_Name x", "not a valid ClusterRole name" },
        { "--label novalue x", "%-%-label novalue: want KEY=VALUE" },
        { "--seed /nonexistent/crd.yaml x", "%-%-seed /nonexistent/crd.yaml: cannot read it" },
        { "/nonexistent/dir", "/nonexistent/dir: not a directory" },
        { "a b", "one directory only" },
      }
      for _, c in ipairs(cases) do
        local out, err, rc = rbac(c[1])
        assert.equal(2, rc, c[1] .. ": " .. err)
        assert.equal("", out)
        assert.matches(c[2], err, nil, c[1])
      end
    end)

    it("a directory that does not load (exit 2, naming the file)", function()
      local dir = tree{ ["broken.lua"] = "return luna.controller {", ["broken_test.lua"] = MARKER_TEST }
      local out, err, rc = rbac(dir)
      assert.equal(2, rc)
      assert.equal("", out)
      assert.matches("luna rbac: .*broken%.lua", err)
    end)

    it("no specs to record calls from, unless --static (exit 2)", function()
      local out, err, rc = rbac(tree{ ["sources.lua"] = SOURCES })
      assert.equal(2, rc)
      assert.equal("", out)
      assert.matches("no %*_test%.lua in .*: the calls the controllers make are recorded from their specs %(or pass %-%-static%)", err)
    end)

    it("calls the runtime dropped unread: the recording would be incomplete (exit 1)", function()
      -- 10,050 reads pass the 10,000 calls a runtime keeps between two
      -- env:calls() (test_control.h), and this spec never reads them
      local dir = tree{ ["big.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "big",
  watch = "v1/ConfigMap",
  reconcile = function(req)
    for i = 1, 10050 do luna.get("v1/ConfigMap", req.namespace, "missing") end
  end,
}
]], ["big_test.lua"] = [[
local testing = require "luna.testing"
describe("big", function()
  it("writes", function()
    local env = testing.start{}
    env:create{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "a", namespace = "default" } }
    env:wait_idle(120)
  end)
end)
]] }
      local out, err, rc = rbac(dir)
      assert.equal(1, rc, err)
      assert.equal("", out)
      assert.matches("luna rbac: %d+ calls were dropped before they were recorded", err)
    end)

    it("a failing spec: the recording would be incomplete (exit 1)", function()
      local dir = tree{ ["marker.lua"] = MARKER, ["marker_test.lua"] = MARKER_TEST:gsub('"yes"', '"no"') }
      local out, err, rc = rbac(dir)
      assert.equal(1, rc)
      assert.equal("", out)
      assert.matches("the specs in .* did not all pass, so the calls recorded may be incomplete: run `luna test", err)
    end)
  end)

  it("deploy/rbac-controllers.yaml is what it prints for controllers/ (make deploy-sync)", function()
    local out, err, rc = rbac("--label rbac.luna.dev/aggregate-to-luna=true --check deploy/rbac-controllers.yaml controllers")
    assert.equal(0, rc, out .. err)
  end)
end)
