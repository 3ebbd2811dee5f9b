---@meta luna.finalizers
-- luna.finalizers: the deletion pattern (lua/luna/finalizers.md).
local finalizers = {}

---What finalizers.handle decided.
---@class luna.FinalizerAction
---@field state "add"|"ready"|"remove"|"pending"|"error"|"deleting"
---@field add? boolean the finalizer was added to obj: write `patch`
---@field remove? boolean cleanup finished and the finalizer was removed: write `patch`
---@field cleanup_done? boolean
---@field deleting? boolean obj is being deleted
---@field pending? boolean cleanup not finished: look again later
---@field error? luna.Error|string cleanup failed
---@field patch? table a merge patch of metadata.finalizers (with resourceVersion)

---obj lists finalizer name.
---@param obj luna.Object
---@param name string
---@return boolean
function finalizers.has(obj, name) end

---Adds finalizer name; true when added.
---@param obj luna.Object
---@param name string
---@return boolean
function finalizers.add(obj, name) end

---Removes finalizer name; true when removed.
---@param obj luna.Object
---@param name string
---@return boolean
function finalizers.remove(obj, name) end

---obj has a deletionTimestamp.
---@param obj luna.Object
---@return boolean
function finalizers.is_deleting(obj) end

---A merge patch setting obj's finalizers (guarded by its resourceVersion).
---@param obj luna.Object
---@return table
function finalizers.patch(obj) end

---Decides what the reconcile does about finalizer name on obj; cleanup(obj)
---returns true (done), false (not yet) or nil, err.
---@param obj luna.Object
---@param name string
---@param opts {cleanup: fun(obj: luna.Object): (boolean|nil, any)}
---@return luna.FinalizerAction
function finalizers.handle(obj, name, opts) end

return finalizers
