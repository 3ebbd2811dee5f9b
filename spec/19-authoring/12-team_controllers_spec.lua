-- docs/team-controllers.md's two controllers, run as the page shows them
-- (issue 30: "both kinds of controller must be writable, testable and
-- deployable from the docs alone"): every file is on the page, `luna test`
-- passes each directory's spec on the dev server, and `luna rbac` gives the
-- role each needs.  The real control plane's half (`luna test --kube`, and
-- each controller running as a ServiceAccount with only that role) is
-- spec/16-deploy/08-team_controllers_kube_spec.lua.
local helpers = require("helpers")
local examples = require("support.doc_examples")

describe("the team controllers of docs/team-controllers.md", function()
  local dir

  before_each(function() dir = examples.extract() end)

  it("shows every file of both, each once", function()
    local files = examples.files()
    local want, n = {}, 0
    for sub, names in pairs(examples.FILES) do
      for _, name in ipairs(names) do
        want[sub .. "/" .. name] = true
        n = n + 1
        assert.is_not_nil(files[sub .. "/" .. name], sub .. "/" .. name .. " is not on the page")
      end
    end
    for path in pairs(files) do assert.is_true(want[path], path .. " is on the page but not run") end
  end)

  for _, case in ipairs {
    { sub = "onboarding", tests = {
      "onboard gives a team's namespace its quota, limits and role binding, owned by it",
      "onboard puts back what is edited or deleted by hand, and follows the size",
      "onboard refuses an unknown size with a Warning and changes nothing",
      "onboard offboards a namespace whose team label is taken away" } },
    { sub = "backup", tests = {
      "backup runs a Job at each time of the schedule, owned by the Backup",
      "backup keeps the newest `keep` Jobs",
      "backup reports a bad schedule and runs nothing until it is fixed",
      "backup deletes its Jobs before the Backup goes, even when told to orphan them" } },
  } do
    it("passes luna test " .. case.sub .. " on the dev server", function()
      local out, rc = helpers.run("cd '" .. dir .. "' && " .. examples.luna() .. " test " .. case.sub .. " 2>&1")
      assert.equal(0, rc, out)
      for _, name in ipairs(case.tests) do
        assert.is_truthy(out:find("ok    " .. name, 1, true), "not passed: " .. name .. "\n" .. out)
      end
      assert.matches(#case.tests .. " passed, 0 failed, 0 pending", out)
    end)
  end

  it("gets from luna rbac the role each needs", function()
    local function rules(sub)
      local out, rc = helpers.run("cd '" .. dir .. "' && " .. examples.luna() .. " rbac --name " .. sub .. " " .. sub)
      assert.equal(0, rc, out)
      -- { ["group/resource"] = "verb,verb" } from the YAML's rules
      local got = {}
      for block in ((out:match("\nrules:\n(.*)$") or "") .. "\n-"):gmatch("%- apiGroups:(.-)\n%f[%-#]") do
        local group = block:match('%["?([^%]"]*)"?%]')
        local resource = block:match('resources: %["?([^%]"]*)"?%]')
        local verbs = block:match("verbs: %[([^%]]*)%]")
        if resource then got[(group or "") .. "/" .. resource] = verbs:gsub("[\" ]", "") end
      end
      return got, out
    end
    local got, out = rules("onboarding")
    for _, r in ipairs { "/resourcequotas", "/limitranges", "rbac.authorization.k8s.io/rolebindings" } do
      assert.is_truthy(got[r], r .. " missing:\n" .. out)
      for _, verb in ipairs { "list", "watch", "create", "patch", "delete" } do
        assert.is_truthy(("," .. got[r] .. ","):find("," .. verb .. ",", 1, true), r .. " lacks " .. verb .. ":\n" .. out)
      end
    end
    assert.is_truthy(got["/namespaces"], out)
    got, out = rules("backup")
    assert.is_truthy(got["example.com/backups"] and got["example.com/backups"]:find("patch"), out)
    assert.is_truthy(got["example.com/backups/status"] and got["example.com/backups/status"]:find("patch"), out)
    for _, verb in ipairs { "list", "watch", "create", "delete" } do
      assert.is_truthy(("," .. (got["batch/jobs"] or "") .. ","):find("," .. verb .. ",", 1, true),
        "batch/jobs lacks " .. verb .. ":\n" .. out)
    end
  end)
end)
