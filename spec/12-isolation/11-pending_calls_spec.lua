-- Class 2 of issue 10: a pending API call belongs to exactly one reconcile
-- and dies with it.  A call that could not yield is refused before it
-- starts (a table.sort comparator, a gsub function, an xpcall handler, a
-- __tostring run by a library function); a call in flight is cancelled
-- whatever ends its reconcile; no script can resume a reconcile (or the
-- host's callback thread) and hand it a forged answer.
local support = require("12-isolation.support")
local attacks = require("12-isolation.attack_files")

local controller = support.controller

local GET = 'luna.get("v1/ConfigMap", req.namespace, req.name)'

describe("a pending API call #integration", function()
  local srv, p
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)
  before_each(function() support.fresh_namespace(srv) end)
  after_each(function()
    if p then support.stop_host(p, { "Sanitizer", "api answer dropped" }) end
    p = nil
  end)

  it("is refused before it starts where the reconcile could not wait, with a clear error", function()
    local contexts = {
      sort = "table.sort({ 'b', 'a' }, function(x, y) " .. GET .. " return x < y end)",
      gsub = "local _ = ('ab'):gsub('%w', function(c) " .. GET .. " return c end)",
      format = "local _ = string.format('%s', setmetatable({}, { __tostring = function() " .. GET ..
        " return 'x' end }))",
    }
    local files = {}
    for name, body in pairs(contexts) do files[name .. ".lua"] = controller("c-" .. name, body) end
    -- in an xpcall handler the refusal is an error in error handling: xpcall
    -- returns false and the reconcile goes on, with no call started
    files["handler.lua"] = controller("c-handler",
      "    print('handler', xpcall(function() error('e') end, function(m) " .. GET .. " return m end))")
    files["after.lua"] = controller("after", "    local cm, err = " .. GET .. "\n    if not cm then return nil, err end\n" ..
      "    print('after got', cm.metadata.name)")
    srv:create_cm("one")
    p = support.run(srv, files)
    for name in pairs(contexts) do
      local line = support.wait_line(p, { "reconcile failed", "controller=c-" .. name }, 30)
      assert.matches("luna.get cannot wait here", line)
    end
    support.wait_line(p, { "handler false" }, 30)
    support.wait_line(p, { "reconcile done", "controller=c-handler" }, 30)
    -- the API works for everyone else
    support.wait_line(p, { "after got one" }, 30)
  end)

  it("works from a metamethod the VM or a fast function runs (LuaJIT can yield there)", function()
    srv:create_cm("one")
    p = support.run(srv, { ["a.lua"] = controller("lazy", [[
    local lazy = setmetatable({}, { __index = function(_, k) return luna.get("v1/ConfigMap", req.namespace, k) end })
    local cm = lazy[req.name]
    print("lazy got", cm and cm.metadata.name)
    local text = tostring(setmetatable({}, { __tostring = function()
      return luna.get("v1/ConfigMap", req.namespace, req.name).metadata.name end }))
    print("tostring got", text)
]]) })
    support.wait_line(p, { "lazy got one" }, 30)
    support.wait_line(p, { "tostring got one" }, 30)
  end)

  it("is refused on a coroutine the script made", function()
    srv:create_cm("one")
    p = support.run(srv, { ["a.lua"] = controller("co", [[
    local ok, err = pcall(coroutine.wrap(function() return luna.get("v1/ConfigMap", req.namespace, req.name) end))
    print("script coroutine", ok, err)
]]) })
    local line = support.wait_line(p, { "script coroutine false" }, 30)
    assert.matches("can only be called inside reconcile", line)
  end)

  it("cannot be answered by a script: resuming a waiting reconcile is refused", function()
    for i = 1, 6 do srv:create_cm("cm-" .. i) end
    p = support.run(srv, { ["a.lua"] = [[
local luna = require "luna"
local waiting = {}
return luna.controller {
  name = "forger", watch = { "v1/ConfigMap", namespace = "@NS@" }, workers = 4,
  reconcile = function(req)
    local me = coroutine.running()
    for co in pairs(waiting) do
      if coroutine.status(co) == "suspended" then
        local ok, err = pcall(coroutine.resume, co, 200, '{"kind":"Forged"}')
        print(ok and "resume allowed" or "resume refused", err)
      end
    end
    waiting[me] = true
    for _ = 1, 20 do
      local cm = luna.get("v1/ConfigMap", req.namespace, req.name)
      if cm and cm.kind == "Forged" then print("forged answer accepted") end
    end
    waiting[me] = nil
  end,
}
]] })
    local line = support.wait_line(p, { "resume refused" }, 30)
    assert.matches("belongs to the host", line)
    for i = 1, 6 do support.wait_line(p, { "reconcile done", "key=" .. srv.ns .. "/cm-" .. i }, 30) end
    assert.same({}, support.lines(p, { "resume allowed" }))
    assert.same({}, support.lines(p, { "forged answer accepted" }))
  end)

  it("leaves nothing behind when refused a thousand times in a pcall loop", function()
    srv:create_cm("one")
    p = support.run(srv, { ["a.lua"] = controller("loop", [[
    local refused = 0
    for _ = 1, 1000 do
      if not pcall(table.sort, { 3, 1, 2 }, function(x, y) luna.get("v1/ConfigMap", req.namespace, req.name) return x < y end) then
        refused = refused + 1
      end
    end
    local cm = luna.get("v1/ConfigMap", req.namespace, req.name)
    print("refused", refused, "then got", cm and cm.metadata.name)
]]) })
    support.wait_line(p, { "refused 1000 then got one" }, 60)
    support.wait_line(p, { "reconcile done", "controller=loop" }, 30)
  end)

  it("is cancelled when the watchdog stops its reconcile, and its answer never arrives", function()
    srv:create_cm("one")
    p = support.run(srv, { ["a.lua"] = controller("budget", [[
    local t = os.clock()
    while os.clock() - t < 0.45 do end
    for _ = 1, 20 do luna.get("v1/ConfigMap", req.namespace, req.name) end
    while true do end
]]) }, { "--reconcile-time-limit", "0.5" })
    for attempt = 1, 3 do
      support.wait_line(p, { "reconcile failed", "controller=budget", "attempt=" .. attempt }, 30)
    end
  end)
end)

