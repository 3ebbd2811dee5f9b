---@meta luna.meta
-- luna.meta: owner references, labels, annotations (lua/luna/meta.md).
local meta = {}

---A new ownerReference for owner (needs apiVersion, kind, metadata.name and .uid).
---@param owner luna.Object
---@param opts? {controller?: boolean, block_owner_deletion?: boolean}
---@return table ref
function meta.owner_reference(owner, opts) end

---Adds or updates obj's reference to owner (controller-runtime's rules: one controller).
---@param obj luna.Object
---@param owner luna.Object
---@param opts? {controller?: boolean, block_owner_deletion?: boolean}
---@return boolean|nil ok
---@return luna.Error|nil err AlreadyOwned when another controller owns obj
function meta.set_owner(obj, owner, opts) end

---Removes every reference to owner; true when one was removed.
---@param obj luna.Object
---@param owner luna.Object
---@return boolean
function meta.remove_owner(obj, owner) end

---{ apiVersion, kind, name, uid } of an object.
---@param owner luna.Object
---@return table
function meta.owner_of_object(owner) end

---The ownerReference ref points at target (by uid, else group, kind and name).
---@param ref table
---@param target table
---@return boolean
function meta.refers_to(ref, target) end

---obj's ownerReference with controller = true, or nil.
---@param obj luna.Object
---@return table|nil
function meta.controller_of(obj) end

---obj has an owner reference to owner.
---@param obj luna.Object
---@param owner luna.Object
---@return boolean
function meta.is_owned_by(obj, owner) end

---owner is obj's controller.
---@param obj luna.Object
---@param owner luna.Object
---@return boolean
function meta.is_controlled_by(obj, owner) end

---The value of label key, or nil.
---@param obj luna.Object
---@param key string
---@return string|nil
function meta.label(obj, key) end

---Sets label key (nil removes it); true when the labels changed.
---@param obj luna.Object
---@param key string
---@param value string|nil
---@return boolean
function meta.set_label(obj, key, value) end

---The value of annotation key, or nil.
---@param obj luna.Object
---@param key string
---@return string|nil
function meta.annotation(obj, key) end

---Sets annotation key (nil removes it); true when the annotations changed.
---@param obj luna.Object
---@param key string
---@param value string|nil
---@return boolean
function meta.set_annotation(obj, key, value) end

return meta
