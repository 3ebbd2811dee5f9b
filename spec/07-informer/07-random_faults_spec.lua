-- The randomised fault run: thousands of writes (creates, updates, label
-- moves, deletes over 200 keys of a custom resource that keeps unknown
-- fields, one write in ten nested 1,100 deep) while the dev server drops, fails, delays,
-- hangs, corrupts, truncates and expires watches and lists at random.  After
-- every round of faults the faults are cleared and both informers (all
-- objects, and a label selector objects move in and out of) must equal the
-- server exactly, keys and resourceVersions, and their handlers must have
-- been told of every change once and in order.
--
-- The seed is printed; LUNA_FAULT_SEED=N replays a run's choices (the
-- interleaving with the network still varies).  LUNA_FAULT_WRITES sets the
-- number of writes (default 3000).
local helpers = require("helpers")
local client = require("support.apiserver_client")
local core = require("luna.core")
local S = require("07-informer.support")

if client.real() then
  describe("randomised fault run", function()
    pending(client.DEV_ONLY .. "needs fault injection (--admin faults)")
  end)
  return
end

-- A private generator (Park-Miller), so nothing else that draws random
-- numbers changes a seed's choices.
local function rng(seed)
  local state = seed % 2147483646 + 1
  local r = {}
  function r.real(lo, hi)
    state = (state * 48271) % 2147483647
    return lo + (hi - lo) * ((state - 1) / 2147483646)
  end
  function r.int(lo, hi) return math.min(hi, lo + math.floor(r.real(0, 1) * (hi - lo + 1))) end
  function r.pick(list) return list[r.int(1, #list)] end
  return r
end

-- Fault kinds; a round draws from one to three different kinds.  Kinds
-- that act when a watch starts also end the open watch (`reconnect`);
-- kinds of one `group` set the same faults, so a round takes one of them.
local KINDS = {
  { name = "close", function(g) return "watch-close-after=" .. g.int(1, 8) end,
                    function(g) return ("watch-close-random=%.2f"):format(g.real(0.02, 0.3)) end },
  { name = "error", group = "error", function(g)
      return ("error-rate=%.2f,error-code=%d,error-on=%s,retry-after=%d"):format(g.real(0.05, 0.5),
        g.pick{ 500, 503, 429 }, g.pick{ "all", "read", "watch" }, g.pick{ 0, 0, 1 })
    end },
  -- Every watch fails: with enough writes the informers' resourceVersion
  -- leaves the server's history and resuming gets 410.
  { name = "outage", group = "error", reconnect = true,
    function() return "error-on=watch,error-rate=1,error-code=503,retry-after=0" end },
  { name = "gone", reconnect = true, function(g) return "gone=" .. g.int(1, 3) end },
  { name = "malformed", function(g) return "malformed-event=" .. g.int(1, 3) end },
  { name = "truncate", function(g) return "truncate-event=" .. g.int(1, 3) end },
  { name = "delay", group = "delay",
    function(g) return ("delay=%.3f,delay-on=all"):format(g.real(0.005, 0.05)) end,
    function(g) return ("delay=%.2f,delay-on=read"):format(g.real(0.02, 0.3)) end },
  -- Hung watches: silent for longer than the informers' idle_timeout.
  { name = "hang", group = "delay", reconnect = true, function() return "delay=1.5,delay-on=watch" end },
}

-- A namespaced kind whose spec keeps any field: kube-apiserver stores and
-- serves a value nested 1,100 deep there (docs/informers.md), as the dev
-- server does.
local CRD = { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
  metadata = { name = "knobs.faults.example.com" },
  spec = { group = "faults.example.com", scope = "Namespaced",
    names = { plural = "knobs", singular = "knob", kind = "Knob", listKind = "KnobList" },
    versions = { { name = "v1", served = true, storage = true, schema = { openAPIV3Schema = {
      type = "object", properties = { spec = { type = "object",
        ["x-kubernetes-preserve-unknown-fields"] = true } } } } } } } }

local function knob(name, data, labels)
  return { apiVersion = "faults.example.com/v1", kind = "Knob", metadata = { name = name, labels = labels },
           spec = data }
end

describe("randomised fault run", function()
  local srv, env
  S.server_each_test({ args = { "--admin", "--history", "100", "--bookmark-interval", "0.2" } }, function(s, e) srv, env = s, e end)

  it("keeps the caches equal to the server through thousands of writes under random faults", function()
    local seed = tonumber(os.getenv("LUNA_FAULT_SEED") or "") or (os.time() % 1000000)
    local total = tonumber(os.getenv("LUNA_FAULT_WRITES") or "") or 3000
    local nkeys, concurrency = 200, 8
    print(("\nrandomised fault run: seed=%d writes=%d keys=%d (replay: LUNA_FAULT_SEED=%d)")
      :format(seed, total, nkeys, seed))
    local g = rng(seed)

    local tuning = { page_size = 50, idle_timeout = 0.8, min_watch_timeout = 1, max_watch_timeout = 3,
                     backoff_base = 0.01, backoff_max = 0.2 }
    assert.equal(201, (srv:request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)))
    local base = "/apis/faults.example.com/v1/namespaces/" .. srv.ns .. "/knobs"
    helpers.eventually(function() return (srv:request("GET", base)) == 200 end, 10, "the Knob kind served")
    local function informer(m, labels)
      local o = { kind = "faults.example.com/v1/Knob", namespace = srv.ns, labels = labels }
      for k, v in pairs(tuning) do o[k] = v end
      for k, v in pairs(m.handlers) do o[k] = v end
      return env:informer(o)
    end
    local all_m, sel_m = S.mirror(), S.mirror()
    local all, sel = informer(all_m), informer(sel_m, "tier=a")
    helpers.eventually(function() return all:has_synced() and sel:has_synced() end, 10, "sync")

    local w = S.writer(srv)
    local exists, busy = {}, {}
    local done, retried, outcomes = 0, 0, {}
    local deep_writes, deep_checked = 0, 0
    local DEEP = ('{"a":'):rep(1100) .. "1" .. ("}"):rep(1100)

    -- One write to a random key with no write in flight; retried while an
    -- injected fault rejects it (those are answered before anything happens).
    local function write()
      local i
      repeat i = g.int(1, nkeys) until not busy[i]
      busy[i] = true
      local name = "k" .. i
      local cm = knob(name, { v = tostring(g.int(1, 1e9)) }, { tier = g.pick{ "a", "b" } })
      local method, path, body, ctype
      -- Now and then an object with a value nested 1,100 deep (issue 24):
      -- one such object once stopped every LIST and WATCH of the kind;
      -- kube serves it, so the cache must hold it like any other.
      local write_cm = cm
      if g.real(0, 1) < 0.1 then
        cm.spec.deep = "@DEEP@"
        write_cm = core.json.encode(cm):gsub('"@DEEP@"', function() return DEEP end)
        cm.spec.deep = nil
        ctype = "application/json"
      end
      if not exists[i] then
        method, path, body = "POST", base, write_cm
      else
        local r = g.real(0, 1)
        if r < 0.45 then
          method, path, body = "PUT", base .. "/" .. name, write_cm
        elseif r < 0.7 then
          method, path, body = "PATCH", base .. "/" .. name, { metadata = { labels = cm.metadata.labels },
            spec = cm.spec }
          ctype = "application/merge-patch+json"
        else
          method, path = "DELETE", base .. "/" .. name
        end
      end
      if type(body) == "string" then deep_writes = deep_writes + 1 end
      local function send()
        w:request(method, path, body, function(status)
          if status == 429 or status == 500 or status == 503 or status == 0 then
            retried = retried + 1
            return send()
          end
          local outcome = method .. " " .. status
          outcomes[outcome] = (outcomes[outcome] or 0) + 1
          if method == "POST" then exists[i] = status == 201 or status == 409
          elseif method == "DELETE" then exists[i] = false
          else exists[i] = status == 200 end
          busy[i] = nil
          done = done + 1
        end, ctype)
      end
      send()
    end

    -- Every kind once first (in a seeded order), then random mixes.
    local order = {}
    for k = 1, #KINDS do order[k] = k end
    for k = #order, 2, -1 do
      local j = g.int(1, k)
      order[k], order[j] = order[j], order[k]
    end

    local function check(round, spec)
      local where = ("seed %d round %d faults '%s'"):format(seed, round, spec)
      S.faults(srv, "")
      local want = S.server_state(srv, nil, base, function(item)
        if item.spec and type(item.spec.deep) == "table" then deep_checked = deep_checked + 1 end
      end)
      local ok, err = pcall(S.converge, all, want, 15, all_m)
      assert(ok, where .. ": " .. tostring(err))
      ok, err = pcall(S.converge, sel, S.server_state(srv, "tier=a", base), 15, sel_m)
      assert(ok, where .. " (selector): " .. tostring(err))
      assert(#all_m.violations == 0, where .. ": " .. table.concat(all_m.violations, "; "))
      assert(#sel_m.violations == 0, where .. " (selector): " .. table.concat(sel_m.violations, "; "))
    end

    local round, seen = 0, {}
    while done < total do
      round = round + 1
      local kinds = {}
      if order[round] then
        kinds[1] = order[round]
      else
        local pool = {}
        for k = 1, #KINDS do pool[k] = k end
        for _ = 1, g.int(1, 3) do kinds[#kinds + 1] = table.remove(pool, g.int(1, #pool)) end
      end
      local parts, groups, reconnect, close = {}, {}, false, false
      for _, k in ipairs(kinds) do
        local kind = KINDS[k]
        local group = kind.group or kind.name
        if not groups[group] then
          groups[group] = true
          parts[#parts + 1] = kind[g.int(1, #kind)](g)
          seen[kind.name] = true
          reconnect = reconnect or kind.reconnect
          close = close or kind.name == "close"
        end
      end
      if reconnect and not close then parts[#parts + 1] = "watch-close-after=1" end
      parts[#parts + 1] = "seed=" .. g.int(1, 1e6)
      local spec = table.concat(parts, ",")
      S.faults(srv, spec)

      local target = math.min(total, done + g.int(20, 200))
      local started = done
      local ok = core.loop.run_until(function()
        while w.in_flight < concurrency and started < target do
          started = started + 1
          write()
        end
        return done >= target and w.in_flight == 0
      end, 60)
      assert(ok, ("seed %d round %d faults '%s': writes did not finish (%d of %d)")
        :format(seed, round, spec, done, target))
      check(round, spec)
    end

    local st = all:stats()
    print(("randomised fault run: %d rounds, %d writes (%d retried), lists=%d watches=%d events=%d " ..
      "gone=%d failures=%d decode_errors=%d, handler calls add=%d update=%d delete=%d")
      :format(round, done, retried, st.lists, st.watches, st.watch_events, st.gone, st.failures,
        st.decode_errors, all_m.adds, all_m.updates, all_m.deletes))
    for _, kind in ipairs(KINDS) do assert.is_true(seen[kind.name], kind.name) end
    -- Each key had one write in flight at a time, so every write landed.
    for outcome in pairs(outcomes) do
      assert.is_truthy(({ ["POST 201"] = 1, ["PUT 200"] = 1, ["PATCH 200"] = 1, ["DELETE 200"] = 1 })[outcome],
        outcome)
    end
    assert.is_true(deep_writes >= 10, "deep writes: " .. deep_writes)
    -- deep objects were on the server at checks, so cached and equal there
    assert.is_true(deep_checked >= 1, "deep objects seen at checks: " .. deep_checked)
    assert.is_true(st.lists >= 2, "relists: " .. st.lists)
    assert.is_true(st.gone >= 1)
    assert.is_true(st.decode_errors >= 1)
    assert.is_true(st.failures >= 1)
    assert.is_true(sel_m.deletes >= 1, "objects left the selector")
    sel:release()
    all:release()
  end)
end)
