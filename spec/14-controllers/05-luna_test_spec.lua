-- The shipped controllers' own specs (controllers/*_test.lua) through
-- `luna test controllers`, as an author runs them: every spec there passes
-- on the real runtime (the files 01-03 here run the same controllers
-- against the real control plane too, which `luna test` does not).
local helpers = require("helpers")
local client = require("support.apiserver_client")

describe("luna test controllers", function()
  it("passes every spec next to the shipped controllers #devonly", function()
    if client.real() then
      return pending(client.DEV_ONLY .. "luna test runs its own embedded dev server")
    end
    local out, rc = helpers.run(helpers.luna .. " test controllers")
    assert.equal(0, rc, out)
    local passed, failed = out:match("(%d+) passed, (%d+) failed")
    assert.equal("0", failed, out)
    assert.is_true(tonumber(passed) >= 12, out)
    for _, file in ipairs { "configmap%-mirror_test", "secret%-checksum_test", "widget_test" } do
      assert.matches("controllers/" .. file .. "%.lua", out)
    end
  end)
end)
