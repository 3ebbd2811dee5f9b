-- Warning response headers as the API client reads them (client/warning.h):
-- the parser's cases, malformed values included, in a C fixture run under
-- LeakSanitizer.  End to end (a reconcile's call): spec/11-runtime/13-api_warnings_spec.lua.
local helpers = require("helpers")

describe("Warning header parsing", function()
  it("reads 299 warnings as client-go does and stops at a malformed one", function()
    local out, rc = helpers.run_leak_checked(helpers.fixtures .. "/warning_c")
    assert.equal(0, rc, out)
    assert.matches("warning_c: all ok", out)
    assert.not_matches("LeakSanitizer", out)
  end)
end)
