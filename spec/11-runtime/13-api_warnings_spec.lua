-- The API server's warnings (`Warning: 299 - "..."` response headers) on a
-- reconcile's calls: a merge patch with a misspelled field ("dta") is
-- answered 200 with `unknown field "dta"` and the field dropped.  luna
-- logs each warning with the controller, key and the call's line, counts
-- it in luna_api_warnings_total{controller}, and the script reads the last
-- call's with luna.last_warnings().
local helpers = require("helpers")
local exposition = require("support.exposition")
local rt = require("11-runtime.support")

local TYPO = [[
local luna = require "luna"
return luna.controller {
  name = "typo",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  reconcile = function(req)
    local before = luna.last_warnings()
    local obj, err = luna.patch("v1/ConfigMap", req.namespace, req.name, { dta = { greeting = "hi" } })
    local after_patch = luna.last_warnings()
    local _, gerr = luna.get("v1/ConfigMap", req.namespace, req.name)
    luna.log.info("patched", { ok = obj ~= nil and not err and not gerr, before = #before,
      warnings = table.concat(after_patch, "|"), after_get = #luna.last_warnings() })
  end,
}
]]

describe("API warnings", function()
  local env, token
  setup(function()
    token = rt.token()
    env = rt.start{ args = { "--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false" },
      sources = { ["typo.lua"] = rt.source(TYPO, { TOKEN = token }) } }
  end)
  teardown(function() env:stop() end)

  it("logs, counts and hands the script the warnings of a patch with an unknown field", function()
    rt.cm(env, "greet", { a = "1" }, { [rt.LABEL] = token })
    local key = env.srv.ns .. "/greet"
    local done = rt.wait(env, rt.msg("patched", { key = key }), 20, "the reconcile")
    assert.equal(true, done.ok)
    assert.equal(0, tonumber(done.before))
    assert.equal('unknown field "dta"', done.warnings)
    assert.equal(0, tonumber(done.after_get), "the get's answer had no warning")

    local w = rt.find(env, rt.msg("api warning", { key = key }))
    assert.is_table(w, "no api warning line")
    assert.equal("typo", w.controller)
    assert.equal("warn", w.level)
    assert.equal('unknown field "dta"', w.warning)
    assert.matches("^luna%.patch at [^ ]*typo%.lua:" .. rt.line_of(TYPO, "luna.patch(") .. "$", w.where)
    assert.is_string(w.reconcile_id)

    local rec = rt.wait(env, rt.msg("metrics server listening"), 5, "the metrics server")
    local out = helpers.run("env -u LD_PRELOAD curl -s -S --max-time 10 http://" .. rec.address .. "/metrics")
    local m = exposition.parse(out)
    assert.equal(1, exposition.get(m, "luna_api_warnings_total", { controller = "typo" }))
    -- the field was dropped
    local now = env:get(env.srv:ns_path("configmaps", "greet"))
    assert.is_nil(now.dta)
  end)
end)
