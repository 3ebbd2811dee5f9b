-- The probe and metrics servers under hostile clients (issue 24, class 2):
-- a slowloris from many addresses must not keep /healthz and /readyz from
-- answering (else the kubelet's liveness probe restarts luna in a loop).
-- Loopback has many addresses (127.0.0.0/8), so "many clients" come from
-- one host.  The attackers pace themselves by waiting on their sockets.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local raw = require("support.raw_http")
local S = require("15-production.support")

local CONFIGMAPS = [[
local luna = require "luna"
return luna.controller { name = "cms", watch = { "v1/ConfigMap", namespace = %q },
                         reconcile = function() end }
]]

local function port_of(url) return tonumber(url:match(":(%d+)$")) end

-- A slow client: the request line, then a header that never ends.
local function slow(port, from)
  local c = raw.connect(port, { from = from })
  c:send("GET /healthz HTTP/1.1\r\nHost: luna\r\nX-Slow: ")
  return c
end

-- One header byte on every connection; a closed one is opened again, as a
-- real attacker would.  Returns how many were found closed.
local function trickle(conns, port)
  local reopened = 0
  for i, a in ipairs(conns) do
    a.c:read_some(0)
    if a.c.eof or not a.c:send("a") then
      a.c:close()
      a.c = slow(port, a.from)
      reopened = reopened + 1
    end
  end
  return reopened
end

local function flood(port, addresses, per_address)
  local conns = {}
  for _, from in ipairs(addresses) do
    for _ = 1, per_address do conns[#conns + 1] = { from = from, c = slow(port, from) } end
  end
  return conns
end

local function close_all(conns) for _, a in ipairs(conns or {}) do a.c:close() end end

describe("probe and metrics servers under hostile clients", function()
  local srv, luna, conns

  before_each(function() srv = client.start() end)
  after_each(function()
    close_all(conns)
    conns = nil
    if luna then luna:stop() end
    luna = nil
    srv:stop()
  end)

  local function start(args)
    luna = S.start(srv, S.controllers({ ["c.lua"] = CONFIGMAPS:format(srv.ns) }), { args = args })
    luna:await("caches synced", 15)
    helpers.eventually(function() return S.get(luna.health .. "/readyz") == 200 end, 10, "ready")
  end

  it("logs the documented limits: header 10s, request 30s, 64 connections, 16 per address", function()
    start()
    for _, server in ipairs({ "metrics server listening", "health probe server listening" }) do
      local line = luna:await(server, 5)
      assert.matches("read_header_timeout=10s", line, 1, true)
      assert.matches("read_timeout=30s", line, 1, true)
      assert.matches("max_connections=64", line, 1, true)
      assert.matches("max_connections_per_address=16", line, 1, true)
    end
  end)

  it("answers /healthz and /readyz while 16 slow clients from each of 5 addresses trickle their headers", function()
    start() -- the defaults
    local port = port_of(luna.health)
    conns = flood(port, { "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6" }, 16)
    local answered = { healthz = 0, readyz = 0 }
    for _ = 1, 8 do
      trickle(conns, port)
      -- the kubelet's probe: a fresh connection, a short timeout
      for path in pairs(answered) do
        local code = S.get(luna.health .. "/" .. path, nil, { max_time = 3 })
        if code == 200 then answered[path] = answered[path] + 1 end
      end
    end
    assert.same({ healthz = 8, readyz = 8 }, answered)
    -- the attack was real: the slow clients still hold most places
    local held = 0
    for _, a in ipairs(conns) do
      a.c:read_some(0)
      if not a.c.eof then held = held + 1 end
    end
    assert.is_true(held >= 48, "only " .. held .. " slow clients held a place")
    -- and the metrics server is not disturbed either
    assert.equal(200, (S.get(luna.metrics .. "/metrics", nil, { max_time = 3 })))
  end)

  it("closes a connection whose request head is not complete after 10s, however often it sends", function()
    start()
    local c = slow(port_of(luna.health))
    local t0 = helpers.now()
    -- a byte every 0.5s: far more often than any idle timeout
    while helpers.now() - t0 < 25 do
      c:read_some(500)
      if c.eof or not c:send("a") then break end
    end
    local elapsed = helpers.now() - t0
    c:close()
    assert.is_true(elapsed >= 9.5 and elapsed < 15, "closed after " .. elapsed .. "s")
  end)

  it("refuses a 17th connection from one address and still answers the others", function()
    start()
    local port = port_of(luna.health)
    conns = flood(port, { "127.0.0.9" }, 16)
    local extra = raw.connect(port, { from = "127.0.0.9" })
    assert.is_true(extra:closed(5), "the 17th connection was not refused")
    extra:close()
    assert.equal(0, (S.get(luna.health .. "/healthz", nil, { interface = "127.0.0.9", max_time = 2 })))
    assert.equal(200, (S.get(luna.health .. "/healthz", nil, { interface = "127.0.0.10", max_time = 3 })))
    -- the address gets a place again once one of its connections ends
    conns[1].c:close()
    table.remove(conns, 1)
    helpers.eventually(function()
      return S.get(luna.health .. "/healthz", nil, { interface = "127.0.0.9", max_time = 2 }) == 200
    end, 10, "a place for 127.0.0.9 again")
  end)

  it("when all 64 connections are taken, closes the oldest unfinished request to answer a probe", function()
    start()
    local port = port_of(luna.health)
    conns = flood(port, { "127.0.0.20", "127.0.0.21", "127.0.0.22", "127.0.0.23" }, 16)
    -- the 64th took the last place: the oldest slow client made room
    assert.is_true(conns[1].c:closed(5), "the oldest slow client is still connected")
    for i = 2, #conns do assert.is_true(conns[i].c:send("a")) end
    assert.is_false(conns[2].c:closed(0.2), "more than one slow client was closed")
    for _, path in ipairs({ "healthz", "readyz" }) do
      assert.equal(200, (S.get(luna.health .. "/" .. path, nil, { max_time = 3 })))
    end
    -- each probe took the place of the oldest slow client left, not the newest
    assert.is_true(conns[2].c:closed(5), "the second oldest slow client is still connected")
    assert.is_false(conns[#conns].c:closed(0.2), "the newest slow client was closed")
  end)

  it("closes a POST to /admin/ whose body never comes, after --http-read-timeout", function()
    start({ "--metrics-secure=false", "--admin-endpoints", "--http-read-timeout=1s" })
    local c = raw.connect(port_of(luna.metrics))
    c:send("POST /admin/controllers/cms/pause HTTP/1.1\r\nHost: luna\r\nContent-Length: 100\r\n\r\n")
    local t0 = helpers.now()
    -- a body byte every 0.2s keeps any idle timeout away
    while helpers.now() - t0 < 15 do
      c:read_some(200)
      if c.eof or not c:send("x") then break end
    end
    local elapsed = helpers.now() - t0
    assert.is_true(c.eof or c:closed(1), "not closed after " .. elapsed .. "s")
    c:close()
    assert.is_true(elapsed < 10, "closed after " .. elapsed .. "s")
    assert.is_nil(c.buf:match("^HTTP/1%.1 2"), "the cut request was acted on: " .. c.buf)
    -- the controller was not paused
    local code, body = S.get(luna.metrics .. "/admin/controllers")
    assert.equal(200, code)
    assert.not_matches('"paused":%s*true', body)
  end)

  -- Request smuggling on luna's own server: a proxy in front that reads
  -- the other framing would see a second request where luna saw a body
  -- (or the reverse), so both are refused before any body byte is read.
  for _, case in ipairs({
    { "two differing Content-Lengths", { "Content-Length: 0", "Content-Length: %d" },
      'http: message cannot contain multiple Content-Length headers; got ["0" "%d"]' },
    { "Content-Length beside Transfer-Encoding", { "Content-Length: %d", "Transfer-Encoding: chunked" },
      "http: message cannot contain both Content-Length and Transfer-Encoding headers" },
  }) do
    it("refuses " .. case[1] .. " with 400, closes, and acts on neither request", function()
      start({ "--metrics-secure=false", "--admin-endpoints" })
      local inner = "POST /admin/controllers/cms/pause HTTP/1.1\r\nHost: luna\r\nContent-Length: 0\r\n\r\n"
      local head = "POST /admin/controllers/cms/pause HTTP/1.1\r\nHost: luna\r\n"
      for _, h in ipairs(case[2]) do head = head .. h:format(#inner) .. "\r\n" end
      local c = raw.connect(port_of(luna.metrics))
      c:send(head .. "\r\n" .. inner)
      local code, got = c:response(10)
      assert(code == 400, tostring(got))
      assert.matches("400 Bad Request: " .. case[3]:format(#inner), got, 1, true)
      assert.is_true(c:closed(10))
      c:close()
      local status, body = S.get(luna.metrics .. "/admin/controllers")
      assert.equal(200, status)
      assert.not_matches('"paused":%s*true', body)
      -- /healthz on the probe port too
      c = raw.connect(port_of(luna.health))
      c:send("GET /healthz HTTP/1.1\r\nHost: luna\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx")
      code, got = c:response(10)
      assert(code == 400, tostring(got))
      c:close()
    end)
  end

  it("rejects bad limits with a clear error", function()
    for _, flag in ipairs({ "--http-read-header-timeout=0", "--http-read-timeout=-1",
                            "--http-read-header-timeout=soon" }) do
      local out, rc = helpers.run(helpers.luna .. " run '" .. flag .. "' /nonexistent")
      assert.not_equal(0, rc)
      assert.matches(flag:match("^(%-%-[%w-]+)"), out, 1, true)
    end
  end)
end)

describe("secure metrics server under hostile clients", function()
  local scrapers = require("support.scrapers")
  local srv, ids, luna, conns

  setup(function()
    srv = client.start({ args = { "--admin" } })
    ids = scrapers.make(srv)
  end)
  teardown(function()
    close_all(conns)
    if luna then luna:stop() end
    if ids then ids:remove() end
    srv:stop()
  end)

  -- A TLS slowloris: a handshake record announced, its bytes trickled.
  local function slow_tls(port, from)
    local c = raw.connect(port, { from = from })
    c:send("\22\3\1\1\0")
    return c
  end

  it("answers scrapes (200 with a token, 401 without) while slow handshakes come from 5 addresses", function()
    luna = S.start(srv, S.controllers({ ["c.lua"] = CONFIGMAPS:format(srv.ns) }), { secure = true })
    luna:await("caches synced", 15)
    local port = port_of(luna.metrics)
    conns = {}
    for a = 2, 6 do
      for _ = 1, 16 do
        local from = "127.0.1." .. a
        conns[#conns + 1] = { from = from, c = slow_tls(port, from) }
      end
    end
    local answers = { token = 0, none = 0 }
    for _ = 1, 8 do
      for _, k in ipairs(conns) do
        k.c:read_some(0)
        if k.c.eof or not k.c:send("\1") then
          k.c:close()
          k.c = slow_tls(port, k.from)
        end
      end
      if S.get(luna.metrics .. "/metrics", nil, { token = ids.allowed, max_time = 3 }) == 200 then
        answers.token = answers.token + 1
      end
      if S.get(luna.metrics .. "/metrics", nil, { max_time = 3 }) == 401 then
        answers.none = answers.none + 1
      end
    end
    assert.same({ token = 8, none = 8 }, answers)
    -- the attack was real: the slow handshakes still hold most places
    local held = 0
    for _, k in ipairs(conns) do
      k.c:read_some(0)
      if not k.c.eof then held = held + 1 end
    end
    assert.is_true(held >= 48, "only " .. held .. " slow handshakes held a place")
    assert.equal(200, (S.get(luna.health .. "/healthz", nil, { max_time = 3 })))
  end)
end)
