-- `luna run --shards`: three replicas (processes) split ≥ 10,000 ConfigMaps
-- by uid through their Leases, under writes, while one is killed
-- (SIGKILL) and started again, one leaves (SIGTERM), and one is frozen
-- (SIGSTOP for longer than the lease: a process that neither renews nor
-- knows it stopped) and thawed.  From the merged log of every reconcile's
-- start and end (the controller logs both, with key and reconcile_id; a
-- replica's identity is the log it wrote) no key is ever reconciled by
-- two replicas at once, and after the last writes every object was
-- reconciled after its last change by exactly the replica that owns its
-- uid.  A second case cuts one replica off the network (a network
-- namespace whose link goes down, then up: it runs on, unanswered) and
-- also reads the API server's history: no write landed outside its
-- writer's claim.  Runs against a real control plane too.
--
-- LUNA_SHARD_SPEC_OBJECTS=N changes the number of objects (default 10000).
local helpers = require("helpers")
local client = require("support.apiserver_client")
local S = require("15-production.support")
local core = require("luna.core")
local cjson = require("cjson")
local netns = require("support.netns")

local OBJECTS = tonumber(os.getenv("LUNA_SHARD_SPEC_OBJECTS") or "") or 10000
-- Lease 6 s, renew deadline 3 s, retry 0.5 s, skew margin 1 s: a peer is
-- taken over 7 s after its last renewal; it stopped itself after 3.
local LEASE = { "--leader-elect-lease-duration=6", "--leader-elect-renew-deadline=3",
                "--leader-elect-retry-period=0.5", "--shard-skew-margin=1" }

local CONTROLLER = [[
local luna = require "luna"
local ME = %q
return luna.controller {
  name = "sharded",
  watch = { "v1/ConfigMap", namespace = %q, labels = { app = "shards" } },
  workers = 8,
  reconcile = function(req)
    luna.log.info("shard reconcile start")
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    local err
    if cm then
      local want = cm.data and cm.data.v or ""
      local ann = cm.metadata.annotations or {}
      if ann["spec.luna.dev/seen"] ~= want or ann["spec.luna.dev/by"] ~= ME then
        local _
        _, err = luna.patch("v1/ConfigMap", req.namespace, req.name, { metadata = {
          annotations = { ["spec.luna.dev/seen"] = want, ["spec.luna.dev/by"] = ME } } })
      end
    end
    luna.log.info("shard reconcile end")
    if err then return nil, err end
  end,
}
]]

-- The same controller with 10 ms of work (CPU) before each write: a
-- replica keeps a backlog under the spec's writes, so when it is cut off
-- its workers send writes into the partition.
local BUSY_CONTROLLER = CONTROLLER:gsub("    local err\n    if cm then", [[
    local err
    local busy = os.clock() + 0.01
    while os.clock() < busy do end
    if cm then]])
assert(BUSY_CONTROLLER ~= CONTROLLER)

-- A replica whose log goes to a file (a pipe would fill up: the spec
-- does not read while it writes thousands of objects).
local Replica = {}
Replica.__index = Replica

-- opts.net: run it inside that network namespace (support.netns).
local function start_replica(srv, name, logs, opts)
  opts = opts or {}
  local source = (opts.controller or CONTROLLER):format(name, srv.ns)
  local dir = S.controllers({ ["sharded.lua"] = source })
  local log = helpers.tmpdir() .. "/" .. name .. ".log"
  local kubeconfig = opts.net and opts.net.kubeconfig or S.kubeconfig_for(srv)
  local argv = { helpers.luna, "run", "--kubeconfig", kubeconfig, "--shards",
                 "--shard-set=spec", "--leader-election-namespace=" .. srv.ns,
                 "--metrics-bind-address=" .. (opts.metrics and "127.0.0.1:0" or "0"),
                 "--metrics-secure=false", "--health-probe-bind-address=0" }
  for _, a in ipairs(LEASE) do argv[#argv + 1] = a end
  for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = dir
  if opts.net then argv = opts.net:argv(argv) end
  local quoted = {}
  for i, a in ipairs(argv) do quoted[i] = "'" .. a:gsub("'", "'\\''") .. "'" end
  local p = helpers.spawn({ "sh", "-c", "exec " .. table.concat(quoted, " ") .. " >" .. log ..
                            " 2>&1" }, { env = { POD_NAME = name, POD_NAMESPACE = false,
                                                 KUBECONFIG = false } })
  local r = setmetatable({ p = p, name = name, log = log }, Replica)
  logs[#logs + 1] = r
  return r
end

function Replica:text() return helpers.read_file(self.log) or "" end
-- Remembers where the log is now: since() looks only at what comes after.
function Replica:mark() self.from = #self:text() end
function Replica:since(pattern) return self:text():find(pattern, (self.from or 0) + 1) ~= nil end
function Replica:has(pattern) return self:text():find(pattern) ~= nil end
function Replica:count(pattern)
  local n = 0
  for _ in self:text():gmatch(pattern) do n = n + 1 end
  return n
end
-- The claim this replica last wrote ("(none)" or a selector's text).
function Replica:claim()
  local last
  for c in self:text():gmatch('shard claim[^\n]-claim=("?[^\n]*)') do last = c end
  return last and last:gsub('^"', ""):gsub('"$', "") or nil
end

-- Requests through core.http, `width` at a time; a failed one (no answer,
-- 429, 5xx) is sent again.  after(done) runs after each answer.
local function bulk(srv, reqs, width, after)
  local next_i, inflight, done = 0, 0, 0
  local function send()
    next_i = next_i + 1
    local r = reqs[next_i]
    if not r then return end
    inflight = inflight + 1
    assert(core.http.request{
      url = srv.url .. r.path, method = r.method, body = r.body, timeout = 60,
      headers = { ["Content-Type"] = r.type or "application/json" },
      on_done = function(resp, err)
        inflight = inflight - 1
        if err or resp.status == 429 or resp.status >= 500 then
          reqs[#reqs + 1] = r
        else
          assert(resp.status < 300 or (r.method == "POST" and resp.status == 409),
                 r.method .. " " .. r.path .. ": " .. resp.status .. " " .. tostring(resp.body))
          done = done + 1
          if after then after(done) end
        end
        send()
      end,
    })
  end
  for _ = 1, width do send() end
  helpers.eventually(function() return inflight == 0 and next_i > #reqs end, 900, "bulk requests")
end

local function name_of(i) return ("cm-%05d"):format(i) end

local function create_all(srv, n)
  local reqs = {}
  for i = 1, n or OBJECTS do
    reqs[i] = { method = "POST", path = srv:ns_path("configmaps"), body = cjson.encode({
      apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = name_of(i), labels = { app = "shards" } }, data = { v = "0" } }) }
  end
  bulk(srv, reqs, 32)
end

-- Writes data.v = value to objects from..to (every `step`th).
local function write_all(srv, value, from, to, step, after)
  local reqs = {}
  for i = from, to, step do
    reqs[#reqs + 1] = { method = "PATCH", path = srv:ns_path("configmaps", name_of(i)),
                        type = "application/merge-patch+json",
                        body = cjson.encode({ data = { v = value } }) }
  end
  bulk(srv, reqs, 16, after)
end

-- Milliseconds since the epoch from a log line's timestamp.
local function millis(ts)
  local y, mo, d, h, mi, s, ms = ts:match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)%.(%d+)Z$")
  assert(y, "timestamp " .. tostring(ts))
  local days = os.time({ year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = 0 })
  return ((days * 1000) + ((tonumber(h) * 60 + tonumber(mi)) * 60 + tonumber(s)) * 1000
          + tonumber(ms))
end

-- Every reconcile of every log as { key, replica, from, to } (ms).  A
-- reconcile abandoned because its replica stopped (its Lease went stale)
-- ends when the replica stopped being allowed to act (`since`): from
-- then on it wrote nothing (its writes are refused, its requests were
-- cancelled before the frozen process could send them).
local function intervals(logs)
  local out, open_count = {}, 0
  for _, r in ipairs(logs) do
    local open, stopped_since = {}, nil
    for line in r:text():gmatch("[^\n]+") do
      local ts = line:match("^(%S+)")
      local id = line:match(" reconcile_id=(%x+)")
      if line:find(" shard reconcile start ", 1, true) then
        open[id] = { key = line:match(" key=(%S+)"), replica = r.name, from = millis(ts) }
      elseif id and open[id] and (line:find(" shard reconcile end ", 1, true) or
                                  line:find(" reconcile abandoned ", 1, true) or
                                  line:find(" reconcile failed ", 1, true)) then
        local iv = open[id]
        iv.to = millis(ts)
        if line:find(" reconcile abandoned ", 1, true) and stopped_since then
          iv.to = math.min(iv.to, stopped_since)
        end
        out[#out + 1] = iv
        open[id] = nil
      elseif line:find("shard stopped", 1, true) and line:find(" since=") then
        stopped_since = millis(line:match(" since=(%S+)"))
      elseif line:find("shard claim", 1, true) then
        stopped_since = nil
      end
    end
    -- a SIGKILLed replica's reconciles in flight end when it died
    for _, iv in pairs(open) do
      iv.to = r.died or math.huge
      out[#out + 1] = iv
      open_count = open_count + 1
    end
  end
  return out, open_count
end

local function assert_no_overlap(logs)
  local all = intervals(logs)
  local by_key = {}
  for _, iv in ipairs(all) do
    by_key[iv.key] = by_key[iv.key] or {}
    table.insert(by_key[iv.key], iv)
  end
  local overlaps = {}
  for key, list in pairs(by_key) do
    table.sort(list, function(a, b) return a.from < b.from end)
    for i = 2, #list do
      for j = 1, i - 1 do
        local a, b = list[j], list[i]
        if a.replica ~= b.replica and b.from < a.to then
          overlaps[#overlaps + 1] = ("%s: %s [%d, %s] and %s [%d, %s]"):format(key, a.replica,
            a.from, tostring(a.to), b.replica, b.from, tostring(b.to))
        end
      end
    end
  end
  assert(#overlaps == 0, #overlaps .. " keys reconciled by two replicas at once:\n" ..
    table.concat(overlaps, "\n", 1, math.min(#overlaps, 20)))
  return #all
end

-- The server's own record of who wrote what when: a watch of the
-- ConfigMaps and one of the Leases, each from resourceVersion rv, into a
-- file (the API server orders both on one resourceVersion sequence).
local function record_history(srv, rv)
  local h = { files = {}, procs = {} }
  for _, path in ipairs({ "/api/v1/namespaces/" .. srv.ns ..
                           "/configmaps?labelSelector=app%3Dshards&",
                         "/apis/coordination.k8s.io/v1/namespaces/" .. srv.ns .. "/leases?" }) do
    path = path .. "watch=1&resourceVersion=" .. rv .. "&timeoutSeconds=3600"
    local file = helpers.tmpdir() .. "/watch.json"
    h.files[#h.files + 1] = file
    h.procs[#h.procs + 1] = helpers.spawn({ "sh", "-c", "exec env -u LD_PRELOAD curl -sN '" ..
                                            srv.url .. path .. "' >" .. file .. " 2>&1" })
  end
  return h
end

-- Every write of a reconcile (a change of the spec.luna.dev/seen or /by
-- annotations: the controller writes only when they differ) landed while
-- its writer held the object's uid in its claim, as the claims Lease's
-- latest version before that write records it.  This is the safety rule
-- seen from the server: a write held by the network and landing after
-- another replica took its range over breaks it, whatever the logs say.
-- Returns the number of writes checked.
local function assert_writes_in_claim(h)
  for _, p in ipairs(h.procs) do
    assert(p.status == nil and p:wait(0) == nil, "a history watch ended early")
  end
  local events = {}
  for _, file in ipairs(h.files) do
    for line in (helpers.read_file(file) or ""):gmatch("[^\n]+") do
      local ok, ev = pcall(cjson.decode, line)
      assert(ok and type(ev) == "table" and ev.object, "history: " .. line:sub(1, 300))
      assert(ev.type ~= "ERROR", "history watch failed: " .. line:sub(1, 300))
      ev.rv = tonumber(ev.object.metadata.resourceVersion)
      events[#events + 1] = ev
    end
  end
  table.sort(events, function(x, y) return x.rv < y.rv end)
  local claims, last, writes, bad = {}, {}, 0, {}
  for _, ev in ipairs(events) do
    local md = ev.object.metadata
    local ann = md.annotations or {}
    if ev.object.kind == "Lease" or md.name == "spec-shards" then
      if md.name == "spec-shards" then
        local text = ann["luna.dev/shard-claims"]
        claims = text and cjson.decode(text) or {}
      end
    elseif ev.type ~= "DELETED" then
      local now = (ann["spec.luna.dev/seen"] or "") .. "|" .. (ann["spec.luna.dev/by"] or "")
      local by = ann["spec.luna.dev/by"]
      if by and last[md.name] ~= now then
        writes = writes + 1
        local sel = claims[by]
        if not (sel and sel ~= "" and core.shard.matches(sel, md.namespace, md.uid)) then
          bad[#bad + 1] = ("%s written by %s at rv %d, its claim then: %s"):format(md.name, by,
            ev.rv, tostring(sel))
        end
      end
      last[md.name] = now
    end
  end
  assert(#bad == 0, #bad .. " writes landed outside their writer's claim:\n" ..
    table.concat(bad, "\n", 1, math.min(#bad, 20)))
  return writes
end

-- Namespace sharding: primaries in several namespaces own Secrets; both
-- informers follow the shard, and a child's change reaches its owner's
-- replica only.
local OWNER = [[
local luna = require "luna"
local ME = %q
return luna.controller {
  name = "owner",
  watch = { "v1/ConfigMap", labels = { app = "ns-shards" } },
  owns = { "v1/Secret" },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm then return end
    local secret = luna.cache("v1/Secret"):get(req.namespace, req.name)
    if not secret then
      local s = { apiVersion = "v1", kind = "Secret",
                  metadata = { name = req.name, namespace = req.namespace },
                  stringData = { v = "0" } }
      -- kube-apiserver's list items carry no apiVersion/kind
      cm.apiVersion, cm.kind = "v1", "ConfigMap"
      luna.meta.set_owner(s, cm, { controller = true })
      local _, err = luna.create(s)
      if err and not luna.is_already_exists(err) then return nil, err end
      return
    end
    local v = secret.data and secret.data.v or ""
    local ann = cm.metadata.annotations or {}
    if ann["spec.luna.dev/secret"] ~= v or ann["spec.luna.dev/by"] ~= ME then
      local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name, { metadata = {
        annotations = { ["spec.luna.dev/secret"] = v, ["spec.luna.dev/by"] = ME } } })
      if err then return nil, err end
    end
  end,
}
]]

describe("luna run --shards", function()
  local srv
  local logs = {}

  before_each(function() srv = client.start() end)
  after_each(function()
    for _, r in ipairs(logs) do r.p:kill(18) end -- SIGCONT: a frozen one must stop too
    for _, r in ipairs(logs) do r.p:stop() end
    logs = {}
    srv:stop()
  end)

  it("refuses bad sharding flags with a clear error", function()
    local function run(args)
      local argv = { helpers.luna, "run", "--kubeconfig", S.kubeconfig_for(srv) }
      for _, a in ipairs(args) do argv[#argv + 1] = a end
      argv[#argv + 1] = helpers.tmpdir()
      local p = helpers.spawn(argv)
      local code = p:wait(15)
      while p:read_line(0.05) do end
      return code, table.concat(p.out, "\n")
    end
    local code, out = run({ "--shards=yes" })
    assert.equal(2, code)
    assert.matches("want auto", out)
    code, out = run({ "--shard-by=name", "--shards" })
    assert.equal(2, code)
    assert.matches("want uid or namespace", out)
    code, out = run({ "--shard-set=x" })
    assert.equal(2, code)
    assert.matches("need %-%-shards", out)
    code, out = run({ "--shards", "--leader-elect" })
    assert.equal(2, code)
    assert.matches("not with %-%-leader%-elect", out)
    -- a skew margin too small for the renew deadline is unsafe
    code, out = run({ "--shards", "--leader-elect-lease-duration=3",
                      "--leader-elect-renew-deadline=2.9", "--leader-elect-retry-period=0.5",
                      "--shard-skew-margin=0.01" })
    assert.equal(2, code)
    assert.matches("leaves no slack", out)
  end)

  it("splits the objects, hands them over on kill, restart, leave and a frozen replica, " ..
     "and never reconciles a key on two replicas at once", function()
    create_all(srv)
    local a = start_replica(srv, "pod-a", logs)
    local b = start_replica(srv, "pod-b", logs)
    local c = start_replica(srv, "pod-c", logs)
    local function members(r, n) return r:since("shard members set=spec members=" .. n) end
    helpers.eventually(function()
      return members(a, 3) and members(b, 3) and members(c, 3) and
             a:claim() and a:claim() ~= "(none)" and b:claim() and b:claim() ~= "(none)" and
             c:claim() and c:claim() ~= "(none)"
    end, 120, "three members, each with a claim")
    -- every replica's server-side filtering mode is logged
    helpers.eventually(function()
      return a:has("sharded informer: ") and b:has("sharded informer: ")
    end, 30, "the filtering mode")

    -- writes; pod-c is killed a third of the way through
    a:mark(); b:mark()
    local killed_at
    write_all(srv, "1", 1, OBJECTS, 3, function(done)
      if done == math.floor(OBJECTS / 9) and not killed_at then
        c.p:kill(9)
        c.p:wait(10)
        killed_at = helpers.now()
        c.died = millis(os.date("!%Y-%m-%dT%H:%M:%S.000Z")) + 1000
      end
    end)
    helpers.eventually(function() return members(a, 2) and members(b, 2) end, 60,
                       "a and b to take pod-c's range over")
    a:mark()
    local c2 = start_replica(srv, "pod-c", logs)
    helpers.eventually(function()
      return members(a, 3) and c2:claim() and
             c2:claim() ~= "(none)"
    end, 60, "pod-c back with a claim")

    -- writes; pod-b leaves gracefully in the middle
    a:mark(); c2:mark()
    local left = false
    write_all(srv, "2", 2, OBJECTS, 3, function(done)
      if done == math.floor(OBJECTS / 9) and not left then
        left = true
        b.p:kill(15)
      end
    end)
    assert.equal(0, b.p:wait(60))
    assert.is_true(b:has("shard claim released"))
    helpers.eventually(function() return members(a, 2) and members(c2, 2) end, 60,
                       "a and c to take pod-b's range over")

    -- writes; pod-a is frozen for longer than its lease, then thawed
    c2:mark()
    local frozen = false
    write_all(srv, "3", 3, OBJECTS, 3, function(done)
      if done == math.floor(OBJECTS / 9) and not frozen then
        frozen = true
        a.p:kill(19) -- SIGSTOP
      end
    end)
    helpers.eventually(function()
      return members(c2, 1) and
             c2:claim() == "shardRange(object.metadata.uid, '0x0000000000000000', " ..
                           "'0x10000000000000000')"
    end, 60, "pod-c to take the whole space over from the frozen pod-a")
    c2:mark()
    a.p:kill(18) -- SIGCONT
    helpers.eventually(function() return a:has("shard stopped") end, 30,
                       "the thawed pod-a to stop itself")
    helpers.eventually(function()
      return members(c2, 2) and a:claim() ~= nil and
             a:claim() ~= "(none)" and c2:claim() ~= "shardRange(object.metadata.uid, " ..
             "'0x0000000000000000', '0x10000000000000000')"
    end, 60, "pod-a back in the split")

    -- the last writes, every object, membership stable: each is reconciled
    -- after them by the replica owning its uid
    write_all(srv, "4", 1, OBJECTS, 1)
    local ids = { "pod-a", "pod-c" }
    local owner_of = {}
    for _, id in ipairs(ids) do owner_of[id] = assert(core.shard.split(ids, id)) end
    local pending
    local ok, err = pcall(helpers.eventually, function()
      local code, list = srv:request("GET",
                                     srv:ns_path("configmaps") .. "?labelSelector=app%3Dshards",
                                     nil, { timeout = 120 })
      assert(code == 200, "list: " .. tostring(code))
      pending = {}
      for _, cm in ipairs(list.items) do
        local ann = cm.metadata.annotations or {}
        local owner
        for id, sel in pairs(owner_of) do
          if core.shard.matches(sel, cm.metadata.namespace, cm.metadata.uid) then owner = id end
        end
        if ann["spec.luna.dev/seen"] ~= "4" or ann["spec.luna.dev/by"] ~= owner then
          pending[#pending + 1] = cm.metadata.name .. " seen="
            .. tostring(ann["spec.luna.dev/seen"])
            .. " by=" .. tostring(ann["spec.luna.dev/by"]) .. " owner=" .. tostring(owner)
        end
      end
      assert.equal(OBJECTS, #list.items)
      return #pending == 0
    end, 300, "every object reconciled after its last change by its owner")
    assert(ok, tostring(err) .. ": " .. #(pending or {}) .. " not yet, e.g. " ..
               table.concat(pending or {}, "; ", 1, math.min(5, #(pending or {}))))

    -- stop everything, then read the merged log
    for _, r in ipairs({ a, c2 }) do r.p:kill(15) end
    for _, r in ipairs({ a, c2 }) do assert.equal(0, r.p:wait(60)) end
    local n = assert_no_overlap(logs)
    assert.is_true(n >= OBJECTS, "reconciles logged: " .. n)
    -- the frozen replica's late writes were refused, never sent
    for _, r in ipairs(logs) do
      for line in r:text():gmatch("[^\n]*shard write refused[^\n]*") do
        assert.matches("reason=", line)
      end
    end
  end)

  -- A network partition, not a stopped process: pod-p runs in a network
  -- namespace whose link is cut under writes and joined again.  It runs
  -- on: its renewals and in-flight writes go unanswered, it stops at its
  -- renew deadline, the others take its range after its Lease expires
  -- (with the skew margin), and once healed it rejoins.  Besides the
  -- merged log, the server's own history says that no write landed
  -- outside its writer's claim (a write held by the partition and
  -- delivered at the heal would).  First, pod-a is frozen past its renew
  -- deadline but not past its Lease's expiry: it stops itself and confirms
  -- the same third again, and no key that reached it meanwhile is lost.
  it("hands a partitioned replica's range over and takes it back after the heal, " ..
     "no write landing outside its writer's claim", function()
    local ok, why = netns.available()
    if not ok then return pending("no network namespaces on this machine: " .. why) end
    local n = math.min(OBJECTS, 2000)
    create_all(srv, n)
    local _, list = srv:request("GET", srv:ns_path("configmaps") ..
                                "?labelSelector=app%3Dshards&limit=1")
    local history = record_history(srv, list.metadata.resourceVersion)
    finally(function() for _, pr in ipairs(history.procs) do pr:stop() end end)
    local net = netns.new(srv)
    finally(function() net:close() end)

    local a = start_replica(srv, "pod-a", logs, { controller = BUSY_CONTROLLER })
    local b = start_replica(srv, "pod-b", logs, { controller = BUSY_CONTROLLER })
    local p = start_replica(srv, "pod-p", logs, { net = net, controller = BUSY_CONTROLLER })
    local function members(r, k) return r:since("shard members set=spec members=" .. k) end
    local function split_of(ids, id) return assert(core.shard.split(ids, id)) end
    local function claims_are(ids)
      for _, r in ipairs({ a, b, p }) do
        local mine = false
        for _, id in ipairs(ids) do mine = mine or id == r.name end
        if mine and r:claim() ~= split_of(ids, r.name) then return false end
      end
      return true
    end
    local three = { "pod-a", "pod-b", "pod-p" }
    helpers.eventually(function() return claims_are(three) end, 120,
                       "three members, each with its third (pod-p through the namespace)")

    -- every object reconciled by its owner after its last write: the
    -- writes made while pod-p was away (a and b reconciled them; pod-p,
    -- back with the same third, takes its objects again without a
    -- relist: their keys wait in its queue until its claim is confirmed),
    -- then after the last writes
    local owner_of = {}
    for _, id in ipairs(three) do owner_of[id] = split_of(three, id) end
    local function converge(value)
      local left
      local done, err = pcall(helpers.eventually, function()
        local code, all = srv:request("GET", srv:ns_path("configmaps") ..
                                      "?labelSelector=app%3Dshards", nil, { timeout = 120 })
        assert(code == 200, "list: " .. tostring(code))
        left = {}
        for _, cm in ipairs(all.items) do
          local ann = cm.metadata.annotations or {}
          local owner
          for id, sel in pairs(owner_of) do
            if core.shard.matches(sel, cm.metadata.namespace, cm.metadata.uid) then owner = id end
          end
          if ann["spec.luna.dev/seen"] ~= value or ann["spec.luna.dev/by"] ~= owner then
            left[#left + 1] = cm.metadata.name .. " seen=" ..
                              tostring(ann["spec.luna.dev/seen"]) .. " by=" ..
                              tostring(ann["spec.luna.dev/by"]) .. " owner=" .. tostring(owner)
          end
        end
        return #left == 0
      end, 300, "every object reconciled after its last change (" .. value .. ") by its " ..
                "owner")
      if not done then
        -- what each replica was doing: its last lines
        local tails = {}
        for _, r in ipairs({ a, b, p }) do
          local lines, warns = {}, {}
          for line in r:text():gmatch("[^\n]+") do
            lines[#lines + 1] = line
            if line:find(" WARN ", 1, true) or line:find(" ERROR ", 1, true) then
              warns[#warns + 1] = line
            end
          end
          tails[#tails + 1] = r.name .. ", its last warnings and lines:\n" ..
            table.concat(warns, "\n", math.max(1, #warns - 3)) .. "\n" ..
            table.concat(lines, "\n", math.max(1, #lines - 3))
        end
        error(tostring(err) .. ": " .. #(left or {}) .. " not yet, e.g. " ..
              table.concat(left or {}, "; ", 1, math.min(5, #(left or {}))) .. "\n" ..
              table.concat(tails, "\n"))
      end
    end
    -- a short stop that keeps the claim: pod-a frozen past its renew
    -- deadline (3 s) but not past its Lease's expiry (7 s), under writes.
    -- Thawed, it stops itself, then confirms the same third again; the
    -- events that reached it meanwhile wait in its queue for that (its
    -- informer does not move, so nothing would enqueue them again).
    a:mark(); b:mark()
    local frozen_at, thawed
    local function thaw()
      if not thawed and helpers.now() - frozen_at > 4 then
        a.p:kill(18) -- SIGCONT
        thawed = true
      end
      return thawed
    end
    write_all(srv, "f", 1, n, 1, function()
      if not frozen_at then
        a.p:kill(19) -- SIGSTOP
        frozen_at = helpers.now()
      end
      thaw()
    end)
    helpers.eventually(thaw, 10, "pod-a frozen for 4 s")
    helpers.eventually(function()
      return a:since("shard stopped") and a:since("shard claim ") and claims_are(three)
    end, 60, "pod-a to stop itself and confirm its third again")
    assert.is_false(members(b, 2), "pod-a was not taken over")

    converge("f")

    -- writes; pod-p is cut off a third of the way through, with a backlog
    -- of reconciles that write
    a:mark(); b:mark(); p:mark()
    local cut
    write_all(srv, "1", 1, n, 1, function(done)
      if done == math.floor(n / 3) and not cut then
        net:partition()
        cut = helpers.now()
      end
    end)
    helpers.eventually(function()
      return p:since("shard stopped") and members(a, 2) and members(b, 2) and
             claims_are({ "pod-a", "pod-b" })
    end, 60, "pod-p to stop at its renew deadline and a and b to take its range over")
    assert.is_true(p:since("shard lease renewal failed"), "pod-p's renewals failed")
    local stopped = p:text():match("shard stopped[^\n]* reason=([^\n]*)", p.from + 1)
    assert.is_truthy(stopped)

    -- writes while it is away: a and b reconcile every object
    write_all(srv, "2", 1, n, 1)
    a:mark(); b:mark(); p:mark()
    net:heal()
    helpers.eventually(function()
      return p:since("shard claim ") and members(a, 3) and members(b, 3) and claims_are(three)
    end, 90, "pod-p to rejoin after the heal")

    converge("2")
    write_all(srv, "3", 1, n, 1)
    converge("3")

    for _, r in ipairs({ a, b, p }) do r.p:kill(15) end
    for _, r in ipairs({ a, b, p }) do assert.equal(0, r.p:wait(60)) end
    assert.is_true(assert_no_overlap(logs) >= n)
    -- let the history catch up with the last writes, then read it
    helpers.eventually(function()
      local t = helpers.read_file(history.files[1]) or ""
      return select(2, t:gsub('seen":"3"', "")) >= n
    end, 60, "the history to hold the last writes")
    local writes = assert_writes_in_claim(history)
    assert.is_true(writes >= n, "reconcile writes in the history: " .. writes)
  end)

  it("with --shard-by=namespace, owned children follow their owner's shard", function()
    local namespaces = {}
    for i = 1, 8 do
      local ns = srv.ns .. "-" .. i
      namespaces[i] = ns
      local code = srv:request("POST", "/api/v1/namespaces",
        { apiVersion = "v1", kind = "Namespace", metadata = { name = ns } })
      assert(code == 201, "namespace " .. ns .. ": " .. tostring(code))
    end
    finally(function()
      for _, ns in ipairs(namespaces) do srv:request("DELETE", "/api/v1/namespaces/" .. ns) end
    end)
    if srv.real then srv:await_namespace() end
    local reqs = {}
    for _, ns in ipairs(namespaces) do
      for j = 1, 5 do
        reqs[#reqs + 1] = { method = "POST", path = "/api/v1/namespaces/" .. ns .. "/configmaps",
          body = cjson.encode({ apiVersion = "v1", kind = "ConfigMap", metadata = {
            name = "owner-" .. j, labels = { app = "ns-shards" } } }) }
      end
    end
    bulk(srv, reqs, 8)
    local opts = { controller = OWNER, metrics = true, args = { "--shard-by=namespace" } }
    local a = start_replica(srv, "pod-a", logs, opts)
    local b = start_replica(srv, "pod-b", logs, opts)
    local ids = { "pod-a", "pod-b" }
    local owner_of = {}
    for _, id in ipairs(ids) do owner_of[id] = assert(core.shard.split(ids, id, "namespace")) end
    local function owner(ns)
      for id, sel in pairs(owner_of) do if core.shard.matches(sel, ns, nil) then return id end end
    end
    -- every owner reconciled by the replica owning its namespace, its
    -- Secret's value seen
    local mismatch
    local function converged(value)
      for _, ns in ipairs(namespaces) do
        local code, list = srv:request("GET", "/api/v1/namespaces/" .. ns ..
                                       "/configmaps?labelSelector=app%3Dns-shards")
        if code ~= 200 or #list.items ~= 5 then return false end
        for _, cm in ipairs(list.items) do
          local ann = cm.metadata.annotations or {}
          if ann["spec.luna.dev/by"] ~= owner(ns) or ann["spec.luna.dev/secret"] ~= value then
            mismatch = ("%s/%s by=%s secret=%s, want by=%s secret=%s"):format(ns,
              cm.metadata.name, tostring(ann["spec.luna.dev/by"]),
              tostring(ann["spec.luna.dev/secret"]), tostring(owner(ns)), value)
            return false
          end
        end
      end
      return true
    end
    local function await(value, what)
      local ok, err = pcall(helpers.eventually, function() return converged(value) end, 120, what)
      assert(ok, tostring(err) .. ": " .. tostring(mismatch) .. "\n" .. a:text() .. b:text())
    end
    await("MA==", "every owner reconciled by its namespace's replica")
    -- a child's change reaches its owner through the owner's replica
    local patches = {}
    for _, ns in ipairs(namespaces) do
      for j = 1, 5 do
        patches[#patches + 1] = { method = "PATCH", type = "application/merge-patch+json",
          path = "/api/v1/namespaces/" .. ns .. "/secrets/owner-" .. j,
          body = cjson.encode({ stringData = { v = "1" } }) }
      end
    end
    bulk(srv, patches, 8)
    await("MQ==", "every Secret change seen by its owner's replica")
    -- both sources of each replica are sharded: the Secret informer lists
    -- only the Secrets of its namespaces
    for _, r in ipairs({ a, b }) do
      local addr = r:text():match("metrics server listening address=(%S+)")
      local code, body = S.get("http://" .. addr .. "/metrics")
      assert.equal(200, code)
      local secrets =
        body:match('luna_informer_objects{resource="v1/secrets[^"]*shard=[^"]*"} (%d+)')
      assert(secrets, "no sharded Secret informer in:\n" .. body)
      local mine = 0
      for _, ns in ipairs(namespaces) do if owner(ns) == r.name then mine = mine + 5 end end
      assert.equal(mine, tonumber(secrets))
    end
    for _, r in ipairs({ a, b }) do r.p:kill(15) end
    for _, r in ipairs({ a, b }) do assert.equal(0, r.p:wait(60)) end
    assert_no_overlap(logs)
  end)
end)
