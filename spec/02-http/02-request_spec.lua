-- core.http.request against the httpd fixture: bodies, streams, headers,
-- timeouts, caps and transport errors.
local helpers = require("helpers")
local core = require("luna.core")
local cjson = require("cjson")

local server, base

-- Runs one request to completion; returns resp, err and what the
-- streaming callbacks saw.
local function fetch(opts)
  local seen = { lines = {}, chunks = {}, headers_calls = 0 }
  local done = false
  local resp, err
  opts.on_done = function(r, e) resp, err, done = r, e, true end
  if opts.stream == "lines" then
    opts.on_line = function(l) seen.lines[#seen.lines + 1] = l end
  elseif opts.stream == "chunks" then
    opts.on_chunk = function(c) seen.chunks[#seen.chunks + 1] = c end
  end
  opts.stream = nil
  local user_headers = opts.on_headers
  opts.on_headers = function(status, headers)
    seen.headers_calls = seen.headers_calls + 1
    seen.status, seen.headers = status, headers
    seen.lines_at_headers = #seen.lines
    if user_headers then user_headers(status, headers) end
  end
  local h, start_err = core.http.request(opts)
  if not h then return nil, start_err, seen end
  helpers.eventually(function() return done end, 10, "on_done of " .. opts.url)
  return resp, err, seen
end

local function free_port()
  local out = helpers.run(helpers.fixtures .. "/httpd --free-port")
  return assert(tonumber(out:match("port (%d+)")))
end

local function pattern_bytes(n)
  local t = {}
  for i = 0, n - 1 do t[#t + 1] = string.char(97 + i % 26) end
  return table.concat(t)
end

describe("core.http.request", function()
  setup(function()
    server = helpers.spawn({ helpers.fixtures .. "/httpd" })
    base = select(2, server:expect("listening on (http://127%.0%.0%.1:%d+)"))
  end)

  teardown(function()
    server:stop()
  end)

  describe("whole bodies", function()
    it("delivers status, headers and a Content-Length body whole", function()
      local resp, err, seen = fetch{ url = base .. "/bytes?n=100000" }
      assert.is_nil(err)
      assert.equal(200, resp.status)
      assert.equal("1.1", resp.http_version)
      assert.equal("application/octet-stream", resp.headers["content-type"])
      assert.equal("100000", resp.headers["content-length"])
      assert.equal(pattern_bytes(100000), resp.body)
      assert.equal(1, seen.headers_calls)
      assert.equal(200, seen.status)
    end)

    it("delivers a chunked body whole", function()
      local resp, err = fetch{ url = base .. "/bytes?n=54321&chunked=1" }
      assert.is_nil(err)
      assert.equal("chunked", resp.headers["transfer-encoding"])
      assert.equal(pattern_bytes(54321), resp.body)
    end)

    it("returns 4xx and 5xx responses as responses, not errors", function()
      for _, code in ipairs({ 404, 418, 500, 503 }) do
        local resp, err = fetch{ url = base .. "/status?code=" .. code }
        assert.is_nil(err)
        assert.equal(code, resp.status)
        assert.equal("status " .. code .. "\n", resp.body)
      end
    end)

    it("handles an empty body and HEAD", function()
      local resp, err = fetch{ url = base .. "/bytes?n=0" }
      assert.is_nil(err)
      assert.equal("", resp.body)
      resp, err = fetch{ url = base .. "/bytes?n=10", method = "HEAD" }
      assert.is_nil(err)
      assert.equal(200, resp.status)
      assert.equal("", resp.body)
    end)
  end)

  describe("streamed bodies", function()
    it("delivers chunks in order that add up to the body, after on_headers", function()
      local order = {}
      local resp, err, seen = fetch{
        url = base .. "/bytes?n=200000&chunked=1", stream = "chunks",
        on_headers = function() order[#order + 1] = "headers" end,
      }
      assert.is_nil(err)
      assert.equal(200, resp.status)
      assert.is_nil(resp.body)
      assert.equal(pattern_bytes(200000), table.concat(seen.chunks))
      assert.equal(1, seen.headers_calls)
      assert.equal("headers", order[1])
    end)

    it("frames an NDJSON watch stream whose events are split across chunks", function()
      local resp, err, seen = fetch{ url = base .. "/stream?n=20", stream = "lines" }
      assert.is_nil(err)
      assert.equal(200, resp.status)
      assert.equal(0, seen.lines_at_headers)
      assert.equal(20, #seen.lines)
      for i, line in ipairs(seen.lines) do
        assert.is_nil(line:find("\r", 1, true))
        local ev = cjson.decode(line)
        assert.equal("ADDED", ev.type)
        assert.equal("cm-" .. (i - 1), ev.object.metadata.name)
        assert.equal("grüße 日本 " .. (i - 1), ev.object.data.note)
      end
    end)

    it("delivers the raw stream unchanged in chunk mode", function()
      local _, err, seen = fetch{ url = base .. "/stream?n=6&delay_ms=0", stream = "chunks" }
      assert.is_nil(err)
      local raw = table.concat(seen.chunks)
      assert.equal(6 + 1, select(2, raw:gsub("\n", ""))) -- 6 events + 1 empty line
      assert.equal(3, select(2, raw:gsub("\r\n", "")))
    end)

    it("reports a stream ending inside a line as Truncated, after the complete lines", function()
      local resp, err, seen = fetch{ url = base .. "/stream?n=3&partial=1", stream = "lines" }
      assert.is_nil(resp)
      assert.equal("Truncated", err.reason)
      assert.equal(0, err.code)
      assert.matches("^GET " .. base:gsub("%p", "%%%0") .. "/stream%?n=3&partial=1: stream ended inside a line", err.message)
      assert.equal(3, #seen.lines)
    end)
  end)

  describe("requests", function()
    it("sends method, headers and a binary body intact", function()
      local body = "a\0b grüße\n" .. string.rep("z", 5000)
      local resp, err = fetch{
        url = base .. "/echo", method = "PUT", body = body,
        headers = { ["X-Luna"] = "one", ["Content-Type"] = "application/json" },
      }
      assert.is_nil(err)
      local echo = cjson.decode(resp.body)
      assert.equal("PUT", echo.method)
      assert.equal(#body, echo.body_len)
      assert.equal(body, echo.body)
      assert.equal("one", echo.headers["x-luna"])
      assert.equal("application/json", echo.headers["content-type"])
      assert.equal(tostring(#body), echo.headers["content-length"])
      assert.matches("^luna/", echo.headers["user-agent"])
      assert.is_nil(echo.headers["expect"])
    end)

    it("sends no form content type and an empty body for a bare POST", function()
      local resp, err = fetch{ url = base .. "/echo", method = "POST" }
      assert.is_nil(err)
      local echo = cjson.decode(resp.body)
      assert.equal("POST", echo.method)
      assert.equal("0", echo.headers["content-length"])
      assert.is_nil(echo.headers["content-type"])
    end)

    it("sends DELETE and PATCH with the right method", function()
      for _, m in ipairs({ "DELETE", "PATCH", "GET" }) do
        local resp = fetch{ url = base .. "/echo", method = m, body = m == "PATCH" and "{}" or nil }
        assert.equal(m, cjson.decode(resp.body).method)
      end
    end)

    it("receives response headers, lowercased, in on_headers and resp", function()
      local resp, err, seen = fetch{ url = base .. "/echo?h_X-Reply=yes&h_X-Other=a%20b" }
      assert.is_nil(err)
      assert.equal("yes", resp.headers["x-reply"])
      assert.equal("a b", resp.headers["x-other"])
      assert.equal("yes", seen.headers["x-reply"])
      assert.is_nil(resp.headers["X-Reply"])
    end)

    it("sends the bearer token as the Authorization header, replacing a given one", function()
      local resp, err = fetch{
        url = base .. "/echo", bearer_token = "t0ken-value",
        headers = { Authorization = "Basic old" },
      }
      assert.is_nil(err)
      assert.equal("Bearer t0ken-value", cjson.decode(resp.body).headers["authorization"])
    end)

    it("completes 200 concurrent requests", function()
      local done, ok = 0, 0
      for i = 1, 200 do
        assert(core.http.request{
          url = base .. "/echo?h_X-I=" .. i,
          on_done = function(resp, err)
            done = done + 1
            if not err and resp.status == 200 and resp.headers["x-i"] == tostring(i) then ok = ok + 1 end
          end,
        })
      end
      helpers.eventually(function() return done == 200 end, 20, "200 responses")
      assert.equal(200, ok)
      assert.equal(0, core.http.active())
    end)

    it("reuses one connection for sequential requests", function()
      local before = tonumber(fetch{ url = base .. "/connections" }.body)
      for _ = 1, 5 do
        local resp = fetch{ url = base .. "/echo" }
        assert.equal(200, resp.status)
      end
      local after = tonumber(fetch{ url = base .. "/connections" }.body)
      assert.equal(before, after)
    end)

    it("lets callbacks start new requests", function()
      local results = {}
      assert(core.http.request{ url = base .. "/status?code=201", on_done = function(resp)
        results[#results + 1] = resp.status
        core.http.request{ url = base .. "/status?code=202", on_done = function(r2)
          results[#results + 1] = r2.status
        end }
      end })
      helpers.eventually(function() return #results == 2 end, 5, "chained request")
      assert.same({ 201, 202 }, results)
    end)
  end)

  describe("re-entrancy", function()
    it("keeps lines whole and in order when on_line runs the loop itself", function()
      local lines, done, err = {}, false
      assert(core.http.request{
        url = base .. "/stream?n=12&delay_ms=3",
        on_line = function(l)
          lines[#lines + 1] = l
          if #lines % 4 == 1 then core.loop.run(0.03) end -- more data arrives meanwhile
        end,
        on_done = function(_, e) done, err = true, e end,
      })
      helpers.eventually(function() return done end, 10, "on_done")
      assert.is_nil(err)
      assert.equal(12, #lines)
      for i, l in ipairs(lines) do
        assert.equal("cm-" .. (i - 1), cjson.decode(l).object.metadata.name)
      end
    end)
  end)

  describe("timeouts", function()
    it("fails a request over its total timeout with Timeout", function()
      local resp, err = fetch{ url = base .. "/slow?ms=3000", timeout = 0.3 }
      assert.is_nil(resp)
      assert.equal("Timeout", err.reason)
      assert.matches("GET " .. base:gsub("%p", "%%%0") .. "/slow%?ms=3000: ", err.message)
      assert.matches(": timed out: ", err.message)
    end)

    it("fails a connect that hangs with Timeout after connect_timeout", function()
      local hole = helpers.spawn({ helpers.fixtures .. "/httpd", "--blackhole" })
      finally(function() hole:stop() end)
      local url = select(2, hole:expect("listening on (http://%S+)"))
      local resp, err = fetch{ url = url .. "/x", connect_timeout = 0.3 }
      assert.is_nil(resp)
      assert.equal("Timeout", err.reason)
      assert.matches(": timed out while connecting: ", err.message)
    end)

    it("fails a stream that stops sending with IdleTimeout, after what arrived", function()
      local resp, err, seen = fetch{ url = base .. "/stall", stream = "lines", idle_timeout = 0.3 }
      assert.is_nil(resp)
      assert.equal("IdleTimeout", err.reason)
      assert.matches("no data received for 0.3 s", err.message)
      assert.same({ '{"type":"BOOKMARK"}' }, seen.lines)
    end)

    it("does not fire the idle timeout while bytes keep arriving", function()
      -- 90 chunks 10 ms apart: longer than the idle timeout in total
      local resp, err, seen = fetch{ url = base .. "/stream?n=30&delay_ms=10", stream = "lines",
                                     idle_timeout = 0.5 }
      assert.is_nil(err)
      assert.equal(200, resp.status)
      assert.equal(30, #seen.lines)
    end)
  end)

  describe("size caps", function()
    it("fails a whole body over max_body with TooBig", function()
      local resp, err = fetch{ url = base .. "/bytes?n=5000", max_body = 1000 }
      assert.is_nil(resp)
      assert.equal("TooBig", err.reason)
      assert.matches(": response body exceeds 1000 bytes$", err.message)
    end)

    it("accepts a body of exactly max_body bytes", function()
      local resp, err = fetch{ url = base .. "/bytes?n=1000", max_body = 1000 }
      assert.is_nil(err)
      assert.equal(1000, #resp.body)
    end)

    it("caps a streamed body too when max_body is given", function()
      local resp, err, seen = fetch{ url = base .. "/bytes?n=50000&chunked=1", stream = "chunks",
                                     max_body = 10000 }
      assert.is_nil(resp)
      assert.equal("TooBig", err.reason)
      assert.is_true(#table.concat(seen.chunks) <= 10000)
    end)

    it("fails a stream line over max_line with TooBig and delivers no part of it", function()
      local resp, err, seen = fetch{ url = base .. "/line?bytes=5000", stream = "lines", max_line = 1000 }
      assert.is_nil(resp)
      assert.equal("TooBig", err.reason)
      assert.matches(": line exceeds 1000 bytes$", err.message)
      assert.same({}, seen.lines)
    end)

    it("refuses a request body over max_request_body before sending anything", function()
      local before = tonumber(fetch{ url = base .. "/connections" }.body)
      local h, err = core.http.request{ url = base .. "/echo", method = "POST",
                                        body = string.rep("x", 2000), max_request_body = 1000 }
      assert.is_nil(h)
      assert.equal("TooBig", err.reason)
      assert.matches("request body of 2000 bytes exceeds 1000 bytes", err.message)
      assert.equal(0, core.http.active())
      assert.equal(before, tonumber(fetch{ url = base .. "/connections" }.body))
    end)
  end)

  describe("transport errors", function()
    it("reports a refused connection as ConnectionFailed naming the URL", function()
      local url = "http://127.0.0.1:" .. free_port() .. "/refused"
      local resp, err = fetch{ url = url }
      assert.is_nil(resp)
      assert.equal("ConnectionFailed", err.reason)
      assert.equal(0, err.code)
      assert.matches("^GET " .. url:gsub("%p", "%%%0") .. ": ", err.message)
      assert.matches("^ConnectionFailed: GET ", tostring(err))
    end)

    it("reports an unknown host as HostNotFound", function()
      local resp, err = fetch{ url = "http://luna-spec-no-such-host.invalid/x", connect_timeout = 5 }
      assert.is_nil(resp)
      assert.equal("HostNotFound", err.reason)
      assert.matches("luna%-spec%-no%-such%-host%.invalid", err.message)
    end)

    it("keeps credentials and the bearer token out of error messages", function()
      local url = "http://alice:s3cret@127.0.0.1:" .. free_port() .. "/x"
      local resp, err = fetch{ url = url, bearer_token = "t0ken-value" }
      assert.is_nil(resp)
      assert.equal("ConnectionFailed", err.reason)
      assert.is_nil(err.message:find("s3cret", 1, true))
      assert.is_nil(err.message:find("alice", 1, true))
      assert.is_nil(err.message:find("t0ken", 1, true))
      assert.matches("GET http://127%.0%.0%.1:%d+/x", err.message)
    end)

    it("fails the request with CallbackFailed when on_line raises", function()
      local resp, err, seen = fetch{ url = base .. "/stream?n=20", on_line = function(l)
        error("boom in handler")
      end }
      assert.is_nil(resp)
      assert.equal("CallbackFailed", err.reason)
      assert.matches("on_line raised an error", err.message)
      assert.same({}, seen.lines)
    end)

    it("survives an on_done that raises", function()
      local called = false
      assert(core.http.request{ url = base .. "/echo", on_done = function()
        called = true
        error("on_done failed")
      end })
      helpers.eventually(function() return called end, 5, "on_done")
      local resp = fetch{ url = base .. "/echo" }
      assert.equal(200, resp.status)
    end)
  end)

  describe("bad requests", function()
    it("returns InvalidRequest for a malformed URL, scheme, method or header", function()
      local cases = {
        { url = "not a url" },
        { url = "ftp://127.0.0.1/x" },
        { url = base .. "/echo", method = "GE T" },
        { url = base .. "/echo", headers = { ["X-Bad"] = "a\r\nInjected: yes" } },
        { url = base .. "/echo", headers = { ["Bad Name"] = "x" } },
        { url = base .. "/echo", bearer_token = "a\nb" },
      }
      local messages = {}
      for _, opts in ipairs(cases) do
        local h, err = core.http.request(opts)
        assert.is_nil(h)
        assert.equal("InvalidRequest", err.reason)
        messages[#messages + 1] = err.message
      end
      assert.equal(0, core.http.active())
      assert.matches("^GET: invalid URL %(", messages[1])
      assert.matches("unsupported URL scheme 'ftp'", messages[2])
      assert.matches("^invalid HTTP method 'GE T'$", messages[3])
      assert.matches("^GET " .. base:gsub("%p", "%%%0") .. "/echo: invalid request header 'X%-Bad'", messages[4])
      assert.is_nil(messages[4]:find("Injected", 1, true)) -- values are never echoed
      assert.matches("invalid request header 'Bad Name'", messages[5])
      assert.matches("invalid bearer token", messages[6])
      assert.is_nil(messages[6]:find("a\nb", 1, true))
    end)

    it("sends a header with an empty value", function()
      local resp, err = fetch{ url = base .. "/echo", headers = { ["X-Empty"] = "" } }
      assert.is_nil(err)
      assert.equal("", cjson.decode(resp.body).headers["x-empty"])
    end)

    it("raises on misuse", function()
      assert.has_error(function() core.http.request() end)
      assert.has_error(function() core.http.request{} end, "core.http.request: field 'url' is required")
      assert.has_error(function() core.http.request{ url = 5 } end)
      assert.has_error(function() core.http.request{ url = base, timeout = -1 } end)
      assert.has_error(function() core.http.request{ url = base, headers = { "x" } } end)
      assert.has_error(function() core.http.request{ url = base, headers = "x" } end)
      assert.has_error(function() core.http.request{ url = base, on_done = 1 } end)
      assert.has_error(function() core.http.request{ url = base, tls = { ca_pem = 1 } } end)
      assert.has_error(function()
        core.http.request{ url = base, on_chunk = print, on_line = print }
      end, "core.http.request: on_chunk and on_line are exclusive")
      assert.equal(0, core.http.active())
    end)
  end)
end)
