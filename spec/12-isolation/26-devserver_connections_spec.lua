-- The dev server under a crowd of connections (issue 24): about 1,100 idle
-- connections used to lock every client out (they filled libmicrohttpd's
-- limit and never timed out; the next ones hung in the listen backlog).
-- Now, as Go's http.Server in kube-apiserver, a request's head must be in
-- within --read-header-timeout (32 s) however often bytes come, a
-- connection that says nothing for --idle-timeout (90 s) is closed, and
-- past --max-connections (1000) a new connection is answered 503 with a
-- Status and Retry-After, then closed, instead of hanging.  The figures
-- are lowered by flag here, so the spec needs a few sockets, not 1,100.
local client = require("support.apiserver_client")
local raw = require("support.raw_http")
local helpers = require("helpers")
local cjson = require("cjson")

local function port_of(srv) return tonumber(srv.url:match(":(%d+)$")) end

local GET = "GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

-- The code of a GET on a fresh connection, or nil if none came in secs.
local function get_code(port, secs)
  local c = raw.connect(port)
  c:send(GET)
  local code, got = c:response(secs or 10)
  c:close()
  return code, got
end

describe("dev server connections", function()
  if client.dev_only("flags and raw sockets of the dev server") then return end

  describe("with --max-connections 6", function()
    local srv
    before_each(function()
      srv = client.start{ args = { "--max-connections", "6" }, no_namespace = true }
    end)
    after_each(function() srv:stop() end)

    it("answers a connection past the cap 503 with a Status and closes it", function()
      local port = port_of(srv)
      local idle = {}
      for i = 1, 6 do idle[i] = raw.connect(port) end
      -- the six are accepted before the seventh (the server takes them in order)
      helpers.eventually(function()
        local c = raw.connect(port)
        c:send(GET)
        local code, got = c:response(5)
        c:close()
        if code == 200 then return false end   -- not all six counted yet
        assert(code == 503, tostring(got))
        local head, body = got:match("^(.-\r\n\r\n)(.*)$")
        assert.matches("\r\nRetry%-After: 1\r\n", head)
        assert.matches("\r\nConnection: close\r\n", head)
        local st = cjson.decode(body)
        assert.equal("ServiceUnavailable", st.reason)
        assert.equal(503, st.code)
        assert.matches("maximum of 6 connections", st.message, 1, true)
        return true
      end, 20, "a 503 past the cap")
      local c = raw.connect(port)
      c:send(GET)
      assert.equal(503, (c:response(10)))
      assert.is_true(c:closed(10), "the refused connection was left open")
      c:close()
      -- one idle client leaves: its place is served again
      idle[1]:close()
      helpers.eventually(function() return get_code(port, 5) == 200 end, 20,
        "a place freed by a client that left")
      for i = 2, 6 do idle[i]:close() end
    end)

    it("closes clients past the cap that send nothing, and still answers the next", function()
      local port = port_of(srv)
      local idle = {}
      for i = 1, 6 do idle[i] = raw.connect(port) end
      helpers.eventually(function() return get_code(port, 5) == 503 end, 20, "the cap reached")
      -- 80 silent connections past the cap (libmicrohttpd's own limit, had
      -- it been near the cap, would leave the next client in the backlog)
      local silent = {}
      for i = 1, 80 do silent[i] = raw.connect(port) end
      local code, got = get_code(port, 10)
      assert(code == 503, "past 80 silent connections: " .. tostring(code) .. " " .. tostring(got))
      for i, c in ipairs(silent) do
        assert.is_true(c:closed(15), "silent connection " .. i .. " past the cap was kept")
        c:close()
      end
      for i = 1, 6 do idle[i]:close() end
    end)
  end)

  describe("with --read-header-timeout 1 --idle-timeout 2", function()
    local srv
    before_each(function()
      srv = client.start{ args = { "--read-header-timeout", "1", "--idle-timeout", "2" },
                          no_namespace = true }
    end)
    after_each(function() srv:stop() end)

    it("closes a slowloris whose head is not in within the header timeout", function()
      local c = raw.connect(port_of(srv))
      c:send("GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
      -- a byte every 0.3 s keeps libmicrohttpd's idle timeout from firing:
      -- only the deadline on the head can end it
      local start, closed = helpers.now(), false
      while helpers.now() - start < 15 do
        if not c:send("a") or not c:read_some(300) then closed = true break end
      end
      assert.is_true(closed, "a head trickling in for 15 s was kept open")
      assert(helpers.now() - start < 8, "closed only after " .. (helpers.now() - start) .. " s")
      c:close()
      assert.equal(200, (get_code(port_of(srv))))
    end)

    it("closes a connection that sends nothing, and a kept-alive one left idle", function()
      local silent = raw.connect(port_of(srv))
      assert.is_true(silent:closed(15), "a connection that never sent a byte was kept")
      silent:close()
      local kept = raw.connect(port_of(srv))
      kept:send(GET)
      assert.equal(200, (kept:response(10)))
      assert.is_true(kept:closed(15), "an idle kept-alive connection was kept")
      kept:close()
    end)

    it("keeps a watch that waits for events past the idle timeout", function()
      local w = raw.connect(port_of(srv))
      w:send("GET /api/v1/namespaces?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
      assert.equal(200, (w:response(10)))
      -- a silent connection opened now is closed once the idle timeout has
      -- passed: the watch, silent as long, must still be open after it
      local probe = raw.connect(port_of(srv))
      assert.is_true(probe:closed(15))
      probe:close()
      local code = srv:request("POST", "/api/v1/namespaces",
        { apiVersion = "v1", kind = "Namespace", metadata = { name = "after-idle" } })
      assert.equal(201, code)
      helpers.eventually(function()
        w:read_some(100)
        return w.buf:find('"after-idle"', 1, true) ~= nil or w.eof
      end, 10, "the event on the watch")
      assert.is_false(w.eof, "the watch was closed as idle")
      w:close()
    end)
  end)

  it("refuses bad figures for the flags", function()
    for _, args in ipairs({ { "--max-connections", "0" }, { "--idle-timeout", "-1" },
                            { "--read-header-timeout", "x" }, { "--watch-buffer", "0" } }) do
      local out = helpers.run("{ " .. helpers.luna .. " dev-server --listen 127.0.0.1:0 " ..
        table.concat(args, " ") .. " 2>&1; echo rc=$?; }")
      assert.matches("must be a positive number", out)
      assert.matches("rc=2", out)
    end
  end)
end)
