-- Decoding LIST bodies and WATCH streams into cached objects, chunk by chunk.
local core = require("luna.core")
local json = core.json

local MANAGED = { { manager = "kubectl", operation = "Update", apiVersion = "v1",
  time = "2026-01-01T00:00:00Z", fieldsType = "FieldsV1",
  fieldsV1 = { ["f:data"] = { ["f:a"] = json.object{} } } } }

local function cm(name, rv, extra)
  local o = { apiVersion = "v1", kind = "ConfigMap",
    metadata = { name = name, namespace = "default", uid = "uid-" .. name,
      resourceVersion = rv, labels = { app = "web", ["x.io/tier"] = "fe" },
      managedFields = MANAGED },
    data = { a = "1", text = "héllo \"quoted\"" } }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

local function list_body(items, meta)
  return assert(json.encode({ apiVersion = "v1", kind = "ConfigMapList",
    metadata = meta or { resourceVersion = "100" }, items = json.array(items) }))
end

local function feed_in_chunks(s, text, size)
  local events = {}
  for i = 1, #text, size do
    local got, err = s:feed(text:sub(i, i + size - 1))
    assert(got, err and err.message)
    for _, e in ipairs(got) do events[#events + 1] = e end
  end
  return events
end

describe("object stream, LIST", function()
  it("yields each item with its identity and drops managedFields", function()
    local s = core.object_stream.new{ mode = "list" }
    local events = assert(s:feed(list_body({ cm("a", "10"), cm("b", "11") })))
    assert(s:finish())
    assert.equal(2, #events)
    local a = events[1].object
    assert.equal("LISTED", events[1].type)
    assert.equal("default/a", a:key())
    assert.equal("uid-a", a:uid())
    assert.equal("10", a:resource_version())
    assert.same({ app = "web", ["x.io/tier"] = "fe" }, a:labels())
    local decoded = json.decode(a:json())
    assert.is_nil(decoded.metadata.managedFields)
    assert.equal("héllo \"quoted\"", decoded.data.text)
    assert.equal("100", s:list_resource_version())
    assert.equal("", s:continue_token())
  end)

  it("keeps managedFields when asked", function()
    local s = core.object_stream.new{ mode = "list", keep_managed_fields = true }
    local events = assert(s:feed(list_body({ cm("a", "10") })))
    local decoded = json.decode(events[1].object:json())
    assert.equal("kubectl", decoded.metadata.managedFields[1].manager)
    assert.matches('"f:a":{}', events[1].object:json(), 1, true)
  end)

  it("gives the same objects however the body is split", function()
    local body = list_body({ cm("a", "1"), cm("b", "2"), cm("c", "3") },
      { resourceVersion = "7", continue = "tok", remainingItemCount = 5 })
    local whole = core.object_stream.new{ mode = "list" }
    local expected = assert(whole:feed(body))
    for _, size in ipairs({ 1, 2, 3, 7, 64 }) do
      local s = core.object_stream.new{ mode = "list" }
      local events = feed_in_chunks(s, body, size)
      assert(s:finish())
      assert.equal(#expected, #events)
      for i, e in ipairs(events) do
        assert.equal(expected[i].object:json(), e.object:json())
        assert.equal(expected[i].object:key(), e.object:key())
      end
      assert.equal("7", s:list_resource_version())
      assert.equal("tok", s:continue_token())
      assert.equal(5, s:remaining())
    end
  end)

  it("treats items: null as an empty list", function()
    local s = core.object_stream.new{ mode = "list" }
    local events = assert(s:feed('{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":null}'))
    assert(s:finish())
    assert.equal(0, #events)
    assert.equal("5", s:list_resource_version())
  end)

  it("keys cluster-scoped items by name", function()
    local s = core.object_stream.new{ mode = "list" }
    local events = assert(s:feed(list_body({ { metadata = { name = "node-1", resourceVersion = "3" } } })))
    assert.equal("node-1", events[1].object:key())
  end)

  local bad = {
    { "an item without a name", list_body({ { metadata = { namespace = "x" } } }), "has no metadata.name" },
    { "items that are not objects", '{"items":[1]}', "must be an array of objects" },
    { "a top level that is not an object", '[1,2]', "expected a JSON object" },
    { "malformed JSON", '{"items":[{"metadata":{"name":"a"}}', nil },
    { "invalid JSON", '{"items":[{"metadata":{"name":"a"},}]}', "" },
  }
  for _, case in ipairs(bad) do
    it("rejects " .. case[1], function()
      local s = core.object_stream.new{ mode = "list" }
      local events, err = s:feed(case[2])
      if events then
        events, err = s:finish()
      end
      assert.is_nil(events)
      assert.equal("InvalidStream", err.reason)
      if case[3] and case[3] ~= "" then assert.matches(case[3], err.message, 1, true) end
    end)
  end

  it("bounds the size of one item", function()
    local s = core.object_stream.new{ mode = "list", max_item_bytes = 200 }
    local big = cm("a", "1", { data = { blob = string.rep("x", 500) } })
    local events, err = s:feed(list_body({ big }))
    assert.is_nil(events)
    assert.matches("exceeds 200 bytes", err.message)
  end)
end)

describe("object stream, labels", function()
  local function one(labels_json)
    local s = core.object_stream.new{ mode = "list" }
    local events = assert(s:feed('{"items":[{"metadata":{"name":"a","namespace":"n","labels":' ..
      labels_json .. '},"data":{"k":"v"}}]}'))
    assert(s:finish())
    return events[1].object
  end

  it("reads plain labels from the JSON instead of copying them", function()
    local long = '{"app":"x","app.kubernetes.io/component":"config",' ..
      '"app.kubernetes.io/instance":"shop-2-prod","app.kubernetes.io/managed-by":"luna-bench",' ..
      '"app.kubernetes.io/name":"shop-2","app.kubernetes.io/part-of":"shop","z":""}'
    local o = one(long)
    assert.same({ app = "x", ["app.kubernetes.io/component"] = "config",
      ["app.kubernetes.io/instance"] = "shop-2-prod", ["app.kubernetes.io/managed-by"] = "luna-bench",
      ["app.kubernetes.io/name"] = "shop-2", ["app.kubernetes.io/part-of"] = "shop", z = "" }, o:labels())
    assert.equal("x", o:label("app"))
    assert.equal("shop", o:label("app.kubernetes.io/part-of"))
    assert.equal("", o:label("z"))
    assert.is_nil(o:label("ap"))
    assert.is_nil(o:label("app.kubernetes.io"))
    assert.is_nil(o:label("zz"))
    -- The object holds its JSON and identity, not a second copy of the labels.
    assert.is_true(o:size() < #o:json() + 80, "size " .. o:size() .. " for " .. #o:json() .. " bytes of JSON")
    assert.same({}, one("{}"):labels())
    assert.is_nil(one("{}"):label("app"))
  end)

  it("copies labels that are unsorted, escaped, repeated or not strings, as Go decodes them", function()
    assert.same({ a = "1", b = "2" }, one('{"b":"2","a":"1"}'):labels())
    assert.equal("1", one('{"b":"2","a":"1"}'):label("a"))
    assert.same({ ["x/y"] = "A" }, one('{"x\\/y":"\\u0041"}'):labels())
    assert.same({ a = "2" }, one('{"a":"1","a":"2"}'):labels())
    assert.same({ b = "2" }, one('{"a":null,"b":"2"}'):labels())
    -- a null after a value: the script reads no string there, nor may the
    -- cache (selectors, lists by label) match the value before it
    assert.same({ b = "2" }, one('{"a":"1","b":"2","a":null}'):labels())
    assert.is_nil(one('{"a":"1","a":null}'):label("a"))
    assert.same({ a = "3" }, one('{"a":"1","a":null,"a":"3"}'):labels())
  end)

  it("keeps a label value readable while other objects are read", function()
    local a, b = one('{"k":"from-a"}'), one('{"k":"from-b"}')
    local va = a:label("k")
    assert.equal("from-b", b:label("k"))
    assert.equal("from-a", va) -- Lua copied it: the C buffer is reused
  end)
end)

describe("object stream, the cached JSON", function()
  local function items(body, opts, chunk)
    opts = opts or {}
    opts.mode = "list"
    local s = core.object_stream.new(opts)
    local out = {}
    for i = 1, #body, chunk or #body do
      for _, e in ipairs(assert(s:feed(body:sub(i, i + (chunk or #body) - 1)))) do out[#out + 1] = e.object end
    end
    assert(s:finish())
    return out
  end

  local cases = {
    { "managedFields last",
      '{"metadata":{"name":"a","labels":{"x":"1"},"managedFields":[{"m":1}]},"data":{"k":"v"}}',
      '{"metadata":{"name":"a","labels":{"x":"1"}},"data":{"k":"v"}}' },
    { "managedFields first",
      '{"metadata":{"managedFields":[{"m":{"n":[1,2]}}],"name":"a","labels":{"x":"1"}},"data":{}}',
      '{"metadata":{"name":"a","labels":{"x":"1"}},"data":{}}' },
    { "managedFields alone",
      '{"metadata":{"managedFields":[],"name":"a"}}', '{"metadata":{"name":"a"}}' },
    { "managedFields null, in the middle",
      '{"metadata":{"name":"a","managedFields":null,"uid":"u"}}', '{"metadata":{"name":"a","uid":"u"}}' },
    { "a pretty-printed item",
      '{ "metadata" : {\n  "name": "a",\n  "managedFields": [ {"m": 1} ] ,\n  "labels": { "x": "1" }\n },\n' ..
      '  "data": { "t": "two  spaces, a \\"quote\\" and a \\\\ backslash\\\\" , "n": [ 1, 2.5e3, true, null ] } }',
      '{"metadata":{"name":"a","labels":{"x":"1"}},"data":{"t":"two  spaces, a \\"quote\\" and a \\\\ backslash\\\\","n":[1,2.5e3,true,null]}}' },
  }
  for _, case in ipairs(cases) do
    it("copies " .. case[1] .. " without managedFields or blanks, however it is split", function()
      local body = '{"kind":"List","items":[ ' .. case[2] .. ' , {"metadata":{"name":"b"}} ]}'
      for _, chunk in ipairs({ 1, 2, 5, 64, #body }) do
        local objs = items(body, nil, chunk)
        assert.equal(2, #objs)
        assert.equal(case[3], objs[1]:json())
        assert.equal('{"metadata":{"name":"b"}}', objs[2]:json())
        local decoded = json.decode(objs[1]:json())
        assert.equal("a", decoded.metadata.name)
        if decoded.metadata.labels then assert.same({ x = "1" }, objs[1]:labels()) end
      end
    end)
  end

  it("keeps managedFields byte for byte when asked", function()
    local item = '{"metadata":{"name":"a","managedFields":[{"manager":"k","fieldsV1":{"f:data":{}}}]}}'
    local objs = items('{"items":[' .. item .. ']}', { keep_managed_fields = true }, 3)
    assert.equal(item, objs[1]:json())
  end)
end)

describe("object stream, WATCH", function()
  it("says which BOOKMARK ends a watch list's initial events", function()
    local s = core.object_stream.new{ mode = "watch" }
    local function bookmark(rv, annotations)
      return assert(json.encode({ type = "BOOKMARK", object = { kind = "ConfigMap", apiVersion = "v1",
        metadata = { resourceVersion = rv, annotations = annotations } } }))
    end
    local annotated = cm("x", "5")
    annotated.metadata.annotations = { ["k8s.io/initial-events-end"] = "true" }
    local text = table.concat({
      assert(json.encode({ type = "ADDED", object = annotated })),
      bookmark("6", { ["other/key"] = "true" }),
      bookmark("7", { ["k8s.io/initial-events-end"] = "false" }),
      bookmark("8", { a = "b", ["k8s.io/initial-events-end"] = "true", z = { nested = "true" } }),
      bookmark("9"),
    }, "\n") .. "\n"
    for _, size in ipairs{ 1, 7, #text } do
      s:reset()
      local events = feed_in_chunks(s, text, size)
      assert.equal(5, #events)
      assert.equal("ADDED", events[1].type)
      local ends = {}
      for i = 2, 5 do ends[#ends + 1] = tostring(events[i].initial_events_end) end
      assert.equal("false,false,true,false", table.concat(ends, ","))
      assert.equal("8", events[4].resource_version)
    end
  end)

  local function ev(t, obj) return assert(json.encode({ type = t, object = obj })) .. "\n" end

  it("yields ADDED, MODIFIED, DELETED, BOOKMARK and ERROR events in order", function()
    local text = ev("ADDED", cm("a", "1")) .. ev("MODIFIED", cm("a", "2")) ..
      ev("BOOKMARK", { kind = "ConfigMap", apiVersion = "v1", metadata = { resourceVersion = "3" } }) ..
      ev("DELETED", cm("a", "4")) ..
      ev("ERROR", { kind = "Status", apiVersion = "v1", status = "Failure", code = 410,
        reason = "Expired", message = "too old resource version: 1 (5)" })
    local s = core.object_stream.new{ mode = "watch" }
    local events = feed_in_chunks(s, text, 5)
    assert(s:finish())
    local summary = {}
    for i, e in ipairs(events) do
      summary[i] = e.type .. ":" .. (e.object and e.object:resource_version() or e.resource_version or e.code)
    end
    assert.same({ "ADDED:1", "MODIFIED:2", "BOOKMARK:3", "DELETED:4", "ERROR:410" }, summary)
    assert.equal("Expired", events[5].reason)
    assert.equal("too old resource version: 1 (5)", events[5].message)
  end)

  it("accepts the type after the object", function()
    local s = core.object_stream.new{ mode = "watch" }
    local events = assert(s:feed('{"object":{"metadata":{"name":"a","resourceVersion":"9"}},"type":"ADDED"}'))
    assert.equal("ADDED", events[1].type)
    assert.equal("9", events[1].object:resource_version())
  end)

  it("reports a truncated stream at finish", function()
    local s = core.object_stream.new{ mode = "watch" }
    local text = ev("ADDED", cm("a", "1")) .. ev("ADDED", cm("b", "2"))
    local events = assert(s:feed(text:sub(1, #text - 10)))
    assert.equal(1, #events)
    local ok, err = s:finish()
    assert.is_nil(ok)
    assert.equal("InvalidStream", err.reason)
  end)

  it("hands over the events before a malformed one", function()
    local s = core.object_stream.new{ mode = "watch" }
    local good, err, before = s:feed(ev("ADDED", cm("a", "1")) .. '{"type":"ADDED","object":{"metadata":{"name":}}}\n')
    assert.is_nil(good)
    assert.equal(1, #before)
    assert.equal("default/a", before[1].object:key())
    assert.equal("InvalidStream", err.reason)
  end)

  local bad = {
    { "an unknown type", '{"type":"RENAMED","object":{"metadata":{"name":"a"}}}', "unknown watch event type" },
    { "an event without object", '{"type":"ADDED"}', "has no object" },
    { "a bookmark without resourceVersion", '{"type":"BOOKMARK","object":{"metadata":{}}}', "without a resourceVersion" },
    { "an object that is not an object", '{"type":"ADDED","object":5}', "must be an object" },
  }
  for _, case in ipairs(bad) do
    it("rejects " .. case[1], function()
      local s = core.object_stream.new{ mode = "watch" }
      local events, err = s:feed(case[2])
      assert.is_nil(events)
      assert.matches(case[3], err.message, 1, true)
    end)
  end

  it("starts clean after reset", function()
    local s = core.object_stream.new{ mode = "watch" }
    s:feed('{"type":"ADDED","obj')
    s:reset()
    local events = assert(s:feed(ev("ADDED", cm("z", "1"))))
    assert.equal("default/z", events[1].object:key())
  end)
end)

-- KEP-5866: a shard selector given to the stream drops items outside it
-- before they are built; the list's metadata.shardInfo is read.
describe("object stream, shard filter", function()
  local shard = core.shard
  local lower = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"

  local function names(events)
    local out = {}
    for _, e in ipairs(events) do out[#out + 1] = e.object:name() end
    table.sort(out)
    return table.concat(out, ",")
  end

  it("drops LIST items whose uid hashes outside the shard, in any chunking", function()
    local items, want = {}, {}
    for i = 1, 40 do
      local c = cm("c" .. i, tostring(i))
      items[#items + 1] = c
      if shard.matches(lower, "default", c.metadata.uid) then want[#want + 1] = c.metadata.name end
    end
    table.sort(want)
    assert.is_true(#want > 5 and #want < 35)
    local body = list_body(items, { resourceVersion = "100", shardInfo = { selector = lower } })
    for _, size in ipairs({ 1, 7, 64, #body }) do
      local s = core.object_stream.new({ mode = "list", shard = lower })
      local events = feed_in_chunks(s, body, size)
      assert(s:finish())
      assert.equal(table.concat(want, ","), names(events))
      assert.equal(40 - #want, s:filtered())
      assert.equal(lower, s:shard_info())
      assert.equal("100", s:list_resource_version())
    end
  end)

  it("reads no shardInfo from a list without it, and forgets it on reset", function()
    local s = core.object_stream.new({ mode = "list" })
    feed_in_chunks(s, list_body({ cm("a", "1") }, { resourceVersion = "5", shardInfo =
      { selector = lower } }), 3)
    assert(s:finish())
    assert.equal(lower, s:shard_info())
    s:reset()
    feed_in_chunks(s, list_body({ cm("a", "1") }), 3)
    assert(s:finish())
    assert.is_nil(s:shard_info())
    assert.equal(0, s:filtered())
  end)

  it("drops WATCH events outside the shard, bookmarks pass", function()
    local s = core.object_stream.new({ mode = "watch", shard = lower })
    local text, want = {}, {}
    for i = 1, 30 do
      local c = cm("w" .. i, tostring(i))
      text[#text + 1] = assert(json.encode({ type = i % 3 == 0 and "DELETED" or "ADDED", object = c }))
      if shard.matches(lower, "default", c.metadata.uid) then want[#want + 1] = c.metadata.name end
    end
    text[#text + 1] = assert(json.encode({ type = "BOOKMARK", object = { kind = "ConfigMap",
      metadata = { resourceVersion = "99" } } }))
    table.sort(want)
    local events = feed_in_chunks(s, table.concat(text, "\n") .. "\n", 13)
    local bookmark = table.remove(events)
    assert.equal("BOOKMARK", bookmark.type)
    assert.equal(table.concat(want, ","), names(events))
    assert.equal(30 - #want, s:filtered())
  end)

  it("refuses a bad shard selector", function()
    assert.has_error(function() core.object_stream.new({ mode = "list", shard = "shardRange(x)" }) end,
      "shardRange() requires exactly 3 arguments, got 1")
  end)
end)

describe("object stream, metadata only", function()
  local MD = { metadata_only = true, api_version = "v1", kind = "ConfigMap" }
  local function ev(t, obj) return assert(json.encode({ type = t, object = obj })) .. "\n" end
  local function opts(extra)
    local o = {}
    for k, v in pairs(MD) do o[k] = v end
    for k, v in pairs(extra) do o[k] = v end
    return o
  end
  -- What kube-apiserver sends for as=PartialObjectMetadata(List).
  local function partial(name, rv)
    local full = cm(name, rv)
    return { kind = "PartialObjectMetadata", apiVersion = "meta.k8s.io/v1", metadata = full.metadata }
  end

  it("keeps apiVersion, kind (the resource's) and metadata less managedFields", function()
    local s = core.object_stream.new(opts{ mode = "list" })
    local body = assert(json.encode({ kind = "PartialObjectMetadataList", apiVersion = "meta.k8s.io/v1",
      metadata = { resourceVersion = "100" }, items = json.array({ partial("a", "10") }) }))
    local events = assert(s:feed(body))
    assert(s:finish())
    local a = events[1].object
    assert.equal("default/a", a:key())
    assert.equal("uid-a", a:uid())
    assert.same({ app = "web", ["x.io/tier"] = "fe" }, a:labels())
    local decoded = json.decode(a:json())
    assert.same({ "apiVersion", "kind", "metadata" }, (function()
      local keys = {}
      for k in pairs(decoded) do keys[#keys + 1] = k end
      table.sort(keys)
      return keys
    end)())
    assert.equal("v1", decoded.apiVersion)
    assert.equal("ConfigMap", decoded.kind)
    assert.is_nil(decoded.metadata.managedFields)
    assert.equal("a", decoded.metadata.name)
    assert.equal("100", s:list_resource_version())
  end)

  it("keeps only metadata of full objects from a server that ignored the conversion", function()
    local s = core.object_stream.new(opts{ mode = "list" })
    local o = cm("b", "11")
    o.data.big = string.rep("x", 4096)
    local events = feed_in_chunks(s, list_body({ o }), 7)
    assert(s:finish())
    local b = events[1].object
    local decoded = json.decode(b:json())
    assert.is_nil(decoded.data)
    assert.equal("b", decoded.metadata.name)
    assert.same({ app = "web", ["x.io/tier"] = "fe" }, b:labels())
    assert.is_true(#b:json() < 400)
  end)

  it("keeps managedFields when asked, and labels placed anywhere in metadata", function()
    local s = core.object_stream.new(opts{ mode = "list", keep_managed_fields = true })
    local events = assert(s:feed('{"items":[{"spec":{"x":1},"metadata":{"managedFields":[{"manager":"m"}],' ..
      '"labels":{"a":"1","b":"2"},"name":"n","namespace":"ns"},"status":{}}]}'))
    local o = events[1].object
    assert.same({ a = "1", b = "2" }, o:labels())
    assert.equal('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"managedFields":[{"manager":"m"}],' ..
      '"labels":{"a":"1","b":"2"},"name":"n","namespace":"ns"}}', o:json())
    s = core.object_stream.new(opts{ mode = "list" })
    events = assert(s:feed('{"items":[{"metadata":{"managedFields":[{"manager":"m"}],' ..
      '"labels":{"a":"1"},"name":"n"}}]}'))
    assert.equal('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"a":"1"},"name":"n"}}',
      events[1].object:json())
    assert.same({ a = "1" }, events[1].object:labels())
  end)

  it("decodes WATCH events, bookmarks and errors", function()
    local text = ev("ADDED", partial("a", "1")) .. ev("MODIFIED", cm("a", "2")) ..
      ev("BOOKMARK", { kind = "PartialObjectMetadata", apiVersion = "meta.k8s.io/v1",
        metadata = { resourceVersion = "3" } }) ..
      ev("DELETED", partial("a", "4")) ..
      ev("ERROR", { kind = "Status", apiVersion = "v1", status = "Failure", code = 410,
        reason = "Expired", message = "too old" })
    local s = core.object_stream.new(opts{ mode = "watch" })
    local events = feed_in_chunks(s, text, 5)
    assert(s:finish())
    local summary = {}
    for i, e in ipairs(events) do
      summary[i] = e.type .. ":" .. (e.object and e.object:resource_version() or e.resource_version or e.code)
    end
    assert.same({ "ADDED:1", "MODIFIED:2", "BOOKMARK:3", "DELETED:4", "ERROR:410" }, summary)
    for _, i in ipairs({ 1, 2, 4 }) do
      local d = json.decode(events[i].object:json())
      assert.equal("ConfigMap", d.kind)
      assert.is_nil(d.data)
    end
    assert.equal("Expired", events[5].reason)
  end)

  it("refuses a missing or unsafe apiVersion or kind", function()
    assert.has_error(function() core.object_stream.new{ mode = "list", metadata_only = true, kind = "X" } end,
      "metadata-only stream needs a plain apiVersion and kind")
    assert.has_error(function()
      core.object_stream.new{ mode = "list", metadata_only = true, api_version = "v1", kind = 'X"' }
    end, "metadata-only stream needs a plain apiVersion and kind")
  end)
end)

describe("object stream, kind and apiVersion", function()
  -- A Secret in a watch of ConfigMaps would be cached as a ConfigMap
  -- (the hostile-response corpus: watchlist-wrong-kind, -wrong-apiversion).
  local function watch_of(obj)
    local s = core.object_stream.new{ mode = "watch", api_version = "v1", kind = "ConfigMap" }
    return s:feed(assert(json.encode({ type = "ADDED", object = obj })) .. "\n")
  end

  it("refuses an item naming another kind or apiVersion", function()
    local got, err = watch_of(cm("a", "1", { kind = "Secret" }))
    assert.is_nil(got)
    assert.matches("default/a of kind Secret apiVersion v1 in a stream of ConfigMap v1", err.message, 1, true)
    got, err = watch_of(cm("a", "1", { apiVersion = "apps/v1" }))
    assert.is_nil(got)
    assert.matches("kind ConfigMap apiVersion apps/v1 in a stream of ConfigMap v1", err.message, 1, true)
  end)

  it("takes items of its kind, items naming neither, and PartialObjectMetadata when metadata only", function()
    assert.equal(1, #assert(watch_of(cm("a", "1"))))
    local bare = cm("a", "1")
    bare.kind, bare.apiVersion = nil, nil
    assert.equal(1, #assert(watch_of(bare)))
    local s = core.object_stream.new{ mode = "list", api_version = "v1", kind = "ConfigMap" }
    local bad = s:feed(list_body({ cm("a", "1"), cm("b", "2", { kind = "Pod" }) }))
    assert.is_nil(bad)
    local md = core.object_stream.new{ mode = "watch", metadata_only = true, api_version = "v1", kind = "ConfigMap" }
    local ev = assert(md:feed(assert(json.encode({ type = "ADDED", object = { kind = "PartialObjectMetadata",
      apiVersion = "meta.k8s.io/v1", metadata = { name = "a", namespace = "d" } } })) .. "\n"))
    assert.equal(1, #ev)
  end)
end)

describe("object stream, repeated keys", function()
  -- The item's identity, its cut of managedFields and its cached bytes must
  -- come from the same members: an item repeating one of the keys the stream
  -- reads is refused (fuzzing found two "metadata" members cached as invalid
  -- JSON, regress_metadata_twice_managed_fields_cut).  JSON leaves repeated
  -- keys undefined; kube-apiserver never sends them.
  local ITEM = '{"apiVersion":"v1","kind":"ConfigMap",' ..
    '"metadata":{"managedFields":[{"manager":"m"}],"name":"a","namespace":"d","uid":"u",' ..
    '"resourceVersion":"5","labels":{"x":"y"},"annotations":{"k":"v"}},"data":{"k":"v"}'
  local function modes()
    return {
      { "list", function(item) return '{"kind":"ConfigMapList","metadata":{"resourceVersion":"9"},"items":[' .. item .. ']}' end },
      { "watch", function(item) return '{"type":"ADDED","object":' .. item .. '}\n' end },
    }
  end
  local function feed(mode, wrap, item, metadata_only)
    local s = core.object_stream.new{ mode = mode, api_version = "v1", kind = "ConfigMap",
                                       metadata_only = metadata_only }
    return s:feed(wrap(item))
  end

  it("takes an item without repeated keys, and repeats elsewhere (data, labels: the last wins)", function()
    for _, m in ipairs(modes()) do
      for _, md in ipairs({ false, true }) do
        local ev = assert(feed(m[1], m[2], ITEM .. "}", md))
        assert.equal(1, #ev)
        assert.equal("d/a", ev[1].object:key())
        ev = assert(feed(m[1], m[2], ITEM .. ',"data":{"k":"w","k":"z"}}', md))
        assert.equal(1, #ev)
        assert.is_table(json.decode(ev[1].object:json()))
      end
    end
  end)

  for _, case in ipairs({
    { "apiVersion", ITEM .. ',"apiVersion":"v1"}' },
    { "kind", ITEM .. ',"kind":"ConfigMap"}' },
    { "metadata", ITEM .. ',"metadata":{"name":"b","namespace":"d"}}' },
    { "metadata", '{"metadata":{"managedFields":[{"manager":"m"}],"name":"b"},"apiVersion":"v1",' ..
      '"metadata":{"name":"a","namespace":"d","uid":"u","labels":{"x":"y"},"managedFields":[]}}' },
    { "metadata.name", (ITEM:gsub('"name":"a"', '"name":"a","name":"b"')) .. "}" },
    { "metadata.namespace", (ITEM:gsub('"namespace":"d"', '"namespace":"d","namespace":"e"')) .. "}" },
    { "metadata.uid", (ITEM:gsub('"uid":"u"', '"uid":"u","uid":"w"')) .. "}" },
    { "metadata.resourceVersion", (ITEM:gsub('"resourceVersion":"5"', '"resourceVersion":"5","resourceVersion":"6"')) .. "}" },
    { "metadata.labels", (ITEM:gsub('"labels":{"x":"y"}', '"labels":{"x":"y"},"labels":{"x":"z"}')) .. "}" },
    { "metadata.annotations", (ITEM:gsub('"annotations":{"k":"v"}', '"annotations":{},"annotations":{"k":"v"}')) .. "}" },
    { "metadata.managedFields", (ITEM:gsub('"uid":"u"', '"uid":"u","managedFields":[]')) .. "}" },
  }) do
    it("refuses an item with " .. case[1] .. " twice, listed or watched, whole or metadata only", function()
      for _, m in ipairs(modes()) do
        for _, md in ipairs({ false, true }) do
          local got, err = feed(m[1], m[2], case[2], md)
          assert.is_nil(got, m[1])
          assert.matches("has " .. case[1] .. " twice", err.message, 1, true)
        end
      end
    end)
  end
end)

describe("object stream, repeated keys outside the items", function()
  local A = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"d","resourceVersion":"1"}}'
  local B = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"d","resourceVersion":"2"}}'
  local function feed(mode, body)
    return core.object_stream.new{ mode = mode, api_version = "v1", kind = "ConfigMap" }:feed(body)
  end

  it("refuses a list with items twice (its first items went out already; Go keeps the second)", function()
    local got, err = feed("list", '{"kind":"ConfigMapList","metadata":{"resourceVersion":"9"},' ..
      '"items":[' .. A .. '],"items":[' .. B .. ']}')
    assert.is_nil(got)
    assert.matches('the list has "items" twice', err.message, 1, true)
    -- spelled with an escape, the same
    got, err = feed("list", '{"items":[' .. A .. '],"it\\u0065ms":[' .. B .. ']}')
    assert.is_nil(got)
    assert.matches('the list has "items" twice', err.message, 1, true)
    -- once is a list
    assert.equal(1, #assert(feed("list", '{"metadata":{"resourceVersion":"9"},"items":[' .. A .. ']}')))
  end)

  it("a watch event with object twice delivers the last, keyed as its bytes say", function()
    local ev = assert(feed("watch", '{"type":"ADDED","object":' .. A .. ',"object":' .. B .. '}\n'))
    assert.equal(1, #ev)
    assert.equal("d/b", ev[1].object:key())
    assert.equal("b", json.decode(ev[1].object:json()).metadata.name)
  end)
end)

describe("object stream, keys written with escapes", function()
  -- The parser hands keys over decoded, so "\u006eame" is "name": a repeat
  -- spelled with escapes is as refused as a plain one, and the object the
  -- script decodes names what the cache key says.
  local function feed(mode, body, metadata_only)
    local s = core.object_stream.new{ mode = mode, api_version = "v1", kind = "ConfigMap",
                                       metadata_only = metadata_only }
    return s:feed(body)
  end
  local function wrap(mode, item)
    return mode == "list"
      and '{"kind":"ConfigMapList","metadata":{"resourceVersion":"9"},"items":[' .. item .. ']}'
      or '{"type":"ADDED","object":' .. item .. '}\n'
  end

  for _, case in ipairs({
    { "metadata.name", '{"metadata":{"name":"a","namespace":"d","\\u006eame":"b"}}' },
    { "metadata.namespace", '{"metadata":{"name":"a","namespace":"d","n\\u0061mespace":"e"}}' },
    { "metadata.resourceVersion", '{"metadata":{"name":"a","resourceVersion":"1","resourceVersio\\u006e":"2"}}' },
    { "metadata", '{"metadata":{"name":"a"},"\\u006detadata":{"name":"b"}}' },
    { "kind", '{"kind":"ConfigMap","\\u006bind":"Secret","metadata":{"name":"a"}}' },
  }) do
    it("refuses " .. case[1] .. " repeated with escapes", function()
      for _, mode in ipairs({ "list", "watch" }) do
        for _, md in ipairs({ false, true }) do
          local got, err = feed(mode, wrap(mode, case[2]), md)
          assert.is_nil(got, mode)
          assert.matches("has " .. case[1] .. " twice", err.message, 1, true)
        end
      end
    end)
  end

  it("reads a name written with escapes as the script decodes it", function()
    for _, mode in ipairs({ "list", "watch" }) do
      local ev = assert(feed(mode, wrap(mode, '{"metadata":{"\\u006eame":"\\u0061b","namespace":"d"}}')))
      assert.equal("d/ab", ev[1].object:key())
      assert.equal("ab", json.decode(ev[1].object:json()).metadata.name)
    end
  end)
end)

describe("object stream, labels", function()
  -- A label is a C string in the cache (selectors, the informer's check of
  -- its label selector, cache lists by label): a NUL byte (\u0000) would cut
  -- it there, and the cache would match the object on labels the script,
  -- decoding its JSON, never sees ("web" for "web\0x").  Kubernetes allows
  -- no NUL in a label; an item with one is refused, as a NUL in its name.
  local function feed(mode, labels, metadata_only)
    local item = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"d",' ..
      '"labels":' .. labels .. '}}'
    local body = mode == "list"
      and '{"kind":"ConfigMapList","metadata":{"resourceVersion":"9"},"items":[' .. item .. ']}'
      or '{"type":"ADDED","object":' .. item .. '}\n'
    local s = core.object_stream.new{ mode = mode, api_version = "v1", kind = "ConfigMap",
                                       metadata_only = metadata_only }
    return s:feed(body)
  end

  it("refuses a label key or value holding a NUL byte, listed or watched, whole or metadata only", function()
    for _, mode in ipairs({ "list", "watch" }) do
      for _, md in ipairs({ false, true }) do
        for _, labels in ipairs({ '{"app":"web\\u0000x"}', '{"app\\u0000x":"web"}',
                                  '{"a":"1","app":"web\\u0000"}' }) do
          local got, err = feed(mode, labels, md)
          assert.is_nil(got, mode .. " " .. labels)
          assert.matches("has a label with a NUL byte", err.message, 1, true)
        end
      end
    end
  end)

  it("refuses labels that are not strings, or not in an object, listed or watched", function()
    -- {"app":"web","app":5} was cached with the label app=web while the
    -- script read app = 5; Go's decoder refuses such an object outright, and
    -- kube-apiserver and the dev server refuse to store one.  (A null value
    -- is still left out of the labels: see "copies labels ..." above.)
    for _, mode in ipairs({ "list", "watch" }) do
      for _, md in ipairs({ false, true }) do
        for _, labels in ipairs({ '{"app":"web","app":5}', '{"app":"web","app":{"x":"y"}}',
                                  '{"app":["web"]}', '{"app":true}', '{"app":1.5}',
                                  '["app","web"]', '"app=web"', '7' }) do
          local got, err = feed(mode, labels, md)
          assert.is_nil(got, mode .. " " .. labels)
          assert.matches("has a label that is not a string", err.message, 1, true)
        end
        -- no labels at all, in the ways a server may say it
        for _, labels in ipairs({ "null", "{}" }) do
          local ev = assert(feed(mode, labels, md))
          assert.same({}, ev[1].object:labels())
        end
      end
    end
  end)

  it("checks only the item's own labels: nested metadata may repeat keys and hold anything", function()
    local item = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"d",' ..
      '"ownerReferences":[{"name":"o1","uid":"1"},{"name":"o2","uid":"2"}],"labels":{"x":"1"}},' ..
      '"spec":{"template":{"metadata":{"name":"x","name":"y","labels":{"a":5,"a":null}}}}}'
    for _, mode in ipairs({ "list", "watch" }) do
      for _, md in ipairs({ false, true }) do
        local s = core.object_stream.new{ mode = mode, api_version = "v1", kind = "ConfigMap",
                                           metadata_only = md }
        local ev = assert(s:feed(mode == "list" and '{"items":[' .. item .. ']}'
                                 or '{"type":"ADDED","object":' .. item .. '}\n'))
        assert.equal("d/a", ev[1].object:key())
        assert.same({ x = "1" }, ev[1].object:labels())
      end
    end
  end)

  it("takes labels with other escapes, the cache reading them as the script does", function()
    for _, mode in ipairs({ "list", "watch" }) do
      local ev = assert(feed(mode, '{"\\u0061pp":"w\\u00e9b","tier":"f\\"e"}'))
      assert.same({ app = "wéb", tier = 'f"e' }, ev[1].object:labels())
      assert.same({ app = "wéb", tier = 'f"e' }, json.decode(ev[1].object:json()).metadata.labels)
    end
  end)
end)
