-- luna.conditions: metav1.Condition rules (lastTransitionTime moves only
-- when the status changes), queries, removal and validation.
local conditions = require("luna.conditions")
local S = require("10-lua-helpers.support")
local json = S.json

local T1 = "2026-11-21T06:00:00Z"
local T2 = "2026-11-21T07:00:00Z"
local T3 = "2026-11-21T08:00:00Z"

local function app()
  return S.decode([[{"apiVersion":"example.com/v1","kind":"App","metadata":{"name":"a","generation":3}}]])
end

describe("luna.conditions.set", function()
  it("creates status and a JSON array of conditions", function()
    local o = app()
    assert.is_true(conditions.set(o, { type = "Ready", status = "False", reason = "Pending",
                                       message = "waiting", observed_generation = 3 }, T1))
    assert.is_true(json.is_array(o.status.conditions))
    assert.same({ type = "Ready", status = "False", reason = "Pending", message = "waiting",
                  lastTransitionTime = T1, observedGeneration = 3 }, o.status.conditions[1])
  end)

  it("defaults message to empty and leaves out observedGeneration", function()
    local o = app()
    conditions.set(o, { type = "Ready", status = "True", reason = "Ok" }, 1795240800)
    local c = o.status.conditions[1]
    assert.equal("", c.message)
    assert.is_nil(c.observedGeneration)
    assert.equal(T1, c.lastTransitionTime)
  end)

  it("stamps the wall clock when now is nil", function()
    local o = app()
    local before = os.time()
    conditions.set(o, { type = "Ready", status = "True", reason = "Ok" })
    local t = assert(require("luna.time").parse(o.status.conditions[1].lastTransitionTime))
    assert.is_true(t >= before and t <= os.time())
  end)

  it("moves lastTransitionTime only when the status changes", function()
    local o = app()
    conditions.set(o, { type = "Ready", status = "False", reason = "Pending" }, T1)
    -- same status, new reason, message and generation: no transition
    assert.is_true(conditions.set(o, { type = "Ready", status = "False", reason = "Scaling",
                                       message = "2/3", observed_generation = 4 }, T2))
    local c = conditions.get(o, "Ready")
    assert.same({ type = "Ready", status = "False", reason = "Scaling", message = "2/3",
                  lastTransitionTime = T1, observedGeneration = 4 }, c)
    -- status changes: transition
    assert.is_true(conditions.set(o, { type = "Ready", status = "True", reason = "Ok" }, T3))
    c = conditions.get(o, "Ready")
    assert.equal(T3, c.lastTransitionTime)
    assert.equal("", c.message)
    assert.is_nil(c.observedGeneration)
    -- True → Unknown → True: two more transitions
    conditions.set(o, { type = "Ready", status = "Unknown", reason = "Lost" }, "2026-11-21T09:00:00Z")
    conditions.set(o, { type = "Ready", status = "True", reason = "Ok" }, "2026-11-21T10:00:00Z")
    assert.equal("2026-11-21T10:00:00Z", conditions.get(o, "Ready").lastTransitionTime)
  end)

  it("reports no change when nothing differs, even with a later time", function()
    local o = app()
    local c = { type = "Ready", status = "True", reason = "Ok", message = "fine", observed_generation = 3 }
    conditions.set(o, c, T1)
    assert.is_false(conditions.set(o, c, T3))
    assert.equal(T1, conditions.get(o, "Ready").lastTransitionTime)
  end)

  it("keeps one entry per type and other types untouched, in order", function()
    local o = app()
    conditions.set(o, { type = "Ready", status = "False", reason = "Pending" }, T1)
    conditions.set(o, { type = "example.com/Synced", status = "True", reason = "Done" }, T1)
    conditions.set(o, { type = "Ready", status = "True", reason = "Ok" }, T2)
    local l = o.status.conditions
    assert.equal(2, #l)
    assert.same({ "Ready", "example.com/Synced" }, { l[1].type, l[2].type })
    assert.equal(T1, l[2].lastTransitionTime)
  end)

  it("works on conditions decoded from the API and keeps unknown fields", function()
    local o = S.decode([[{"metadata":{"name":"a"},"status":{"phase":"Running","conditions":[
      {"type":"Ready","status":"True","reason":"Ok","message":"","lastTransitionTime":"2026-01-01T00:00:00Z","extra":1}]}}]])
    assert.is_false(conditions.set(o, { type = "Ready", status = "True", reason = "Ok" }, T1))
    assert.is_true(conditions.set(o, { type = "Ready", status = "False", reason = "Broken" }, T1))
    local c = conditions.get(o, "Ready")
    assert.equal(T1, c.lastTransitionTime)
    assert.equal(1, c.extra)
    assert.equal("Running", o.status.phase)
  end)

  it("repairs an entry without lastTransitionTime", function()
    local o = S.decode([[{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Ok","message":""}]}}]])
    assert.is_true(conditions.set(o, { type = "Ready", status = "True", reason = "Ok" }, T2))
    assert.equal(T2, conditions.get(o, "Ready").lastTransitionTime)
  end)

  it("replaces a null status", function()
    local o = { status = json.null }
    assert.is_true(conditions.set(o, { type = "Ready", status = "True", reason = "Ok" }, T1))
    assert.equal(1, #o.status.conditions)
  end)

  it("normalises now to metav1.Time", function()
    local o = app()
    conditions.set(o, { type = "Ready", status = "True", reason = "Ok" }, "2026-11-21T07:00:00.9+01:00")
    assert.equal(T1, conditions.get(o, "Ready").lastTransitionTime)
  end)

  it("accepts reasons and types at the edges of the metav1.Condition rules", function()
    local o = app()
    for _, r in ipairs({ "A", "Ok", "Reason_1", "a:b,c_", "Waiting:For,Pods1" }) do
      assert.is_true(conditions.set(o, { type = "Ready", status = "True", reason = r }, T1), r)
    end
    for _, t in ipairs({ "R", "ready", "Ready-2", "a.b_c", "x.io/Ready", "a-b.c/D.e_f",
                         string.rep("a", 253) .. "/" .. string.rep("B", 62) }) do
      assert.is_true(conditions.set(o, { type = t, status = "True", reason = "Ok" }, T1), t)
    end
    assert.is_true(conditions.set(o, { type = "M", status = "True", reason = "Ok",
                                       message = string.rep("m", 32768) }, T1))
    assert.is_true(conditions.set(o, { type = "G", status = "True", reason = "Ok", observed_generation = 0 }, T1))
  end)

  it("raises on invalid conditions, leaving the object alone", function()
    local o = app()
    local function bad(msg, c, now)
      S.raises(msg, function() conditions.set(o, c, now) end)
    end
    bad("condition must be a table, got nil", nil)
    bad("unknown condition field 'observedGeneration'",
        { type = "Ready", status = "True", reason = "Ok", observedGeneration = 1 })
    bad("condition type must be a non-empty string, got nil", { status = "True", reason = "Ok" })
    bad("condition type must be a non-empty string, got \"\"", { type = "", status = "True", reason = "Ok" })
    for _, t in ipairs({ "Ready!", "-Ready", "Ready-", "a/b/c", "/Ready", "Ready/", "Example.com/Ready", "a b" }) do
      bad("invalid condition type", { type = t, status = "True", reason = "Ok" })
    end
    bad("must be no more than 316 characters",
        { type = string.rep("a", 253) .. "/" .. string.rep("B", 63), status = "True", reason = "Ok" })
    bad("status must be \"True\", \"False\" or \"Unknown\", got \"true\"",
        { type = "Ready", status = "true", reason = "Ok" })
    bad("status must be \"True\", \"False\" or \"Unknown\", got true",
        { type = "Ready", status = true, reason = "Ok" })
    bad("condition reason must be a non-empty CamelCase string, got nil", { type = "Ready", status = "True" })
    bad("condition reason must be a non-empty CamelCase string, got \"\"", { type = "Ready", status = "True", reason = "" })
    for _, r in ipairs({ "1Ok", "Not ok", "Ok,", "Ok:", "Ok-Fine", "_Ok", "Ök" }) do
      bad("must be CamelCase", { type = "Ready", status = "True", reason = r })
    end
    bad("condition reason must be no more than 1024 characters",
        { type = "Ready", status = "True", reason = string.rep("R", 1025) })
    bad("message must be a string, got number", { type = "Ready", status = "True", reason = "Ok", message = 1 })
    bad("message must be no more than 32768 characters",
        { type = "Ready", status = "True", reason = "Ok", message = string.rep("m", 32769) })
    for _, g in ipairs({ -1, 1.5, "3", math.huge }) do
      bad("observed_generation must be an integer >= 0",
          { type = "Ready", status = "True", reason = "Ok", observed_generation = g })
    end
    bad("now: invalid time", { type = "Ready", status = "True", reason = "Ok" }, "soon")
    S.raises("object must be a table, got string", function()
      conditions.set("o", { type = "Ready", status = "True", reason = "Ok" }) end)
    assert.is_nil(o.status)
  end)
end)

describe("luna.conditions queries", function()
  local o
  before_each(function()
    o = app()
    conditions.set(o, { type = "Ready", status = "True", reason = "Ok" }, T1)
    conditions.set(o, { type = "Degraded", status = "False", reason = "Fine" }, T1)
    conditions.set(o, { type = "Progressing", status = "Unknown", reason = "Starting" }, T1)
  end)

  it("get returns the entry or nil", function()
    assert.equal("Ok", conditions.get(o, "Ready").reason)
    assert.is_nil(conditions.get(o, "Available"))
    assert.is_nil(conditions.get(app(), "Ready"))
    assert.is_nil(conditions.get({ status = { conditions = json.null } }, "Ready"))
    S.raises("invalid condition type", function() conditions.get(o, "not valid") end)
    S.raises("object must be a table", function() conditions.get(nil, "Ready") end)
  end)

  it("is_true, is_false and is_unknown read the status", function()
    assert.same({ true, false, false }, { conditions.is_true(o, "Ready"), conditions.is_false(o, "Ready"),
                                          conditions.is_unknown(o, "Ready") })
    assert.same({ false, true, false }, { conditions.is_true(o, "Degraded"), conditions.is_false(o, "Degraded"),
                                          conditions.is_unknown(o, "Degraded") })
    assert.same({ false, false, true }, { conditions.is_true(o, "Progressing"),
                                          conditions.is_false(o, "Progressing"),
                                          conditions.is_unknown(o, "Progressing") })
    assert.same({ false, false, true }, { conditions.is_true(o, "Available"), conditions.is_false(o, "Available"),
                                          conditions.is_unknown(o, "Available") })
  end)

  it("remove drops the entry and leaves [] after the last", function()
    assert.is_true(conditions.remove(o, "Degraded"))
    assert.is_false(conditions.remove(o, "Degraded"))
    assert.is_nil(conditions.get(o, "Degraded"))
    assert.same({ "Ready", "Progressing" }, { o.status.conditions[1].type, o.status.conditions[2].type })
    conditions.remove(o, "Ready")
    conditions.remove(o, "Progressing")
    assert.equal([[{"conditions":[]}]], S.encode(o.status))
    assert.is_false(conditions.remove(app(), "Ready"))
    assert.is_nil(app().status)
  end)

  it("remove marks a Lua-built list", function()
    local b = { status = { conditions = { { type = "Ready", status = "True" } } } }
    assert.is_true(conditions.remove(b, "Ready"))
    assert.equal([[{"conditions":[]}]], S.encode(b.status))
  end)
end)
