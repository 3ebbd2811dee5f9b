-- The order `luna run` logs startup and a reload in, as README.md ("The
-- command line", "Hot reload") documents it: a controller starts once its
-- own informers have synced; a reload takes over once discovery has
-- answered for its kinds, logs "reload done" with its result, and only then
-- do its controllers start (at once on shared informers, after "informer
-- synced" on new ones).
local helpers = require("helpers")
local rt = require("11-runtime.support")

local SIGHUP = 1

local function controller(name, kind, token, note)
  return rt.source([[
local luna = require "luna"
-- @NOTE@
return luna.controller {
  name = "@NAME@",
  watch = { "@KIND@", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  reconcile = function(req) luna.log.info("@NAME@ reconciled", { name = req.name }) end,
}
]], { NAME = name, KIND = kind, TOKEN = token, NOTE = note or "v1" })
end

-- Index of the first record at or after `from` that pred accepts.
local function index(env, pred, from, what)
  local list = rt.records(env)
  for i = from or 1, #list do
    if pred(list[i]) then return i end
  end
  error("no record: " .. what)
end

local function informer_of(kind)
  return function(r) return r.msg == "informer synced" and r.informer:find(kind, 1, true) == 1 end
end

describe("the documented order of startup and reload #integration", function()
  local env
  after_each(function() if env then env:stop() end env = nil end)

  it("starts a controller after its informers synced, and a reload's controllers after reload done",
     function()
    local token = rt.token()
    env = rt.start{ sources = { ["a.lua"] = controller("first", "v1/ConfigMap", token) } }
    -- startup: informer synced < caches synced < controller started
    local synced = index(env, informer_of("v1/ConfigMap"), 1, "the ConfigMap informer synced")
    rt.wait(env, rt.msg("controller started", { controller = "first" }), 20, "first started")
    local caches = index(env, rt.msg("caches synced"), 1, "caches synced")
    local started = index(env, rt.msg("controller started", { controller = "first" }), 1, "first started")
    assert.is_true(synced < caches and caches < started, "startup order")

    -- a reload changing "first" (shared informer) and adding "second" (a
    -- new informer, of Secrets)
    helpers.write_file(env.dir .. "/a.lua", controller("first", "v1/ConfigMap", token, "v2"))
    helpers.write_file(env.dir .. "/b.lua", controller("second", "v1/Secret", token))
    env.luna:kill(SIGHUP)
    rt.wait(env, rt.msg("controller started", { controller = "second" }), 30, "second started")
    rt.wait_count(env, rt.msg("controller started", { controller = "first" }), 2, 10, "first restarted")
    local req = index(env, rt.msg("reload requested"), 1, "reload requested")
    local changed = index(env, rt.msg("controller changed", { controller = "first" }), req, "first changed")
    local added = index(env, rt.msg("controller added", { controller = "second" }), req, "second added")
    local done = index(env, rt.msg("reload done", { result = "success" }), req, "reload done")
    local first = index(env, rt.msg("controller started", { controller = "first" }), req, "first started")
    local secrets = index(env, informer_of("v1/Secret"), req, "the Secret informer synced")
    local second = index(env, rt.msg("controller started", { controller = "second" }), req, "second started")
    assert.is_true(changed < done, "controller changed before reload done")
    assert.is_true(added < done, "controller added before reload done")
    assert.is_true(done < first, "the changed controller starts after reload done")
    assert.is_true(done < second, "the added controller starts after reload done")
    assert.is_true(secrets < second, "the added controller starts after its new informer synced")

    -- and both reconcile
    rt.cm(env, "c1", {}, { [rt.LABEL] = token })
    rt.wait(env, rt.msg("first reconciled", { name = "c1" }), 20, "first reconciles")
    rt.create(env, env.srv:ns_path("secrets"), { apiVersion = "v1", kind = "Secret",
      metadata = { name = "s1", labels = { [rt.LABEL] = token } }, data = { k = "dg==" } })
    rt.wait(env, rt.msg("second reconciled", { name = "s1" }), 20, "second reconciles")
  end)

  it("removes a controller whose reconcile is still in flight: it finishes, nothing breaks", function()
    -- the dev server holds the reconcile's GET for a second; a real cluster
    -- answers at once, and the reconcile simply ends sooner
    local token = rt.token()
    local held = rt.source([[
local luna = require "luna"
return luna.controller {
  name = "doomed",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  reconcile = function(req)
    luna.get("v1/ConfigMap", req.namespace, "held-" .. req.name)
    luna.log.info("doomed finished", { name = req.name })
  end,
}
]], { TOKEN = token })
    env = rt.start{ args = { "--metrics-secure=false", "--metrics-bind-address=127.0.0.1:0" }, sources = {
      ["a.lua"] = held, ["b.lua"] = controller("survivor", "v1/ConfigMap", token) },
      server_args = { "--faults", "delay=1,delay-path=/configmaps/held-" } }
    rt.cm(env, "one", {}, { [rt.LABEL] = token })
    rt.wait(env, rt.msg("reconcile start", { controller = "doomed" }), 20, "the held reconcile")
    os.remove(env.dir .. "/a.lua")
    env.luna:kill(SIGHUP)
    rt.wait(env, rt.msg("reload done", { result = "success" }), 20, "the reload")
    assert.is_table(rt.find(env, rt.msg("controller removed", { controller = "doomed" })))
    -- the old code's reconcile ends after its controller's series are gone
    rt.wait(env, rt.msg("doomed finished", { name = "one" }), 20, "the in-flight reconcile ends")
    rt.cm(env, "two", {}, { [rt.LABEL] = token })
    rt.wait(env, rt.msg("survivor reconciled", { name = "two" }), 20, "the other controller goes on")
    local url = "http://" .. rt.wait(env, rt.msg("metrics server listening"), 5, "metrics").address
    local out = helpers.run("env -u LD_PRELOAD curl -s -o /dev/null -w '%{http_code}' " .. url .. "/metrics")
    assert.equal("200", out)
    -- env:stop() asserts a clean exit: a use after free would abort first
  end)
end)
