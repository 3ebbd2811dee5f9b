-- The attack corpus (spec/12-isolation/attacks/, see its README.md): every
-- hostile controller file runs against the real host next to a healthy
-- canary, at startup and added by a reload; the host must keep reconciling
-- the canary, answer /healthz within 1 s (3 s with the default 2 s time
-- budget), stay under the Lua cap + margin in RSS and exit 0 on SIGTERM;
-- refused files must be refused with an error naming the file while the
-- running code keeps going.  Odd batches run with the flags a user gets,
-- even ones tight (attack_runner.lua), so every batched attack runs under
-- both (started in one host, added by a reload to the other).
local support = require("12-isolation.support")
local R = require("12-isolation.attack_runner")

local corpus, problems = R.corpus()

describe("the attack corpus", function()
  local srv
  setup(function() srv = support.server() end)
  teardown(function() support.stop(srv) end)

  it("follows the convention (attacks/README.md)", function()
    assert.is_true(#corpus > 0, "no attack files in " .. R.DIR)
    assert.same({}, problems)
    local seen = {}
    for _, a in ipairs(corpus) do
      assert.is_nil(seen[a.name], "two attacks named " .. a.name)
      seen[a.name] = true
    end
  end)

  local refused, batched, alone = {}, {}, {}
  for _, a in ipairs(corpus) do
    if a.expect == "refused" then
      refused[#refused + 1] = a
    elseif a.alone then
      alone[#alone + 1] = a
    else
      batched[#batched + 1] = a
    end
  end

  if #refused > 0 then
    it(("refuses the %d refused attacks, at startup and by reload"):format(#refused), function()
      R.run_refused(srv, refused)
    end)
  end

  -- batch i starts with its attacks and adds batch i+1 by a reload (the last
  -- adds the first), so every attack is tried both ways; a single attack
  -- runs alone, which does both in two hosts
  if #batched == 1 then alone[#alone + 1] = batched[1]; batched = {} end
  local batches = {}
  local nb = #batched > 0 and math.max(2, math.ceil(#batched / R.BATCH)) or 0
  for i, a in ipairs(batched) do
    local b = (i - 1) % nb + 1
    batches[b] = batches[b] or {}
    table.insert(batches[b], a)
  end
  for i, batch in ipairs(batches) do
    local next_batch = batches[i % #batches + 1]
    local list = {}
    for _, a in ipairs(batch) do list[#list + 1] = a.name end
    local tight = i % 2 == 0
    it(("survives %s (%s flags)"):format(table.concat(list, ", "), tight and "tight" or "default"), function()
      R.run_batch(srv, batch, next_batch, tight)
    end)
  end

  for _, a in ipairs(alone) do
    it(("survives %s (alone: %s)"):format(a.name, a.alone or "the only batched attack"), function()
      R.run_alone(srv, a, false)
    end)
  end
end)
