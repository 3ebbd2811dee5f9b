-- The shipped controllers' own specs (controllers/*_test.lua) through
-- `luna test controllers`, as an author runs them: every spec there passes
-- on the real runtime against its embedded dev server; and under
-- `make test-kube`, through `luna test --kube controllers`, against the
-- real control plane too (each test in a namespace of its own,
-- docs/testing.md "Against a real control plane").
local helpers = require("helpers")
local client = require("support.apiserver_client")

describe("luna test controllers", function()
  it("passes every spec next to the shipped controllers", function()
    local cmd = helpers.luna .. " test " .. (client.real() and "--kube " or "") .. "controllers"
    local out, rc = helpers.run(cmd)
    assert.equal(0, rc, out)
    local passed, failed, skipped = out:match("(%d+) passed, (%d+) failed, (%d+) pending")
    assert.equal("0", failed, out)
    -- under --kube a case may be skipped, with its reason, never silently
    assert.equal(18, tonumber(passed) + tonumber(skipped), out)
    if client.real() then
      assert.is_true(tonumber(passed) >= 17, out)
      assert.matches("luna test %-%-kube: ", out)
      for reason in out:gmatch("skip  [^\n]*%((.-)%)\n") do assert.matches("^dev server only: ", reason) end
    else
      assert.equal("0", skipped, out)
    end
    for _, file in ipairs { "configmap%-mirror_test", "secret%-checksum_test", "widget_test", "widget%-conversion_test" } do
      assert.matches("controllers/" .. file .. "%.lua", out)
    end
  end)
end)
