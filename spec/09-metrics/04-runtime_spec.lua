-- core.metrics.runtime: controller-runtime's metric names, HELP, types,
-- labels and buckets (so its dashboards work), luna's own metrics, and the
-- helpers the runtime calls.
local helpers = require("helpers") -- luacheck: ignore
local core = require("luna.core")
local expo = require("support.exposition")

local function parse(reg)
  local parsed = expo.parse(reg:render())
  expo.check_histograms(parsed)
  return parsed
end

local function label_names(sample, drop)
  local names = {}
  for k in pairs(sample.labels) do
    if k ~= drop then names[#names + 1] = k end
  end
  table.sort(names)
  return table.concat(names, ",")
end

-- name -> { type, sorted label names, HELP } as controller-runtime v0.16+ and
-- client-go register them.
local EXPECTED = {
  controller_runtime_webhook_requests_total = { "counter", "code,webhook",
    "Total number of admission requests by HTTP status code." },
  controller_runtime_webhook_latency_seconds = { "histogram", "webhook",
    "Histogram of the latency of processing admission requests" },
  controller_runtime_webhook_requests_in_flight = { "gauge", "webhook",
    "Current number of admission requests being served." },
  controller_runtime_reconcile_total = { "counter", "controller,result",
    "Total number of reconciliations per controller" },
  controller_runtime_reconcile_errors_total = { "counter", "controller",
    "Total number of reconciliation errors per controller" },
  controller_runtime_reconcile_panics_total = { "counter", "controller",
    "Total number of reconciliation panics per controller" },
  controller_runtime_reconcile_time_seconds = { "histogram", "controller",
    "Length of time per reconciliation per controller" },
  controller_runtime_max_concurrent_reconciles = { "gauge", "controller",
    "Maximum number of concurrent reconciles per controller" },
  controller_runtime_active_workers = { "gauge", "controller",
    "Number of currently used workers per controller" },
  workqueue_depth = { "gauge", "name", "Current depth of workqueue" },
  workqueue_adds_total = { "counter", "name", "Total number of adds handled by workqueue" },
  workqueue_queue_duration_seconds = { "histogram", "name",
    "How long in seconds an item stays in workqueue before being requested" },
  workqueue_work_duration_seconds = { "histogram", "name",
    "How long in seconds processing an item from workqueue takes." },
  workqueue_retries_total = { "counter", "name", "Total number of retries handled by workqueue" },
  workqueue_unfinished_work_seconds = { "gauge", "name",
    "How many seconds of work has been done that is in progress and hasn't been observed by " ..
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck " ..
    "threads by observing the rate at which this increases." },
  workqueue_longest_running_processor_seconds = { "gauge", "name",
    "How many seconds has the longest running processor for workqueue been running." },
  rest_client_requests_total = { "counter", "code,host,method",
    "Number of HTTP requests, partitioned by status code, method, and host." },
  leader_election_master_status = { "gauge", "name",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, " ..
    "1 indicates master. 'name' is the string used to identify the lease. Please make sure " ..
    "to group by name." },
  luna_informer_objects = { "gauge", "resource" },
  luna_informer_relists_total = { "counter", "resource" },
  luna_informer_undecodable_objects_total = { "counter", "resource" },
  luna_watch_restarts_total = { "counter", "reason,resource" },
  luna_watch_version_checks_total = { "counter", "resource,result" },
  luna_reloads_total = { "counter", "result" },
  luna_reload_last_timestamp_seconds = { "gauge", "" },
  luna_lua_memory_bytes = { "gauge", "state" },
  luna_controller_script_info = { "gauge", "controller,sha256" },
  luna_controller_kinds_not_served = { "gauge", "controller",
    "Number of the controller's sources whose kind the API server does not serve " ..
    "(the controller cannot start until it does)" },
  luna_triggers_total = { "counter", "action,controller",
    "Total number of admin requests that acted on a controller, per action " ..
    "(reconcile, pause, resume)" },
  luna_trigger_keys_total = { "counter", "controller" },
  luna_controller_paused = { "gauge", "controller" },
  luna_periodic_ticks_total = { "counter", "controller" },
  luna_periodic_next_run_timestamp_seconds = { "gauge", "controller" },
  luna_controller_lua_memory_bytes = { "gauge", "controller" },
  luna_controller_watchdog_stops_total = { "counter", "controller,reason" },
  luna_api_warnings_total = { "counter", "controller" },
  luna_log_lines_total = { "counter", "" },
  luna_log_lines_dropped_total = { "counter", "",
    "Total number of log lines dropped because the log reader did not keep up (the " ..
    "buffer was full) or the output failed" },
  luna_log_lines_truncated_total = { "counter", "" },
  luna_log_buffered_bytes = { "gauge", "" },
  luna_controllers_stale = { "gauge", "" },
  process_cpu_seconds_total = { "counter", "" },
  process_resident_memory_bytes = { "gauge", "" },
  process_virtual_memory_bytes = { "gauge", "" },
  process_open_fds = { "gauge", "" },
  process_max_fds = { "gauge", "" },
  process_start_time_seconds = { "gauge", "" },
}

local RECONCILE_BUCKETS = { "0.005", "0.01", "0.025", "0.05", "0.1", "0.15", "0.2", "0.25",
  "0.3", "0.35", "0.4", "0.45", "0.5", "0.6", "0.7", "0.8", "0.9", "1", "1.25", "1.5", "1.75",
  "2", "2.5", "3", "3.5", "4", "4.5", "5", "6", "7", "8", "9", "10", "15", "20", "25", "30",
  "40", "50", "60", "+Inf" }

describe("runtime metrics names", function()
  it("exports controller-runtime's and luna's families with their types, labels and HELP", function()
    local reg = core.metrics.new()
    local rt = core.metrics.runtime(reg)
    local ctl = rt:controller("configmap-mirror", 4) -- luacheck: ignore
    local q = core.workqueue.new{ clock = "fake", name = "configmap-mirror" }
    core.metrics.export_workqueue(reg, q)
    rt:rest_request(200, "GET", "10.0.0.1:6443")
    rt:leader("luna-leader", true)
    rt:informer("v1/ConfigMap", function() return 3 end)
    rt:watch_restart("v1/ConfigMap", "gone")
    rt:version_check("v1/ConfigMap", false)
    rt:lua_state("main")
    ctl:script(string.rep("ab", 32))
    core.metrics.webhook(reg, "/validate/widgets.validate.example.com")
    local parsed = parse(reg)
    local names = {}
    for name in pairs(EXPECTED) do names[#names + 1] = name end
    table.sort(names)
    assert.same(names, parsed.order)
    for name, want in pairs(EXPECTED) do
      local f = parsed.families[name]
      assert.equal(want[1], f.type, name)
      assert.is_true(#f.samples > 0, name)
      for _, s in ipairs(f.samples) do
        assert.equal(want[2], label_names(s, "le"), s.line)
      end
      if want[3] then assert.equal(want[3], f.help, name) end
      assert.is_true(#f.help > 0, name .. " has HELP")
    end
  end)

  it("uses controller-runtime's reconcile time buckets", function()
    local reg = core.metrics.new()
    core.metrics.runtime(reg):controller("c", 1)
    local les = {}
    for _, s in ipairs(expo.samples(parse(reg), "controller_runtime_reconcile_time_seconds_bucket")) do
      les[#les + 1] = s.labels.le
    end
    assert.same(RECONCILE_BUCKETS, les)
  end)

  it("is registered once per registry", function()
    local reg = core.metrics.new()
    core.metrics.runtime(reg)
    assert.has_error(function() core.metrics.runtime(reg) end,
      "runtime metrics: already registered in this registry")
  end)

  it("refuses a registry where one of its names means something else", function()
    local reg = core.metrics.new()
    reg:gauge{ name = "luna_reloads_total" }
    assert.has_error(function() core.metrics.runtime(reg) end)
    assert.equal("gauge", reg:find("luna_reloads_total"):type())
  end)
end)

describe("runtime metrics controllers", function()
  local reg, rt
  before_each(function()
    reg = core.metrics.new()
    rt = core.metrics.runtime(reg)
  end)

  local function v(name, labels) return expo.get(parse(reg), name, labels) end

  it("creates every series of a controller at zero, like controller-runtime's initMetrics", function()
    local ctl = rt:controller("mirror", 4) -- luacheck: ignore
    local c = { controller = "mirror" }
    for _, result in ipairs({ "success", "error", "requeue", "requeue_after" }) do
      assert.equal(0, v("controller_runtime_reconcile_total", { controller = "mirror", result = result }))
    end
    assert.equal(0, v("controller_runtime_reconcile_errors_total", c))
    assert.equal(0, v("controller_runtime_reconcile_panics_total", c))
    assert.equal(0, v("controller_runtime_active_workers", c))
    assert.equal(4, v("controller_runtime_max_concurrent_reconciles", c))
    assert.equal(0, v("controller_runtime_reconcile_time_seconds_count", c))
    assert.equal(0, v("luna_controller_kinds_not_served", c))
    assert.is_nil(v("luna_controller_script_info", { controller = "mirror", sha256 = "x" }))
    ctl:kinds_not_served(2)
    assert.equal(2, v("luna_controller_kinds_not_served", c))
    ctl:kinds_not_served(0)
    assert.equal(0, v("luna_controller_kinds_not_served", c))
    assert.has_error(function() ctl:kinds_not_served(-1) end)
  end)

  it("counts reconciles by result, errors, panics, active workers and time", function()
    local ctl = rt:controller("mirror", 2)
    local c = { controller = "mirror" }
    ctl:reconcile_start()
    ctl:reconcile_start()
    assert.equal(2, v("controller_runtime_active_workers", c))
    ctl:reconcile_done("success", 0.004)
    assert.equal(1, v("controller_runtime_active_workers", c))
    ctl:reconcile_done("error", 0.3)
    ctl:panic()
    for _, r in ipairs({ { "requeue", 1.1 }, { "requeue_after", 70 }, { "error", 0.05 } }) do
      ctl:reconcile_start()
      ctl:reconcile_done(r[1], r[2])
    end
    local parsed = parse(reg)
    local function total(result)
      return expo.get(parsed, "controller_runtime_reconcile_total", { controller = "mirror", result = result })
    end
    assert.equal(1, total("success"))
    assert.equal(2, total("error"))
    assert.equal(1, total("requeue"))
    assert.equal(1, total("requeue_after"))
    assert.equal(2, expo.get(parsed, "controller_runtime_reconcile_errors_total", c))
    assert.equal(1, expo.get(parsed, "controller_runtime_reconcile_panics_total", c))
    assert.equal(0, expo.get(parsed, "controller_runtime_active_workers", c))
    assert.equal(5, expo.get(parsed, "controller_runtime_reconcile_time_seconds_count", c))
    assert.equal(0.004 + 0.3 + 1.1 + 70 + 0.05,
      expo.get(parsed, "controller_runtime_reconcile_time_seconds_sum", c))
    local function bucket(le)
      return expo.get(parsed, "controller_runtime_reconcile_time_seconds_bucket",
        { controller = "mirror", le = le })
    end
    assert.equal(1, bucket("0.005"))
    assert.equal(2, bucket("0.05"))
    assert.equal(3, bucket("0.3"))
    assert.equal(4, bucket("1.25"))
    assert.equal(4, bucket("60"))
    assert.equal(5, bucket("+Inf"))
    assert.has_error(function() ctl:reconcile_done("ok", 1) end)
    assert.has_error(function() ctl:reconcile_done("success") end)
  end)

  it("updates the worker count, and keeps one script series per controller", function()
    local ctl = rt:controller("mirror", 2)
    ctl:set_workers(8)
    assert.equal(8, v("controller_runtime_max_concurrent_reconciles", { controller = "mirror" }))
    assert.has_error(function() ctl:set_workers(0) end)
    assert.has_error(function() ctl:set_workers(1.5) end)
    local old, new = string.rep("a", 64), string.rep("b", 64)
    ctl:script(old)
    ctl:script(old)
    ctl:script(new)
    local info = expo.samples(parse(reg), "luna_controller_script_info")
    assert.equal(1, #info)
    assert.same({ controller = "mirror", sha256 = new }, info[1].labels)
    assert.equal(1, info[1].value)
  end)

  it("removes a controller's series and leaves the others", function()
    local gone, stays = rt:controller("gone", 1), rt:controller("stays", 3)
    gone:script("s1")
    stays:script("s2")
    gone:reconcile_start()
    gone:remove()
    assert.has_error(function() gone:reconcile_start() end, "controller metrics are removed")
    local parsed = parse(reg)
    for _, f in pairs(parsed.families) do
      for _, s in ipairs(f.samples) do
        assert.is_not.equal("gone", s.labels.controller, s.line)
      end
    end
    assert.equal(3, expo.get(parsed, "controller_runtime_max_concurrent_reconciles", { controller = "stays" }))
    assert.equal(1, expo.get(parsed, "luna_controller_script_info", { controller = "stays", sha256 = "s2" }))
    -- the name can be used again
    rt:controller("gone", 1)
  end)

  it("removes a controller's series when its handle is collected", function()
    do rt:controller("temp", 1) end
    collectgarbage(); collectgarbage()
    assert.is_nil(v("controller_runtime_max_concurrent_reconciles", { controller = "temp" }))
  end)

  it("refuses two controllers of one name", function()
    local _keep = rt:controller("twin", 1) -- luacheck: ignore
    assert.has_error(function() rt:controller("twin", 1) end,
      'runtime metrics: controller "twin" already has metrics')
    assert.has_error(function() rt:controller("x", 0) end)
    assert.has_error(function() rt:controller(1, 1) end)
  end)
end)

describe("runtime metrics client, informers, reloads, Lua, leader", function()
  local reg, rt
  before_each(function()
    reg = core.metrics.new()
    rt = core.metrics.runtime(reg)
  end)

  it("counts API requests by code, method and host; no response is <error>", function()
    rt:rest_request(200, "GET", "api:6443")
    rt:rest_request(200, "GET", "api:6443")
    rt:rest_request(409, "PUT", "api:6443")
    rt:rest_request(0, "WATCH", "api:6443")
    local parsed = parse(reg)
    local function n(code, method)
      return expo.get(parsed, "rest_client_requests_total", { code = code, method = method, host = "api:6443" })
    end
    assert.equal(2, n("200", "GET"))
    assert.equal(1, n("409", "PUT"))
    assert.equal(1, n("<error>", "WATCH"))
    assert.has_error(function() rt:rest_request(200.5, "GET", "h") end)
    assert.has_error(function() rt:rest_request(-1, "GET", "h") end)
    assert.has_error(function() rt:rest_request(200, nil, "h") end)
  end)

  it("reads informer object counts at scrape time and counts relists and watch restarts", function()
    local objects = 10
    rt:informer("v1/Pod", function() return objects end)
    rt:informer("apps/v1/Deployment", function() return 2 end)
    rt:relist("v1/Pod")
    rt:undecodable("v1/Pod")
    rt:undecodable("v1/Pod")
    rt:watch_restart("v1/Pod", "gone")
    rt:watch_restart("v1/Pod", "gone")
    rt:watch_restart("v1/Pod", "timeout")
    rt:watch_restart("apps/v1/Deployment", "error")
    rt:version_check("v1/Pod", false)
    rt:version_check("v1/Pod", false)
    rt:version_check("v1/Pod", true)
    rt:version_check("apps/v1/Deployment", true)
    assert.has_error(function() rt:version_check("v1/Pod", "stale") end)
    objects = 11
    local parsed = parse(reg)
    assert.equal(11, expo.get(parsed, "luna_informer_objects", { resource = "v1/Pod" }))
    assert.equal(1, expo.get(parsed, "luna_informer_relists_total", { resource = "v1/Pod" }))
    assert.equal(0, expo.get(parsed, "luna_informer_relists_total", { resource = "apps/v1/Deployment" }))
    assert.equal(2, expo.get(parsed, "luna_informer_undecodable_objects_total", { resource = "v1/Pod" }))
    assert.equal(0, expo.get(parsed, "luna_informer_undecodable_objects_total",
      { resource = "apps/v1/Deployment" }))
    assert.equal(2, expo.get(parsed, "luna_watch_restarts_total", { resource = "v1/Pod", reason = "gone" }))
    assert.equal(1, expo.get(parsed, "luna_watch_restarts_total", { resource = "v1/Pod", reason = "timeout" }))
    assert.equal(2, expo.get(parsed, "luna_watch_version_checks_total", { resource = "v1/Pod", result = "current" }))
    assert.equal(1, expo.get(parsed, "luna_watch_version_checks_total", { resource = "v1/Pod", result = "stale" }))
    assert.has_error(function() rt:informer("v1/Pod", function() return 0 end) end,
      'runtime metrics: informer "v1/Pod" already has metrics')

    rt:informer_remove("v1/Pod")
    parsed = parse(reg)
    for _, f in pairs(parsed.families) do
      for _, s in ipairs(f.samples) do assert.is_not.equal("v1/Pod", s.labels.resource, s.line) end
    end
    assert.equal(1, expo.get(parsed, "luna_watch_restarts_total",
      { resource = "apps/v1/Deployment", reason = "error" }))
    assert.equal(1, expo.get(parsed, "luna_watch_version_checks_total",
      { resource = "apps/v1/Deployment", result = "stale" }))
    rt:informer("v1/Pod", function() return 0 end) -- may come back
  end)

  it("counts reloads and stamps the last successful one", function()
    local parsed = parse(reg)
    assert.equal(0, expo.get(parsed, "luna_reloads_total", { result = "success" }))
    assert.equal(0, expo.get(parsed, "luna_reloads_total", { result = "failure" }))
    assert.equal(0, expo.get(parsed, "luna_reloads_total", { result = "unresolved" }))
    assert.equal(0, expo.get(parsed, "luna_reload_last_timestamp_seconds"))
    rt:reload(true, 1700000000)
    rt:reload(false, 1700000100)
    rt:reload("success", 1700000200.5)
    rt:reload("failure", 1700000300)
    parsed = parse(reg)
    assert.equal(2, expo.get(parsed, "luna_reloads_total", { result = "success" }))
    assert.equal(2, expo.get(parsed, "luna_reloads_total", { result = "failure" }))
    assert.equal(1700000200.5, expo.get(parsed, "luna_reload_last_timestamp_seconds"))
    -- applied, but a kind is not served: counted on its own, and stamped
    rt:reload("unresolved", 1700000400)
    parsed = parse(reg)
    assert.equal(1, expo.get(parsed, "luna_reloads_total", { result = "unresolved" }))
    assert.equal(1700000400, expo.get(parsed, "luna_reload_last_timestamp_seconds"))
    assert.has_error(function() rt:reload("yes", 1) end)
  end)

  it("reports a Lua state's heap size", function()
    rt:lua_state("main")
    assert.has_error(function() rt:lua_state("main") end)
    local before = collectgarbage("count") * 1024
    local bytes = expo.get(parse(reg), "luna_lua_memory_bytes", { state = "main" })
    assert.is_true(bytes > 0)
    -- the same heap, read moments apart: within what rendering allocates
    assert.is_true(math.abs(bytes - before) < 1024 * 1024, bytes .. " vs " .. before)
    rt:lua_state_remove("main")
    assert.is_nil(expo.get(parse(reg), "luna_lua_memory_bytes", { state = "main" }))
  end)

  it("reports leadership per lease", function()
    rt:leader("a", true)
    rt:leader("b", false)
    local parsed = parse(reg)
    assert.equal(1, expo.get(parsed, "leader_election_master_status", { name = "a" }))
    assert.equal(0, expo.get(parsed, "leader_election_master_status", { name = "b" }))
    rt:leader("a", false)
    assert.equal(0, expo.get(parse(reg), "leader_election_master_status", { name = "a" }))
  end)

  it("reports this process: CPU, memory, file descriptors, start time", function()
    local parsed = parse(reg)
    local function get(name) return expo.get(parsed, name) end
    assert.is_true(get("process_cpu_seconds_total") >= 0)
    assert.is_true(get("process_resident_memory_bytes") > 1024 * 1024)
    assert.is_true(get("process_virtual_memory_bytes") >= get("process_resident_memory_bytes"))
    assert.is_true(get("process_open_fds") >= 3)
    assert.is_true(get("process_max_fds") >= get("process_open_fds"))
    local start = get("process_start_time_seconds")
    assert.is_true(start > 1.5e9 and start <= os.time() + 1, tostring(start))
  end)
end)
