-- luna.events: Event bodies (events.k8s.io/v1 and core/v1), names, note
-- truncation, and the recorder's deduplication window and LRU bound.
local events = require("luna.events")
local S = require("10-lua-helpers.support")
local json = S.json

local T1 = 1795240800 -- 2026-11-21T06:00:00Z
local HEX_T1 = "18e9f9fefa49c000" -- T1 in nanoseconds, hex
local CTRL = "example.com/widgets"

local function widget(name, uid)
  return S.decode(string.format([[{"apiVersion":"example.com/v1","kind":"Widget","metadata":{
    "name":%q,"namespace":"ns","uid":%q,"resourceVersion":"42","labels":{"a":"b"}}}]], name or "w", uid or "w-1"))
end

local function node()
  return S.decode([[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","uid":"n-1","resourceVersion":"7"}}]])
end

local E = { type = "Normal", reason = "Created", note = "made it", action = "Create",
            controller = CTRL, instance = "luna-0" }

local function with(t)
  local e = {}
  for k, v in pairs(E) do e[k] = v end
  for k, v in pairs(t) do e[k] = v end
  return e
end

describe("luna.events.event (events.k8s.io/v1)", function()
  it("builds the Event body", function()
    local ev = events.event(widget(), E, T1)
    assert.same({
      apiVersion = "events.k8s.io/v1", kind = "Event",
      metadata = { name = "w." .. HEX_T1, namespace = "ns" },
      eventTime = "2026-11-21T06:00:00.000000Z",
      reportingController = CTRL, reportingInstance = "luna-0",
      action = "Create", reason = "Created", note = "made it", type = "Normal",
      regarding = { apiVersion = "example.com/v1", kind = "Widget", name = "w", namespace = "ns",
                    uid = "w-1", resourceVersion = "42" },
    }, ev)
    assert.is_string(S.encode(ev))
  end)

  it("names the Event <name>.<hex nanoseconds> and writes microseconds", function()
    local ev = events.event(widget(), E, T1 + 0.5)
    assert.equal("w.18e9f9ff18172500", ev.metadata.name)
    assert.equal("2026-11-21T06:00:00.500000Z", ev.eventTime)
    ev = events.event(widget(), E, "2026-11-21T06:00:00.000001Z")
    assert.equal("w.18e9f9fefa49c3e8", ev.metadata.name)
    assert.equal("2026-11-21T06:00:00.000001Z", ev.eventTime)
  end)

  it("cuts a long object name so the Event name stays within 253 characters", function()
    local long = string.rep("a", 230) .. "-" .. string.rep("b", 40)
    local ev = events.event(widget(long), E, T1)
    assert.equal(253, #ev.metadata.name)
    assert.equal(string.rep("a", 230) .. "-" .. string.rep("b", 5) .. "." .. HEX_T1, ev.metadata.name)
    local dash = string.rep("a", 235) .. "-" .. string.rep("b", 40)
    ev = events.event(widget(dash), E, T1)
    assert.equal(string.rep("a", 235) .. "." .. HEX_T1, ev.metadata.name)
    assert.equal(dash, ev.regarding.name) -- the reference keeps the full name
  end)

  it("puts Events about cluster-scoped objects in namespace default", function()
    local ev = events.event(node(), E, T1)
    assert.equal("default", ev.metadata.namespace)
    assert.is_nil(ev.regarding.namespace)
    assert.equal("n-1", ev.regarding.uid)
  end)

  it("defaults note to empty and action to Reconcile", function()
    local ev = events.event(widget(), { type = "Warning", reason = "Failed", controller = CTRL, instance = "i" }, T1)
    assert.equal("", ev.note)
    assert.equal("Reconcile", ev.action)
    assert.equal("Warning", ev.type)
  end)

  it("cuts the note at 1024 bytes without splitting a UTF-8 character", function()
    assert.equal(1024, #events.event(widget(), with({ note = string.rep("x", 5000) }), T1).note)
    assert.equal(1024, #events.event(widget(), with({ note = string.rep("x", 1024) }), T1).note)
    local cases = {
      { string.rep("é", 600), 1024 },             -- 2-byte characters, boundary at 1024
      { "a" .. string.rep("é", 600), 1023 },      -- é straddles 1024: dropped whole
      { string.rep("€", 400), 1023 },             -- 3 bytes: 341 fit
      { "ab" .. string.rep("😀", 300), 1022 },    -- 4 bytes: "ab" + 255
      { "abc" .. string.rep("😀", 300), 1023 },
      { "a" .. string.rep("😀", 300), 1021 },
    }
    for _, c in ipairs(cases) do
      local note = events.event(widget(), with({ note = c[1] }), T1).note
      assert.equal(c[2], #note)
      assert.equal(c[1]:sub(1, c[2]), note)
      assert.is_string(S.encode(note)) -- still valid UTF-8
    end
    assert.equal("é", events.truncate("é", 1024))
  end)

  it("raises on invalid events", function()
    local w = widget()
    local function bad(msg, e, obj)
      S.raises(msg, function() events.event(obj or w, e, T1) end)
    end
    bad("event type must be \"Normal\" or \"Warning\", got \"Error\"", with({ type = "Error" }))
    bad("event type must be \"Normal\" or \"Warning\", got nil", { reason = "R", controller = CTRL, instance = "i" })
    bad("event reason must be a non-empty string, got \"\"", with({ reason = "" }))
    bad("event reason must be no more than 128 characters", with({ reason = string.rep("R", 129) }))
    bad("event action must be a non-empty string, got number", with({ action = 5 }))
    bad("event action must be no more than 128 characters", with({ action = string.rep("A", 129) }))
    bad("event note must be a string, got table", with({ note = {} }))
    bad("event controller \"Bad Name\"", with({ controller = "Bad Name" }))
    bad("event controller must be a non-empty string, got nil", { type = "Normal", reason = "R", instance = "i" })
    bad("event instance must be a non-empty string, got nil", { type = "Normal", reason = "R", controller = CTRL })
    bad("unknown event field 'message'", with({ message = "x" }))
    bad("event must be a table, got string", "Normal")
    S.raises("regarding object must be a table, got nil", function() events.event(nil, E, T1) end)
    bad("regarding object has no metadata.name", E, { apiVersion = "v1", kind = "X", metadata = {} })
    bad("regarding object has no kind", E, { apiVersion = "v1", metadata = { name = "x" } })
    bad("regarding object has no apiVersion", E, { kind = "X", metadata = { name = "x" } })
    S.raises("now: invalid time", function() events.event(w, E, "later") end)
  end)
end)

describe("luna.events.core_event (core/v1)", function()
  it("builds the legacy Event body", function()
    local ev = events.core_event(widget(), E, T1 + 0.75)
    assert.same({
      apiVersion = "v1", kind = "Event",
      metadata = { name = "w.18e9f9ff26fdd780", namespace = "ns" },
      involvedObject = { apiVersion = "example.com/v1", kind = "Widget", name = "w", namespace = "ns",
                         uid = "w-1", resourceVersion = "42" },
      reason = "Created", message = "made it", type = "Normal", action = "Create",
      count = 1, firstTimestamp = "2026-11-21T06:00:00Z", lastTimestamp = "2026-11-21T06:00:00Z",
      source = { component = CTRL, host = "luna-0" },
      reportingComponent = CTRL, reportingInstance = "luna-0",
    }, ev)
  end)

  it("uses namespace default for cluster-scoped objects and validates like event()", function()
    assert.equal("default", events.core_event(node(), E, T1).metadata.namespace)
    S.raises("event type must be", function() events.core_event(node(), with({ type = "Info" }), T1) end)
  end)
end)

describe("luna.events.recorder", function()
  local function rec(opts)
    local o = { controller = CTRL, instance = "luna-0" }
    for k, v in pairs(opts or {}) do o[k] = v end
    return events.recorder(o)
  end

  it("creates an Event the first time", function()
    local r = rec()
    local act = r:prepare(widget(), "Normal", "Created", "made it", "Create", T1)
    assert.equal("events.k8s.io/v1", act.api)
    assert.same(events.event(widget(), E, T1), act.create)
    assert.is_nil(act.patch)
    assert.is_string(act.key)
    assert.equal(1, r:size())
  end)

  it("patches the series of a repeat within the window", function()
    local r = rec()
    local first = r:prepare(widget(), "Warning", "Failed", "boom", nil, T1)
    local name = first.create.metadata.name
    local second = r:prepare(widget(), "Warning", "Failed", "boom", nil, T1 + 30.25)
    assert.is_nil(second.create)
    assert.same({ name = name, namespace = "ns",
                  body = { series = { count = 2, lastObservedTime = "2026-11-21T06:00:30.250000Z" } } },
                second.patch)
    assert.equal(2, second.count)
    assert.equal(first.key, second.key)
    local third = r:prepare(widget(), "Warning", "Failed", "boom", nil, T1 + 60)
    assert.equal(3, third.patch.body.series.count)
    assert.equal(name, third.patch.name)
    assert.equal(1, r:size())
  end)

  it("measures the window from the last occurrence", function()
    local r = rec({ window = 600 })
    r:prepare(widget(), "Normal", "Tick", "", nil, T1)
    for i = 1, 5 do
      local act = r:prepare(widget(), "Normal", "Tick", "", nil, T1 + 500 * i)
      assert.is_table(act.patch, "occurrence " .. i)
      assert.equal(i + 1, act.count)
    end
  end)

  it("creates a new Event after the window", function()
    local r = rec({ window = 600 })
    local first = r:prepare(widget(), "Normal", "Tick", "", nil, T1)
    assert.is_table(r:prepare(widget(), "Normal", "Tick", "", nil, T1 + 600).patch) -- at the edge: same
    local later = r:prepare(widget(), "Normal", "Tick", "", nil, T1 + 1200.001)
    assert.is_table(later.create)
    assert.not_equal(first.create.metadata.name, later.create.metadata.name)
    assert.equal(1, r:size())
    assert.equal(2, r:prepare(widget(), "Normal", "Tick", "", nil, T1 + 1201).count)
  end)

  it("keeps apart events that differ in object, type, reason, action or note", function()
    local r = rec()
    local base = { widget(), "Normal", "Created", "n", "Create" }
    local variants = {
      { widget("w", "other-uid"), "Normal", "Created", "n", "Create" },
      { widget(), "Warning", "Created", "n", "Create" },
      { widget(), "Normal", "Updated", "n", "Create" },
      { widget(), "Normal", "Created", "n2", "Create" },
      { widget(), "Normal", "Created", "n", "Update" },
    }
    assert.is_table(r:prepare(base[1], base[2], base[3], base[4], base[5], T1).create)
    for i, v in ipairs(variants) do
      assert.is_table(r:prepare(v[1], v[2], v[3], v[4], v[5], T1 + i).create, "variant " .. i)
    end
    assert.equal(6, r:size())
    -- the resourceVersion is not part of the identity
    local newer = widget()
    newer.metadata.resourceVersion = "43"
    assert.equal(2, r:prepare(newer, "Normal", "Created", "n", "Create", T1 + 10).count)
  end)

  it("treats notes equal after truncation as the same event", function()
    local r = rec()
    local a = string.rep("x", 1024)
    r:prepare(widget(), "Normal", "Big", a .. "tail-1", nil, T1)
    assert.equal(2, r:prepare(widget(), "Normal", "Big", a .. "tail-2", nil, T1 + 1).count)
  end)

  it("never hands out the same name twice", function()
    local r = rec()
    local a = r:prepare(widget(), "Normal", "A", "", nil, T1)
    local b = r:prepare(widget(), "Normal", "B", "", nil, T1)
    local c = r:prepare(widget(), "Normal", "C", "", nil, T1 - 5)
    assert.equal("w." .. HEX_T1, a.create.metadata.name)
    assert.equal("w.18e9f9fefa49c001", b.create.metadata.name)
    assert.equal("w.18e9f9fefa49c002", c.create.metadata.name)
    assert.equal("2026-11-21T05:59:55.000000Z", c.create.eventTime) -- the time itself is kept
  end)

  it("evicts the least recently used entry beyond max_entries", function()
    local r = rec({ max_entries = 2 })
    r:prepare(widget("a", "a"), "Normal", "R", "", nil, T1)
    r:prepare(widget("b", "b"), "Normal", "R", "", nil, T1 + 1)
    assert.equal(2, r:prepare(widget("a", "a"), "Normal", "R", "", nil, T1 + 2).count) -- a is now newest
    r:prepare(widget("c", "c"), "Normal", "R", "", nil, T1 + 3)                        -- evicts b
    assert.equal(2, r:size())
    assert.equal(3, r:prepare(widget("a", "a"), "Normal", "R", "", nil, T1 + 4).count)
    assert.is_table(r:prepare(widget("b", "b"), "Normal", "R", "", nil, T1 + 5).create) -- evicts c
    assert.is_table(r:prepare(widget("c", "c"), "Normal", "R", "", nil, T1 + 6).create) -- evicts a
    assert.is_table(r:prepare(widget("a", "a"), "Normal", "R", "", nil, T1 + 7).create)
    assert.equal(2, r:size())
  end)

  it("stays bounded at the default 4096 entries", function()
    local r = rec()
    for i = 1, 5000 do
      r:prepare(widget("w" .. i, "u" .. i), "Normal", "R", "", nil, T1 + i)
    end
    assert.equal(4096, r:size())
    assert.is_table(r:prepare(widget("w1", "u1"), "Normal", "R", "", nil, T1 + 5001).create)
    assert.equal(2, r:prepare(widget("w5000", "u5000"), "Normal", "R", "", nil, T1 + 5002).count)
  end)

  it("forgets an entry so the next occurrence creates a new Event", function()
    local r = rec()
    local first = r:prepare(widget(), "Normal", "R", "", nil, T1)
    local second = r:prepare(widget(), "Normal", "R", "", nil, T1 + 1)
    assert.is_true(r:forget(second))      -- e.g. the patch got NotFound
    assert.is_false(r:forget(second))
    assert.equal(0, r:size())
    local third = r:prepare(widget(), "Normal", "R", "", nil, T1 + 2)
    assert.is_table(third.create)
    assert.not_equal(first.create.metadata.name, third.create.metadata.name)
    assert.is_true(r:forget(third.key))
    S.raises("recorder:forget takes a prepare result or its key", function() r:forget(5) end)
  end)

  it("keeps its memory in a store that a later recorder can take over", function()
    -- what the runtime does across a reload: the new state's recorder gets
    -- the store the old one used
    local store = events.memory_store(4096)
    local before = rec({ store = store })
    local first = before:prepare(widget(), "Warning", "Failed", "boom", nil, T1)
    before:prepare(widget(), "Warning", "Failed", "boom", nil, T1 + 1)
    local after = rec({ store = store })
    assert.equal(1, after:size())
    local third = after:prepare(widget(), "Warning", "Failed", "boom", nil, T1 + 2)
    assert.same({ name = first.create.metadata.name, namespace = "ns",
                  body = { series = { count = 3, lastObservedTime = "2026-11-21T06:00:02.000000Z" } } },
                third.patch)
    -- names stay unique across the two: same instant, next nanosecond
    local other = after:prepare(widget("x", "x-1"), "Normal", "R", "", nil, T1)
    assert.equal("x.18e9f9fefa49c001", other.create.metadata.name)
    assert.is_true(after:forget(third))
    assert.equal(1, store:size())
    S.raises("option 'store' must be a store", function() rec({ store = 5 }) end)
    S.raises("max_entries must be a positive integer", function() events.memory_store(0) end)
  end)

  it("records core/v1 Events when api = \"v1\"", function()
    local r = rec({ api = "v1" })
    local first = r:prepare(widget(), "Warning", "Failed", "boom", "Sync", T1)
    assert.equal("v1", first.api)
    assert.same(events.core_event(widget(), with({ type = "Warning", reason = "Failed", note = "boom",
                                                   action = "Sync" }), T1), first.create)
    local second = r:prepare(widget(), "Warning", "Failed", "boom", "Sync", T1 + 90.5)
    assert.same({ name = first.create.metadata.name, namespace = "ns",
                  body = { count = 2, lastTimestamp = "2026-11-21T06:01:30Z" } }, second.patch)
  end)

  it("defaults instance to $HOSTNAME", function()
    local host = os.getenv("HOSTNAME")
    if host and host ~= "" then
      assert.equal(host, events.recorder({ controller = CTRL }).instance)
    else
      S.raises("events.recorder needs an 'instance'", function() events.recorder({ controller = CTRL }) end)
    end
  end)

  it("raises on bad options and misuse", function()
    local function bad(msg, opts) S.raises(msg, function() events.recorder(opts) end) end
    bad("events.recorder options must be a table, got nil", nil)
    bad("unknown events.recorder option 'name'", { controller = CTRL, instance = "i", name = "x" })
    bad("event controller must be a non-empty string, got nil", { instance = "i" })
    bad("event controller \"a/b/c\"", { controller = "a/b/c", instance = "i" })
    bad("event instance must be no more than 128 characters", { controller = CTRL, instance = string.rep("i", 129) })
    bad("option 'window' must be a number of seconds >= 0", { controller = CTRL, instance = "i", window = -1 })
    bad("option 'window' must be a number of seconds >= 0", { controller = CTRL, instance = "i", window = "10m" })
    bad("option 'max_entries' must be a positive integer", { controller = CTRL, instance = "i", max_entries = 0 })
    bad("option 'max_entries' must be a positive integer", { controller = CTRL, instance = "i", max_entries = 1.5 })
    bad("option 'api' must be \"events.k8s.io/v1\" or \"v1\"", { controller = CTRL, instance = "i", api = "v1beta1" })
    local r = rec()
    S.raises("use recorder:prepare(...)", function() r.prepare(widget(), "Normal", "R") end)
    S.raises("event type must be", function() r:prepare(widget(), "normal", "R") end)
    S.raises("regarding object must be a table", function() r:prepare(nil, "Normal", "R") end)
    assert.equal(0, r:size())
  end)

  it("a window of 0 only merges events at the same instant", function()
    local r = rec({ window = 0 })
    r:prepare(widget(), "Normal", "R", "", nil, T1)
    assert.equal(2, r:prepare(widget(), "Normal", "R", "", nil, T1).count)
    assert.is_table(r:prepare(widget(), "Normal", "R", "", nil, T1 + 0.000001).create)
  end)

  it("produces bodies core.json can send", function()
    local r = rec()
    local act = r:prepare(node(), "Normal", "R", "ünïcode ✓", nil, T1)
    local back = S.decode(S.encode(act.create))
    assert.same(act.create, back)
    assert.equal("ünïcode ✓", back.note)
    local patch = r:prepare(node(), "Normal", "R", "ünïcode ✓", nil, T1 + 1).patch
    assert.same(patch.body, S.decode(S.encode(patch.body)))
  end)
end)
