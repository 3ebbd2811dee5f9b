-- core.health: the /healthz and /readyz state and bodies (kube-apiserver's
-- "[+]name ok" / "[-]name failed: reason" style), on a fake clock.
local helpers = require("helpers") -- luacheck: ignore
local core = require("luna.core")

local function new(opts)
  opts = opts or {}
  opts.clock = opts.clock or "fake"
  return core.health.new(opts)
end

describe("healthz", function()
  it("answers ok while the heartbeat is fresh", function()
    local h = new()
    assert.same({ "ok", 200 }, { h:render("healthz") })
    assert.same({ "[+]loop ok\nhealthz check passed\n", 200 },
      { h:render("healthz", { verbose = true }) })
    assert.is_true(h:live())
  end)

  it("fails once the heartbeat is older than the timeout, and recovers on a beat", function()
    local h = new{ timeout = 10 }
    h:advance(10)
    assert.is_true(h:live()) -- exactly the timeout still counts
    h:advance(0.5)
    assert.is_false(h:live())
    assert.equal(10.5, h:age())
    -- failures are always verbose
    assert.same({ "[-]loop failed: no heartbeat for 10.5s (timeout 10s)\nhealthz check failed\n", 500 },
      { h:render("healthz") })
    h:beat()
    assert.equal(0, h:age())
    assert.same({ "ok", 200 }, { h:render("healthz") })
  end)

  it("ignores readiness checks", function()
    local h = new()
    h:set("informers-synced", false, "0/2 synced")
    assert.same({ "ok", 200 }, { h:render("healthz") })
  end)

  it("beats on the loop with a real clock", function()
    local h = core.health.new{ clock = "real", interval = 0.02, timeout = 0.5 }
    core.loop.run(0.2)
    -- a beat happened while the loop ran (else the age would be >= 0.2)
    assert.is_true(h:age() < 0.2, tostring(h:age()))
    assert.is_true(h:live())
    assert.has_error(function() h:advance(1) end)
  end)
end)

