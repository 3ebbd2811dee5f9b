-- The hostile-response runner: reads spec/12-isolation/responses/*.http
-- (the convention is in responses/README.md) and plays each one to the real
-- `luna` executable (the ASan/UBSan build under `make test`) in place of the
-- API server's answer, through spec/fixtures/hostile_proxy.c in front of
-- the dev server (or of `kubectl proxy` for the cluster in KUBECONFIG).
--
--   local RR = require("12-isolation.response_runner")
--   local corpus, problems = RR.corpus()   parsed cases; header problems
--   local proxy = RR.proxy(srv)            the proxy in front of srv
--   RR.run_batch(srv, proxy, cases)        the cases, one after another, in
--                                          one host process
--
-- Each case has a controller of its own (named after the case) watching the
-- ConfigMaps of a namespace of its own, so each attacked informer has its own
-- reflector and backoff; the canary of attack_runner watches another
-- namespace.  For every case the runner:
--   - arms the proxy with the case's response for the next request of its
--     kind (list, watch, get, write) on the attacked collection, and makes
--     that request happen (a cut watch for `watch`; a cut watch answered
--     410 Gone, which makes the reflector relist, for `list`; a write the
--     attacked controller reconciles for `get` and `write`);
--   - waits until the proxy played it, then writes a token into a
--     ConfigMap of the attacked namespace (while the informer may still be
--     recovering) and waits for the attacked controller to patch it back:
--     the cache caught up with the server and the controller reconciles;
--   - finds each `# log:` text on a line of the host's log since the case
--     began (the error names the problem);
--   - checks the canary reconciles a write, /healthz answers within 1 s and
--     there is no sanitizer report.
-- At the end of the batch: peak RSS under R.CAP_MIB + R.MARGIN_MIB and
-- SIGTERM exits 0.
local helpers = require("helpers")
local support = require("12-isolation.support")
local R = require("12-isolation.attack_runner")

local RR = {}

RR.DIR = "spec/12-isolation/responses"
RR.BATCH = 12
-- What a host may hold beyond attack_runner's bound (R.CAP_MIB +
-- R.MARGIN_MIB): one watch event or list item at the 64 MiB item bound
-- (object_stream's max_item_bytes) arrives into a buffer that grows by
-- doubling, so up to 2 x 64 MiB for the item in flight.
RR.ITEM_MIB = 128
-- The watch-list hosts' --min-watch-timeout, seconds.
RR.WATCH_TIMEOUT = 5

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- ---- the corpus ----------------------------------------------------------

local KINDS = { list = true, watch = true, watchlist = true, get = true, write = true }
local HEADERS = { response = true, on = true, log = true, ["not-log"] = true, alone = true, ["watch-list"] = true, selector = true,
  ["min-watch-timeout"] = true, ["idle-timeout"] = true }
local MODES = { off = true, auto = true, on = true }

-- \n \r \t \0 \\ \xHH in a directive's text
local ESC = { n = "\n", r = "\r", t = "\t", ["0"] = "\0", ["\\"] = "\\" }
local function unescape(s)
  local out, i = {}, 1
  while i <= #s do
    local ch = s:sub(i, i)
    if ch == "\\" and s:sub(i + 1, i + 1) == "x" and s:sub(i + 2, i + 3):match("^%x%x$") then
      out[#out + 1] = string.char(tonumber(s:sub(i + 2, i + 3), 16))
      i = i + 4
    elseif ch == "\\" and ESC[s:sub(i + 1, i + 1)] then
      out[#out + 1] = ESC[s:sub(i + 1, i + 1)]
      i = i + 2
    else
      out[#out + 1] = ch
      i = i + 1
    end
  end
  return table.concat(out)
end

-- The case's bytes as plan operations: { op = "send", data } |
-- { op = "repeat", n, data } | { op = "sleep", ms }.  Head lines end in
-- CRLF (the head ends at the first empty line), body lines in LF; a line
-- `@@bytes TEXT`, `@@repeat N TEXT` or `@@sleep MS` is a directive (TEXT
-- with escapes, no line end added).  `@LEN@` in the head is the number of
-- body bytes.
local function compile(raw, vars)
  local head, body = {}, {}
  local cur, eol = head, "\r\n"
  local function add(op)
    local last = cur[#cur]
    if op.op == "send" and last and last.op == "send" then last.data = last.data .. op.data return end
    cur[#cur + 1] = op
  end
  local lines = {}
  for line in (raw .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  if lines[#lines] == "" then lines[#lines] = nil end
  for _, line in ipairs(lines) do
    for k, v in pairs(vars) do line = line:gsub("@" .. k .. "@", (v:gsub("%%", "%%%%"))) end
    local n, text = line:match("^@@repeat (%d+) (.*)$")
    if n then
      add({ op = "repeat", n = tonumber(n), data = unescape(text) })
    elseif line:match("^@@sleep %d+$") then
      add({ op = "sleep", ms = tonumber(line:match("%d+")) })
    elseif line:match("^@@bytes ") then
      add({ op = "send", data = unescape(line:sub(9)) })
    elseif cur == head and line == "" then
      add({ op = "send", data = "\r\n" })
      cur, eol = body, "\n"
    else
      add({ op = "send", data = line .. eol })
    end
  end
  local len = 0
  for _, op in ipairs(body) do
    if op.op == "send" then len = len + #op.data elseif op.op == "repeat" then len = len + op.n * #op.data end
  end
  for _, op in ipairs(head) do
    if op.data then op.data = op.data:gsub("@LEN@", tostring(len)) end
  end
  local ops = {}
  for _, op in ipairs(head) do ops[#ops + 1] = op end
  for _, op in ipairs(body) do ops[#ops + 1] = op end
  return ops
end

local function plan_bytes(ops)
  local out = {}
  for _, op in ipairs(ops) do
    if op.op == "send" then out[#out + 1] = ("send %d\n%s"):format(#op.data, op.data)
    elseif op.op == "repeat" then out[#out + 1] = ("repeat %d %d\n%s"):format(op.n, #op.data, op.data)
    else out[#out + 1] = ("sleep %d\n"):format(op.ms) end
  end
  return table.concat(out)
end

-- "# --- [KIND] [count=N] [query=TEXT] [optional]" starts a response.
local function section(c, line, problems)
  local s = { kind = c.on, count = 1, lines = {} }
  for word in line:gmatch("%S+") do
    if KINDS[word] then s.kind = word
    elseif word:match("^count=%d+$") then s.count = tonumber(word:sub(7))
    elseif word:match("^query=") then s.query = word:sub(7)
    elseif word == "optional" then s.optional = true
    else problems[#problems + 1] = "unknown word '" .. word .. "' on a '# ---' line" end
  end
  return s
end

local function parse(path, file)
  local src = assert(helpers.read_file(path))
  local c = { file = file, path = path, name = file:gsub("%.http$", ""), logs = {}, not_logs = {}, sections = {} }
  local problems = {}
  local cur
  for line in (src .. (src:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    local rest = line:match("^# %-%-%-(.*)$")
    if rest then
      cur = section(c, rest, problems)
      c.sections[#c.sections + 1] = cur
    elseif cur then
      cur.lines[#cur.lines + 1] = line
    else
      local key, value = line:match("^#%s*([%w_%-]+):%s*(.*)$")
      if key == "log" then
        c.logs[#c.logs + 1] = trim(value)
      elseif key == "not-log" then
        c.not_logs[#c.not_logs + 1] = trim(value)
      elseif key and HEADERS[key] then
        if c[key] then problems[#problems + 1] = "header '" .. key .. "' given twice" end
        c[key] = trim(value)
      end
    end
  end
  for _, s in ipairs(c.sections) do
    s.kind = s.kind or c.on
    s.raw = table.concat(s.lines, "\n")
  end
  if not file:match("^[a-z0-9%-]+%.http$") then
    problems[#problems + 1] = "file name must be <what>.http (lowercase, digits, dashes)"
  end
  if not c.response or c.response == "" then problems[#problems + 1] = "missing '# response: <what it tries>'" end
  if not KINDS[c.on or ""] then problems[#problems + 1] = "'# on:' must be list, watch, watchlist, get or write" end
  c.mode = c["watch-list"] or (c.on == "watchlist" and "auto" or "off")
  if not MODES[c.mode] then problems[#problems + 1] = "'# watch-list:' must be off, auto or on" end
  c.watch_timeout = tonumber(c["min-watch-timeout"] or RR.WATCH_TIMEOUT)
  if not c.watch_timeout or c.watch_timeout < 1 then problems[#problems + 1] = "'# min-watch-timeout:' must be seconds >= 1" end
  if c["idle-timeout"] then
    c.idle_timeout = tonumber(c["idle-timeout"])
    if not c.idle_timeout or c.idle_timeout < 1 or c.idle_timeout % 1 ~= 0 then
      problems[#problems + 1] = "'# idle-timeout:' must be whole seconds >= 1"
    end
  end
  -- cases share a host when they share its flags
  c.host = c.mode .. (c.mode ~= "off" and ("," .. tostring(c.watch_timeout)) or "") ..
    (c.idle_timeout and (",idle=" .. tostring(c.idle_timeout)) or "")
  if c.on == "watchlist" and c.mode == "off" then problems[#problems + 1] = "a watchlist case needs '# watch-list: auto' or 'on'" end
  if c.selector and not c.selector:match("^[a-z0-9.-]+=[a-z0-9.-]+$") then
    problems[#problems + 1] = "'# selector:' must be one key=value"
  end
  if #c.logs == 0 then problems[#problems + 1] = "missing '# log: <text the host must log>'" end
  if #c.sections == 0 then problems[#problems + 1] = "missing the '# ---' line before the response" end
  return c, problems
end

function RR.corpus(dir)
  return R.read_corpus(dir or RR.DIR, "%.http$", parse)
end

RR.compile = compile

-- ---- the proxy -----------------------------------------------------------

local Proxy = {}
Proxy.__index = Proxy

function RR.proxy(srv)
  local upstream = assert(srv.url:match("^http://([%d%.]+:%d+)"), "the proxy needs a plain-HTTP upstream: " .. srv.url)
  local p = helpers.spawn({ helpers.fixtures .. "/hostile_proxy", "127.0.0.1:0", upstream })
  local _, addr = p:expect("hostile proxy listening on (%S+)", 10)
  local self = setmetatable({ proc = p, url = "http://" .. addr, dir = helpers.tmpdir(), n = 0 }, Proxy)
  -- (against a cluster, srv.url is `kubectl proxy`, which carries the
  -- credentials: the host talks plain HTTP to the proxy either way)
  self.kubeconfig = require("support.luna_env").kubeconfig_file(self.url)
  return self
end

function Proxy:control(method, path)
  local out = helpers.run(("env -u LD_PRELOAD curl -s -X %s --max-time 5 '%s%s'"):format(method, self.url, path))
  return out
end

function Proxy:arm(kind, coll, ops, s)
  s = s or {}
  self.n = self.n + 1
  local file = ("%s/plan-%d"):format(self.dir, self.n)
  helpers.write_file(file, plan_bytes(ops))
  local out = self:control("POST", ("/hostile/arm?kind=%s&coll=%s&plan=%s&count=%d%s%s"):format(kind, coll, file,
    s.count or 1, s.query and ("&query=" .. s.query) or "", s.optional and "&optional=1" or ""))
  assert(out:match("armed"), "the proxy did not arm: " .. out)
end

function Proxy:pending()
  local out = self:control("GET", "/hostile/pending")
  return tonumber(out:match("pending (%d+)"))
end

function Proxy:trapped() return tonumber(self:control("GET", "/hostile/trapped"):match("%d+")) end
function Proxy:cut(coll) return self:control("POST", "/hostile/cut?coll=" .. coll) end
function Proxy:clear() return self:control("POST", "/hostile/clear") end
function Proxy:stop() self.proc:stop() end

-- ---- one batch -----------------------------------------------------------

local ATTACKED = [[
local luna = require "luna"
-- The attacked controller of case @CASE@: copies data.token of each
-- ConfigMap of its namespace into an annotation, reading the object from
-- the API first (so a GET can be attacked too), and writes the names its
-- cache holds in the namespace into another (the runner compares them with
-- the server's: nothing a refused answer planted may remain).
return luna.controller {
  name = "@CASE@",
  watch = { "v1/ConfigMap", namespace = "@NS@"@LABELS@ },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm or not cm.data or not cm.data.token then return end
    if luna.meta.annotation(cm, "luna.dev/canary") == cm.data.token then return end
    local names = {}
    for _, o in ipairs(luna.cache("v1/ConfigMap"):list({ namespace = req.namespace })) do
      names[#names + 1] = o.metadata.name
    end
    table.sort(names)
    local live, err = luna.get("v1/ConfigMap", req.namespace, req.name)
    if err then return nil, err end
    if type(live) ~= "table" or type(live.metadata) ~= "table" then return nil, "odd object from get" end
    local _, perr = luna.patch("v1/ConfigMap", req.namespace, req.name,
      { metadata = { annotations = { ["luna.dev/canary"] = cm.data.token,
        ["luna.dev/cached"] = table.concat(names, ",") } } })
    if perr then return nil, perr end
  end,
}
]]

-- What makes the reflector relist: its watch answered 410 Gone.
local GONE = [[
HTTP/1.1 410 Gone
Content-Type: application/json
Content-Length: @LEN@

{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}
]]

local function coll(ns) return "/api/v1/namespaces/" .. ns .. "/configmaps" end

-- Writes a token into a ConfigMap of ns and waits until the case's
-- controller has patched it back.
local function token_round(h, srv, c, ns, secs)
  h.tokens = h.tokens + 1
  local name = "tok-" .. h.tokens
  local token = tostring(h.tokens) .. "-" .. tostring(math.random(1e6))
  local labels
  if c.selector then
    local k, v = c.selector:match("^(.-)=(.*)$")
    labels = { [k] = v }
  end
  local code = srv:request("POST", coll(ns), { apiVersion = "v1", kind = "ConfigMap",
    metadata = { name = name, labels = labels }, data = { token = token } })
  if code ~= 201 then h:fail("case %s: cannot create the token ConfigMap: HTTP %s", c.file, tostring(code)) end
  local last = 0
  h:wait(function()
    if helpers.now() - last < 0.1 then return false end
    last = helpers.now()
    local cc, obj = srv:request("GET", coll(ns) .. "/" .. name)
    local ann = cc == 200 and obj.metadata.annotations
    if ann and ann["luna.dev/canary"] == token then
      h.cached = ann["luna.dev/cached"] or ""
      return true
    end
    return false
  end, secs or 60, ("case %s: its controller to reconcile a write after the attack (token %s)"):format(c.file, token))
end

-- A watch-list case: the attacked informer's cache (the names its controller
-- saw when it reconciled the token) is the server's state, not a half-swapped
-- one nor one holding what a refused answer planted.
local function same_state(h, srv, c, ns)
  local code, list = srv:request("GET", coll(ns))
  if code ~= 200 then h:fail("case %s: cannot list the namespace: HTTP %s", c.file, tostring(code)) end
  local names = {}
  for _, o in ipairs(list.items) do
    local l = o.metadata.labels or {}
    local k, v = (c.selector or ""):match("^(.-)=(.*)$")
    if not k or l[k] == v then names[#names + 1] = o.metadata.name end
  end
  table.sort(names)
  local want = table.concat(names, ",")
  if h.cached ~= want then
    h:fail("case %s: the attacked informer's cache held {%s} when it reconciled the token; the server holds {%s}",
      c.file, h.cached, want)
  end
end

local function run_case(h, srv, proxy, c, ns)
  local from = #h.lines + 1
  local cl = coll(ns)
  local trapped = proxy:trapped()
  -- a list (or, in a watch-list host, a watch list) follows a 410 on the watch
  if c.on == "list" then proxy:arm("watch", cl, compile(GONE, {})) end
  -- @RV@: the server's resourceVersion now (an end bookmark a watch can go on from)
  local _, now = srv:request("GET", cl)
  local rv = type(now) == "table" and now.metadata and now.metadata.resourceVersion or "1"
  for _, s in ipairs(c.sections) do
    local kind, opts = s.kind, s
    if kind == "watchlist" then
      kind = "watch"
      opts = { count = s.count, optional = s.optional, query = s.query or "sendInitialEvents=true" }
    end
    proxy:arm(kind, cl, compile(s.raw, { NS = ns, RV = rv, PROXY = proxy.url:match("//(.*)") }), opts)
  end
  -- (armed after the case's watch list, which rules match first: a watch
  -- that ends on its own (5 s timeouts) and is answered 410 before the case
  -- is armed would have its watch list relayed to the server)
  if c.on == "watchlist" then proxy:arm("watch", cl, compile(GONE, {})) end
  if c.on == "list" or c.on == "watch" or c.on == "watchlist" then proxy:cut(cl) end
  if c.on == "get" or c.on == "write" then
    token_round(h, srv, c, ns)
    if proxy:pending() ~= 0 then h:fail("case %s: the response was never asked for", c.file) end
  else
    local last = 0
    h:wait(function()
      if helpers.now() - last < 0.1 then return false end
      last = helpers.now()
      return proxy:pending() == 0
    end, 30, "case " .. c.file .. ": the host to ask for the response")
    token_round(h, srv, c, ns)
  end
  if c.on == "watchlist" then same_state(h, srv, c, ns) end
  for _, text in ipairs(c.logs) do
    -- "a && b || c": a line with a and b, or a line with c
    local alternatives = {}
    for alt in (text .. " || "):gmatch("(.-) || ") do
      local parts = {}
      for part in (alt .. " && "):gmatch("(.-) && ") do parts[#parts + 1] = part end
      alternatives[#alternatives + 1] = parts
    end
    local ok, err = pcall(h.wait_line, h, from, alternatives, 10, "case " .. c.file .. ": a log line with '" .. text .. "'")
    if not ok then error(err, 0) end
  end
  -- "# not-log: a && b": no line since the case began has both (checked
  -- once the case's log lines were found, so the host has said its piece)
  for _, text in ipairs(c.not_logs) do
    local parts = {}
    for part in (text .. " && "):gmatch("(.-) && ") do parts[#parts + 1] = part end
    for i = from, #h.lines do
      local all = true
      for _, part in ipairs(parts) do
        if not h.lines[i]:find(part, 1, true) then all = false break end
      end
      if all then h:fail("case %s: the host logged what it must not ('%s'): %s", c.file, text, h.lines[i]) end
    end
  end
  proxy:clear()
  if proxy:trapped() ~= trapped then h:fail("case %s: the host followed a redirect to another server", c.file) end
  local ok, err = pcall(h.check, h)
  if not ok then error("after case " .. c.file .. ": " .. err, 0) end
  if os.getenv("LUNA_HOSTILE_VERBOSE") then
    io.stderr:write("== ", c.file, "\n")
    for i = from, #h.lines do
      if not h.lines[i]:find("canary", 1, true) and not h.lines[i]:find(" DEBUG ", 1, true) then io.stderr:write(h.lines[i], "\n") end
    end
  end
end

-- Runs the cases in one host process; raises naming the failing case.
function RR.run_batch(srv, proxy, cases)
  local files, nss = {}, {}
  for i, c in ipairs(cases) do
    nss[i] = support.fresh_namespace(srv)
    local labels = ""
    if c.selector then
      local k, v = c.selector:match("^(.-)=(.*)$")
      labels = (', labels = { ["%s"] = "%s" }'):format(k, v)
    end
    files[c.name .. ".lua"] = (ATTACKED:gsub("@CASE@", c.name):gsub("@NS@", nss[i]):gsub("@LABELS@", labels))
  end
  local h
  local ok, err = pcall(function()
    -- a batch's cases share one way to sync (RR.batches): by LIST (the
    -- list cases answer LISTs), or by watch list (the watchlist cases).
    -- A case that leaves a watch waiting in silence (watch-rv-huge) asks
    -- for a short idle timeout, so the watch is replaced (and its version
    -- checked) within the case's time; the rest keep the default (3 min),
    -- so a stream slowed by a loaded machine (the 70 MiB ones) is not
    -- taken for a dead one
    local mode = cases[1].mode
    local args = { "--watch-list=" .. mode }
    if cases[1].idle_timeout then
      args[#args + 1] = ("--watch-idle-timeout=%ds"):format(cases[1].idle_timeout)
    end
    if mode ~= "off" then
      -- watches (and so the wait for an initial-events-end bookmark) end
      -- within [RR.WATCH_TIMEOUT, 2 x) s (+ the client's grace), not 5-10 min
      args[#args + 1] = "--min-watch-timeout=" .. cases[1].watch_timeout
    end
    h = R.start(srv, {}, { files = files, kubeconfig = proxy.kubeconfig, args = args, tight = true })
    h:check()
    -- a case that fails leaves the host to the next one unless it died
    local failures = {}
    for i, c in ipairs(cases) do
      local ok1, err1 = pcall(run_case, h, srv, proxy, c, nss[i])
      if not ok1 then
        proxy:clear()
        failures[#failures + 1] = err1
        if h:status() then break end
      end
    end
    if #failures > 0 then error(table.concat(failures, "\n\n"), 0) end
    h:rss_ok(RR.ITEM_MIB)
    h:stop()
  end)
  proxy:clear()
  if h then h:kill() end
  if not ok then error(err, 0) end
end

-- Compiles a response (the .http body convention) for Proxy:arm.
RR.compile = compile

return RR