describe("a pending API call at reload #integration", function()
  local client = require("support.apiserver_client")
  if client.real() then
    pending("needs the dev server's delay-path fault injection")
    return
  end
  local srv, p
  setup(function() srv = client.start{ args = { "--admin" } } srv.namespaces = {} end)
  teardown(function()
    srv:request("PUT", "/luna/v1/faults", "", { content_type = "text/plain" })
    support.stop(srv)
  end)

  it("finishes on the old code after its controller was removed, into nothing freed", function()
    support.fresh_namespace(srv)
    srv:request("PUT", "/luna/v1/faults", "delay=2,delay-path=/configmaps/held", { content_type = "text/plain" })
    p = support.run(srv, {
      ["a.lua"] = controller("leaving", [[
    local cm = luna.get("v1/ConfigMap", req.namespace, req.name)
    print("leaving got", cm and cm.metadata.name)
]]),
      ["b.lua"] = controller("staying", "    print('staying reconciled', req.name)"),
    }, { "--metrics-bind-address", "127.0.0.1:0" })
    support.wait_line(p, { "caches synced" }, 30)
    srv:create_cm("held")
    support.wait_line(p, { "http request start", "/configmaps/held" }, 30)
    os.remove(p.dir .. "/a.lua")
    p:kill(1)
    support.wait_line(p, { "reload done" }, 30)
    support.wait_line(p, { "controller removed controller=leaving" }, 30)
    -- the answer arrives for a controller whose metrics and queue are gone
    support.wait_line(p, { "leaving got held" }, 30)
    support.wait_line(p, { "reconcile done", "controller=leaving" }, 30)
    srv:create_cm("later")
    support.wait_line(p, { "staying reconciled later" }, 30)
    p:kill(15)
    local rc = p:wait(20)
    local out = table.concat(p.out, "\n")
    p:stop()
    assert.equal(0, rc, out)
    assert.is_nil(out:find("Sanitizer", 1, true), out)
  end)
end)

describe("class 2 attack files #integration", function()
  local srv
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)

  it("are survived, next to a canary", function()
    support.fresh_namespace(srv)
    local runs = {}
    for _, case in ipairs(attacks.list("2")) do
      assert.equal("runs", case.expect)
      runs[#runs + 1] = case
    end
    assert.is_true(#runs >= 15)
    attacks.run(srv, runs)
  end)
end)
