-- A protobuf writer for specs that send hand-made Kubernetes protobuf
-- bodies (spec/08-apiserver/14-protobuf_spec.lua): just enough of the wire
-- format to build messages field by field, including broken ones.
--
--   local pb = require("support.protobuf")
--   pb.msg{ pb.str(1, "name"), pb.int(7, 2), pb.sub(11, pb.msg{...}) }
--   pb.envelope("v1", "ConfigMap", raw)   -- "k8s\0" + runtime.Unknown
local pb = {}

-- A varint (0 <= n < 2^53).
function pb.varint(n)
  assert(n >= 0, "pb.varint: negative numbers are not needed by the specs")
  local out = {}
  repeat
    local b = n % 128
    n = math.floor(n / 128)
    out[#out + 1] = string.char(n > 0 and b + 128 or b)
  until n == 0
  return table.concat(out)
end

function pb.tag(num, wire) return pb.varint(num * 8 + wire) end

-- Length-delimited field (strings, bytes, messages).
function pb.bytes(num, s) return pb.tag(num, 2) .. pb.varint(#s) .. s end
pb.str = pb.bytes
pb.sub = pb.bytes

function pb.int(num, n) return pb.tag(num, 0) .. pb.varint(n) end
function pb.bool(num, b) return pb.int(num, b and 1 or 0) end

-- Packed repeated varints.
function pb.packed(num, list)
  local body = {}
  for i, n in ipairs(list) do body[i] = pb.varint(n) end
  return pb.bytes(num, table.concat(body))
end

-- A message from a list of encoded fields.
function pb.msg(fields) return table.concat(fields) end

-- A map entry field: {1: key, 2: value} (value already encoded as field 2).
function pb.entry(num, key, value_field)
  return pb.sub(num, pb.str(1, key) .. value_field)
end

-- The body kube clients send: "k8s\0" then runtime.Unknown{typeMeta, raw}.
function pb.envelope(api_version, kind, raw)
  return "k8s\0" .. pb.sub(1, pb.str(1, api_version) .. pb.str(2, kind)) .. pb.bytes(2, raw)
end

return pb
