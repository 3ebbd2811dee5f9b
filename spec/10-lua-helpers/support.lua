-- Shared by the spec/10-lua-helpers specs.
local core = require("luna.core")
local luassert = require("luassert")

local S = {}

S.json = core.json

-- Decodes JSON text (objects as API calls and the cache hand them over).
function S.decode(text)
  local v, err = core.json.decode(text)
  luassert(v ~= nil, tostring(err))
  return v
end

function S.encode(v)
  local s, err = core.json.encode(v)
  luassert(s ~= nil, tostring(err))
  return s
end

-- Calls fn(...) expecting it to raise a message containing `plain` (plain
-- text), reported at the calling spec's line (the helpers raise at the
-- first frame outside luna's Lua library).  Returns the message.
function S.raises(plain, fn, ...)
  local ok, err = pcall(fn, ...)
  luassert(not ok, "expected an error containing: " .. plain)
  luassert.is_string(err)
  luassert(err:find(plain, 1, true), "error " .. err .. " lacks: " .. plain)
  luassert(err:match("^[%./]*spec/10%-lua%-helpers/[%w%-]+_spec%.lua:%d+: "),
         "error not reported at the spec's line: " .. err)
  return err
end

return S
