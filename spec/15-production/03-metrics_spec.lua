-- /metrics of `luna run`, scraped over HTTP and read with the strict
-- exposition parser: controller-runtime's names and labels, with counts
-- that match the reconciles a controller was made to do.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local S = require("15-production.support")

-- What each ConfigMap's reconciles return, by name prefix:
--   ok-*     success, after a DELETE that must answer 404
--   flaky-*  error on the first attempt, then success
--   again-*  {requeue = true} on the first attempt, then success
--   raise-*  error() on the first attempt, then success
--   later-*  {requeue_after = 3600}
local CONTROLLER = [[
local luna = require "luna"
return luna.controller {
  name = "counter",
  workers = 2,
  watch = { "v1/ConfigMap", namespace = %q, labels = { app = "metrics" } },
  reconcile = function(req)
    local first = req.attempt == 1
    if req.name:match("^ok") then
      local _, err = luna.delete("v1/ConfigMap", req.namespace, "missing-" .. req.name)
      if not err or err.code ~= 404 then return nil, "expected NotFound" end
    elseif req.name:match("^flaky") and first then
      return nil, "first attempt fails"
    elseif req.name:match("^again") and first then
      return { requeue = true }
    elseif req.name:match("^raise") and first then
      error("first attempt raises")
    elseif req.name:match("^later") then
      return { requeue_after = 3600 }
    end
  end,
}
]]

