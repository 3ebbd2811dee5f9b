-- luna.errors: the is_* predicates over real Kubernetes Status reasons and
-- codes, unknown reasons falling back to the HTTP code, and non-errors.
local core = require("luna.core")
local errors = require("luna.errors")
local S = require("10-lua-helpers.support")

local PREDICATES = {
  "is_not_found", "is_already_exists", "is_conflict", "is_gone", "is_expired",
  "is_invalid", "is_bad_request", "is_unauthorized", "is_forbidden",
  "is_method_not_supported", "is_not_acceptable", "is_request_entity_too_large",
  "is_unsupported_media_type", "is_internal_error", "is_service_unavailable",
  "is_server_timeout", "is_timeout", "is_too_many_requests", "is_server_error",
  "is_no_kind_match",
}

-- reason, code, the predicates that hold (every other one must not).
-- The reason/code pairs are what kube-apiserver sends (apimachinery's
-- errors.New* constructors), then luna's own client-side failures, then
-- statuses whose reason Kubernetes does not define.
local CASES = {
  { "NotFound", 404, { "is_not_found" } },
  { "AlreadyExists", 409, { "is_already_exists" } },
  { "Conflict", 409, { "is_conflict" } },
  { "Gone", 410, { "is_gone" } },
  { "Expired", 410, { "is_expired" } },
  { "Invalid", 422, { "is_invalid" } },
  { "BadRequest", 400, { "is_bad_request" } },
  { "Unauthorized", 401, { "is_unauthorized" } },
  { "Forbidden", 403, { "is_forbidden" } },
  { "MethodNotAllowed", 405, { "is_method_not_supported" } },
  { "NotAcceptable", 406, { "is_not_acceptable" } },
  { "RequestEntityTooLarge", 413, { "is_request_entity_too_large" } },
  { "UnsupportedMediaType", 415, { "is_unsupported_media_type" } },
  { "TooManyRequests", 429, { "is_too_many_requests" } },
  { "InternalError", 500, { "is_internal_error", "is_server_error" } },
  { "ServerTimeout", 500, { "is_server_timeout", "is_server_error" } },
  { "ServiceUnavailable", 503, { "is_service_unavailable", "is_server_error" } },
  { "Timeout", 504, { "is_timeout", "is_server_error" } },
  { "StoreReadError", 500, { "is_server_error" } },
  -- luna's client side: no HTTP status
  { "Timeout", 0, { "is_timeout" } },
  { "ConnectionFailed", 0, {} },
  { "InvalidJSON", 0, {} },
  { "ServiceUnavailable", 0, { "is_service_unavailable", "is_server_error" } },
  -- the server does not serve the kind: never a missing object, whatever
  -- the code (a 404 from discovery must not read as NotFound)
  { "NoKindMatch", 0, { "is_no_kind_match" } },
  { "NoKindMatch", 404, { "is_no_kind_match" } },
  { "DiscoveryFailed", 404, {} },
  { "ConnectionFailed", 404, {} },
  -- reasons Kubernetes does not define: the code decides
  { "", 404, { "is_not_found" } },
  { "Unknown", 409, { "is_conflict" } },
  { "", 410, { "is_gone" } },
  { "", 422, { "is_invalid" } },
  { "", 400, { "is_bad_request" } },
  { "", 401, { "is_unauthorized" } },
  { "", 403, { "is_forbidden" } },
  { "", 405, { "is_method_not_supported" } },
  { "", 406, { "is_not_acceptable" } },
  { "", 413, { "is_request_entity_too_large" } },
  { "", 415, { "is_unsupported_media_type" } },
  { "", 429, { "is_too_many_requests" } },
  { "", 500, { "is_internal_error", "is_server_error" } },
  { "", 502, { "is_server_error" } },
  { "", 503, { "is_service_unavailable", "is_server_error" } },
  { "", 504, { "is_timeout", "is_server_error" } },
  { "SomethingNew", 404, { "is_not_found" } },
  -- a known reason with a surprising code: the reason wins
  { "Forbidden", 404, { "is_forbidden" } },
  -- 429 always means slow down
  { "Forbidden", 429, { "is_forbidden", "is_too_many_requests" } },
}

