-- Every result a reconcile can produce, and the request it gets, through
-- `luna run`: what the workqueue does with the key (done, rate-limited
-- retry, delayed retry) and what the log says.
local rt = require("11-runtime.support")

-- Each ConfigMap's data.mode picks a behaviour; every reconcile logs what
-- it saw first ("saw"), with the call count n for its key.
local RESULTS = [[
local luna = require "luna"
local calls = {}
local function raised(text)
  return setmetatable({}, { __tostring = function() return text end })
end
return luna.controller {
  name = "results",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  workers = 4,
  rate_limit = { base_delay = 0.1, max_delay = 10 },
  reconcile = function(req)
    calls[req.key] = (calls[req.key] or 0) + 1
    local n = calls[req.key]
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    local mode = cm and cm.data and cm.data.mode or "gone"
    luna.log.info("saw", { req_namespace = req.namespace, req_name = req.name, req_key = req.key,
      req_attempt = req.attempt, attempt_type = type(req.attempt), n = n, mode = mode })
    if mode == "none" then return end
    if mode == "true" then return true end
    if mode == "requeue" then
      if req.attempt < 4 then return { requeue = true } end
      return
    end
    if mode == "after" then
      if n == 1 then return nil, "fails once first" end
      if n == 2 then return { requeue_after = 0.5 } end
      return
    end
    if mode == "raise" and req.attempt < 4 then error("boom at attempt " .. req.attempt) end
    if mode == "nilerr" and req.attempt < 3 then return nil, "bad thing " .. req.attempt end
    if mode == "false" and req.attempt < 2 then return false end
    if mode == "tblret" and req.attempt < 2 then return nil, raised("returned object") end
    if mode == "tblraise" and req.attempt < 2 then error(raised("raised object")) end
    if mode == "badtostring" and req.attempt < 2 then
      error(setmetatable({}, { __tostring = function() error("tostring exploded") end }))
    end
    if mode == "plainraise" and req.attempt < 2 then error({ code = 7 }) end
    if mode == "apierr" and req.attempt < 2 then
      local _, err = luna.get("v1/ConfigMap", req.namespace, "does-not-exist")
      return nil, err
    end
    if mode == "yield" and req.attempt < 2 then coroutine.yield() end
    if mode == "badafter" and req.attempt < 3 then
      return { requeue_after = req.attempt == 1 and "1" or 0 / 0 }
    end
    if mode == "lowpriority" and req.attempt < 3 then
      return { requeue = true, priority = req.attempt == 1 and -100 or nil }
    end
    if mode == "badpriority" and req.attempt < 3 then
      return { requeue = true, priority = req.attempt == 1 and 1.5 or "high" }
    end
    if mode == "typokey" and req.attempt < 3 then
      return { requeue_afer = 30 }
    end
    if mode == "oddkey" and req.attempt < 2 then
      return { requeue = true, 30 }
    end
    if mode == "metatable" then
      -- a result whose metamethods raise: read raw, so just done
      return setmetatable({}, { __index = function() error("no fields here") end })
    end
  end,
}
]]

