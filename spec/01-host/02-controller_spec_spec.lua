-- luna.controller{} validation, in process.
local luna = require("luna")

local function ok_spec(extra)
  local s = { name = "demo", watch = "v1/ConfigMap", reconcile = function() end }
  for k, v in pairs(extra or {}) do s[k] = v end
  return s
end

describe("luna.controller", function()
  it("returns a validated controller with defaults", function()
    local c = luna.controller(ok_spec())
    assert.is_true(luna.is_controller(c))
    assert.equal("demo", c.name)
    assert.equal("v1/ConfigMap", c.watch.kind)
    assert.equal("ConfigMap", c.watch.type.kind)
    assert.equal("", c.watch.type.group)
    assert.equal(1, c.workers)
  end)

  it("parses group kinds", function()
    local c = luna.controller(ok_spec({ watch = { "apps/v1/Deployment", namespace = "prod", labels = { app = "x" } } }))
    assert.same({ group = "apps", version = "v1", kind = "Deployment", api_version = "apps/v1" }, c.watch.type)
    assert.equal("prod", c.watch.namespace)
    assert.equal("app=x", c.watch.labels)
    local w = luna.parse_kind("example.com/v1alpha1/Widget")
    assert.equal("example.com/v1alpha1", w.api_version)
  end)

  it("marks metadata-only sources, and only them", function()
    local c = luna.controller(ok_spec({ watch = { "v1/ConfigMap", metadata_only = false },
      owns = { { "v1/Secret", metadata_only = true }, "v1/Pod" },
      watches = { { "v1/Pod", metadata_only = true, map = function() end } } }))
    assert.is_nil(c.watch.metadata_only)
    assert.is_true(c.owns[1].metadata_only)
    assert.is_nil(c.owns[2].metadata_only)
    assert.is_true(c.watches[1].metadata_only)
    assert.is_true(luna.controller(ok_spec({ watch = { "v1/Pod", metadata_only = true } })).watch.metadata_only)
  end)

  it("copies the watchdog limits it is given", function()
    local limits = { instructions = 1e6, seconds = 0.5 }
    local c = luna.controller(ok_spec({ limits = limits }))
    assert.same(limits, c.limits)
    assert.are_not.equal(limits, c.limits)
    assert.same({}, luna.controller(ok_spec()).limits)
  end)

  it("copies the rate limit it is given", function()
    local rl = { base_delay = 0.01, max_delay = 10, qps = 5, burst = 20 }
    local c = luna.controller(ok_spec({ rate_limit = rl }))
    assert.same(rl, c.rate_limit)
    assert.are_not.equal(rl, c.rate_limit)
  end)

  it("is not fooled by a plain table or a forged metatable", function()
    assert.is_false(luna.is_controller({ name = "x" }))
    assert.is_false(luna.is_controller(setmetatable({ name = "x" }, { __metatable = "luna.controller" })))
    assert.is_false(luna.is_controller(nil))
  end)

  local bad = {
    { "a non-table", 42, "takes a table" },
    { "an unknown field", ok_spec({ wtach = 1 }), "unknown field 'wtach' (did you mean 'watch'?)" },
    { "a missing name", ok_spec({ name = false }), "'name' must be" },
    { "an uppercase name", ok_spec({ name = "Demo" }), "'name' must be" },
    { "a missing watch", ok_spec({ watch = false }), "must be a kind string" },
    { "a malformed kind", ok_spec({ watch = "ConfigMap" }), "invalid kind" },
    { "a missing reconcile", ok_spec({ reconcile = 1 }), "needs a 'reconcile' function" },
    { "zero workers", ok_spec({ workers = 0 }), "'workers' must be a positive integer" },
    { "fractional workers", ok_spec({ workers = 1.5 }), "'workers' must be a positive integer" },
    { "a negative resync", ok_spec({ resync = -1 }), "'resync' must be" },
    { "a priority_queue that is not a boolean", ok_spec({ priority_queue = "fifo" }),
      "'priority_queue' must be a boolean" },
    { "a watches entry without map", ok_spec({ watches = { "v1/Secret" } }), "needs a 'map' function" },
    { "labels that are not strings", ok_spec({ watch = { "v1/Pod", labels = { a = 1 } } }), "map strings to strings" },
    { "an index that is not a function", ok_spec({ indexes = { by_x = "x" } }), "map index names to functions" },
    { "limits that are not a table", ok_spec({ limits = 5 }), "'limits' must be a table" },
    { "an unknown limit", ok_spec({ limits = { memroy = 1 } }), "'limits' has unknown key 'memroy'" },
    { "a memory limit of 0", ok_spec({ limits = { memory = 0 } }),
      "'limits.memory' must be a number of MiB > 0 and <= 64 (--controller-memory-limit)" },
    { "a memory limit past the operator's", ok_spec({ limits = { memory = 65 } }),
      "'limits.memory' must be a number of MiB > 0 and <= 64 (--controller-memory-limit)" },
    { "a negative limit", ok_spec({ limits = { seconds = -1 } }), "'limits.seconds' must be a number > 0" },
    { "a limit that is not a number", ok_spec({ limits = { instructions = "1e6" } }),
      "'limits.instructions' must be a number > 0" },
    { "a NaN limit", ok_spec({ limits = { seconds = 0 / 0 } }), "'limits.seconds' must be a number > 0" },
    { "an unknown rate_limit key", ok_spec({ rate_limit = { base = 1 } }), "'rate_limit' has unknown key 'base'" },
    { "a metadata_only that is not a boolean", ok_spec({ owns = { { "v1/Secret", metadata_only = "yes" } } }),
      "controller field 'owns[1].metadata_only' must be a boolean (true: cache apiVersion, kind and metadata only)" },
    { "a metadata_only of 1 on watch", ok_spec({ watch = { "v1/Pod", metadata_only = 1 } }),
      "controller field 'watch.metadata_only' must be a boolean" },
    { "a misspelled metadata_only", ok_spec({ owns = { { "v1/Secret", metadata_ony = true } } }),
      "controller field 'owns[1]' has unknown key 'metadata_ony' (did you mean 'metadata_only'?)" },
    { "a rate_limit that is not a number", ok_spec({ rate_limit = { qps = "10" } }),
      "'rate_limit.qps' must be a number > 0" },
  }
  for _, case in ipairs(bad) do
    it("rejects " .. case[1], function()
      local ok, err = pcall(luna.controller, case[2])
      assert.is_false(ok)
      assert.matches(case[3], err, 1, true)
    end)
  end
end)
