---@meta luna.time
-- luna.time: metav1.Time and MicroTime (lua/luna/time.md).  `now` is nil
-- (the wall clock), seconds since the epoch, or an RFC 3339 string.
local time = {}

---Seconds since the epoch (with a fraction).
---@return number
function time.now() end

---RFC 3339 text → seconds since the epoch, or nil, message.
---@param s string
---@return number|nil
---@return string|nil err
function time.parse(s) end

---now → seconds (raises on a wrong type or malformed text).
---@param now? number|string
---@return number
function time.resolve(now) end

---metav1.Time: "2026-11-21T06:00:00Z".
---@param now? number|string
---@return string
function time.format(now) end

---Whole microseconds since the epoch.
---@param now? number|string
---@return number
function time.micros(now) end

---metav1.MicroTime: "2026-11-21T06:00:00.000000Z".
---@param now? number|string
---@return string
function time.format_micro(now) end

return time
