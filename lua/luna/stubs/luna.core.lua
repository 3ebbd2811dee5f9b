---@meta luna.core
-- luna.core as scripts see it: the version, JSON and hashes.
local core = {}

---The luna version.
---@type string
core.version = ""

core.json = {}

---JSON text → value, or nil, err.
---@param s string
---@param opts? {max_depth?: integer, bigint?: "error"|"double", max_size?: integer}
---@return any
---@return string|nil err
function core.json.decode(s, opts) end

---value → JSON text, or nil, err.
---@param v any
---@param opts? {max_depth?: integer}
---@return string|nil
---@return string|nil err
function core.json.encode(v, opts) end

---The value of JSON null.
---@type lightuserdata
core.json.null = nil

---Marks t (or a new table) as a JSON array.
---@param t? table
---@return table
function core.json.array(t) end

---Marks t (or a new table) as a JSON object.
---@param t? table
---@return table
function core.json.object(t) end

---@param v any
---@return boolean
function core.json.is_array(v) end

---@param v any
---@return boolean
function core.json.is_object(v) end

core.crypto = {}

---The hex SHA-256 of s.
---@param s string
---@return string
function core.crypto.sha256(s) end

return core