describe("luna.errors predicates", function()
  for _, case in ipairs(CASES) do
    local reason, code, holds = case[1], case[2], case[3]
    it(string.format("reason %q code %d → {%s}", reason, code, table.concat(holds, ", ")), function()
      local set = {}
      for _, p in ipairs(holds) do set[p] = true end
      local err = errors.new(reason ~= "" and reason or "X", "m", code)
      err.reason = reason
      for _, p in ipairs(PREDICATES) do
        assert.equal(set[p] == true, errors[p](err), p)
      end
    end)
  end

  it("treats a missing reason like an unknown one", function()
    assert.is_true(errors.is_not_found({ code = 404 }))
    assert.is_true(errors.is_conflict({ code = 409, message = "x" }))
    assert.is_false(errors.is_already_exists({ code = 409 }))
  end)

  it("works on a decoded Kubernetes Status object", function()
    local st = S.decode([[{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
      "message":"configmaps \"x\" not found","reason":"NotFound",
      "details":{"name":"x","kind":"configmaps"},"code":404}]])
    assert.is_true(errors.is_not_found(st))
    assert.is_false(errors.is_conflict(st))
    assert.equal("NotFound", errors.reason(st))
    assert.equal(404, errors.code(st))
  end)

  it("works on the errors the C bindings return", function()
    local v, err = core.json.decode("{")
    assert.is_nil(v)
    assert.is_true(errors.is_error(err))
    assert.equal("InvalidJSON", errors.reason(err))
    for _, p in ipairs(PREDICATES) do assert.is_false(errors[p](err), p) end
  end)

  it("gives false for nil and for values that are not error tables", function()
    local values = { nil, false, true, 0, 404, "NotFound", "Conflict: x", {},
                     { reason = 404 }, { code = "404" }, { reason = {} }, print,
                     core.json.null, coroutine.create(print) }
    for i = 1, 14 do
      local v = values[i]
      for _, p in ipairs(PREDICATES) do
        assert.is_false(errors[p](v), p .. " of " .. tostring(v))
      end
      assert.is_false(errors.is_error(v))
    end
    assert.is_nil(errors.reason(nil))
    assert.is_nil(errors.reason("NotFound"))
    assert.is_nil(errors.reason({ code = 404 }))
    assert.is_nil(errors.code(nil))
    assert.is_nil(errors.code({ code = "404" }))
  end)

  it("reads raw fields, not __index", function()
    local fake = setmetatable({}, { __index = function() return "NotFound" end })
    assert.is_false(errors.is_not_found(fake))
  end)
end)

describe("luna.errors.new", function()
  it("builds an error with the C errors' fields and string form", function()
    local err = errors.new("AlreadyOwned", "x is owned", 0)
    assert.same({ code = 0, reason = "AlreadyOwned", message = "x is owned" },
                { code = err.code, reason = err.reason, message = err.message })
    assert.equal("AlreadyOwned: x is owned", tostring(err))
    local _, c_err = core.json.decode("[")
    assert.matches("^InvalidJSON: ", tostring(c_err))
  end)

  it("is the one error type: C errors, API errors and errors.new share a metatable", function()
    local _, c_err = core.json.decode("[")
    local mt = getmetatable(c_err)
    assert.is_table(mt)
    assert.equal(mt, getmetatable(errors.new("Oops", "m", 1)))
    assert.equal(mt, getmetatable(core.error("Oops", "m", 1)))
    -- an error luna.get builds itself (a namespaced kind without a
    -- namespace), with a stand-in for the host's runtime table
    local api = require("luna.api")
    local saved = core.runtime
    core.runtime = {
      current = function() return { key = "ns/x" } end,
      resolve = function()
        return { group = "", version = "v1", resource = "configmaps", namespaced = true }
      end,
    }
    -- on a coroutine, as reconcile runs: luna.get refuses to start a call
    -- where it could not wait
    local ok, obj, err = coroutine.resume(coroutine.create(api.get), "v1/ConfigMap", "x")
    core.runtime = saved
    assert.is_true(ok, tostring(obj))
    assert.is_nil(obj)
    assert.equal("BadRequest", err.reason)
    assert.equal(400, err.code)
    assert.equal(mt, getmetatable(err))
    assert.equal("BadRequest: v1/ConfigMap is namespaced: a namespace is required", tostring(err))
  end)

  it("takes (reason, message, code) in C and Lua alike", function()
    local a, b = errors.new("NotFound", "x missing", 404), core.error("NotFound", "x missing", 404)
    for _, e in ipairs({ a, b }) do
      assert.same({ "NotFound", "x missing", 404 }, { e.reason, e.message, e.code })
      assert.equal("NotFound: x missing", tostring(e))
    end
  end)

  it("defaults code to 0 and message to empty", function()
    local err = errors.new("Oops")
    assert.equal(0, err.code)
    assert.equal("", err.message)
    assert.equal("Oops: ", tostring(err))
  end)

  it("raises on misuse", function()
    S.raises("reason must be a non-empty string", function() errors.new() end)
    S.raises("reason must be a non-empty string", function() errors.new("") end)
    S.raises("message must be a string", function() errors.new("R", 5) end)
    S.raises("code must be a number", function() errors.new("R", "m", "404") end)
  end)
end)
