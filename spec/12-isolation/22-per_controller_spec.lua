-- Nothing a controller owns is shared with its neighbours (issue 23,
-- classes 4 and 5; docs/isolation.md, "Nothing shared between
-- controllers" and "Per-controller settings on shared informers").
--
-- Class 4: two controller files that require the same module of the
-- controllers directory each get their own instance of it, so one cannot
-- replace the other's helper functions or read what the other stored in
-- the module; the luna library hands out no shared table a script can
-- write (a lister's or a recorder's methods), and math.random is each
-- controller's own.
-- Class 5: settings of a controller that rides on a shared informer stay
-- its own whoever loaded first: resync (per handler, as client-go's
-- AddEventHandlerWithResyncPeriod) and keep_managed_fields (a different
-- informer).
--
-- Every host runs with the default flags a user gets.
local support = require("12-isolation.support")

local helpers = require("helpers")

local function count(p, parts) return #support.lines(p, parts) end

-- Reads p's output until n lines have all parts (raises after secs).
local function wait_count(p, parts, n, secs)
  local deadline = helpers.now() + secs
  while count(p, parts) < n do
    local left = deadline - helpers.now()
    if left <= 0 or not p:read_line(left) then
      error(("%d of %d lines with %s within %ss; output:\n%s"):format(count(p, parts), n,
        table.concat(parts, " + "), secs, table.concat(p.out, "\n")), 2)
    end
  end
end

describe("per-controller isolation #integration", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)
  before_each(function() support.fresh_namespace(srv) end)
  after_each(function()
    if p then support.stop_host(p, { "Sanitizer" }) end
    p = nil
  end)

  it("gives each controller its own instance of a shared module", function()
    -- a.lua loads first (files load in name order) and tampers with the
    -- module at its top level; b.lua keeps a secret in it and relies on its
    -- permission check.
    p = support.run(srv, {
      ["lib/shared.lua"] = [[
local M = { secrets = {} }
function M.allowed(name) return name == "ok" end
return M
]],
      ["lib/wrap.lua"] = [[
return { shared = require "lib.shared" }
]],
      ["a.lua"] = [[
local luna = require "luna"
local shared = require "lib.shared"
shared.allowed = function() return true end -- let everything through
return luna.controller {
  name = "attacker", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { role = "a" } },
  reconcile = function(req)
    print("attacker sees token=" .. tostring(shared.secrets.token))
  end,
}
]],
      ["b.lua"] = [[
local luna = require "luna"
local shared = require "lib.shared"
-- within one controller a module is one instance, whoever requires it
print("victim same-instance=" .. tostring(require("lib.wrap").shared == shared))
return luna.controller {
  name = "victim", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { role = "b" } },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    shared.secrets.token = cm.data.token
    print("victim stored; allowed(" .. req.name .. ")=" .. tostring(shared.allowed(req.name)))
  end,
}
]],
    })
    support.wait_line(p, { "victim same-instance=true" }, 30)
    srv:create_cm("secret", { token = "hunter2" }, { role = "b" })
    local line = support.wait_line(p, { "victim stored;" }, 30)
    assert.matches("allowed(secret)=false", line, 1, true)
    srv:create_cm("probe", nil, { role = "a" })
    line = support.wait_line(p, { "attacker sees token=" }, 30)
    assert.matches("attacker sees token=nil", line, 1, true)
  end)

  -- a.lua (loaded first) runs `attack` at its top level; b.lua runs
  -- `victim` in its reconcile of the ConfigMap "mine".
  local function attack_files(attack, victim)
    return {
      ["a.lua"] = [[
local luna = require "luna"
]] .. attack .. [[

return luna.controller {
  name = "attacker", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { role = "a" } },
  reconcile = function(req) end,
}
]],
      ["b.lua"] = [[
local luna = require "luna"
return luna.controller {
  name = "victim", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { role = "b" } },
  reconcile = function(req)
]] .. victim .. [[

  end,
}
]],
    }
  end

  it("hands out no lister methods a neighbour's cache reads use", function()
    p = support.run(srv, attack_files([[
-- with `Lister.__index = Lister`, a lister's __index was the methods
-- table every controller's luna.cache() shares
local methods = luna.cache("v1/ConfigMap").__index
print("attacker lister-methods=" .. type(methods))
if type(methods) == "table" then methods.get = function() return { forged = true } end end
]], [[
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    print("victim cache forged=" .. tostring(cm.forged) .. " name=" .. tostring(cm.metadata and cm.metadata.name))
]]))
    srv:create_cm("mine", nil, { role = "b" })
    local line = support.wait_line(p, { "victim cache forged=" }, 30)
    assert.matches("forged=nil name=mine", line, 1, true)
    assert.equal(1, count(p, { "attacker lister-methods=nil" }), table.concat(p.out, "\n"))
  end)

  it("hands out no recorder methods a neighbour's luna.event uses", function()
    p = support.run(srv, attack_files([[
local rec = luna.events.recorder{ controller = "example.com/x", instance = "i" }
print("attacker recorder-methods=" .. type(rec.__index))
if type(rec.__index) == "table" then rec.__index.prepare = function() error("tampered prepare") end end
print("attacker store-methods=" .. type(luna.events.memory_store(4).__index))
]], [[
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    local ok, err = pcall(luna.event, cm, "Normal", "Seen", "seen it")
    print("victim event ok=" .. tostring(ok) .. " err=" .. tostring(err))
]]))
    srv:create_cm("mine", nil, { role = "b" })
    local line = support.wait_line(p, { "victim event ok=" }, 30)
    assert.is_nil(line:find("tampered", 1, true), line)
    assert.equal(1, count(p, { "attacker recorder-methods=nil" }), table.concat(p.out, "\n"))
    assert.equal(1, count(p, { "attacker store-methods=nil" }), table.concat(p.out, "\n"))
  end)

  it("gives each controller its own random generator", function()
    -- the attacker seeds at its top level, draws three numbers and seeds
    -- again; the victim loads next and draws.  With one generator per
    -- state the victim's draws were the attacker's prediction.
    p = support.run(srv, {
      ["a.lua"] = [[
local luna = require "luna"
math.randomseed(7)
print(("attacker predicts %d %d %d"):format(math.random(1e9), math.random(1e9), math.random(1e9)))
math.randomseed(7)
return luna.controller {
  name = "attacker", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { role = "a" } },
  reconcile = function(req) end,
}
]],
      ["b.lua"] = [[
local luna = require "luna"
print(("victim drew %d %d %d"):format(math.random(1e9), math.random(1e9), math.random(1e9)))
-- its own seed still makes its own sequence reproducible
math.randomseed(3)
local first = math.random(1e9)
math.randomseed(3)
print("victim reseeded same=" .. tostring(first == math.random(1e9)))
return luna.controller {
  name = "victim", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { role = "b" } },
  reconcile = function(req) end,
}
]],
    })
    local predicted = support.wait_line(p, { "attacker predicts " }, 30):match("attacker predicts (%d+ %d+ %d+)")
    local drew = support.wait_line(p, { "victim drew " }, 30):match("victim drew (%d+ %d+ %d+)")
    assert.is_not_nil(predicted)
    assert.is_not_nil(drew)
    assert.are_not.equal(predicted, drew)
    support.wait_line(p, { "victim reseeded same=true" }, 30)
  end)

  -- Three pairs of controllers, each pair on one shared informer (the same
  -- kind, namespace and selector), loaded in file-name order.
  local function resync_controller(name, pair, resync)
    return ([[
local luna = require "luna"
return luna.controller {
  name = %q, watch = { "v1/ConfigMap", namespace = "@NS@", labels = { pair = %q } }, %s
  reconcile = function(req) print("reconciled by=%s key=" .. req.key) end,
}
]]):format(name, pair, resync and ("resync = " .. resync .. ",") or "", name)
  end

  it("gives each controller on a shared informer its own resync period", function()
    p = support.run(srv, {
      ["1a.lua"] = resync_controller("one-plain", "one", nil),  -- first: no resync
      ["1b.lua"] = resync_controller("one-resync", "one", 1),
      ["2a.lua"] = resync_controller("two-resync", "two", 1),   -- first: resync 1 s
      ["2b.lua"] = resync_controller("two-plain", "two", nil),
      ["3a.lua"] = resync_controller("three-slow", "three", 3600), -- first: resync 1 h
      ["3b.lua"] = resync_controller("three-fast", "three", 1),
    })
    for _, pair in ipairs({ "one", "two", "three" }) do srv:create_cm("cm-" .. pair, nil, { pair = pair }) end
    -- each controller that asked for resync = 1 gets its object again and again
    for _, name in ipairs({ "one-resync", "two-resync", "three-fast" }) do
      wait_count(p, { "reconciled by=" .. name .. " " }, 4, 60)
    end
    -- ... while a neighbour on the same informer that asked for none (or
    -- for an hour) saw its object once, from the informer's first list
    for _, name in ipairs({ "one-plain", "two-plain", "three-slow" }) do
      assert.equal(1, count(p, { "reconciled by=" .. name .. " " }), table.concat(p.out, "\n"))
    end
  end)

  it("gives a controller that keeps managedFields an informer that keeps them", function()
    local files = {}
    -- 1: the default (managedFields dropped), loaded first; 2: keeps them
    for i, keep in ipairs({ false, true }) do
      files[i .. ".lua"] = ([[
local luna = require "luna"
return luna.controller {
  name = "mf-%d", watch = { "v1/ConfigMap", namespace = "@NS@" }, keep_managed_fields = %s,
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    print("mf-%d has-managed-fields=" .. tostring(cm.metadata.managedFields ~= nil))
  end,
}
]]):format(i, tostring(keep), i)
    end
    p = support.run(srv, files)
    local created = srv:create_cm("with-fields")
    assert.is_not_nil(created.metadata.managedFields, "the server sets managedFields")
    assert.matches("has-managed-fields=false", support.wait_line(p, { "mf-1 has-managed-fields=" }, 30), 1, true)
    assert.matches("has-managed-fields=true", support.wait_line(p, { "mf-2 has-managed-fields=" }, 30), 1, true)
  end)
end)
