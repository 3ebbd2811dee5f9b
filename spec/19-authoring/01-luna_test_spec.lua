-- `luna test` (lua/luna/testing.lua, testing_cli.lua, runtime/test_control.h):
-- specs and fixture files run against the real runtime; failures say what
-- and show luna's log; the fake clock steps requeue_after and retry
-- backoff; bad usage exits 2.
local helpers = require("helpers")

local function tree(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  return dir
end

local function luna_test(args)
  return helpers.run(helpers.luna .. " test " .. args)
end

-- Marks a ConfigMap; fails the first attempt of every key labelled flaky.
local MARKER = [[
local luna = require "luna"
return luna.controller {
  name = "marker",
  watch = "v1/ConfigMap",
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm or (cm.metadata.labels or {}).marked then return end
    if (cm.metadata.labels or {}).flaky and req.attempt == 1 then return nil, "flaky first attempt" end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name, { metadata = { labels = { marked = "yes" } } })
    if err then return nil, err end
    if (cm.metadata.labels or {}).again then return { requeue_after = 60 } end
  end,
}
]]

local function cm(name, labels)
  return ([[{ apiVersion = "v1", kind = "ConfigMap", metadata = { name = %q, namespace = "default", labels = %s } }]])
    :format(name, labels or "nil")
end

