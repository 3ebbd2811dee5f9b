-- Webhook calls (and probes) go ahead of reconciles also when many API
-- answers come in together (docs/webhooks.md, "Isolation"): a reconcile
-- that waited in an API call is resumed under the dispatcher's slice, as a
-- start is, so N answers arriving in one loop iteration do not run N
-- reconciles back to back before the loop reads a webhook request.
--
-- N reconciles each GET the Secret "held" (held back by the dev server's
-- delay fault) and then spin ~30 ms of script.  The spec releases them
-- while a webhook call holds luna's loop (so every answer is in when the
-- loop next polls, however the dev server's writes are spread), waits
-- until the first reconcile has finished (the burst is under way), then
-- asks on a connection already open (no handshake to wait for) and counts
-- the reconciles that finished between its request and the answer: a few
-- at most, where answering after the burst is N - 1.  The delay fault is
-- the dev server's, so this runs against it only.
local ffi = require("ffi")
local helpers = require("helpers")
local client = require("support.apiserver_client")
local raw = require("support.raw_http")
local tls = require("support.raw_tls")
local rt = require("11-runtime.support")
local S = require("21-webhooks.support")
local json = require("luna.core").json

if client.real() then
  describe("webhook calls ahead of resumed reconciles", function()
    pending(client.DEV_ONLY .. "needs the delay-path fault injection")
  end)
  return
end

local N = 40          -- reconciles resumed together
local SPIN = 0.03     -- script seconds each spends after its answer
local AT_MOST = 3     -- reconciles that may finish while a request waits
local HOLD = 0.25     -- script seconds of the webhook call the release happens in

local CODE = [[
local luna = require "luna"
return luna.controller {
  name = "burst",
  watch = { "v1/ConfigMap", labels = { ["luna.dev/spec"] = "@TOKEN@" } },
  workers = 64,
  reconcile = function(req)
    local s, err = luna.get("v1/Secret", req.namespace, "held")
    if not s then return nil, err end
    local t0 = os.clock()
    while os.clock() - t0 < @SPIN@ do end
    luna.log.info("burned", { key = req.key })
  end,
  webhooks = {
    luna.webhook {
      name = "cm.validate.example.com",
      rules = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "configmaps" },
                  operations = { "CREATE" } } },
      validate = function(req)
        luna.log.info("webhook called", { uid = req.uid })
        local spin = tonumber(req.object.data.spin)
        local t0 = os.clock()
        while spin and os.clock() - t0 < spin do end
      end,
    },
  },
}
]]

pcall(ffi.cdef, "int clock_gettime(int clk, void *ts);")
local timespec_t = ffi.typeof("struct { long s; long ns; }[1]")
-- The wall clock in seconds of the day (UTC), as rt.seconds reads luna's
-- timestamps (milliseconds).
local function wall_of_day()
  local t = timespec_t()
  ffi.C.clock_gettime(0, t)
  return tonumber(t[0].s) % 86400 + tonumber(t[0].ns) / 1e9
end

-- Reads one whole HTTP/1.1 answer (head and Content-Length body) from c,
-- leaving the connection ready for the next; returns the status, the body
-- and when (wall_of_day) the head was complete, or nil after secs.
local function answer(c, secs)
  local deadline = helpers.now() + secs
  local at
  repeat
    local head_end = c.buf:find("\r\n\r\n", 1, true)
    if head_end then
      at = at or wall_of_day()
      local len = tonumber(c.buf:sub(1, head_end):lower():match("content%-length:%s*(%d+)")) or 0
      if #c.buf >= head_end + 3 + len then
        local status = tonumber(c.buf:match("^HTTP/1%.1 (%d%d%d)"))
        local body = c.buf:sub(head_end + 4, head_end + 3 + len)
        c.buf = c.buf:sub(head_end + 4 + len)
        return status, body, at
      end
    end
    if not c:read_some(2) then return nil end
  until helpers.now() > deadline
end

-- The state of one luna run and the helpers over it.
local env, token, webhook_port, health_port, round = nil, nil, nil, nil, 0

local function faults(spec)
  local code = env.srv:request("PUT", "/luna/v1/faults", spec, { content_type = "text/plain" })
  assert.equal(200, code)
end

local function burned()
  local n = 0
  for _, r in ipairs(rt.records(env)) do
    if r.msg == "burned" then n = n + 1 end
  end
  return n
end

