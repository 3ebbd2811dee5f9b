---@meta luna.errors
-- LuaLS definitions of luna's script API (`luna stubs DIR` writes these
-- files; spec/19-authoring/02-stubs_spec.lua checks them against the
-- runtime).  luna.errors: lua/luna/errors.md.

---luna's one error type: what a failed API call returns as its second value.
---`tostring(err)` is `"Reason: message"`.
---@class luna.Error
---@field reason string Kubernetes Status reason (NotFound, Conflict, ...) or luna's (Timeout, ConnectionFailed, NoKindMatch, ...)
---@field message string
---@field code integer HTTP status; 0 when no response arrived
---@field where? string the failed call and its script line ("luna.get at file:line")

local errors = {}

---The metav1.StatusReason values (reason → true).
---@type table<string, boolean>
errors.KNOWN_REASONS = {}

---Reasons luna gives failures that are not API statuses (reason → true).
---@type table<string, boolean>
errors.LUNA_REASONS = {}

---A new error (message defaults to the reason, code to 0).
---@param reason string
---@param message? string
---@param code? integer
---@return luna.Error
function errors.new(reason, message, code) end

---The error's reason, or nil.
---@param err any
---@return string|nil
function errors.reason(err) end

---The error's HTTP code, or nil.
---@param err any
---@return integer|nil
function errors.code(err) end

---True for any luna error value.
---@param err any
---@return boolean
function errors.is_error(err) end

---True for a 5xx server error.
---@param err any
---@return boolean
function errors.is_server_error(err) end

---client-go's IsAlreadyExists: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_already_exists(err) end

---client-go's IsBadRequest: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_bad_request(err) end

---client-go's IsConflict: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_conflict(err) end

---client-go's IsExpired: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_expired(err) end

---client-go's IsForbidden: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_forbidden(err) end

---client-go's IsGone: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_gone(err) end

---client-go's IsInternalError: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_internal_error(err) end

---client-go's IsInvalid: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_invalid(err) end

---client-go's IsMethodNotSupported: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_method_not_supported(err) end

---client-go's IsNoKindMatch: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_no_kind_match(err) end

---client-go's IsNotAcceptable: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_not_acceptable(err) end

---client-go's IsNotFound: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_not_found(err) end

---client-go's IsRequestEntityTooLarge: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_request_entity_too_large(err) end

---client-go's IsServerTimeout: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_server_timeout(err) end

---client-go's IsServiceUnavailable: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_service_unavailable(err) end

---client-go's IsTimeout: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_timeout(err) end

---client-go's IsTooManyRequests: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_too_many_requests(err) end

---client-go's IsUnauthorized: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_unauthorized(err) end

---client-go's IsUnsupportedMediaType: the reason matches, or an unknown reason with the matching HTTP code.
---@param err any
---@return boolean
function errors.is_unsupported_media_type(err) end

return errors
