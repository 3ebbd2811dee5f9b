-- Log lines a controller file cannot forge or use to stall the host
-- (issue 23, class 6), in both formats: print text, luna.log messages and
-- field keys are escaped like values; the host's keys (controller, key,
-- reconcile_id, source, level, msg, ts, ...) stay the host's, a script's
-- field of that name goes under "script."; ANSI, C1 and bidi controls and
-- bytes that are not UTF-8 never reach the output raw; no JSON key
-- appears twice; a line is at most 16 KiB and says truncated=N when cut;
-- and a log reader that stops reading costs lines (counted in
-- luna_log_lines_dropped_total and reported once output drains), never
-- the loop: /healthz answers and other controllers reconcile.
-- Every host here runs with the default limits a user gets.
local helpers = require("helpers")
local cjson = require("cjson")
local support = require("12-isolation.support")

local LINE_MAX = 16384

local FORGED = "2026-01-01T00:00:00.000Z INFO reconcile start controller=other key=x/y"
local PRINT_CRLF = "P1-MARK ok\r\n" .. FORGED .. " forged-P1\n{\"level\":\"info\",\"msg\":\"forged-P1j\"}"
local LOG_CRLF = "L1-MARK msg\r\n" .. FORGED .. " forged-L1"
local KEY_CRLF = "k\r\n" .. FORGED .. " forged-L2 x"
local ANSI = "P2-MARK \27[2J\27[31mred\27[0m \27]0;title\7 \226\128\174bidi-rlo \226\129\166iso " ..
             "\216\156alm \226\128\143rlm \194\155c1-csi \194\133nel \127del \226\128\168ls \255bad"
local HOSTILE = ([==[
local luna = require "luna"
return luna.controller {
  name = "web", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    if req.name ~= "target" then return end
    print(%q)
    luna.log.info(%q, { a = "1" })
    luna.log.info("L2-MARK key", { [%q] = "v" })
    luna.log.info("L3-MARK host keys", { controller = "other", key = "x/y", reconcile_id = "999",
      source = "evil.lua:1", level = "error", msg = "forged-msg", ts = "1999-01-01T00:00:00.000Z",
      namespace = "ns2", name = "n2", truncated = "7", ["script.controller"] = "nested" })
    load("print('P4-MARK from a chunk named like a file')", "@other.lua")()
    print(%q)
    luna.log.info("L4-MARK json keys", { level = "error", msg = "m", ts = "t" })
    print("P3-MARK " .. string.rep("x", 100000))
    luna.log.info("L5-MARK big field", { big = string.rep("y", 50000), small = "s" })
    luna.log.info("L6-MARK typed", { n = 1, f = 0.25, neg = -3, big = 1e300, yes = true, no = false,
      s = "7", inf = math.huge, nan = 0 / 0, edge = 1.5e308 })
    luna.log.info("DONE-MARK")
  end,
}
]==]):format(PRINT_CRLF, LOG_CRLF, KEY_CRLF, ANSI)

