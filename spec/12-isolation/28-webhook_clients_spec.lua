-- The webhook server under hostile clients (issue 25, "bad input"): a
-- malformed AdmissionReview, a wrong apiVersion, a huge body, a slow
-- client or a TLS handshake flood gets a clear error (a status with the
-- reason where HTTP can still carry one, and a log line), bounded memory,
-- and leaves other requests alone: during every attack a well-behaved
-- review from another address is answered promptly and the controller's
-- reconciles keep running.  Loopback has many addresses (127.0.0.0/8), so
-- the attackers come from their own.  docs/isolation.md, "Hostile clients
-- of the webhook server", has the ledger.
local helpers = require("helpers")
local raw = require("support.raw_http")
local tls = require("support.raw_tls")
local S = require("21-webhooks.support")
local json = require("luna.core").json

local HOOKS = [[
local luna = require "luna"
local RULES = { { api_groups = { "" }, api_versions = { "v1" }, resources = { "configmaps" },
                  operations = { "CREATE", "UPDATE" } } }
return luna.controller {
  name = "ticker",
  watch = { "v1/Namespace" },
  -- reconciles that keep coming: each namespace again every 0.2 s
  reconcile = function(req) print("tick " .. req.name) return { requeue_after = 0.2 } end,
  webhooks = {
    luna.webhook { name = "cm.validate.example.com", rules = RULES,
      validate = function(req) return { warnings = { "seen " .. req.uid } } end },
    luna.webhook { name = "cm.mutate.example.com", rules = RULES,
      mutate = function(req, obj) obj.metadata = obj.metadata or {}; obj.metadata.x = "y" end },
  },
}
]]

local VALIDATE = "/validate/cm.validate.example.com"
local MIB = 1024 * 1024

local function review(uid, pad)
  local object = { metadata = { name = "cm" }, data = { k = "v" } }
  if pad then object.data.pad = string.rep("p", pad) end
  return S.review(uid, object)
end

