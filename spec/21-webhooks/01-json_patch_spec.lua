-- The RFC 6902 diff a mutating webhook's answer is made of
-- (lua/luna/webhook.lua): applying diff(a, b) to a gives b, for removals,
-- additions, replaced types, arrays that grow and shrink, nested arrays,
-- and keys holding "/" and "~" (RFC 6901 escapes).
local core = require("luna.core")
local webhook = require("luna.webhook")
local S = require("21-webhooks.support")
local json = core.json

local function roundtrip(a_text, b_text)
  local a, b = json.decode(a_text), json.decode(b_text)
  local ops = webhook.diff(a, b)
  local patched = S.apply(a, json.decode(json.encode(ops)))
  assert.equal(S.canon(b), S.canon(patched))
  return ops
end

describe("webhook JSON patch diff", function()
  it("is empty for equal documents", function()
    assert.same({}, roundtrip('{"a":[1,{"b":null}],"c":"x"}', '{"c":"x","a":[1,{"b":null}]}'))
  end)

  it("adds, removes and replaces object members", function()
    local ops = roundtrip('{"a":1,"b":{"c":2},"d":true}', '{"a":2,"b":{"e":3},"f":null}')
    local seen = {}
    for _, op in ipairs(ops) do seen[#seen + 1] = op.op .. " " .. op.path end
    assert.same({ "remove /d", "replace /a", "remove /b/c", "add /b/e", "add /f" }, seen)
  end)

  it("orders the patch by key at every level whatever the tables' order", function()
    -- 40 keys (hash order is not key order): every 3rd removed, every 5th
    -- changed (nested), every 7th added
    local a, b, want_rm, want_rest = {}, {}, {}, {}
    for i = 1, 40 do
      local k = ("k%02d"):format(i)
      if i % 3 == 0 then a[k] = i
      else
        a[k] = { v = i, w = "same" }
        b[k] = { v = i % 5 == 0 and -i or i, w = "same" }
      end
      if i % 7 == 0 then b["n" .. k] = i end
    end
    for i = 1, 40 do
      local k = ("k%02d"):format(i)
      if i % 3 == 0 then want_rm[#want_rm + 1] = "remove /" .. k
      elseif i % 5 == 0 then want_rest[#want_rest + 1] = "replace /" .. k .. "/v" end
    end
    for i = 7, 40, 7 do want_rest[#want_rest + 1] = ("add /nk%02d"):format(i) end
    table.sort(want_rest, function(x, y) return x:match("/(%w+)") < y:match("/(%w+)") end)
    local seen = {}
    for _, op in ipairs(roundtrip(json.encode(a), json.encode(b))) do seen[#seen + 1] = op.op .. " " .. op.path end
    for _, x in ipairs(want_rest) do want_rm[#want_rm + 1] = x end
    assert.same(want_rm, seen)
  end)

  it("escapes '/' and '~' in keys", function()
    local ops = roundtrip('{"metadata":{"labels":{"example.com/x":"1","a~b":"2"}}}',
                          '{"metadata":{"labels":{"example.com/x":"9","a~b/c":"3"}}}')
    local paths = {}
    for _, op in ipairs(ops) do paths[#paths + 1] = op.path end
    assert.same({ "/metadata/labels/a~0b", "/metadata/labels/a~0b~1c",
                  "/metadata/labels/example.com~1x" }, paths)
  end)

  it("grows and shrinks arrays, nested ones too", function()
    roundtrip('{"l":[1,2,3,4]}', '{"l":[1,5]}')
    roundtrip('{"l":[1]}', '{"l":[1,2,{"x":[3]}]}')
    roundtrip('{"l":[[1,2],[3]]}', '{"l":[[1],[3,4,5]],"m":[]}')
    roundtrip('{"l":[{"a":1},{"b":2},{"c":3}]}', '{"l":[{"a":1}]}')
  end)

  it("replaces a value whose type changed", function()
    roundtrip('{"a":[1],"b":{"c":1},"c":"s","d":null}', '{"a":{"x":1},"b":[1],"c":5,"d":"x"}')
  end)

  it("handles tables a script built (unmarked arrays and objects)", function()
    local a = json.decode('{"spec":{"containers":[{"name":"a"}]}}')
    local b = json.decode('{"spec":{"containers":[{"name":"a"}]}}')
    b.spec.containers[2] = { name = "sidecar", args = { "--x", "--y" } }
    b.metadata = { labels = { injected = "true" } }
    local patched = S.apply(a, json.decode(json.encode(webhook.diff(a, b))))
    assert.equal(S.canon(b), S.canon(patched))
  end)

  it("gives RFC 6901 pointers", function()
    assert.equal("/a~1b/c~0d/0", webhook.pointer({ "a/b", "c~d", 0 }))
  end)
end)