describe("luna test", function()
  it("runs describe/it specs on the real runtime and reports each test", function()
    local dir = tree{ ["marker.lua"] = MARKER, ["marker_test.lua"] = [[
local testing = require "luna.testing"
describe("marker", function()
  local env
  before_each(function() env = testing.start{} end)
  it("marks", function()
    env:create(]] .. cm("a") .. [[)
    env:wait_idle()
    assert.equal("yes", env:get("v1/ConfigMap", "default", "a").metadata.labels.marked)
    local calls = env:calls()
    assert.equal(1, #calls)
    assert.equal("PATCH", calls[1].method)
    assert.equal("marker", calls[1].controller)
    assert.equal("default/a", calls[1].key)
    assert.equal(200, calls[1].status)
    assert.same({ metadata = { labels = { marked = "yes" } } }, calls[1].body)
  end)
  it("fails with the reason", function()
    env:create(]] .. cm("b") .. [[)
    env:wait_idle()
    assert.equal("no", env:get("v1/ConfigMap", "default", "b").metadata.labels.marked)
  end)
  pending("later")
end)
]] }
    local out, rc = luna_test(dir)
    assert.equal(1, rc, out)
    assert.matches("ok    marker marks", out)
    assert.matches("FAIL  marker fails with the reason", out)
    assert.matches('expected "no", got "yes"', out)
    assert.matches("%-%-%- luna log %(last lines%) %-%-%-", out)
    assert.matches("pend  marker later", out)
    assert.matches("1 passed, 1 failed, 1 pending", out)
  end)

  it("steps requeue_after and retry backoff on the fake clock", function()
    local dir = tree{ ["marker.lua"] = MARKER, ["clock_test.lua"] = [[
local testing = require "luna.testing"
describe("clock", function()
  it("retries a failed key only when the clock moves", function()
    local env = testing.start{ objects = { ]] .. cm("f", "{ flaky = 'y' }") .. [[ } }
    local st = env:status()
    assert.is_true(st.idle)
    assert.equal(1, st.controllers[1].waiting)
    assert.is_nil(env:get("v1/ConfigMap", "default", "f").metadata.labels.marked)
    st = env:advance(1)
    assert.equal("yes", env:get("v1/ConfigMap", "default", "f").metadata.labels.marked)
    assert.equal(0, st.controllers[1].waiting)
  end)
  it("runs requeue_after when it is due", function()
    local env = testing.start{ objects = { ]] .. cm("r", "{ again = 'y' }") .. [[ } }
    local st = env:status()
    assert.equal(1, st.controllers[1].waiting)
    assert.equal(60, math.floor(st.controllers[1].next + 0.5))
    env:calls()
    env:advance(59)
    assert.same({}, env:calls())
    env:advance(1)
    assert.same({}, env:calls(), "marked already: the second reconcile writes nothing")
    assert.equal(0, env:status().controllers[1].waiting)
  end)
  it("has no clock to step without fake_clock", function()
    local env = testing.start{ fake_clock = false }
    assert.has_error(function() env:advance(1) end, "advance needs the fake clock")
  end)
  it("reports a runtime that died, without dying itself", function()
    local env = testing.start{}
    os.execute("kill -9 " .. env.pid)
    assert.has_error(function()
      for _ = 1, 50 do env:status() end
    end, "luna exited")
  end)
  it("reports unknown control commands", function()
    local env = testing.start{}
    assert.has_error(function() env:command("bogus") end, "unknown command: bogus")
  end)
end)
]] }
    local out, rc = luna_test(dir)
    assert.equal(0, rc, out)
    assert.matches("5 passed, 0 failed, 0 pending", out)
  end)

  it("runs fixture files and names the first difference", function()
    local dir = tree{ ["marker.lua"] = MARKER, ["fixture_test.lua"] = [[
return {
  cases = {
    { name = "marks what it finds",
      objects = { ]] .. cm("a") .. [[ },
      expect = { objects = { { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "a", labels = { marked = "yes" } } } },
                 calls = { { method = "PATCH", path = "/configmaps/a$", body = { metadata = { labels = { marked = "yes" } } } } } } },
    { name = "wrong expectation",
      objects = { ]] .. cm("b") .. [[ },
      expect = { objects = { { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "b", labels = { marked = "no" } } } } } },
    { name = "missing call",
      objects = { ]] .. cm("c") .. [[ },
      expect = { calls = { { method = "DELETE" } } } },
    { name = "act, then absent",
      objects = { ]] .. cm("d") .. [[ },
      act = function(env) env:delete("v1/ConfigMap", "default", "d") end,
      expect = { absent = { { "v1/ConfigMap", "default", "d" } } } },
  },
}
]] }
    local out, rc = luna_test(dir)
    assert.equal(1, rc, out)
    assert.matches("ok    marks what it finds", out)
    assert.matches("v1/ConfigMap b: %.metadata%.labels%.marked: want no, have yes", out)
    assert.matches("no API call matches .*DELETE.*; calls: PATCH /api/v1/namespaces/default/configmaps/c", out)
    assert.matches("ok    act, then absent", out)
    assert.matches("2 passed, 2 failed, 0 pending", out)
  end)

  it("waits until everything a write caused has happened", function()
    -- a chain: each ConfigMap's reconcile creates the next one, up to 30
    local chain = [[
local luna = require "luna"
return luna.controller {
  name = "chain", watch = "v1/ConfigMap", workers = 4,
  reconcile = function(req)
    local n = tonumber(req.name:match("^c(%d+)$"))
    if not n or n >= 30 then return end
    local _, err = luna.create{ apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "c" .. (n + 1), namespace = req.namespace } }
    if err and not luna.is_already_exists(err) then return nil, err end
  end,
}
]]
    local dir = tree{ ["chain.lua"] = chain, ["chain_test.lua"] = [[
local testing = require "luna.testing"
it("follows the chain to its end", function()
  local env = testing.start{ fake_clock = false }
  for round = 1, 3 do
    -- (seeding text creates the namespace too)
    env:seed("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, namespace: r" .. round .. "}\n")
    env:wait_idle()
    assert.equal(30, #env:list("v1/ConfigMap", { namespace = "r" .. round }))
  end
end)
]] }
    local out, rc = luna_test(dir)
    assert.equal(0, rc, out)
  end)

  it("seeds objects from Lua tables, YAML text and manifest files, and reports bad ones", function()
    local dir = tree{ ["marker.lua"] = MARKER, ["objs.yaml"] = [[
apiVersion: v1
kind: ConfigMap
metadata: {name: from-file, namespace: default}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
]], ["seed_test.lua"] = [[
local testing = require "luna.testing"
it("seeds", function()
  local env = testing.start{}
  env:seed{ ]] .. cm("from-table") .. [[ }
  env:seed("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-yaml, namespace: default}\n")
  env:seed_file("objs.yaml")
  env:wait_idle()
  for _, name in ipairs { "from-table", "from-yaml", "from-file" } do
    assert.equal("yes", env:get("v1/ConfigMap", "default", name).metadata.labels.marked, name)
  end
  assert.is_not_nil(env:get("v1/Namespace", "other"))
  -- seeding an object again replaces it
  env:seed{ ]] .. cm("from-table", "{ replaced = 'y' }") .. [[ }
  env:wait_idle()
  assert.equal("y", env:get("v1/ConfigMap", "default", "from-table").metadata.labels.replaced)
  assert.has_error(function() env:seed("a: [") end, "seed")
  assert.has_error(function() env:seed_file("missing.yaml") end, "cannot read")
end)
]] }
    local out, rc = luna_test(dir)
    assert.equal(0, rc, out)
    assert.matches("1 passed, 0 failed, 0 pending", out)
  end)

  it("--filter runs the tests whose name contains the text", function()
    local dir = tree{ ["marker.lua"] = MARKER, ["f_test.lua"] = [[
describe("x", function()
  it("one", function() end)
  it("two", function() error("not run") end)
end)
]] }
    local out, rc = luna_test("--filter one " .. dir)
    assert.equal(0, rc, out)
    assert.matches("1 passed, 0 failed, 0 pending", out)
  end)

  it("reports a file that does not load, and a controller that does not", function()
    local dir = tree{ ["marker.lua"] = MARKER, ["broken_test.lua"] = "describe(\n" }
    local out, rc = luna_test(dir)
    assert.equal(1, rc, out)
    assert.matches("FAIL  %(loading%).*broken_test%.lua", out)
    dir = tree{ ["bad.lua"] = "return 42\n", ["bad_test.lua"] = [[
it("starts", function() require("luna.testing").start{} end)
]] }
    out, rc = luna_test(dir)
    assert.equal(1, rc, out)
    assert.matches("luna exited before answering status", out)
    assert.matches("controller load failed", out)
    -- beside a file that loads too: a test env runs with --require-all, so
    -- a broken file fails the test instead of running without it
    dir = tree{ ["marker.lua"] = MARKER, ["bad.lua"] = "return 42\n", ["bad_test.lua"] = [[
it("starts", function() require("luna.testing").start{} end)
]] }
    out, rc = luna_test(dir)
    assert.equal(1, rc, out)
    assert.matches("luna exited before answering status", out)
    assert.matches("1 of 2 controller files failed to load", out)
  end)

  it("exits 2 on bad usage", function()
    local out, rc = luna_test("/nonexistent/luna-spec")
    assert.equal(2, rc)
    assert.matches("no such file or directory", out)
    out, rc = luna_test(tree{ ["a.lua"] = "" })
    assert.equal(2, rc)
    assert.matches("no %*_test%.lua files", out)
    out, rc = luna_test("--frobnicate")
    assert.equal(2, rc)
    assert.matches("unknown option %-%-frobnicate", out)
    out, rc = luna_test("--help")
    assert.equal(0, rc)
    assert.matches("usage: luna test", out)
  end)
