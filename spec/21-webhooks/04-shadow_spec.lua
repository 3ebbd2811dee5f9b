-- luna run --shadow answers every admission request allowed, without a
-- patch, and logs what the webhook would have done; a directory of
-- webhooks only (luna.webhooks{...}) runs with no controller; a webhook
-- that runs past its time budget (timeoutSeconds minus the margin) is
-- stopped and answered by failurePolicy well before the API server would
-- give up; a DELETE's mutate gets no object and sends no patch.
local helpers = require("helpers")
local core = require("luna.core")
local S = require("21-webhooks.support")
local json = core.json

local WEBHOOKS = [[
local luna = require "luna"
local RULES = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "configmaps" },
                  operations = { "*" } } }
return luna.webhooks {
  luna.webhook {
    name = "cm.deny.example.com",
    rules = RULES,
    validate = function(req) return false, "never " .. req.name end,
  },
  luna.webhook {
    name = "cm.label.example.com",
    rules = RULES,
    mutate = function(req, obj)
      if obj then obj.metadata.labels = { shadowed = "yes" } end
    end,
  },
  luna.webhook {
    name = "cm.slow.example.com",
    rules = RULES,
    timeout_seconds = 1,
    validate = function(req) while true do end end,
  },
}
]]

local function start(flags)
  local dir = helpers.tmpdir()
  helpers.write_file(dir .. "/hooks.lua", WEBHOOKS)
  local argv = { helpers.luna, "run", "--dev-server" }
  for _, f in ipairs(flags) do argv[#argv + 1] = f end
  argv[#argv + 1] = dir
  local proc = helpers.spawn(argv)
  local _, addr = proc:expect("webhook server listening address=(%S+) cert=self%-signed webhooks=3", 20)
  return proc, addr
end

describe("webhooks", function()
  local proc

  after_each(function()
    if proc then proc:stop() end
    proc = nil
  end)

  it("in shadow mode allow everything and log what they would have done", function()
    local addr
    proc, addr = start({ "--shadow" })
    local status, body = S.post(addr, nil, "/validate/cm.deny.example.com",
      S.review("uid-s1", { metadata = { name = "x" } }))
    assert.equal(200, status, body)
    local r = json.decode(body).response
    assert.equal("uid-s1", r.uid)
    assert.is_true(r.allowed)
    assert.is_nil(r.status)
    proc:expect("webhook shadow webhook=cm.deny.example.com uid=uid%-s1 operation=CREATE would=deny .*message=\"never x\"", 5)

    status, body = S.post(addr, nil, "/mutate/cm.label.example.com",
      S.review("uid-s2", { metadata = { name = "y" } }))
    r = json.decode(body).response
    assert.is_true(r.allowed)
    assert.is_nil(r.patch)
    assert.is_nil(r.patchType)
    proc:expect("webhook shadow webhook=cm.label.example.com uid=uid%-s2 .*would=patch .*ops=1", 5)
  end)

  it("stop a webhook at its time budget and answer by failurePolicy", function()
    local addr
    proc, addr = start({ "--reconcile-instruction-limit=0" })
    local t0 = helpers.now()
    local status, body = S.post(addr, nil, "/validate/cm.slow.example.com",
      S.review("uid-t", { metadata = { name = "z" } }))
    local took = helpers.now() - t0
    assert.equal(200, status, body)
    local r = json.decode(body).response
    assert.equal("uid-t", r.uid)
    assert.is_false(r.allowed)
    assert.equal(500, r.status.code)
    assert.truthy(r.status.message:find("time budget", 1, true), r.status.message)
    assert.is_true(took < 1.0 + 0.5, "answered after " .. took .. " s")
    proc:expect("webhook failed webhook=cm.slow.example.com uid=uid%-t .*stopped=true", 5)
    -- and the server goes on
    status, body = S.post(addr, nil, "/validate/cm.deny.example.com",
      S.review("uid-after", { metadata = { name = "w" } }))
    assert.is_false(json.decode(body).response.allowed)
  end)

  it("give a DELETE's mutate no object and send no patch", function()
    local addr
    proc, addr = start({})
    local status, body = S.post(addr, nil, "/mutate/cm.label.example.com",
      S.review("uid-d", nil, "DELETE", { metadata = { name = "gone" } }))
    assert.equal(200, status, body)
    local r = json.decode(body).response
    assert.is_true(r.allowed)
    assert.is_nil(r.patch)
  end)
end)
