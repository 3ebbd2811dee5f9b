---@meta luna.conditions
-- luna.conditions: metav1.Condition in status.conditions (lua/luna/conditions.md).
local conditions = {}

---A condition to set.
---@class luna.Condition
---@field type string
---@field status "True"|"False"|"Unknown"
---@field reason string
---@field message? string
---@field observed_generation? integer

---Sets condition c; lastTransitionTime moves only when the status changes.
---now: nil, seconds or RFC 3339.  True when anything changed.
---@param obj luna.Object
---@param c luna.Condition
---@param now? number|string
---@return boolean
function conditions.set(obj, c, now) end

---The condition of type t, or nil.
---@param obj luna.Object
---@param t string
---@return table|nil
function conditions.get(obj, t) end

---Condition t has status "True".
---@param obj luna.Object
---@param t string
---@return boolean
function conditions.is_true(obj, t) end

---Condition t has status "False".
---@param obj luna.Object
---@param t string
---@return boolean
function conditions.is_false(obj, t) end

---Condition t is absent or "Unknown".
---@param obj luna.Object
---@param t string
---@return boolean
function conditions.is_unknown(obj, t) end

---Removes condition t; true when it was present.
---@param obj luna.Object
---@param t string
---@return boolean
function conditions.remove(obj, t) end

return conditions