-- The JSON string token starting at line[i] ('"'): its value, and the
-- index after it.
local function json_string(line, i)
  local j = i + 1
  while j <= #line and line:sub(j, j) ~= '"' do
    j = j + (line:sub(j, j) == "\\" and 2 or 1)
  end
  assert(j <= #line, "unterminated string in: " .. line)
  return cjson.decode(line:sub(i, j)), j + 1
end

-- A text line: TS LEVEL message( key=value)*, message, keys and values
-- bare or quoted (docs/operations.md).  Raises on a duplicate key.
local function parse_text(line)
  local ts, level, i = line:match("^(%S+) (%u+) ()")
  assert(ts, "not a text log line: " .. line)
  local rec = { ts = ts, level = level, fields = {}, keys = {} }
  if line:sub(i, i) == '"' then
    rec.msg, i = json_string(line, i)
  else
    local j = line:find('[="]', i)
    if not j then
      rec.msg, i = line:sub(i), #line + 1
    elseif line:sub(j, j) == '"' then
      rec.msg, i = line:sub(i, j - 2), j - 1
    else
      local sp = j
      while sp > i and line:sub(sp, sp) ~= " " do sp = sp - 1 end
      rec.msg, i = line:sub(i, sp - 1), sp
    end
  end
  while i <= #line do
    assert(line:sub(i, i) == " ", "no space before a pair at " .. i .. " in: " .. line)
    i = i + 1
    local k, v
    if line:sub(i, i) == '"' then
      k, i = json_string(line, i)
    else
      k = assert(line:match('^[^=" ]+', i), "no key at " .. i .. " in: " .. line)
      i = i + #k
    end
    assert(line:sub(i, i) == "=", "no '=' after " .. k .. " in: " .. line)
    i = i + 1
    if line:sub(i, i) == '"' then
      v, i = json_string(line, i)
    else
      v = line:match("^[^ ]*", i)
      i = i + #v
    end
    assert(rec.fields[k] == nil, "key " .. k .. " twice in: " .. line)
    rec.fields[k] = v
    rec.keys[#rec.keys + 1] = k
  end
  return rec
end

-- A JSON line, read key by key (cjson would keep the last of two equal
-- keys): the record; raises on a duplicate key.
local function parse_json(line)
  assert(line:sub(1, 1) == "{", "not a JSON log line: " .. line)
  local i, fields, keys = 2, {}, {}
  while true do
    local k, v
    k, i = json_string(line, i)
    assert(line:sub(i, i) == ":", "no ':' after " .. k .. " in: " .. line)
    i = i + 1
    if line:sub(i, i) == '"' then
      v, i = json_string(line, i)
    elseif line:find("^true", i) or line:find("^false", i) then
      v = line:find("^true", i) ~= nil
      i = i + (v and 4 or 5)
    else
      local num = assert(line:match("^%-?[%d.eE+%-]+", i), "no value for " .. k .. " in: " .. line)
      v, i = assert(tonumber(num), "not a number: " .. num), i + #num
    end
    assert(fields[k] == nil, "key " .. k .. " twice in: " .. line)
    fields[k], keys[#keys + 1] = v, k
    local c = line:sub(i, i)
    i = i + 1
    if c == "}" then break end
    assert(c == ",", "no ',' or '}' after " .. k .. " in: " .. line)
  end
  assert(i == #line + 1, "text after the object in: " .. line)
  local rec = { ts = fields.ts, level = fields.level, msg = fields.msg, fields = fields, keys = keys }
  fields.ts, fields.level, fields.msg = nil, nil, nil
  return rec
end

-- No byte a terminal or a line reader acts on: controls, DEL, C1 and bidi
-- controls, line separators, bytes that are not UTF-8.
local function assert_inert(line)
  assert(not line:find("[%z\1-\31\127]"), "raw control byte in: " .. line)
  assert(not line:find("\194[\128-\159]"), "raw C1 control in: " .. line)
  for _, seq in ipairs { "\216\156", "\226\128\142", "\226\128\143", "\226\128\168", "\226\128\169",
                         "\226\128\170", "\226\128\171", "\226\128\172", "\226\128\173", "\226\128\174",
                         "\226\129\166", "\226\129\167", "\226\129\168", "\226\129\169" } do
    assert(not line:find(seq, 1, true), "raw bidi control or separator in: " .. line)
  end
  local i = 1
  while i <= #line do
    local c = line:byte(i)
    local n = c < 0x80 and 1 or c >= 0xC2 and c <= 0xDF and 2 or c >= 0xE0 and c <= 0xEF and 3
              or c >= 0xF0 and c <= 0xF4 and 4 or nil
    assert(n, "invalid UTF-8 at byte " .. i .. " in: " .. line)
    for j = i + 1, i + n - 1 do
      local b = line:byte(j)
      assert(b and b >= 0x80 and b <= 0xBF, "invalid UTF-8 at byte " .. j .. " in: " .. line)
    end
    i = i + n
  end
end

for _, format in ipairs { "text", "json" } do
  describe("lines a script writes, --log-format " .. format .. " #integration", function()
    local srv, p
    local parse = format == "json" and parse_json or parse_text

    setup(function()
      srv = support.server()
      support.fresh_namespace(srv)
      srv:create_cm("target")
      p = support.run(srv, { ["web.lua"] = HOSTILE }, { "--log-format", format })
      support.wait_line(p, { "DONE-MARK" }, 30)
      -- whatever came with it
      while p:read_line(0.2) do end
    end)
    teardown(function()
      if p then support.stop_host(p) end
      support.stop(srv)
    end)

    -- The one output line holding `mark`, parsed; raises when another line
    -- holds `forged` (a line the script started).
    local function record(mark, forged)
      local found
      for _, line in ipairs(p.out) do
        if line:find(mark, 1, true) then
          assert(not found, "two lines hold " .. mark .. ":\n" .. tostring(found) .. "\n" .. line)
          found = line
        end
      end
      assert(found, "no line holds " .. mark .. " in:\n" .. table.concat(p.out, "\n"))
      if forged then
        for _, line in ipairs(p.out) do
          assert(line == found or not line:find(forged, 1, true), "a forged line: " .. line)
        end
      end
      assert_inert(found)
      assert(#found + 1 <= LINE_MAX, ("a line of %d bytes"):format(#found + 1))
      return parse(found), found
    end

    local function assert_from_web(rec)
      assert.equal("web", rec.fields.controller)
      assert.equal(srv.ns .. "/target", rec.fields.key)
      assert.matches("^%x+$", rec.fields.reconcile_id)
    end

    it("keeps a CR/LF in print text inside its one record", function()
      local rec = record("P1-MARK", "forged-P1")
      assert.equal(PRINT_CRLF, rec.msg)
      assert_from_web(rec)
    end)

    it("keeps a CR/LF in a luna.log message inside its one record", function()
      local rec = record("L1-MARK", "forged-L1")
      assert.equal(LOG_CRLF, rec.msg)
      assert.equal("1", rec.fields.a)
      assert_from_web(rec)
    end)

    it("keeps a CR/LF in a field key inside its one record", function()
      local rec = record("L2-MARK", "forged-L2")
      assert.equal("v", rec.fields[KEY_CRLF])
      assert_from_web(rec)
    end)

    it("never lets a script set controller, key, reconcile_id, source, level, msg or ts", function()
      local rec = record("L3-MARK")
      assert_from_web(rec)
      assert.equal("L3-MARK host keys", rec.msg)
      assert.equal(format == "json" and "info" or "INFO", rec.level)
      assert.not_equal("1999-01-01T00:00:00.000Z", rec.ts)
      assert.equal(srv.ns, rec.fields.namespace)
      assert.equal("target", rec.fields.name)
      assert.is_nil(rec.fields.source)
      assert.is_nil(rec.fields.truncated)
      -- the script's fields are all there, where they cannot collide
      assert.same({
        ["script.controller"] = "other", ["script.key"] = "x/y", ["script.reconcile_id"] = "999",
        ["script.source"] = "evil.lua:1", ["script.level"] = "error", ["script.msg"] = "forged-msg",
        ["script.ts"] = "1999-01-01T00:00:00.000Z", ["script.namespace"] = "ns2",
        ["script.name"] = "n2", ["script.truncated"] = "7", ["script.script.controller"] = "nested",
      }, (function()
        local mine = {}
        for k, v in pairs(rec.fields) do
          if k:find("^script%.") then mine[k] = v end
        end
        return mine
      end)())
      -- print's source= is where the code is: a chunk the script names
      -- like a file does not pass for one
      local chunk = record("P4-MARK")
      assert_from_web(chunk)
      assert.is_nil(chunk.fields.source:find("^other%.lua"), chunk.fields.source)
    end)

    it("escapes ANSI, C1 and bidi controls and bytes that are not UTF-8", function()
      local rec, line = record("P2-MARK")
      assert.equal((ANSI:gsub("\255", "\239\191\189")), rec.msg)
      assert.is_nil(line:find("\27", 1, true))
      assert_from_web(rec)
    end)

    it("writes each key once, the host's level, msg and ts first", function()
      local rec, line = record("L4-MARK")
      assert.equal("L4-MARK json keys", rec.msg)
      assert.equal(format == "json" and "info" or "INFO", rec.level)
      assert.equal("error", rec.fields["script.level"])
      assert.equal("m", rec.fields["script.msg"])
      assert.equal("t", rec.fields["script.ts"])
      if format == "json" then
        assert.matches('^{"ts":"[^"]+","level":"info","msg":"L4%-MARK json keys",', line)
      end
      assert_from_web(rec)
    end)

    -- JSON numbers and booleans for a script's numbers and booleans, and
    -- for the host's own (counts, attempts, durations); strings stay
    -- strings; a number JSON cannot write (inf, nan) or a reader could not
    -- hold in a double is a string.  The
    -- text format is the same as ever.
    it("writes numbers and booleans typed in JSON, as before in text", function()
      local rec = record("L6-MARK")
      assert_from_web(rec)
      local f = rec.fields
      if format == "json" then
        assert.same({ 1, 0.25, -3, 1e300, true, false, "7", "inf" },
          { f.n, f.f, f.neg, f.big, f.yes, f.no, f.s, f.inf })
        assert.matches("^%-?nan$", f.nan)
        -- past 1e308 a reader's double could overflow: a string
        assert.equal("1.5e+308", f.edge)
      else
        assert.same({ "1", "0.25", "-3", "1e+300", "true", "false", "7", "inf" },
          { f.n, f.f, f.neg, f.big, f.yes, f.no, f.s, f.inf })
      end
      local loaded = record("controllers loaded")
      assert.equal(format == "json" and 1 or "1", loaded.fields.count)
      assert.is_string(loaded.fields.dir)
    end)

    it("cuts a line at 16 KiB and says how much was left out", function()
      local rec, line = record("P3-MARK")
      assert.is_true(#line + 1 <= LINE_MAX and #line + 1 > LINE_MAX - 64, "length " .. #line)
      assert.matches("^P3%-MARK x+$", rec.msg)
      assert.equal(100008 - #rec.msg, tonumber(rec.fields.truncated))
      assert_from_web(rec)
      assert.matches("^.*web%.lua:%d+$", rec.fields.source)
      -- a field: the short ones stay whole, the long one is cut
      local big = record("L5-MARK")
      assert_from_web(big)
      assert.equal("s", big.fields.small)
      assert.matches("^y+$", big.fields.big)
      assert.equal(50000 - #big.fields.big, tonumber(big.fields.truncated))
    end)
  end)
end

-- A reader that does not read: the pipe to it fills, and then the host's
-- buffer.  Before, one 24 MiB print blocked the loop until the reader
-- read (about 9 s on a slow one; here for ever).
local PRINTER = [==[
local luna = require "luna"
local state = { first = true }
return luna.controller {
  name = "printer", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    if req.name ~= "printer" then return end
    local cm = luna.get("v1/ConfigMap", req.namespace, req.name)
    if not cm or not cm.data or cm.data.mode ~= "print" then
      luna.log.info("printer quiet")
      return
    end
    if state.first then
      state.first = false
      print(string.rep("x", 24 * 1024 * 1024))
    end
    local line = string.rep("p", 8000)
    for _ = 1, 100 do print(line) end
    return { requeue_after = 0.02 }
  end,
}
]==]
local CANARY = [==[
local luna = require "luna"
return luna.controller {
  name = "canary", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    if req.name == "canary" then return { requeue_after = 0.05 } end
  end,
}
]==]

describe("log output to a reader that does not read #integration", function()
  local srv, p
  setup(function()
    srv = support.server()
    support.fresh_namespace(srv)
  end)
  teardown(function()
    if p then p:stop() end
    support.stop(srv)
  end)

  local function curl(port, path)
    local out = helpers.run("env -u LD_PRELOAD curl -s -m 2 -w '\\n%{http_code}' http://127.0.0.1:" ..
                            port .. path)
    local body, code = out:match("^(.*)\n(%d+)%s*$")
    return tonumber(code), body or out
  end

  local function metric(body, pattern)
    return tonumber(body:match("\n" .. pattern .. " ([%d.e+]+)"))
  end

  it("drops and counts lines rather than block: /healthz answers, the canary reconciles", function()
    srv:create_cm("canary")
    p = support.run(srv, { ["printer.lua"] = PRINTER, ["canary.lua"] = CANARY },
      { "--log-level", "info", "--health-probe-bind-address", "127.0.0.1:0",
        "--metrics-bind-address", "127.0.0.1:0", "--metrics-secure=false" })
    local health = support.wait_line(p, { "health probe server listening" }, 20)
    local hport = assert(health:match("address=[^%s]*:(%d+)"), health)
    local mline = support.wait_line(p, { "metrics server listening" }, 20)
    local mport = assert(mline:match("address=[^%s]*:(%d+)"), mline)
    support.wait_line(p, { "caches synced" }, 30)
    -- from here on nobody reads the host's output
    srv:create_cm("printer", { mode = "print" })
    local canary = 'controller_runtime_reconcile_total{controller="canary",result="requeue_after"}'
    local dropped, first_canary, last_canary, probes = 0, nil, nil, 0
    local deadline = helpers.now() + 60
    repeat
      local code, body = curl(hport, "/healthz")
      assert.equal(200, code, "/healthz while the reader does not read: " .. tostring(body))
      probes = probes + 1
      local mcode, metrics = curl(mport, "/metrics")
      assert.equal(200, mcode, "/metrics while the reader does not read")
      dropped = metric(metrics, "luna_log_lines_dropped_total") or 0
      local c = metric(metrics, canary:gsub("[%p]", "%%%0"))
      if dropped > 0 then
        first_canary = first_canary or c
        last_canary = c
      end
    until (first_canary and last_canary and last_canary - first_canary >= 10 and probes >= 10)
          or helpers.now() > deadline
    assert.is_true(dropped > 0, "no dropped lines counted")
    assert.is_true(first_canary ~= nil and last_canary - first_canary >= 10,
      ("the canary reconciled %s times after the drops began"):format(
        tostring(last_canary and first_canary and last_canary - first_canary)))
    -- quiet again, then read: the buffered lines and the report arrive
    local code = srv:request("PATCH", srv:ns_path("configmaps", "printer"),
      { data = { mode = "quiet" } }, { content_type = "application/merge-patch+json" })
    assert.equal(200, code)
    local report = support.wait_line(p, { "log lines dropped" }, 60)
    local n = tonumber(report:match("dropped=(%d+)"))
    assert.is_true(n and n > 0, report)
    assert.matches("^%S+ WARN log lines dropped ", report)
    -- nothing the host wrote was torn: every line is a whole record
    for _, line in ipairs(p.out) do
      assert(#line + 1 <= LINE_MAX, "a line of " .. #line .. " bytes")
      parse_text(line)
    end
    support.stop_host(p)
    p = nil
  end)
end)