end)

describe("luna run and the specs next to controllers", function()
  it("does not load *_test.lua as a controller", function()
    local dir = tree{ ["marker.lua"] = MARKER, ["marker_test.lua"] = "error('loaded as a controller')\n" }
    local p = helpers.spawn({ helpers.luna, "run", "--dev-server", "--metrics-bind-address=0",
                              "--health-probe-bind-address=0", dir })
    finally(function() p:stop() end)
    p:expect("controllers loaded dir=%S+ count=1", 20)
    p:expect("caches synced", 20)
    p:kill()
    assert.equal(0, p:wait(20))
  end)

  it("takes --fake-clock only with --test-control; --test-control without --dev-server uses the kubeconfig", function()
    -- `luna test --kube` runs the runtime against the kubeconfig's cluster
    local out, rc = helpers.run("KUBECONFIG=/nonexistent/kubeconfig " .. helpers.luna ..
      " run --test-control controllers </dev/null")
    assert.equal(1, rc, out)
    assert.matches("kubeconfig failed error=\"KUBECONFIG=/nonexistent/kubeconfig", out)
    out, rc = helpers.run(helpers.luna .. " run --dev-server --fake-clock controllers")
    assert.equal(2, rc)
    assert.matches("%-%-fake%-clock needs %-%-test%-control", out)
  end)

  it("shuts the runtime down when the test runner goes away", function()
    local p = helpers.spawn({ "sh", "-c", "exec " .. helpers.luna ..
      " run --dev-server --test-control --metrics-bind-address=0 --health-probe-bind-address=0 " ..
      tree{ ["marker.lua"] = MARKER } .. " </dev/null" })
    finally(function() p:stop() end)
    p:expect("test control: input closed, shutting down", 20)
    assert.equal(0, p:wait(20))
  end)
end)
