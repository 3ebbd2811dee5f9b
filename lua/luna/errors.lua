-- luna.errors: predicates over the errors luna's API calls return.
--
-- An API call that fails returns nil, err where err is a table
-- { code = <HTTP status>, reason = <Kubernetes Status reason>, message = ... }
-- (code 0 for failures that never got an HTTP status: reason "Timeout",
-- "ConnectionFailed", ...).  A decoded Kubernetes Status object has the same
-- three fields, so the predicates work on it too.
--
-- The rules are client-go's (k8s.io/apimachinery/pkg/api/errors): a
-- predicate is true when the reason matches, or when the reason is not one
-- of the reasons Kubernetes defines and the HTTP code matches (a proxy's or
-- an aggregated API server's bare 404 is still "not found").  Every
-- predicate accepts any value: nil, strings and tables without these
-- fields give false.

local util = require("luna.util")

local errors = {}

-- metav1.StatusReason values (StatusReasonUnknown, "", is deliberately absent).
local KNOWN_REASONS = {
  Unauthorized = true, Forbidden = true, NotFound = true, AlreadyExists = true,
  Conflict = true, Gone = true, Invalid = true, ServerTimeout = true,
  StoreReadError = true, Timeout = true, Expired = true, TooManyRequests = true,
  BadRequest = true, MethodNotAllowed = true, NotAcceptable = true,
  RequestEntityTooLarge = true, UnsupportedMediaType = true,
  InternalError = true, ServiceUnavailable = true,
}
errors.KNOWN_REASONS = KNOWN_REASONS

-- Reasons luna gives failures that are not API statuses.  Like the known
-- reasons, they never fall back to the HTTP code: an unknown kind is not a
-- missing object, whatever code it carries.
local LUNA_REASONS = {
  NoKindMatch = true, DiscoveryFailed = true, InvalidRequest = true, InvalidObject = true,
  InvalidResponse = true, ConnectionFailed = true, HostNotFound = true, IdleTimeout = true,
  TooBig = true, TLSError = true, ProtocolError = true, Truncated = true, CallbackFailed = true,
}
errors.LUNA_REASONS = LUNA_REASONS

-- The error table luna returns, built in Lua (same fields and string form
-- as the errors the C bindings return: "Reason: message").
errors.mt = {
  __tostring = function(e)
    return string.format("%s: %s", tostring(e.reason or "Unknown"), tostring(e.message or ""))
  end,
}

-- errors.new(reason, message [, code]) → an error table (code defaults to 0).
function errors.new(reason, message, code)
  util.check_string(reason, "errors.new: reason")
  if message ~= nil and type(message) ~= "string" then
    util.raise("errors.new: message must be a string, got %s", type(message))
  end
  if code ~= nil and type(code) ~= "number" then
    util.raise("errors.new: code must be a number, got %s", type(code))
  end
  return setmetatable({ code = code or 0, reason = reason, message = message or "" }, errors.mt)
end

-- err.reason when err is an error table with a string reason, else nil.
function errors.reason(err)
  if type(err) ~= "table" then return nil end
  local r = rawget(err, "reason")
  if type(r) ~= "string" then return nil end
  return r
end

-- err.code when err is an error table with a numeric code, else nil.
function errors.code(err)
  if type(err) ~= "table" then return nil end
  local c = rawget(err, "code")
  if type(c) ~= "number" then return nil end
  return c
end

-- reason matches, or the reason is unknown and the code matches.
local function predicate(reason, code)
  return function(err)
    local r = errors.reason(err)
    if r == reason then return true end
    if code and (r == nil or not (KNOWN_REASONS[r] or LUNA_REASONS[r])) then
      return errors.code(err) == code
    end
    return false
  end
end

errors.is_not_found = predicate("NotFound", 404)
errors.is_already_exists = predicate("AlreadyExists", nil)
errors.is_conflict = predicate("Conflict", 409)
errors.is_gone = predicate("Gone", 410)
errors.is_expired = predicate("Expired", nil)
errors.is_invalid = predicate("Invalid", 422)
errors.is_bad_request = predicate("BadRequest", 400)
errors.is_unauthorized = predicate("Unauthorized", 401)
errors.is_forbidden = predicate("Forbidden", 403)
errors.is_method_not_supported = predicate("MethodNotAllowed", 405)
errors.is_not_acceptable = predicate("NotAcceptable", 406)
errors.is_request_entity_too_large = predicate("RequestEntityTooLarge", 413)
errors.is_unsupported_media_type = predicate("UnsupportedMediaType", 415)
errors.is_internal_error = predicate("InternalError", 500)
errors.is_service_unavailable = predicate("ServiceUnavailable", 503)
errors.is_server_timeout = predicate("ServerTimeout", nil)

-- NoKindMatch: the server does not serve the kind asked for (its group or
-- version is unknown, or it has no such kind: a typo, or a CRD not
-- installed), as client-go's meta.IsNoMatchError.  Not a NotFound: a
-- delete of a kind that does not exist has not "already happened".
function errors.is_no_kind_match(err)
  return errors.reason(err) == "NoKindMatch"
end

-- Timeout: a 504 from the server, or a request luna gave up on (code 0).
errors.is_timeout = predicate("Timeout", 504)

-- TooManyRequests: reason, or a 429 whatever the reason (client-go does the
-- same: a 429 always means "slow down").
function errors.is_too_many_requests(err)
  return errors.reason(err) == "TooManyRequests" or errors.code(err) == 429
end

-- Any 5xx, or a server-side failure reason when there is no HTTP code.
local SERVER_REASONS = { InternalError = true, ServiceUnavailable = true, ServerTimeout = true }
function errors.is_server_error(err)
  local c = errors.code(err)
  if c and c >= 500 and c <= 599 then return true end
  return (c == nil or c == 0) and SERVER_REASONS[errors.reason(err)] == true
end

-- A truthy value that is an error table (has a string reason).
function errors.is_error(err)
  return errors.reason(err) ~= nil
end

return errors