describe("luna run /metrics", function()
  local srv, luna

  before_each(function() srv = client.start({ args = { "--admin" } }) end)
  after_each(function()
    if luna then luna:stop() end
    luna = nil
    srv:stop()
  end)

  local function run(opts)
    local dir = S.controllers({ ["counter.lua"] = CONTROLLER:format(srv.ns) })
    luna = S.start(srv, dir, opts)
    luna:await("controller started", 15)
  end

  local function faults(spec)
    assert.equal(200, (srv:request("PUT", "/luna/v1/faults", spec, { content_type = "text/plain" })))
  end

  it("counts reconciles by result, errors, panics, queue adds and API requests", function()
    run({ name = "pod-m", leader = true, lease = { 15, 10, 2 } })
    for _, name in ipairs({ "ok-1", "ok-2", "ok-3", "flaky-1", "again-1", "raise-1", "later-1" }) do
      srv:create_cm(name, { k = "v" }, { app = "metrics" })
    end
    local m
    local ctl = { controller = "counter" }
    local function total(result)
      return S.value(m, "controller_runtime_reconcile_total", { controller = "counter", result = result })
    end
    helpers.eventually(function()
      m = S.scrape(luna)
      return total("success") == 6 and total("requeue_after") == 1
    end, 15, "7 objects reconciled")
    assert.equal(2, total("error"))          -- flaky-1 and raise-1, first attempts
    assert.equal(1, total("requeue"))        -- again-1
    assert.equal(2, S.value(m, "controller_runtime_reconcile_errors_total", ctl))
    assert.equal(1, S.value(m, "controller_runtime_reconcile_panics_total", ctl))
    assert.equal(10, S.value(m, "controller_runtime_reconcile_time_seconds_count", ctl))
    assert.equal(10, S.value(m, "controller_runtime_reconcile_time_seconds_bucket",
                             { controller = "counter", le = "+Inf" }))
    assert.equal(2, S.value(m, "controller_runtime_max_concurrent_reconciles", ctl))
    assert.equal(0, S.value(m, "controller_runtime_active_workers", ctl))
    assert.equal("counter", m.families.controller_runtime_reconcile_total.samples[1].labels.controller)

    -- 7 keys added by the watch, 3 re-added with rate limiting; retries
    -- also count later-1's add_after, as client-go's AddAfter does
    local q = { name = "counter" }
    assert.equal(10, S.value(m, "workqueue_adds_total", q))
    assert.equal(4, S.value(m, "workqueue_retries_total", q))
    assert.equal(0, S.value(m, "workqueue_depth", q))
    assert.equal(10, S.value(m, "workqueue_work_duration_seconds_count", q))
    assert.equal("counter", m.families.workqueue_adds_total.samples[1].labels.name)

    -- the API server luna talks to: the dev server, or the cluster's
    -- (srv.url is then kubectl proxy, which only the spec uses)
    local server = srv.url
    if srv.real then
      server = require("helpers").read_file(os.getenv("KUBECONFIG")):match("server:%s*(%S+)")
    end
    local host = server:match("^https?://([^/]+)")
    assert.equal(3, S.value(m, "rest_client_requests_total",
                            { code = "404", method = "DELETE", host = host }))
    assert.is_true(S.value(m, "rest_client_requests_total",
                           { code = "200", method = "GET", host = host }) >= 1)
    local resource = "v1/configmaps ns=" .. srv.ns .. " labels=app=metrics"
    assert.equal(7, S.value(m, "luna_informer_objects", { resource = resource }))
    assert.equal(0, S.value(m, "luna_informer_relists_total", { resource = resource }))
    assert.equal(1, S.value(m, "leader_election_master_status", { name = "luna-spec" }))
    assert.is_true(S.value(m, "luna_lua_memory_bytes", { state = "controllers" }) > 0)
    assert.is_true(S.value(m, "process_open_fds") > 0)
  end)

  it("counts relists and watch restarts by reason", function()
    if srv.real then return pending(client.DEV_ONLY .. "needs fault injection") end
    run()
    -- the next watch event ends the stream; the watch after it gets 410 Gone
    faults("watch-close-after=1,gone=1")
    srv:create_cm("ok-1", { k = "v" }, { app = "metrics" })
    local resource = "v1/configmaps ns=" .. srv.ns .. " labels=app=metrics"
    local m
    helpers.eventually(function()
      m = S.scrape(luna)
      return (S.value(m, "luna_informer_relists_total", { resource = resource }) or 0) >= 1
    end, 15, "a relist")
    faults("")
    assert.equal(1, S.value(m, "luna_watch_restarts_total", { resource = resource, reason = "gone" }))
    assert.is_true(S.value(m, "luna_watch_restarts_total", { resource = resource, reason = "closed" }) >= 1)
    -- nothing was lost: the object was reconciled (again after the relist)
    helpers.eventually(function()
      return S.value(S.scrape(luna), "controller_runtime_reconcile_total",
                     { controller = "counter", result = "success" }) >= 1
    end, 10, "the object reconciled")
  end)

  -- A watch that brings nothing for --watch-idle-timeout has the version it
  -- resumes from checked (07-informer/11): each check is counted, and a
  -- quiet collection's versions are current, never stale.
  it("counts the version checks of watches that brought nothing", function()
    run({ args = { "--watch-idle-timeout=1s" } })
    local resource = "v1/configmaps ns=" .. srv.ns .. " labels=app=metrics"
    local m
    helpers.eventually(function()
      m = S.scrape(luna)
      return (S.value(m, "luna_watch_version_checks_total", { resource = resource, result = "current" }) or 0) >= 2
    end, 30, "two version checks of the quiet collection")
    assert.is_nil(S.value(m, "luna_watch_version_checks_total", { resource = resource, result = "stale" }))
    assert.is_true(S.value(m, "luna_watch_restarts_total", { resource = resource, reason = "timeout" }) >= 2)
    assert.equal(0, S.value(m, "luna_informer_relists_total", { resource = resource }))
  end)
end)

describe("shared informer keys", function()
  it("keep selectors whole, so informers differing only at the end are not shared", function()
    local core = require("luna.core")
    local srv = client.start()
    local env = assert(core.informer.env{ kubeconfig = S.kubeconfig_for(srv) })
    local a = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = "app=x",
                            fields = "metadata.name=first" }
    local b = env:informer{ kind = "v1/ConfigMap", namespace = srv.ns, labels = "app=x",
                            fields = "metadata.name=other" }
    assert.equal(2, env:count())
    a:release()
    b:release()
    env:close()
    srv:stop()
  end)
end)
