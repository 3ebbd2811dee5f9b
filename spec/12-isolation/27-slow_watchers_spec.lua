-- Watchers that do not read (issue 24): 800 of them held 3.4 GB of the dev
-- server's memory, each queue growing to 64 MiB and then kept even after
-- its watch "ended".  Now, as kube-apiserver's watch cache terminates a
-- watcher whose channel is full, a watcher more than --watch-buffer bytes
-- behind (default 4 MiB) is ended when the next event comes: its unread
-- bytes are freed at once (but the rest of the line being sent), the
-- server logs the cut-off with the bytes all watches still hold, and the
-- client sees its stream end after whole events (then re-watches from the
-- last resourceVersion it saw).  A watcher that reads keeps its watch.
-- The bound is lowered to 1 MiB by flag here, so a few tens of MB of
-- events show it.
local client = require("support.apiserver_client")
local raw = require("support.raw_http")
local helpers = require("helpers")

local function port_of(srv) return tonumber(srv.url:match(":(%d+)$")) end

describe("slow watchers", function()
  if client.dev_only("--watch-buffer and the dev server's log") then return end

  local srv
  setup(function()
    srv = client.start{ args = { "--watch-buffer", tostring(1024 * 1024) } }
  end)
  teardown(function() srv:stop() end)

  local function watch(port)
    local c = raw.connect(port)
    c:send("GET " .. srv:ns_path("configmaps") .. "?watch=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return c
  end

  it("ends a watch that falls behind, frees what it held, and keeps the reader's", function()
    local port = port_of(srv)
    local slow = { watch(port), watch(port) }
    local fast = watch(port)
    assert.equal(200, (fast:response(10)))
    local seen, saw_after = 0, false  -- what the reading watcher has seen
    local function drain_fast()
      repeat
        local before = #fast.buf
        fast:read_some(0)
      until #fast.buf == before
      local pos = 1
      while true do
        local nl = fast.buf:find("\n", pos, true)
        if not nl then break end
        local at = fast.buf:find('"name":"big-', pos, true)
        if at and at < nl then
          seen = math.max(seen, tonumber(fast.buf:match("^%d+", at + 12)))
        end
        local a = fast.buf:find('"name":"after"', pos, true)
        saw_after = saw_after or (a ~= nil and a < nl)
        pos = nl + 1
      end
      fast.buf = fast.buf:sub(pos)
    end
    local value = string.rep("v", 256 * 1024)
    local cut_offs, last = {}, nil
    -- one 256 KiB object at a time, until both never-reading watchers are
    -- cut off: the kernel's socket buffers take some MB before the
    -- server's queue grows at all
    for i = 1, 200 do
      srv:create_cm("big-" .. i, { v = value })
      drain_fast()
      local line = srv.proc:read_line(0.01)
      while line do
        if line:find("slow watcher cut off", 1, true) then
          cut_offs[#cut_offs + 1] = line
          last = i
        end
        line = srv.proc:read_line(0.01)
      end
      if #cut_offs >= 2 then break end
    end
    assert(#cut_offs == 2, "cut-offs logged: " .. #cut_offs .. "\n" .. table.concat(cut_offs, "\n") .. "\nseen " .. seen .. "\n" .. srv.proc:drain(1):sub(-3000))
    local line = cut_offs[2]
    assert.matches("cut_off_total.-2", line)
    assert.matches("resource.-configmaps", line)
    -- what both cut watches still hold is at most the rest of one line
    -- each (without freeing they held over the 1 MiB bound each)
    local held = tonumber(line:match('all_watches_bytes[^%d]*(%d+)'))
    assert(held and held < 1024 * 1024, "after the cut-offs the watches hold " .. tostring(held))
    -- the reader kept its watch: it sees the next object too
    srv:create_cm("after", { v = "1" })
    helpers.eventually(function()
      drain_fast()
      return seen >= last and saw_after
    end, 20, "the reading watcher's events")
    assert.is_false(fast.eof)
    -- a cut-off client that reads now finds whole events, then the end of
    -- its stream (the last chunk of the chunked body)
    for _, c in ipairs(slow) do
      helpers.eventually(function()
        c:read_some(50)
        return c.buf:sub(-7) == "\r\n0\r\n\r\n" or c.eof
      end, 30, "the end of a cut-off watch")
      assert.equal("\r\n0\r\n\r\n", c.buf:sub(-7))
      assert.matches("^HTTP/1%.1 200", c.buf)
      -- the chunked body ends on a whole event line
      assert.equal('}}\n\r\n0\r\n\r\n', c.buf:sub(-10))
      c:close()
    end
    fast:close()
  end)
end)