describe("webhook server under hostile clients", function()
  local proc, addr, port, lines = nil, nil, nil, {}
  local conns = {}

  -- Every log line so far (kept in `lines`), without waiting.
  local function read_log()
    while true do
      local line = proc:read_line(0.02) -- 0 would not look at the pipe
      if not line then return end
      lines[#lines + 1] = line
    end
  end

  -- Waits up to secs for the host's next log line (the attackers' pace).
  local function pace(secs)
    local line = proc:read_line(secs)
    if line then lines[#lines + 1] = line end
  end

  local function ticks()
    read_log()
    local n = 0
    for _, l in ipairs(lines) do if l:find("INFO tick ", 1, true) then n = n + 1 end end
    return n
  end

  -- A log line matching pattern and holding text (plain), if any so far.
  local function logged(pattern, text)
    read_log()
    for _, l in ipairs(lines) do
      if l:find(pattern) and (not text or l:find(text, 1, true)) then return l end
    end
  end

  local function rss_kib(field)
    local status = helpers.read_file("/proc/" .. proc.pid .. "/status") or ""
    return tonumber(status:match((field or "VmRSS") .. ":%s*(%d+)"))
  end

  -- The well-behaved client: a fresh review, answered 200 with its uid
  -- within 3 s (kube-apiserver's default webhook timeout is 10 s).
  local victims = 0
  local function victim_answered(pad)
    victims = victims + 1
    local uid = "victim-" .. victims
    local t0 = helpers.now()
    local status, body = S.post(addr, nil, VALIDATE, review(uid, pad))
    local took = helpers.now() - t0
    assert.equal(200, status, ("the well-behaved review %s: HTTP %s %s"):format(uid, tostring(status), body))
    assert.equal(uid, json.decode(body).response.uid)
    assert.is_true(took < 3, ("the well-behaved review %s took %.1f s"):format(uid, took))
  end

  -- Runs attack_round (which keeps the attack up) n times, checking the
  -- victim's review and that reconciles went on during the rounds.
  local function during(n, attack_round)
    local before = ticks()
    for _ = 1, n do
      attack_round()
      victim_answered()
    end
    helpers.eventually(function() return ticks() > before end, 5, "reconciles during the attack")
  end

  local function close_all()
    for _, c in ipairs(conns) do c:close() end
    conns = {}
  end

  setup(function()
    local dir = helpers.tmpdir()
    helpers.write_file(dir .. "/hooks.lua", HOOKS)
    proc = helpers.spawn({ helpers.luna, "run", "--dev-server", "--metrics-secure=false",
                           "--http-read-header-timeout=2s", "--http-read-timeout=4s", dir },
      -- ASan's quarantine keeps freed memory resident (256 MiB by default),
      -- which would hide whether bodies are bounded
      { env = { ASAN_OPTIONS = "detect_leaks=1:abort_on_error=1:quarantine_size_mb=4" } })
    local _
    _, addr = proc:expect("webhook server listening address=(%S+)", 30)
    port = tonumber(addr:match(":(%d+)$"))
    helpers.eventually(function() return ticks() > 0 end, 20, "the first reconciles")
    victim_answered()
  end)

  after_each(close_all)

  teardown(function()
    close_all()
    if proc then proc:stop() end
  end)

  local function head(path, extra)
    return ("POST %s HTTP/1.1\r\nHost: luna\r\nContent-Type: application/json\r\n%s\r\n")
      :format(path, extra or "")
  end

  local function post_raw(body, path, from)
    local c = assert(tls.connect(port, { from = from }))
    conns[#conns + 1] = c
    c:send(head(path or VALIDATE, ("Content-Length: %d\r\n"):format(#body)) .. body)
    return c:response(10)
  end

  local BASE = '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":%s}'
  for _, case in ipairs({
    { "malformed JSON", '{"apiVersion":', "malformed AdmissionReview" },
    { "a nesting bomb 100,000 deep", string.rep("[", 100000), "nesting deeper than 1000" },
    { "a nesting bomb inside request.object",
      BASE:format('{"uid":"n","object":' .. string.rep('{"a":', 5000) .. "1" .. string.rep("}", 5000) .. "}"),
      "nesting deeper than 1000" },
    { "a JSON array", '[{"apiVersion":"admission.k8s.io/v1"}]', "an AdmissionReview is a JSON object, got an array" },
    { "apiVersion v1beta1", '{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}',
      "apiVersion must be admission.k8s.io/v1, got admission.k8s.io/v1beta1" },
    { "apiVersion a number", '{"apiVersion":1,"kind":"AdmissionReview","request":{"uid":"x"}}',
      "apiVersion must be admission.k8s.io/v1, got a number" },
    { "an apiVersion with a newline (found by the fuzz target admission_review)",
      '{"apiVersion":"admission.k8s.io/v1\\nX-Injected: 1","kind":"AdmissionReview","request":{"uid":"x"}}',
      "got admission.k8s.io/v1?X-Injected: 1" },
    { "kind ConversionReview", '{"apiVersion":"admission.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x"}}',
      "kind must be AdmissionReview, got ConversionReview" },
    { "no request", '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}',
      "request must be an object, got none" },
    { "request a string", BASE:format('"CREATE"'), "request must be an object, got a string" },
    { "no uid", BASE:format('{"operation":"CREATE"}'), "no request.uid (got none)" },
    { "an empty uid", BASE:format('{"uid":""}'), "no request.uid (got an empty string)" },
    { "a uid that is a number", BASE:format('{"uid":7}'), "no request.uid (got a number)" },
    { "a uid of 300 bytes", BASE:format('{"uid":"' .. string.rep("u", 300) .. '"}'), "request.uid is longer than 255 bytes" },
    { "request.object a string", BASE:format('{"uid":"x","object":"str"}'),
      "request.object must be an object, got a string" },
    { "request.object an array", BASE:format('{"uid":"x","object":[{"metadata":{}}]}'),
      "request.object must be an object, got an array" },
    { "request.oldObject a number", BASE:format('{"uid":"x","oldObject":5}'),
      "request.oldObject must be an object, got a number" },
    { "request.userInfo a string", BASE:format('{"uid":"x","userInfo":"root"}'),
      "request.userInfo must be an object, got a string" },
    { "request.operation an object", BASE:format('{"uid":"x","operation":{}}'),
      "request.operation must be a string, got an object" },
    { "request.dryRun a string", BASE:format('{"uid":"x","dryRun":"yes"}'),
      "request.dryRun must be a boolean, got a string" },
    { "request repeated (the webhook would see the second)",
      '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"},"request":{"uid":"y","object":5}}',
      "repeats the key request" },
    { "request.object repeated", BASE:format('{"uid":"x","object":{},"object":"str"}'),
      "repeats the key request.object" },
  }) do
    it("refuses " .. case[1] .. " with 400, the reason and a log line, and serves the next review", function()
      local code, got = post_raw(case[2])
      assert.equal(400, code, got)
      assert.truthy(got:find(case[3], 1, true), got)
      helpers.eventually(function() return logged("webhook request refused", case[3]) end, 5,
        "the refusal's log line")
      victim_answered()
    end)
  end

  it("refuses a Content-Length past 7 MiB at once (413), before a byte of the body", function()
    local c = assert(tls.connect(port, { from = "127.0.5.1" }))
    conns[#conns + 1] = c
    c:send(head(VALIDATE, "Content-Length: 1073741824\r\n"))
    local code, got = c:response(5)
    assert.equal(413, code, got)
    assert.truthy(got:find("at most 7340032 bytes", 1, true), got)
    assert.is_true(c:closed(5))
    victim_answered()
  end)

  it("drops a chunked body at 7 MiB, answers 413 at its end, and does not keep it", function()
    local before = rss_kib()
    local c = assert(tls.connect(port, { from = "127.0.5.2" }))
    conns[#conns + 1] = c
    c:send(head(VALIDATE, "Transfer-Encoding: chunked\r\n"))
    local piece = string.rep("x", MIB)
    for _ = 1, 24 do assert.is_true(c:send(("%x\r\n%s\r\n"):format(#piece, piece))) end
    c:send("0\r\n\r\n")
    local code, got = c:response(10)
    assert.equal(413, code, got)
    -- 24 MiB went through; at most the 7 MiB bound of it was ever kept
    local grew = (rss_kib() - before) / 1024
    assert.is_true(grew < 16, ("resident size grew %.1f MiB"):format(grew))
    victim_answered()
  end)

  it("keeps bodies read at once within 28 MiB: the oldest unfinished makes room, and reviews are answered", function()
    local before, before_hwm = rss_kib(), rss_kib("VmHWM")
    -- 12 uploads of 6.5 MiB of a 7,000,000-byte body, held unfinished:
    -- 78 MiB if they were all kept
    local held = {}
    for i = 1, 12 do
      local c = assert(tls.connect(port, { from = "127.0.6." .. i }))
      conns[#conns + 1] = c
      held[#held + 1] = c
      c:send(head(VALIDATE, "Content-Length: 7000000\r\n"))
      c:send(string.rep("y", 6500000))
    end
    during(3, function() end)
    -- a large well-behaved review (3 MiB, kube-apiserver's largest object)
    victim_answered(3 * MIB)
    local grew = (rss_kib("VmHWM") - math.max(before, before_hwm)) / 1024
    assert.is_true(grew < 48, ("the peak resident size grew %.1f MiB (28 MiB of bodies allowed)"):format(grew))
    -- the uploads that made room were closed, and the reason logged
    local closed = 0
    for _, c in ipairs(held) do if c:closed(0.2) then closed = closed + 1 end end
    assert.is_true(closed >= 8, closed .. " of 12 held uploads were closed")
    helpers.eventually(function() return logged("HTTP request body dropped") end, 5, "the log line")
  end)

  it("closes clients that dribble their head or their body at the read deadlines, serving others meanwhile", function()
    local heads, bodies = {}, {}
    for a = 1, 4 do
      for _ = 1, 6 do
        local c = assert(tls.connect(port, { from = "127.0.7." .. a }))
        c:send("POST " .. VALIDATE .. " HTTP/1.1\r\nHost: luna\r\nX-Slow: ")
        heads[#heads + 1] = c
        conns[#conns + 1] = c
        local b = assert(tls.connect(port, { from = "127.0.8." .. a }))
        b:send(head(VALIDATE, "Content-Length: 100000\r\n"))
        bodies[#bodies + 1] = b
        conns[#conns + 1] = b
      end
    end
    local t0 = helpers.now()
    -- a byte every 0.25 s on each: far more often than any idle timeout
    while helpers.now() - t0 < 7 do
      for _, c in ipairs(heads) do c:send("a") end
      for _, c in ipairs(bodies) do c:send("b") end
      victim_answered()
      pace(0.25)
    end
    for _, c in ipairs(heads) do assert.is_true(c:closed(1), "a head dribbler still connected after 7 s") end
    for _, c in ipairs(bodies) do assert.is_true(c:closed(1), "a body dribbler still connected after 7 s") end
  end)

  it("closes handshakes that stall, plain HTTP and garbage at once or at the head deadline, serving others meanwhile", function()
    local stalled = {}
    local before = ticks()
    for a = 1, 4 do
      for _ = 1, 16 do
        local c = raw.connect(port, { from = "127.0.9." .. a })
        c:send("\22\3\1\1\0") -- a handshake record announced, never sent
        stalled[#stalled + 1] = c
        conns[#conns + 1] = c
      end
    end
    victim_answered()
    local t0 = helpers.now()
    for _, c in ipairs(stalled) do assert.is_true(c:closed(6), "a stalled handshake still open") end
    assert.is_true(helpers.now() - t0 < 6)
    -- plain HTTP to the TLS port, and bytes that are not TLS
    for _, bytes in ipairs({ head(VALIDATE, "Content-Length: 2\r\n") .. "{}", string.rep("\0\255garbage", 100) }) do
      local c = raw.connect(port, { from = "127.0.9.9" })
      conns[#conns + 1] = c
      c:send(bytes)
      assert.is_true(c:closed(2), "closed at once")
      assert.is_nil(c.buf:match("^HTTP/1%.1 2"))
    end
    victim_answered()
    helpers.eventually(function() return ticks() > before end, 5, "reconciles during the attack")
  end)

  it("refuses a 17th connection from one address and answers reviews from others; a full server makes room", function()
    for _ = 1, 16 do
      local c = raw.connect(port, { from = "127.0.10.1" })
      c:send("\22\3\1")
      conns[#conns + 1] = c
    end
    local extra = raw.connect(port, { from = "127.0.10.1" })
    conns[#conns + 1] = extra
    assert.is_true(extra:closed(5), "the 17th connection was not refused")
    -- 80 more from 5 addresses: past the 64 connections of the server
    for a = 2, 6 do
      for _ = 1, 16 do
        local c = raw.connect(port, { from = "127.0.10." .. a })
        c:send("\22\3\1")
        conns[#conns + 1] = c
      end
    end
    during(3, function() end)
  end)
end)
