---@meta luna.predicates
-- luna.predicates: filters for a controller's `predicates` (listed, not called).
local predicates = {}

---Updates whose metadata.generation changed (and every add and delete).
---@type luna.Predicate
predicates.generation_changed = nil

---Updates whose labels changed.
---@type luna.Predicate
predicates.labels_changed = nil

---Updates whose annotations changed.
---@type luna.Predicate
predicates.annotations_changed = nil

---Updates whose resourceVersion changed (drops the periodic resync).
---@type luna.Predicate
predicates.resource_version_changed = nil

---Passes if one of the predicates passes.
---@param ... luna.Predicate
---@return luna.Predicate
function predicates.any(...) end

---Passes if every predicate passes.
---@param ... luna.Predicate
---@return luna.Predicate
function predicates.all(...) end

---Passes if p does not.
---@param p luna.Predicate
---@return luna.Predicate
function predicates.negate(p) end

return predicates
