-- `kubectl api-resources` (and `-o wide`: verbs and categories) print the
-- same built-in resources for the dev server as for the pinned
-- kube-apiserver (issue #29).  It needs both servers, so it runs under
-- `make test-kube` (the cluster in KUBECONFIG, a dev server beside it); under
-- `make test` it reports pending, saying so.
local client = require("support.apiserver_client")
local helpers = require("helpers")

-- Built-in groups: the core group, the *.k8s.io groups and the short
-- names kube gives its oldest groups; what other specs leave behind in
-- the cluster (CRDs of test groups) is not compared.
local SHORT_GROUPS = { apps = true, batch = true, autoscaling = true, policy = true }
local function builtin(api_version)
  local group = api_version:match("^(.*)/[^/]+$")
  return group == nil or SHORT_GROUPS[group] or group:match("%.k8s%.io$") ~= nil
end

-- The lines of a table kubectl printed whose APIVERSION column names a
-- built-in group, with runs of spaces made one (column widths differ
-- with the rows).
local function rows(out)
  local lines = {}
  local header = true
  for line in out:gmatch("[^\n]+") do
    if header then
      header = false
    else
      local cols = {}
      for c in line:gmatch("%S+") do cols[#cols + 1] = c end
      -- NAME [SHORTNAMES] APIVERSION NAMESPACED KIND ...: the apiVersion is
      -- the column before the true/false one
      for i = 2, #cols do
        if cols[i] == "true" or cols[i] == "false" then
          if builtin(cols[i - 1]) then lines[#lines + 1] = table.concat(cols, " ") end
          break
        end
      end
    end
  end
  return lines
end

describe("kubectl api-resources, dev server beside kube-apiserver", function()
  if not client.real() then
    it("needs a real control plane (make test-kube)", function()
      pending("runs under make test-kube: compares the dev server with kube-apiserver")
    end)
    return
  end
  local dev, dir
  setup(function()
    dev = client.start({ dev = true, no_namespace = true })
    dir = helpers.tmpdir()
    helpers.write_file(dir .. "/kubeconfig", table.concat({
      "apiVersion: v1", "kind: Config", "clusters:", "- name: dev", "  cluster:",
      "    server: " .. dev.url, "contexts:", "- name: dev", "  context:", "    cluster: dev",
      "    user: dev", "current-context: dev", "users:", "- name: dev", "  user: {}", "" }, "\n"))
  end)
  teardown(function() dev:stop() end)

  for _, args in ipairs({ "api-resources", "api-resources -o wide" }) do
    it("prints the same `kubectl " .. args .. "`", function()
      local real, rc = helpers.run("kubectl --cache-dir " .. dir .. "/real-cache " .. args)
      assert.equal(0, rc, real)
      local mine
      mine, rc = helpers.run("KUBECONFIG=" .. dir .. "/kubeconfig kubectl --cache-dir " .. dir ..
                             "/dev-cache " .. args)
      assert.equal(0, rc, mine)
      local want, got = rows(real), rows(mine)
      assert.is_true(#want > 60, "kube-apiserver printed only " .. #want .. " built-in rows")
      assert.same(want, got)
    end)
  end
end)
