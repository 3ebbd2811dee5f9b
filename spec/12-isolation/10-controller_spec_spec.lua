-- Class 1 of issue 10: the controller spec is validated once, with raw
-- reads, into memory the host owns; no script code runs while it is read,
-- values out of range are refused, a misspelled field is reported at its
-- own line with the nearest known field, and nothing the script does to
-- its tables afterwards reaches the host.
local luna = require("luna")
local support = require("12-isolation.support")
local attacks = require("12-isolation.attack_files")

local function ok_spec(extra)
  local s = { name = "demo", watch = "v1/ConfigMap", reconcile = function() end }
  for k, v in pairs(extra or {}) do s[k] = v end
  return s
end

local function refused(spec)
  local ok, err = pcall(luna.controller, spec)
  assert.is_false(ok, "accepted")
  return err
end

-- A table whose every metamethod counts its calls (and then misbehaves).
local calls = 0
local function trapped(t)
  local function trap() calls = calls + 1 while true do end end
  return setmetatable(t or {}, { __index = trap, __newindex = trap, __len = trap, __call = trap,
    __tostring = trap, __eq = trap, __lt = trap, __le = trap, __concat = trap, __pairs = trap,
    __ipairs = trap })
end

describe("the controller spec #unit", function()
  it("is read without running any metamethod of the script's tables", function()
    calls = 0
    local c = luna.controller(trapped{
      name = "demo",
      watch = trapped{ "v1/ConfigMap", namespace = "ns", labels = trapped{ app = "x" },
        fields = trapped{ ["metadata.name"] = "y" } },
      owns = trapped{ trapped{ "v1/Secret" }, "apps/v1/Deployment" },
      watches = trapped{ trapped{ "v1/Pod", map = function() end } },
      limits = trapped{ seconds = 1 },
      rate_limit = trapped{ qps = 5 },
      indexes = trapped{ by_x = function() end },
      predicates = trapped{ function() return true end },
      reconcile = function() end,
    })
    assert.equal(0, calls)
    assert.equal("app=x", c.watch.labels)
    assert.equal("metadata.name=y", c.watch.fields)
    assert.equal(2, #c.owns)
    assert.same({ seconds = 1 }, c.limits)
  end)

  it("reads what is in the table, not what __index would make up", function()
    local err = refused(setmetatable({ name = "demo", reconcile = function() end },
      { __index = function(_, k) if k == "watch" then return "v1/ConfigMap" end end }))
    assert.matches("needs a 'watch' field", err, 1, true)
  end)

  it("keeps its copy when the script changes its tables afterwards", function()
    local labels, owns = { app = "x" }, { "v1/Secret" }
    local spec = ok_spec({ watch = { "v1/ConfigMap", labels = labels }, owns = owns,
      limits = { seconds = 2 }, rate_limit = { qps = 7 } })
    local c = luna.controller(spec)
    labels.app, labels.other = "changed", "y"
    owns[1], owns[2] = "v1/Pod", "v1/Pod"
    spec.watch, spec.name = "v1/Pod", "other"
    spec.limits.seconds, spec.rate_limit.qps = -1, 0 / 0
    assert.equal("demo", c.name)
    assert.equal("v1/ConfigMap", c.watch.kind)
    assert.equal("app=x", c.watch.labels)
    assert.equal(1, #c.owns)
    assert.equal("v1/Secret", c.owns[1].kind)
    assert.same({ seconds = 2 }, c.limits)
    assert.equal(7, c.rate_limit.qps)
  end)

  it("is read-only, and what it hands out are copies", function()
    local c = luna.controller(ok_spec())
    assert.has_error(function() c.watch = "v1/Pod" end)
    assert.has_error(function() c.reconcile = print end)
    assert.has_error(function() setmetatable(c, {}) end)
    assert.equal("luna.controller", getmetatable(c))
    local w = c.watch
    w.kind = "v1/Pod"
    assert.equal("v1/ConfigMap", c.watch.kind)
    assert.is_true(luna.is_controller(c))
  end)

  local out_of_range = {
    { "a resync of a nanosecond", { resync = 1e-9 }, "'resync' must be a number of seconds: 0 (off) or 1 to" },
    { "a resync under a second", { resync = 0.5 }, "'resync' must be" },
    { "an infinite resync", { resync = math.huge }, "'resync' must be" },
    { "a NaN resync", { resync = 0 / 0 }, "'resync' must be" },
    { "a billion workers", { workers = 1e9 }, "'workers' must be a positive integer (1 to 1024)" },
    { "infinite workers", { workers = math.huge }, "'workers' must be a positive integer" },
    { "NaN workers", { workers = 0 / 0 }, "'workers' must be a positive integer" },
    { "negative workers", { workers = -3 }, "'workers' must be a positive integer" },
    { "an infinite instruction budget", { limits = { instructions = math.huge } }, "'limits.instructions' must be" },
    { "an infinite time budget", { limits = { seconds = math.huge } }, "'limits.seconds' must be a number > 0" },
    { "a day-long time budget and more", { limits = { seconds = 90000 } }, "'limits.seconds' must be" },
    { "a zero qps", { rate_limit = { qps = 0 } }, "'rate_limit.qps' must be a number > 0" },
    { "a NaN qps", { rate_limit = { qps = 0 / 0 } }, "'rate_limit.qps' must be" },
    { "an infinite max_delay", { rate_limit = { max_delay = math.huge } }, "'rate_limit.max_delay' must be" },
    { "a negative base_delay", { rate_limit = { base_delay = -1 } }, "'rate_limit.base_delay' must be" },
    { "a fractional burst", { rate_limit = { burst = 2.5 } }, "'rate_limit.burst' must be an integer" },
    { "a zero burst", { rate_limit = { burst = 0 } }, "'rate_limit.burst' must be an integer" },
    { "base_delay above max_delay", { rate_limit = { base_delay = 10, max_delay = 1 } },
      "'rate_limit.base_delay' (10 s) must not exceed max_delay (1 s)" },
    { "keep_managed_fields that is not a boolean", { keep_managed_fields = "yes" }, "must be a boolean" },
    { "65 owned kinds", { owns = (function() local t = {} for i = 1, 65 do t[i] = "v1/Secret" end return t end)() },
      "has more than 64 entries" },
    { "an owns list with a hole", { owns = { "v1/Secret", nil, "v1/Pod" } }, "'owns' must be a list" },
    { "an invalid label value", { watch = { "v1/ConfigMap", labels = { app = "a b" } } }, "not a valid label key and value" },
    { "a label selector string that does not parse", { watch = { "v1/ConfigMap", labels = "a in (" } }, "'watch.labels'" },
    { "a namespace that is not a name", { watch = { "v1/ConfigMap", namespace = "A/../b" } }, "must be a namespace name" },
    { "a map on an owned kind", { owns = { { "v1/Secret", map = function() end } } }, "only applies to watches" },
    { "an index name with a slash", { indexes = { ["a/b"] = function() end } }, "index name 'a/b'" },
  }
  for _, case in ipairs(out_of_range) do
    it("refuses " .. case[1], function()
      assert.matches(case[3], refused(ok_spec(case[2])), 1, true)
    end)
  end

  local misspelled = {
    { { wacth = "v1/ConfigMap" }, "unknown field 'wacth' (did you mean 'watch'?)" },
    { { reconcil = 1 }, "unknown field 'reconcil' (did you mean 'reconcile'?)" },
    { { worker = 2 }, "unknown field 'worker' (did you mean 'workers'?)" },
    { { ratelimit = {} }, "unknown field 'ratelimit' (did you mean 'rate_limit'?)" },
    { { indices = {} }, "unknown field 'indices' (did you mean 'indexes'?)" },
    { { zzzzzzzz = 1 }, "unknown field 'zzzzzzzz'" },
    { { watch = { "v1/ConfigMap", lables = { a = "b" } } }, "'watch' has unknown key 'lables' (did you mean 'labels'?)" },
    { { rate_limit = { qsp = 1 } }, "'rate_limit' has unknown key 'qsp' (did you mean 'qps'?)" },
    { { limits = { second = 1 } }, "'limits' has unknown key 'second' (did you mean 'seconds'?)" },
  }
  for _, case in ipairs(misspelled) do
    it("names the nearest known field for " .. next(case[1]), function()
      local err = refused(ok_spec(case[1]))
      assert.matches(case[2], err, 1, true)
      if not case[2]:find("did you mean", 1, true) then assert.is_nil(err:find("did you mean", 1, true)) end
    end)
  end
end)

describe("a refused spec in a controller file #integration", function()
  it("is reported at the line of the field, with no traceback into luna's library", function()
    local out, rc = support.load_only({ ["a.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "demo",
  watch = { "v1/ConfigMap",
    lables = { app = "x" } },
  reconcile = function() end,
}
]] })
    assert.equal(1, rc)
    local line = out:match("[^\n]*controller load failed[^\n]*")
    assert.matches("a%.lua:5: controller field 'watch' has unknown key 'lables' %(did you mean 'labels'%?%)", line)
    assert.is_nil(line:find("traceback", 1, true))
    assert.is_nil(line:find("init.lua", 1, true))
  end)

  it("points at the misspelled field of a tail call (issue 17, point 3)", function()
    local out = support.load_only({ ["b.lua"] = [[
local luna = require "luna"

return luna.controller {
  name = "demo",
  wacth = "v1/ConfigMap",
  reconcile = function() end,
}
]] })
    assert.matches("b%.lua:5: controller has unknown field 'wacth' %(did you mean 'watch'%?%)", out)
    assert.is_nil(out:find("init.lua", 1, true))
  end)

  it("points at the call when the field is not written out (a computed key)", function()
    local out = support.load_only({ ["c.lua"] = [[
local luna = require "luna"
local spec = { name = "demo", watch = "v1/ConfigMap", reconcile = function() end }
spec["res" .. "ync"] = 1e-9
local c = luna.controller(spec)
return c
]] })
    assert.matches("c%.lua:4: controller field 'resync' must be", out)
  end)
end)

describe("class 1 attack files #integration", function()
  local srv
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)

  for _, case in ipairs(attacks.list("1")) do
    if case.expect == "refused" then
      it("refuses " .. case.name .. ": " .. case.attack, function() attacks.refused(case) end)
    end
  end

  it("survives every class 1 attack that loads, next to a canary", function()
    support.fresh_namespace(srv)
    local runs = {}
    for _, case in ipairs(attacks.list("1")) do
      if case.expect == "runs" then runs[#runs + 1] = case end
    end
    assert.is_true(#runs >= 3)
    attacks.run(srv, runs)
  end)
end)