describe("readyz", function()
  it("is ready with no checks", function()
    local h = new()
    assert.is_true(h:ready())
    assert.same({ "ok", 200 }, { h:render("readyz") })
    assert.same({ "[+]loop ok\nreadyz check passed\n", 200 }, { h:render("readyz", { verbose = true }) })
  end)

  it("lists the checks in registration order and fails while one is false", function()
    local h = new()
    h:set("informers-synced", false, "2/3 informers synced")
    h:set("leader-or-standby", true)
    h:set("shutdown", true)
    assert.is_false(h:ready())
    assert.same({ table.concat({
      "[+]loop ok",
      "[-]informers-synced failed: 2/3 informers synced",
      "[+]leader-or-standby ok",
      "[+]shutdown ok",
      "readyz check failed",
    }, "\n") .. "\n", 500 }, { h:render("readyz") })
    h:set("informers-synced", true, "")
    assert.is_true(h:ready())
    assert.same({ "ok", 200 }, { h:render("readyz") })
    assert.same({ table.concat({
      "[+]loop ok", "[+]informers-synced ok", "[+]leader-or-standby ok", "[+]shutdown ok",
      "readyz check passed",
    }, "\n") .. "\n", 200 }, { h:render("readyz", { verbose = true }) })
  end)

  it("shows a passing check's note in the verbose body only (objects-decoded)", function()
    local h = new()
    h:set("objects-decoded", true, "v1/ConfigMap: 1 left out, last ns/deep: nesting deeper than the limit")
    assert.is_true(h:ready())
    assert.same({ "ok", 200 }, { h:render("readyz") })
    assert.same({ "[+]loop ok\n[+]objects-decoded ok: v1/ConfigMap: 1 left out, last ns/deep: "
      .. "nesting deeper than the limit\nreadyz check passed\n", 200 },
      { h:render("readyz", { verbose = true }) })
  end)

  it("writes a failed check without a reason, and keeps reasons on one line", function()
    local h = new()
    h:set("a", false)
    h:set("b", false, "line one\nline two\tend\r")
    assert.same({ "[+]loop ok\n[-]a failed\n[-]b failed: line one line two end \nreadyz check failed\n", 500 },
      { h:render("readyz") })
    local ok, reason = h:check("b")
    assert.is_false(ok)
    assert.equal("line one line two end ", reason)
  end)

  it("cuts long reasons", function()
    local h = new()
    h:set("long", false, string.rep("x", 2000))
    local _, reason = h:check("long")
    assert.equal(512, #reason)
  end)

  it("is not ready while the loop is stale", function()
    local h = new{ timeout = 5 }
    h:set("informers-synced", true)
    h:advance(6)
    assert.is_false(h:ready())
    local body, status = h:render("readyz")
    assert.equal(500, status)
    assert.matches("^%[%-%]loop failed: no heartbeat for 6.0s %(timeout 5s%)\n", body)
  end)

  it("removes checks and reports one check", function()
    local h = new()
    h:set("gone", false, "x")
    h:set("kept", true)
    assert.equal(2, h:count())
    assert.is_true(h:remove("gone"))
    assert.is_false(h:remove("gone"))
    assert.is_nil(h:check("gone"))
    assert.same({ true, "" }, { h:check("kept") })
    assert.same({ "ok", 200 }, { h:render("readyz") })
  end)

  it("excludes checks on request and warns about names that match nothing", function()
    local h = new()
    h:set("informers-synced", false, "not yet")
    h:set("leader-or-standby", true)
    assert.same({ table.concat({
      "[+]loop ok",
      "[+]informers-synced excluded: ok",
      "[+]leader-or-standby ok",
      'warn: some health checks cannot be excluded: no matches for "also-nope","nope"',
      "readyz check passed",
    }, "\n") .. "\n", 200 }, { h:render("readyz", { verbose = true,
      exclude = { "informers-synced", "nope", "also-nope", "nope" } }) })
    -- passing and not verbose: just ok, as kube-apiserver answers
    assert.same({ "ok", 200 }, { h:render("readyz", { exclude = { "informers-synced", "nope" } }) })
    assert.same({ table.concat({
      "[+]loop excluded: ok",
      'warn: some health checks cannot be excluded: no matches for "informers-synced"',
      "healthz check passed",
    }, "\n") .. "\n", 200 },
      { h:render("healthz", { verbose = true, exclude = { "loop", "informers-synced" } }) })
  end)
end)

describe("health misuse", function()
  for _, name in ipairs({ "", "a b", "tab\t", "new\nline", "semi;colon", string.rep("n", 129) }) do
    it("rejects the check name " .. string.format("%q", name:sub(1, 20)), function()
      assert.has_error(function() new():set(name, true) end)
    end)
  end

  it("accepts names like kube-apiserver's", function()
    local h = new()
    h:set("poststarthook/start-informers", true)
    h:set("etcd_2.v3", true)
    assert.equal(2, h:count())
  end)

  it("rejects bad arguments and options", function()
    local h = new()
    assert.has_error(function() h:set("x", "yes") end)
    assert.has_error(function() h:set("x", true, 5) end)
    assert.has_error(function() h:render("livez") end)
    assert.has_error(function() h:render("readyz", { verbos = true }) end)
    assert.has_error(function() h:render("readyz", { exclude = { 1 } }) end)
    local many = {}
    for i = 1, 64 do many[i] = "c" .. i end
    assert.equal(200, select(2, h:render("readyz", { exclude = many })))
    many[65] = "c65"
    assert.has_error(function() h:render("readyz", { exclude = many }) end)
    assert.has_error(function() h:advance(-1) end)
    assert.has_error(function() core.health.new{ timeout = 1, interval = 1 } end)
    assert.has_error(function() core.health.new{ interval = -1 } end)
    assert.has_error(function() core.health.new{ timeout = 1 / 0 } end)
    assert.has_error(function() core.health.new{ clock = "wall" } end)
    assert.has_error(function() core.health.new{ timout = 3 } end)
  end)
end)
