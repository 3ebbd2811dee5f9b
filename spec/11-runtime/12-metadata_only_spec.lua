-- A metadata-only `owns` source: a change to an owned Secret (its data
-- included) reconciles the owner, and the Secrets the lister returns are
-- apiVersion, kind and metadata only.
local rt = require("11-runtime.support")

local OWNER = [[
local luna = require "luna"
return luna.controller {
  name = "md-owns",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  owns = { { "v1/Secret", labels = { ["luna.dev/spec"] = "@TOKEN@" }, metadata_only = true } },
  reconcile = function(req)
    local seen, with_data = {}, 0
    for _, s in ipairs(luna.cache("v1/Secret"):list{ namespace = req.namespace }) do
      seen[#seen + 1] = s.apiVersion .. "/" .. s.kind .. "/" .. s.metadata.name .. "@" ..
        s.metadata.resourceVersion
      if s.data or s.type then with_data = with_data + 1 end
    end
    table.sort(seen)
    luna.log.info("secrets seen", { key = req.namespace .. "/" .. req.name,
      secrets = table.concat(seen, ","), with_data = with_data })
  end,
}
]]

describe("metadata-only owns #integration", function()
  local env, token, ns
  setup(function()
    token = rt.token()
    env = rt.start{ sources = { ["md-owns.lua"] = rt.source(OWNER, { TOKEN = token }) } }
    ns = env.srv.ns
  end)
  teardown(function() env:stop() end)

  it("reconciles the owner on changes to its child and lists the child's metadata only", function()
    local label = { [rt.LABEL] = token }
    local owner = rt.cm(env, "md-owner", {}, label)
    local done = rt.msg("reconcile done", { controller = "md-owns", key = ns .. "/md-owner" })
    rt.wait(env, done, 15, "owner reconciled")
    local child = rt.create(env, env.srv:ns_path("secrets"), { apiVersion = "v1", kind = "Secret",
      metadata = { name = "md-child", labels = label, ownerReferences = { { apiVersion = "v1",
        kind = "ConfigMap", name = "md-owner", uid = owner.metadata.uid, controller = true } } },
      data = { big = string.rep("QUFB", 1024) } })
    rt.wait(env, rt.msg("secrets seen", { key = ns .. "/md-owner",
      secrets = "v1/Secret/md-child@" .. child.metadata.resourceVersion, with_data = 0 }), 15,
      "the child's metadata in the lister")

    -- a change of the data alone reaches the owner too (a new resourceVersion)
    child.data = { big = "Y2hhbmdlZA==" }
    local code, updated = env.srv:request("PUT", env.srv:ns_path("secrets", "md-child"), child)
    assert.equal(200, code)
    rt.wait(env, rt.msg("secrets seen", { key = ns .. "/md-owner",
      secrets = "v1/Secret/md-child@" .. updated.metadata.resourceVersion, with_data = 0 }), 15,
      "the update reconciles the owner")
    assert.is_nil(rt.find(env, function(r) return r.msg == "secrets seen" and r.with_data ~= 0 end))
  end)
end)