-- Starts luna (more flags: args) and the Secret its reconciles GET.
local function start(args)
  token, round = rt.token(), 0
  local argv = { "--webhook-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0" }
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  env = rt.start{
    sources = { ["burst.lua"] = rt.source(CODE, { TOKEN = token, SPIN = tostring(SPIN) }) },
    server_args = { "--admin" },
    args = argv,
  }
  local listening = rt.wait(env, rt.msg("webhook server listening"), 20, "the webhook server")
  webhook_port = tonumber(listening.address:match(":(%d+)$"))
  listening = rt.wait(env, rt.msg("health probe server listening"), 20, "the probe server")
  health_port = tonumber(listening.address:match(":(%d+)$"))
  local code = env.srv:request("POST", env.srv:ns_path("secrets"),
    { apiVersion = "v1", kind = "Secret", metadata = { name = "held" }, data = {} })
  assert.equal(201, code)
end

local function review(uid, data)
  local body = S.review(uid, { metadata = { name = "cm" }, data = data or { k = "v" } })
  return ("POST /validate/cm.validate.example.com HTTP/1.1\r\nHost: luna\r\n"
    .. "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"):format(#body, body)
end

-- Opens a TLS connection to the webhook server and has it answer once
-- (the connection is set up and kept alive before the burst).
local function webhook_conn()
  local c = assert(tls.connect(webhook_port))
  assert.is_true(c:send(review("warm")))
  local status, body = answer(c, 10)
  assert.equal(200, status, body)
  return c
end

-- N reconciles waiting in their GET at once; then the release, while a
-- webhook call that spins HOLD seconds holds the loop, and the first of
-- them finished: returns when the burst is under way.
local function burst()
  round = round + 1
  local holder = webhook_conn()
  faults("delay=60,delay-path=/secrets/held")
  local before = burned()
  for i = 1, N do rt.cm(env, ("r%d-%d"):format(round, i), {}, { [rt.LABEL] = token }) end
  env:wait(function()
    local _, f = env.srv:request("GET", "/luna/v1/faults")
    return f and f.waiting == N
  end, 30, N .. " reconciles waiting in their GET")
  local uid = "hold-" .. round
  assert.is_true(holder:send(review(uid, { spin = tostring(HOLD) })))
  rt.wait(env, rt.msg("webhook called", { uid = uid }), 10, "the holding webhook call")
  faults("")
  local status, body = answer(holder, 10)
  holder:close()
  assert.equal(200, status, body)
  env:wait(function() return burned() > before end, 20, "the first resumed reconcile")
  return before
end

describe("webhook calls ahead of resumed reconciles #integration", function()
  setup(start)

  teardown(function()
    if env then
      faults("")
      env:stop()
    end
  end)

  -- Sends request on c at once, reads the answer; returns it, how many
  -- reconciles finished between the send and the answer and how many
  -- after the answer.  Those already logged when it sends finished
  -- before; the others are placed by luna's timestamps (ms: one finishing
  -- in the answer's millisecond counts as during).
  local function ask(c, request, before)
    while env.luna:read_line(0.001) do end -- what luna logged by now
    local seen = burned()
    local sent = wall_of_day()
    assert.is_true(c:send(request))
    local status, body, at = answer(c, 20)
    assert.is_not_nil(status, "no answer")
    env:wait(function() return burned() >= before + N end, 30, "the whole burst")
    local until_answer, after = 0, 0
    for _, r in ipairs(rt.records(env)) do
      if r.msg == "burned" then
        if rt.seconds(r) <= at then until_answer = until_answer + 1 else after = after + 1 end
      end
    end
    local during = until_answer - seen
    -- the request came in the middle of the burst (else this proves nothing)
    assert.is_true(during + after >= N / 2,
      ("only %d of %d reconciles finished after the request was sent"):format(during + after, N))
    return status, body, during
  end

  it("answers a webhook request before the resumed reconciles have all run", function()
    local c = webhook_conn()
    local status, body
    local before = burst()
    local during
    status, body, during = ask(c, review("in-burst"), before)
    c:close()
    assert.equal(200, status, body)
    assert.equal("in-burst", json.decode(body).response.uid)
    assert.is_true(during <= AT_MOST,
      ("%d of %d resumed reconciles finished while the webhook request waited (at most %d)")
        :format(during, N, AT_MOST))
    -- and by log order: the webhook ran before most of the burst
    local after_call, seen = 0, false
    for _, r in ipairs(rt.records(env)) do
      if r.msg == "webhook called" and r.uid == "in-burst" then seen = true
      elseif seen and r.msg == "burned" then after_call = after_call + 1 end
    end
    assert.is_true(seen, "the webhook logged its call")
    assert.is_true(after_call >= N / 2,
      ("only %d of the %d resumed reconciles ran after the webhook call"):format(after_call, N))
  end)

  it("answers /healthz before the resumed reconciles have all run", function()
    local c = raw.connect(health_port)
    local probe = "GET /healthz HTTP/1.1\r\nHost: luna\r\n\r\n"
    assert.is_true(c:send(probe))
    local status, body = answer(c, 10)
    assert.equal(200, status, body)

    local before = burst()
    local during
    status, body, during = ask(c, probe, before)
    c:close()
    assert.equal(200, status, body)
    assert.is_true(during <= AT_MOST,
      ("%d of %d resumed reconciles finished while /healthz waited (at most %d)")
        :format(during, N, AT_MOST))
  end)
end)

-- The reconciles a burst leaves waiting for their turn are in flight: a
-- shutdown waits for them as for any other, and one that gives up on them
-- never resumes them.
describe("a shutdown during a burst of resumed reconciles #integration", function()
  after_each(function()
    if env and not env.stopped then env:stop() end
  end)

  -- Log records from the first that msg names (nil: from the start).
  local function records_after(msg)
    local out, on = {}, msg == nil
    for _, r in ipairs(rt.records(env)) do
      if on then out[#out + 1] = r end
      if r.msg == msg then on = true end
    end
    return out
  end

  it("runs every waiting resume before it exits", function()
    start()
    local before = burst()
    local out = env:stop() -- SIGTERM; asserts exit status 0
    assert.matches("shutdown complete", out, 1, true)
    assert.equal(before + N, burned(), "every resumed reconcile finished")
    local late = records_after("shutdown requested")
    local done, shut = 0, false
    for _, r in ipairs(late) do
      if r.msg == "reconcile done" and r.controller == "burst" then done = done + 1 end
      if r.msg == "shutdown complete" then shut = true end
      assert.is_false(shut and r.msg == "burned", "a reconcile ran after the shutdown completed")
    end
    assert.is_true(done >= N / 2, ("only %d reconciles finished during the drain"):format(done))
    assert.is_nil(rt.find(env, rt.msg("reconcile abandoned")))
    assert.is_nil(rt.find(env, rt.msg("reconcile failed")))
  end)

  it("stops the waiting reconciles when the grace period ends, running none of their code", function()
    start({ "--shutdown-grace-period=200ms" })
    local before = burst()
    env:stop() -- SIGTERM; asserts exit status 0
    local stopped, after_stop = 0, 0
    for _, r in ipairs(records_after("shutdown requested")) do
      if r.msg == "reconcile failed" and r.stopped == "shutdown" then stopped = stopped + 1
      elseif stopped > 0 and r.msg == "burned" then after_stop = after_stop + 1 end
    end
    assert.is_true(stopped >= N / 2, ("only %d waiting reconciles stopped"):format(stopped))
    assert.equal(0, after_stop, "a reconcile ran its code after the grace period")
    assert.equal(N, burned() - before + stopped, "every reconcile finished or was stopped")
  end)
end)

describe("a reload during a burst of resumed reconciles #integration", function()
  after_each(function()
    if env and not env.stopped then env:stop() end
  end)

  it("runs the old code's waiting resumes, and never one it abandoned", function()
    start({ "--shutdown-grace-period=200ms" })
    burst()
    env.luna:kill(1) -- SIGHUP: the same files again
    rt.wait(env, rt.msg("reload grace period over: abandoning the old code's reconciles"), 20,
      "the old code's grace period")
    -- the abandoned keys go to the new code, which reconciles them again
    env:wait(function()
      return #rt.all(env, rt.msg("reconcile done", { controller = "burst" })) >= N
    end, 30, "every key reconciled")
    local abandoned, ran_on = {}, 0
    local old_done = 0
    local reloaded, grace_over = false, false
    for _, r in ipairs(rt.records(env)) do
      if r.msg == "reload requested" then
        reloaded = true
      elseif r.msg == "reload grace period over: abandoning the old code's reconciles" then
        grace_over = true
      elseif r.msg == "reconcile abandoned" then
        abandoned[r.reconcile_id] = true
      elseif r.reconcile_id and abandoned[r.reconcile_id] then
        ran_on = ran_on + 1
      elseif r.msg == "reconcile done" and reloaded and not grace_over then
        old_done = old_done + 1
      end
    end
    local n = 0
    for _ in pairs(abandoned) do n = n + 1 end
    assert.is_true(n >= 1, "the grace period abandoned waiting reconciles")
    assert.is_true(old_done >= 2, "the old code's waiting resumes ran after the reload")
    assert.equal(0, ran_on, "an abandoned reconcile went on")
  end)
end)
