-- Class 5 of issue 10 (the runtime's part): what a script makes the host
-- keep in C memory is bounded.  Keys from a watches map (per result, per
-- key, queued in all), index values (per object, per value; repeated
-- values dropped in n log n), index functions in the controller's watchdog
-- guard; and one cached object with an integer past 64 bits reads as the
-- nearest double (as the API server decodes it) instead of breaking every
-- read of the cache.
local support = require("12-isolation.support")
local attacks = require("12-isolation.attack_files")

local function controller(name, extra, body) return support.controller(name, body, extra) end

describe("bounded growth #integration", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)
  before_each(function() support.fresh_namespace(srv) end)
  after_each(function()
    if p then support.stop_host(p) end
    p = nil
  end)

  it("refuses an index function's 100,000 values at once, and the loop goes on", function()
    srv:create_cm("one")
    p = support.run(srv, {
      ["a.lua"] = controller("wide", [[indexes = {
        by_all = function(o) local t = {} for i = 1, 1e5 do t[i] = "v" .. i end return t end,
        -- only the spec's object: a cluster adds kube-root-ca.crt to the namespace
        by_dup = function(o)
          if o.metadata.name ~= "one" then return nil end
          local t = {} for i = 1, 1000 do t[i] = "same" end return t
        end },]],
        [[    print("wide sees", #luna.cache("v1/ConfigMap"):by_index("by_dup", "same"),
      #luna.cache("v1/ConfigMap"):by_index("by_all", "v1"))]]),
      ["b.lua"] = controller("other", "", "    print('other reconciled', req.name)"),
    })
    local line = support.wait_line(p, { "index function failed", "index=wide/by_all" }, 60)
    assert.matches("index function returned 100000 values %(at most 1024%)", line)
    -- a thousand copies of one value: the object is in that bucket once
    support.wait_line(p, { "wide sees 1 0" }, 60)
    srv:create_cm("two")
    support.wait_line(p, { "other reconciled two" }, 60)
  end)

  it("runs index functions in the controller's own watchdog budgets", function()
    srv:create_cm("one")
    p = support.run(srv, { ["a.lua"] = controller("spin",
      [[limits = { instructions = 1e6 }, indexes = { by_spin = function() while true do end end },]],
      "    print('spin reconciled', req.name)") })
    local line = support.wait_line(p, { "index function failed", "index=spin/by_spin" }, 60)
    assert.matches("index function exceeded its instruction budget %(1000000 instructions", line)
    support.wait_line(p, { "spin reconciled one" }, 60)
  end)

  it("refuses watches map results past the bounds, with a clear error", function()
    p = support.run(srv, {
      ["a.lua"] = controller("many", [[watches = { { "v1/Secret", namespace = "@NS@",
        map = function(s)
          if s.metadata.name == "many" then local t = {} for i = 1, 5000 do t[i] = "@NS@/k" .. i end return t end
          if s.metadata.name == "long" then return ("k"):rep(2 ^ 20) end
          return { namespace = "@NS@", name = "fine" }
        end } },]], "    print('many reconciled', req.name)"),
    })
    support.wait_line(p, { "caches synced" }, 30)
    for _, name in ipairs({ "many", "long", "fine" }) do
      srv:request("POST", srv:ns_path("secrets"), { apiVersion = "v1", kind = "Secret",
        metadata = { name = name }, data = {} })
    end
    support.wait_line(p, { "watches map result ignored", "map returned more than 1000 requests" }, 60)
    support.wait_line(p, { "watches map result ignored", "keys of at most 317 bytes" }, 60)
    support.wait_line(p, { "many reconciled fine" }, 60)
    assert.same({}, support.lines(p, { "many reconciled k1" }))
  end)

end)

describe("an integer past 64 bits in a cached object #unit", function()
  -- The dev server refuses such a body (400) and a real API server
  -- stores the number as a float64; a hostile or buggy server can still
  -- send one.  Cache reads, index functions, predicates and map functions
  -- decode objects with bigint = "double"; a script's own decode refuses.
  local json = require("luna.core").json
  local doc = '{"spec":{"n":123456789012345678901234567890,"m":18446744073709551616,"k":1}}'

  it("reads as the nearest double where the host decodes cached objects", function()
    local v = assert(json.decode(doc, { bigint = "double" }))
    assert.equal(1.2345678901234568e29, v.spec.n)
    assert.equal(2 ^ 64, v.spec.m)
    assert.equal(1, v.spec.k)
  end)

  it("is refused by a script's own decode, never rounded silently", function()
    local v, err = json.decode(doc)
    assert.is_nil(v)
    assert.matches("does not fit in 64 bits", err.message)
    assert.has_error(function() json.decode(doc, { bigint = "round" }) end)
  end)
end)

describe("class 5 attack files (the runtime's) #integration", function()
  local srv
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)

  it("are survived, next to a canary", function()
    support.fresh_namespace(srv)
    local runs = {}
    for _, case in ipairs(attacks.list("5")) do
      if case.expect == "runs" and not case.alone then runs[#runs + 1] = case end
    end
    assert.is_true(#runs >= 6)
    attacks.run(srv, runs)
  end)
end)
