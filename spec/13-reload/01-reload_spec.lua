-- Hot reload: SIGHUP (and --watch) load the controllers anew without a
-- restart, without a relist, and without a broken script taking over.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local luna_env = require("support.luna_env")

local SIGHUP = 1

-- A controller that stamps `version` into an annotation of every
-- ConfigMap of the spec's (labelled luna-spec=stamp) in the spec namespace;
-- `extra` is spliced into the reconcile.  The label keeps other writers'
-- ConfigMaps (a cluster's kube-root-ca.crt) out of the counts.
local function stamper(version, ns, extra)
  return ([[
local luna = require "luna"
return luna.controller {
  name = "stamper",
  watch = { "v1/ConfigMap", namespace = %q, labels = { ["luna-spec"] = "stamp" } },
  workers = 4,
  reconcile = function(req)
    %s
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm then return end
    if luna.meta.annotation(cm, "stamp") == %q then return end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name,
      { metadata = { annotations = { stamp = %q } } })
    if err then return nil, err end
  end,
}
]]):format(ns, extra or "", version, version)
end

local STAMPED = { ["luna-spec"] = "stamp" }

local function stamps(env)
  local _, list = env.srv:request("GET", env.srv:ns_path("configmaps") .. "?labelSelector=luna-spec%3Dstamp")
  local out = {}
  for _, cm in ipairs(list.items) do
    out[cm.metadata.name] = cm.metadata.annotations and cm.metadata.annotations.stamp or false
  end
  return out
end

local function all_stamped(env, version, n)
  local count = 0
  for _, v in pairs(stamps(env)) do
    if v ~= version then return false end
    count = count + 1
  end
  return count == n
end

local function count_lines(out, pattern)
  local n = 0
  for _ in out:gmatch(pattern) do n = n + 1 end
  return n
end

