-- End to end on a laptop: `luna webhooks manifest --url … --ca-bundle …`
-- registers luna's webhooks with the dev server `luna run --dev-server`
-- embeds, which then calls them as kube-apiserver does (docs/dev-server.md,
-- "Admission webhooks"): kubectl's writes come back denied with the
-- webhook's message, warned, or stored with the mutating webhook's patch
-- applied.
local helpers = require("helpers")
local S = require("21-webhooks.support")

local HOOKS = [[
local luna = require "luna"
local RULES = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "configmaps" },
                  operations = { "CREATE", "UPDATE" }, scope = "Namespaced" } }
local ONLY = { match_labels = { ["luna-spec"] = "webhooks" } }
return luna.webhooks {
  luna.webhook {
    name = "cm.validate.example.com",
    rules = RULES,
    object_selector = ONLY,
    validate = function(req)
      if req.object.data and req.object.data.bad then return false, "bad data in " .. req.name end
      return { warnings = { "validated " .. req.name } }
    end,
  },
  luna.webhook {
    name = "cm.mutate.example.com",
    rules = RULES,
    object_selector = ONLY,
    mutate = function(req, obj)
      obj.data = obj.data or {}
      obj.data["set.by"] = "luna"
      obj.data.drop = nil
      obj.metadata.labels["example.com/injected"] = "yes"
    end,
  },
}
]]

describe("luna's webhooks behind the embedded dev server", function()
  local proc, kubeconfig, work

  local function kubectl(args, stdin_file)
    return helpers.run(("env -u LD_PRELOAD kubectl --kubeconfig %s %s%s 2>&1")
      :format(kubeconfig, args, stdin_file and (" -f " .. stdin_file) or ""))
  end

  setup(function()
    local dir, certs = helpers.tmpdir(), helpers.tmpdir()
    work = helpers.tmpdir()
    local ca = S.make_cert(work, "srv")
    assert(os.execute(("cp %s/srv.crt %s/tls.crt && cp %s/srv.key %s/tls.key")
      :format(work, certs, work, certs)))
    helpers.write_file(dir .. "/hooks.lua", HOOKS)
    proc = helpers.spawn({ helpers.luna, "run", "--dev-server", "--webhook-cert-path", certs, dir })
    local _
    _, kubeconfig = proc:expect("dev server listening url=%S+ kubeconfig=(%S+)", 20)
    local _, addr = proc:expect("webhook server listening address=(%S+)", 20)
    local out, rc = helpers.run(("%s webhooks manifest --url https://%s --ca-bundle %s %s > %s/hooks.yaml")
      :format(helpers.luna, addr, ca, dir, work))
    assert.equal(0, rc, out)
    out = kubectl("create", work .. "/hooks.yaml")
    assert.truthy(out:find("validatingwebhookconfiguration.admissionregistration.k8s.io/luna created", 1, true), out)
    assert.truthy(out:find("mutatingwebhookconfiguration.admissionregistration.k8s.io/luna created", 1, true), out)
  end)

  teardown(function()
    if proc then proc:stop() end
  end)

  local function configmap(name, data)
    local lines = { "apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: " .. name,
                    "  namespace: default", "  labels:", "    luna-spec: webhooks", "data:" }
    for k, v in pairs(data) do lines[#lines + 1] = ("  %s: %q"):format(k, v) end
    local file = work .. "/" .. name .. ".yaml"
    helpers.write_file(file, table.concat(lines, "\n") .. "\n")
    return file
  end

  it("refuses what the validating webhook denies, with its message", function()
    local out = kubectl("create", configmap("nope", { bad = "1" }))
    assert.truthy(out:find('admission webhook "cm.validate.example.com" denied the request: bad data in nope', 1, true), out)
    out = kubectl("get configmap nope -n default")
    assert.truthy(out:find("NotFound", 1, true) or out:find("not found", 1, true), out)
  end)

  it("stores the mutated object and shows the warnings", function()
    local out = kubectl("create", configmap("fine", { keep = "v", drop = "x" }))
    assert.truthy(out:find("configmap/fine created", 1, true), out)
    assert.truthy(out:find("Warning: validated fine", 1, true), out)
    local json = kubectl("get configmap fine -n default -o json")
    local cm = require("luna.core").json.decode(json)
    assert.is_table(cm, json)
    assert.equal("luna", cm.data["set.by"])
    assert.equal("v", cm.data.keep)
    assert.is_nil(cm.data.drop)
    assert.equal("yes", cm.metadata.labels["example.com/injected"])
  end)
end)