-- A cluster-scoped primary: Namespaces carrying the spec label.
local SCOPED = [[
local luna = require "luna"
return luna.controller {
  name = "scoped",
  watch = { "v1/Namespace", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  reconcile = function(req)
    luna.log.info("scoped saw", { req_namespace = req.namespace, ns_type = type(req.namespace),
      req_name = req.name, req_key = req.key, req_attempt = req.attempt })
  end,
}
]]

describe("reconcile results #integration", function()
  local env, token, ns
  local modes = { "none", "true", "requeue", "after", "raise", "nilerr", "false", "tblret",
                  "tblraise", "badtostring", "plainraise", "apierr", "yield", "badafter", "badpriority", "lowpriority",
                  "metatable", "typokey", "oddkey" }

  setup(function()
    token = rt.token()
    env = rt.start{ sources = { ["results.lua"] = rt.source(RESULTS, { TOKEN = token }),
                                ["scoped.lua"] = rt.source(SCOPED, { TOKEN = token }) } }
    ns = env.srv.ns
    for _, m in ipairs(modes) do rt.cm(env, m, { mode = m }, { [rt.LABEL] = token }) end
  end)
  teardown(function() env:stop() end)

  local function key(name) return ns .. "/" .. name end
  local function saw(name) return rt.msg("saw", { req_key = key(name) }) end
  local function done(name, result)
    return rt.msg("reconcile done", { key = key(name), controller = "results", result = result })
  end
  local function failed(name) return rt.msg("reconcile failed", { key = key(name) }) end
  local function attempts(list)
    local out = {}
    for i, r in ipairs(list) do out[i] = tonumber(r.attempt or r.req_attempt) end
    return out
  end
  -- Once every mode has finished for good, nothing reconciles again.
  local function settled()
    rt.wait(env, done("requeue", "success"), 20, "requeue done")
    rt.wait(env, done("raise", "success"), 20, "raise done")
    rt.wait(env, done("after", "success"), 20, "after done")
  end

  it("hands a namespaced request its namespace, name, key and attempt", function()
    local r = rt.wait(env, saw("none"), 15, "reconcile of none")
    assert.equal(ns, r.req_namespace)
    assert.equal("none", r.req_name)
    assert.equal(ns .. "/none", r.req_key)
    assert.equal(1, r.req_attempt)
    assert.equal("number", r.attempt_type)
    -- the log line of a reconcile carries the controller, key and reconcile id
    assert.equal("results", r.controller)
    assert.equal(ns .. "/none", r.key)
    local start = rt.find(env, rt.msg("reconcile start", { key = key("none") }))
    assert.equal(start.reconcile_id, r.reconcile_id)
  end)

  it("hands a cluster-scoped request no namespace, and name = key", function()
    local code = env.srv:request("PATCH", "/api/v1/namespaces/" .. ns,
      { metadata = { labels = { [rt.LABEL] = token } } },
      { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
    local r = rt.wait(env, rt.msg("scoped saw", { req_key = ns }), 15, "namespace reconcile")
    assert.is_nil(r.req_namespace)
    assert.equal("nil", r.ns_type)
    assert.equal(ns, r.req_name)
    assert.equal(1, r.req_attempt)
  end)

  it("treats nothing and true as done: one reconcile, forgotten", function()
    rt.wait(env, done("none", "success"), 15, "none done")
    rt.wait(env, done("true", "success"), 15, "true done")
    settled()
    assert.equal(1, #rt.all(env, saw("none")))
    assert.equal(1, #rt.all(env, saw("true")))
  end)

  it("retries {requeue = true} with rate limiting, counting attempts", function()
    rt.wait(env, done("requeue", "success"), 20, "requeue done")
    assert.same({ 1, 2, 3, 4 }, attempts(rt.all(env, saw("requeue"))))
    local requeued = rt.all(env, done("requeue", "requeue"))
    assert.same({ 1, 2, 3 }, attempts(requeued))
    -- rate limited: each retry waits at least the per-key backoff (0.1 s, 0.2 s, ...)
    local runs = rt.all(env, saw("requeue"))
    for i = 2, #runs do
      assert.is_true(rt.seconds(runs[i]) - rt.seconds(runs[i - 1]) >= 0.1 * 2 ^ (i - 2) * 0.9)
    end
    assert.is_nil(rt.find(env, failed("requeue")))
  end)

  it("comes back after {requeue_after = s}, with the key's failures forgotten", function()
    local again = rt.wait(env, function(r) return saw("after")(r) and r.n == 3 end, 20, "third")
    local after = rt.wait(env, rt.msg("requeue after", { key = key("after") }), 1, "requeue after")
    assert.equal("0.5", after.result)
    assert.equal(2, after.attempt)
    assert.is_true(rt.seconds(again) - rt.seconds(after) >= 0.45)
    -- attempt 1 failed, attempt 2 asked for the delay, which forgot the failure
    assert.same({ 1, 2, 1 }, attempts(rt.all(env, saw("after"))))
    rt.wait(env, done("after", "success"), 5, "after done")
    assert.equal(3, #rt.all(env, saw("after")))
  end)

  it("logs an error() with key, attempt and a traceback naming the script line, and retries with growing backoff", function()
    rt.wait(env, done("raise", "success"), 20, "raise done")
    local fails = rt.all(env, failed("raise"))
    assert.same({ 1, 2, 3 }, attempts(fails))
    local line = rt.line_of(RESULTS, 'error("boom at attempt "')
    for i, f in ipairs(fails) do
      assert.equal("results", f.controller)
      assert.equal("error", f.level)
      assert.equal("error", f.result)
      assert.matches("results%.lua:" .. line .. ": boom at attempt " .. i, f.error)
      assert.matches("stack traceback:", f.error, 1, true)
      assert.is_string(f.reconcile_id)
    end
    local runs = rt.all(env, saw("raise"))
    assert.same({ 1, 2, 3, 4 }, attempts(runs))
    local gaps = {}
    for i = 2, #runs do gaps[#gaps + 1] = rt.seconds(runs[i]) - rt.seconds(runs[i - 1]) end
    -- per-key exponential backoff from base_delay 0.1: at least 0.1, 0.2, 0.4 s
    for i, g in ipairs(gaps) do assert.is_true(g >= 0.1 * 2 ^ (i - 1) * 0.9, "gap " .. i) end
    assert.is_true(gaps[3] > gaps[1], "the gap between attempts grows")
  end)

  it("logs nil, err with the error's text and retries", function()
    rt.wait(env, done("nilerr", "success"), 20, "nilerr done")
    local fails = rt.all(env, failed("nilerr"))
    assert.same({ 1, 2 }, attempts(fails))
    assert.equal("bad thing 1", fails[1].error)
    assert.equal("bad thing 2", fails[2].error)
    assert.same({ 1, 2, 3 }, attempts(rt.all(env, saw("nilerr"))))
  end)

  it("treats false as an error", function()
    rt.wait(env, done("false", "success"), 20, "false done")
    local fails = rt.all(env, failed("false"))
    assert.equal(1, #fails)
    assert.equal("reconcile returned false", fails[1].error)
    assert.same({ 1, 2 }, attempts(rt.all(env, saw("false"))))
  end)

  it("turns table error values into text with __tostring, returned or raised", function()
    rt.wait(env, done("tblret", "success"), 20, "tblret done")
    rt.wait(env, done("tblraise", "success"), 20, "tblraise done")
    assert.equal("returned object", rt.find(env, failed("tblret")).error)
    local raised = rt.find(env, failed("tblraise")).error
    assert.matches("^raised object\nstack traceback:", raised)
    assert.matches("results%.lua:" .. rt.line_of(RESULTS, 'error(raised("raised object"))'), raised)
  end)

  it("survives a __tostring that fails and an error table without one", function()
    rt.wait(env, done("badtostring", "success"), 20, "badtostring done")
    rt.wait(env, done("plainraise", "success"), 20, "plainraise done")
    assert.matches("^%(error value whose __tostring failed: .*tostring exploded",
      rt.find(env, failed("badtostring")).error)
    assert.matches("^%(table error value%)\nstack traceback:", rt.find(env, failed("plainraise")).error)
  end)

  it("logs a returned API error as Reason: message, with the failed call's line", function()
    rt.wait(env, done("apierr", "success"), 20, "apierr done")
    local f = rt.find(env, failed("apierr"))
    assert.matches("^NotFound: ", f.error)
    local line = rt.line_of(RESULTS, '"does-not-exist")')
    assert.matches("^luna%.get at .*results%.lua:" .. line .. "$", f.where)
    assert.is_nil(rt.find(env, failed("nilerr")).where, "a string error has no call site")
  end)

  it("fails a result whose requeue_after is not a number of seconds", function()
    rt.wait(env, done("badafter", "success"), 20, "badafter done")
    local fails = rt.all(env, failed("badafter"))
    assert.same({ 1, 2 }, attempts(fails))
    for _, f in ipairs(fails) do
      assert.matches("invalid result: requeue_after must be a number of seconds", f.error)
    end
  end)

  it("fails a result with a misspelled key, naming the key, the known one and the reconcile's line", function()
    rt.wait(env, done("typokey", "success"), 20, "typokey done")
    local fails = rt.all(env, failed("typokey"))
    assert.same({ 1, 2 }, attempts(fails))
    local line = rt.line_of(RESULTS, "reconcile = function(req)")
    for _, f in ipairs(fails) do
      assert.matches("^reconcile returned unknown result key 'requeue_afer' %(did you mean "
        .. "'requeue_after'%?%) in the reconcile function at [^ ]*results%.lua:" .. line .. "$", f.error)
    end
    rt.wait(env, done("oddkey", "success"), 20, "oddkey done")
    assert.matches("^reconcile returned unknown result key 1 in the reconcile function at [^ ]*results%.lua:%d+$",
      rt.find(env, failed("oddkey")).error)
  end)

  it("requeues at the priority a result names, and retries keep it", function()
    rt.wait(env, done("lowpriority", "success"), 20, "lowpriority done")
    local prios = {}
    for i, r in ipairs(rt.all(env, rt.msg("reconcile start", { key = key("lowpriority") }))) do
      prios[i] = r.priority
    end
    -- created live (0), then the result's -100, kept by the next requeue
    assert.same({ 0, -100, -100 }, prios)
  end)

  it("fails a result whose priority is not an integer", function()
    rt.wait(env, done("badpriority", "success"), 20, "badpriority done")
    local fails = rt.all(env, failed("badpriority"))
    assert.same({ 1, 2 }, attempts(fails))
    for _, f in ipairs(fails) do
      assert.matches("invalid result: priority must be an integer", f.error)
    end
  end)

  it("reads a result table raw: a raising __index counts as done", function()
    rt.wait(env, done("metatable", "success"), 20, "metatable done")
    assert.is_nil(rt.find(env, failed("metatable")))
    assert.is_true(env.luna:alive())
  end)

  it("fails a reconcile that yields outside a luna API call", function()
    rt.wait(env, done("yield", "success"), 20, "yield done")
    assert.matches("coroutine.yield is not allowed in reconcile",
      rt.find(env, failed("yield")).error, 1, true)
  end)
end)