describe("hot reload", function()
  local env
  after_each(function() if env then env:stop() end env = nil end)

  it("runs the new code on every object after SIGHUP, without a relist", function()
    -- the controllers directory is filled after the server is up, so luna
    -- starts with a placeholder controller: use SIGHUP for the real one too
    local ns
    env = luna_env.start{ sources = { ["a.lua"] = stamper("v1", "none") } }
    ns = env.srv.ns
    for i = 1, 5 do env.srv:create_cm("cm-" .. i, nil, STAMPED) end
    helpers.write_file(env.dir .. "/a.lua", stamper("v1", ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    env:wait(function() return all_stamped(env, "v1", 5) end, 20, "v1 everywhere")
    local before = count_lines(env.luna:drain(0.5), "reflector listed[^\n]*ns=" .. ns:gsub("%-", "%%-"))
    assert.equal(1, before)
    helpers.write_file(env.dir .. "/a.lua", stamper("v2", ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    env:wait(function() return all_stamped(env, "v2", 5) end, 20, "v2 everywhere")
    local out = env.luna:drain(0.5)
    assert.matches("controller changed controller=stamper enqueued=5", out)
    local after = count_lines(out, "reflector listed[^\n]*ns=" .. ns:gsub("%-", "%%-"))
    assert.equal(before, after, "an unchanged informer must not relist")
  end)

  it("keeps the old code when a file has a syntax error or fails at load", function()
    env = luna_env.start{ sources = { ["a.lua"] = stamper("v1", "x") } }
    local ns = env.srv.ns
    helpers.write_file(env.dir .. "/a.lua", stamper("v1", ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    env.srv:create_cm("one", nil, STAMPED)
    env:wait(function() return all_stamped(env, "v1", 1) end, 20, "v1")

    helpers.write_file(env.dir .. "/a.lua", "return luna.controller {\n  name = 'broken',\n")
    env.luna:kill(SIGHUP)
    local line = env.luna:expect("reload failed", 20)
    assert.matches("a%.lua:3:", line)
    env.srv:create_cm("two", nil, STAMPED)
    env:wait(function() return all_stamped(env, "v1", 2) end, 20, "old code still running")

    helpers.write_file(env.dir .. "/a.lua", "error('boom at load')\n")
    env.luna:kill(SIGHUP)
    line = env.luna:expect("reload failed", 20)
    assert.matches("a%.lua:1: boom at load", line)
    env.srv:create_cm("three", nil, STAMPED)
    env:wait(function() return all_stamped(env, "v1", 3) end, 20, "old code still running")
  end)

  it("adds and removes controllers and the informers they need", function()
    env = luna_env.start{ sources = { ["a.lua"] = stamper("v1", "x") },
                          args = { "--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false" } }
    local metrics_url
    for _, l in ipairs(env.luna.out) do
      metrics_url = metrics_url or l:match("metrics server listening address=(%S+)")
    end
    assert.truthy(metrics_url, "luna did not say where its metrics are")
    -- the informers luna holds, by the resource of each (their cache-size
    -- gauge lives exactly as long as the informer)
    local function informers()
      local out = helpers.run("env -u LD_PRELOAD curl -s -S --max-time 10 http://" .. metrics_url .. "/metrics")
      local held = {}
      for resource in out:gmatch('luna_informer_objects{resource="([^"]+)"}') do
        held[#held + 1] = resource
      end
      return table.concat(held, "; ")
    end
    local ns = env.srv.ns
    env.srv:create_cm("c1", nil, STAMPED)
    helpers.write_file(env.dir .. "/a.lua", stamper("v1", ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    env:wait(function() return all_stamped(env, "v1", 1) end, 20, "stamper")
    assert.matches("^v1/configmaps ns=" .. ns:gsub("%-", "%%-") .. " ", informers())
    -- add a controller watching Secrets; drop the stamper
    os.remove(env.dir .. "/a.lua")
    helpers.write_file(env.dir .. "/b.lua", ([[
local luna = require "luna"
return luna.controller { name = "secrets", watch = { "v1/Secret", namespace = %q },
  reconcile = function(req) luna.log.info("saw secret", { name = req.name }) end }
]]):format(ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    local out = table.concat(env.luna.out, "\n")
    assert.matches("controller added controller=secrets", out)
    assert.matches("controller removed controller=stamper", out)
    env.srv:request("POST", env.srv:ns_path("secrets"), { apiVersion = "v1", kind = "Secret",
      metadata = { name = "s1" }, data = { k = "dg==" } })
    env.luna:expect("saw secret[^\n]*name=s1", 20)
    -- the ConfigMap informer is released, the Secret one held
    local held
    pcall(env.wait, env, function()
      held = informers()
      return held == "v1/secrets ns=" .. ns
    end, 20)
    assert.equal("v1/secrets ns=" .. ns, held)
    -- the ConfigMap informer is gone: a new ConfigMap is not stamped
    -- (a Secret written after it, once seen, marks the time a reconcile of
    -- c2 had to stamp it by, if anything still watched ConfigMaps)
    env.srv:create_cm("c2", nil, STAMPED)
    env.srv:request("POST", env.srv:ns_path("secrets"), { apiVersion = "v1", kind = "Secret",
      metadata = { name = "s2" }, data = { k = "dg==" } })
    env.luna:expect("saw secret[^\n]*name=s2", 20)
    assert.is_false(stamps(env).c2)
  end)

  it("finishes in-flight reconciles on the old code, loses none, never runs a key twice at once", function()
    -- every reconcile waits on an API call the server delays
    env = luna_env.start{ sources = { ["a.lua"] = stamper("v1", "x") }, server_args = { "--admin" } }
    local ns = env.srv.ns
    for i = 1, 20 do env.srv:create_cm("cm-" .. i, nil, STAMPED) end
    helpers.write_file(env.dir .. "/a.lua", stamper("v1", ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    env:wait(function() return all_stamped(env, "v1", 20) end, 30, "v1 everywhere")
    if not env.srv.real then
      env.srv:request("PUT", "/luna/v1/faults", "delay=0.3", { content_type = "text/plain" })
    end
    helpers.write_file(env.dir .. "/a.lua", stamper("v2", ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    helpers.write_file(env.dir .. "/a.lua", stamper("v3", ns))
    env.luna:kill(SIGHUP)
    env:wait(function() return all_stamped(env, "v3", 20) end, 60, "v3 everywhere")
    if not env.srv.real then env.srv:request("PUT", "/luna/v1/faults", "", { content_type = "text/plain" }) end
    -- pair reconcile start/done by id; per key the intervals never overlap
    local out = env.luna:drain(0.5)
    local open_by_key, key_of = {}, {}
    for line in out:gmatch("[^\n]+") do
      local key, id = line:match("reconcile start controller=stamper key=(%S+) reconcile_id=(%S+)")
      if key then
        assert.is_nil(open_by_key[key], "key " .. key .. " reconciled twice at once")
        open_by_key[key], key_of[id] = id, key
      end
      local did = line:match("controller=stamper key=%S+ reconcile_id=(%S+) attempt=%d+ result=")
        or line:match("reconcile abandoned controller=stamper key=%S+ reconcile_id=(%S+)")
      if did and key_of[did] then
        open_by_key[key_of[did]] = nil
      end
    end
  end)

  it("survives 100 reloads while objects change, without growing or losing a reconcile", function()
    env = luna_env.start{ sources = { ["a.lua"] = stamper("v0", "x") },
      env = { ASAN_OPTIONS = "detect_leaks=1:quarantine_size_mb=1:malloc_context_size=4" } }
    local ns = env.srv.ns
    for i = 1, 10 do env.srv:create_cm("cm-" .. i, nil, STAMPED) end
    local function rss()
      local st = helpers.read_file("/proc/" .. env.luna.pid .. "/status") or ""
      return tonumber(st:match("VmRSS:%s*(%d+)")) / 1024
    end
    local rss10
    for round = 1, 100 do
      helpers.write_file(env.dir .. "/a.lua", stamper("v" .. round, ns))
      env.luna:kill(SIGHUP)
      env.luna:expect("reload done", 20)
      if round % 10 == 0 then
        env.srv:request("PUT", env.srv:ns_path("configmaps", "cm-" .. math.floor(round / 10)),
          { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "cm-" .. math.floor(round / 10),
            labels = STAMPED }, data = { round = tostring(round) } })
      end
      if round == 10 then
        env:wait(function() return all_stamped(env, "v10", 10) end, 30, "v10")
        rss10 = rss()
      end
    end
    env:wait(function() return all_stamped(env, "v100", 10) end, 30, "v100 on every object")
    local growth = rss() - rss10
    -- 90 more reloads (90 Lua states made and closed) may not cost more
    -- than a few MB; a leaked state per reload would be several times that.
    assert.is_true(growth < 8, ("RSS grew %.1f MB over 90 reloads"):format(growth))
  end)

  it("lets a removed controller's reconcile in flight finish after its metrics are gone", function()
    -- the reconcile waits on an API answer the server delays; the reload
    -- removes its controller (and the controller's metric series) meanwhile
    if client.real() then
      return pending(client.DEV_ONLY .. "needs the delay fault to hold a reconcile across the reload")
    end
    env = luna_env.start{ sources = { ["a.lua"] = stamper("v1", "x") }, server_args = { "--admin" } }
    local ns = env.srv.ns
    assert.equal(200, (env.srv:request("PUT", "/luna/v1/faults", "delay=1.5,delay-path=slow-answer",
      { content_type = "text/plain" })))
    helpers.write_file(env.dir .. "/a.lua", ([[
local luna = require "luna"
return luna.controller {
  name = "leaving",
  watch = { "v1/ConfigMap", namespace = %q, labels = { ["luna-spec"] = "stamp" } },
  reconcile = function(req)
    luna.log.info("asking slowly", { name = req.name })
    luna.get("v1/ConfigMap", req.namespace, "slow-answer")
    error("the answer came")  -- a failed reconcile reports a panic to the metrics too
  end,
}
]]):format(ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    env.srv:create_cm("cm-1", nil, STAMPED)
    env.luna:expect("asking slowly", 20)
    -- replace the controller while its reconcile waits
    os.remove(env.dir .. "/a.lua")
    helpers.write_file(env.dir .. "/b.lua", stamper("v2", ns):gsub('name = "stamper"', 'name = "staying"'))
    env.luna:kill(SIGHUP)
    env.luna:expect("controller removed controller=leaving", 20)
    env.luna:expect("reconcile failed controller=leaving[^\n]*the answer came", 20)
    env:wait(function() return all_stamped(env, "v2", 1) end, 20, "the new controller at work")
    -- env:stop() (after_each) asserts a clean exit: no sanitizer report
  end)

  it("frees retiring reloads oldest first: a queue handed on outlives the old reconcile in flight", function()
    -- reload 1 keeps the controller (its successor takes the workqueue);
    -- reload 2 removes it, and that successor, with nothing in flight,
    -- drains at once.  The first code's reconcile still waits on a slow
    -- answer and then finishes into the handed-on queue: freeing the newer
    -- reload first freed that queue under it (heap-use-after-free).
    if client.real() then
      return pending(client.DEV_ONLY .. "needs the delay fault to hold a reconcile across two reloads")
    end
    local function slow(version)
      return ([[
local luna = require "luna"
return luna.controller {
  name = "handed-on",
  watch = { "v1/ConfigMap", namespace = %q, labels = { ["luna-spec"] = "stamp" } },
  reconcile = function(req)
    luna.log.info("asking slowly", { name = req.name, version = %q })
    if %q == "v1" then luna.get("v1/ConfigMap", req.namespace, "slow-answer") end
    luna.log.info("answered", { name = req.name, version = %q })
  end,
}
]]):format(env.srv.ns, version, version, version)
    end
    env = luna_env.start{ sources = { ["a.lua"] = stamper("v0", "x") }, server_args = { "--admin" } }
    assert.equal(200, (env.srv:request("PUT", "/luna/v1/faults", "delay=3,delay-path=slow-answer",
      { content_type = "text/plain" })))
    helpers.write_file(env.dir .. "/a.lua", slow("v1"))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    env.srv:create_cm("cm-1", nil, STAMPED)
    env.luna:expect("asking slowly[^\n]*version=v1", 20)
    helpers.write_file(env.dir .. "/a.lua", slow("v2"))
    env.luna:kill(SIGHUP)
    env.luna:expect("reload done", 20)
    os.remove(env.dir .. "/a.lua")
    helpers.write_file(env.dir .. "/b.lua", stamper("v3", env.srv.ns))
    env.luna:kill(SIGHUP)
    env.luna:expect("controller removed controller=handed%-on", 20)
    env.luna:expect("answered[^\n]*version=v1", 30)
    env:wait(function() return all_stamped(env, "v3", 1) end, 20, "the new controller at work")
    -- env:stop() (after_each) asserts a clean exit: no sanitizer report
  end)

  it("reloads when the kubelet swaps a ConfigMap volume's ..data symlink (--watch)", function()
    -- lay the directory out as the kubelet does
    local base = helpers.tmpdir()
    local function publish(stamp_version, ns)
      local ts = ("..2026_11_21_%d"):format(math.random(1e6, 9e6))
      os.execute("mkdir -p " .. base .. "/" .. ts)
      helpers.write_file(base .. "/" .. ts .. "/a.lua", stamper(stamp_version, ns))
      os.execute(("cd %s && ln -sfn %s ..data_tmp && mv -T ..data_tmp ..data"):format(base, ts))
      if not helpers.read_file(base .. "/a.lua") then
        os.execute(("cd %s && ln -s ..data/a.lua a.lua"):format(base))
      end
      return ts
    end
    publish("v1", "none")
    env = luna_env.start{ dir = base, args = { "--watch" } }
    local ns = env.srv.ns
    for i = 1, 3 do env.srv:create_cm("cm-" .. i, nil, STAMPED) end
    local old = publish("v1", ns)
    env:wait(function() return all_stamped(env, "v1", 3) end, 20, "v1 after the first swap")
    publish("v2", ns)
    os.execute("rm -rf " .. base .. "/" .. old)
    env:wait(function() return all_stamped(env, "v2", 3) end, 20, "v2 after the second swap")
    -- the log is read as the wait went: the line may still be in the pipe
    if not table.concat(env.luna.out, "\n"):find("reload requested[^\n]*trigger=watch") then
      env.luna:expect("reload requested.*trigger=watch", 20)
    end
  end)
end)
