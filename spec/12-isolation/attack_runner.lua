-- The attack-corpus runner: reads spec/12-isolation/attacks/*.lua (the
-- convention is in attacks/README.md) and runs each hostile controller file
-- against the real `luna` executable (the ASan build under `make test`) next
-- to a healthy canary controller, against the dev server or the cluster in
-- KUBECONFIG.
--
--   local R = require("12-isolation.attack_runner")
--   local corpus, problems = R.corpus()     parsed attack files; header problems
--   R.run_batch(srv, batch, next_batch, tight)  `runs` attacks: startup + reload
--   R.run_alone(srv, attack, tight)         one `runs` attack in its own hosts
--   R.run_refused(srv, attacks)             `refused` attacks: startup + reload
--
-- Hosts run with the flags a user gets (default budgets: 1e8 instructions,
-- 2 s, a 128 MiB Lua heap), or, with `tight`, with R.TIGHT (a 64 MiB heap and
-- a 0.5 s time budget); 05-attacks_spec.lua alternates, so every attack runs
-- under both and at least half the hosts run with the defaults.
--
-- Each run_* raises an error that names the failing attack and says why
-- (with the host's last log lines); a failing batch is re-run one attack at
-- a time to find the culprit.
--
-- What every host process must show (R.check):
--   - each attack was exercised (a reconcile of its controller ended, a
--     callback of it failed, or its `-- reached:` text was logged);
--   - the canary reconciles a write: the runner writes a token into a
--     ConfigMap of the canary's namespace, the canary patches it back into
--     an annotation (so the loop, the informers, the workqueue and API
--     writes all work);
--   - GET /healthz answers 200 within 1 s (tight hosts) or 3 s (the default
--     2 s time budget + 1 s: a probe waits for one stretch at most);
--   - no sanitizer report, no Lua PANIC;
--   - at the end, the peak RSS (VmHWM) is under the host's Lua cap + R.MARGIN_MIB,
--     and SIGTERM exits 0 (LeakSanitizer on: leaks fail the exit code).
local helpers = require("helpers")
local support = require("12-isolation.support")

local R = {}

R.DIR = "spec/12-isolation/attacks"
-- The Lua heap cap of tight hosts (R.DEFAULT_CAP_MIB: luna run's default),
-- and the margin the process's peak RSS may exceed it by: the host's own
-- memory (~30 MB under ASan with the canary), ASan's shadow memory and
-- quarantine (limited to 32 MB below), the cached objects, and C-side
-- buffers that are bounded rather than counted.
R.CAP_MIB = 64
R.DEFAULT_CAP_MIB = 128
R.MARGIN_MIB = 128
-- The flags of a tight host; the probe's bound there, and with the defaults
-- (the default 2 s time budget + 1 s).
R.TIGHT = { "--lua-memory-limit", tostring(R.CAP_MIB), "--reconcile-time-limit", "0.5" }
R.TIGHT_PROBE_S = 1
R.DEFAULT_PROBE_S = 3
-- Attacks per host process; a batch that fails is re-run one by one.
R.BATCH = 8

local SIGHUP = 1

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- ---- the corpus ----------------------------------------------------------

local HEADERS = { attack = true, expect = true, error = true, reached = true, alone = true }

local function parse(path, file)
  local src = assert(helpers.read_file(path))
  local a = { file = file, path = path, source = src, name = file:gsub("%.lua$", "") }
  local problems = {}
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    local key, value = line:match("^%-%-%s*([%w_]+):%s*(.*)$")
    if not key then
      if not line:match("^%-%-") then break end
    elseif HEADERS[key] then
      if a[key] then problems[#problems + 1] = "header '" .. key .. "' given twice" end
      a[key] = trim(value)
    end
  end
  if not file:match("^[a-z0-9]+%-[a-z0-9%-]+%.lua$") then
    problems[#problems + 1] = "file name must be <class>-<what>.lua (lowercase, digits, dashes)"
  end
  a.class = file:match("^([a-z0-9]+)%-")
  if not a.attack or a.attack == "" then problems[#problems + 1] = "missing '-- attack: <what it tries>'" end
  if a.expect ~= "refused" and a.expect ~= "runs" then
    problems[#problems + 1] = "'-- expect:' must be refused or runs"
  end
  if a.expect == "refused" and (not a.error or a.error == "") then
    problems[#problems + 1] = "a refused attack needs '-- error: <text the error must contain>'"
  end
  if a.expect == "runs" and not src:find('name%s*=%s*"' .. a.name:gsub("%-", "%%-") .. '"') then
    problems[#problems + 1] = 'a runs attack names its controller after its file: name = "' .. a.name .. '"'
  end
  return a, problems
end

-- The files of dir whose names match pattern, each read by
-- parse(path, file) -> item (with .file), its problems; in name order, and a
-- list of "file: problem" strings.  (The response corpus reads its files so.)
function R.read_corpus(dir, pattern, read)
  local out, problems = {}, {}
  local ls = io.popen("ls -1 '" .. dir .. "' 2>/dev/null")
  for file in ls:lines() do
    if file:match(pattern) then
      local item, p = read(dir .. "/" .. file, file)
      out[#out + 1] = item
      for _, msg in ipairs(p) do problems[#problems + 1] = file .. ": " .. msg end
    end
  end
  ls:close()
  table.sort(out, function(x, y) return x.file < y.file end)
  return out, problems
end

-- All attack files in name order, and a list of "file: problem" strings.
function R.corpus(dir)
  return R.read_corpus(dir or R.DIR, "%.lua$", parse)
end

-- ---- one host process ----------------------------------------------------

local CANARY = [[
local luna = require "luna"
-- The healthy controller every attack runs next to: it copies data.token of
-- each ConfigMap of its namespace into an annotation.
return luna.controller {
  name = "canary",
  watch = { "v1/ConfigMap", namespace = "@CANARY_NS@" },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm or not cm.data or not cm.data.token then return end
    if luna.meta.annotation(cm, "luna.dev/canary") == cm.data.token then return end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name,
      { metadata = { annotations = { ["luna.dev/canary"] = cm.data.token } } })
    if err then return nil, err end
  end,
}
]]

local Host = {}
Host.__index = Host

local LINE_KEEP = 500 -- characters of each log line the runner keeps

local ffi = require("ffi")
local C = ffi.C
local readbuf = ffi.new("char[65536]")
local pfd = ffi.new("struct luna_pollfd[1]")

-- Reads what the host wrote within secs into self.lines. The pipe must be
-- drained all the time (a host blocked on its log looks hung), and lines of
-- megabytes must not cost quadratic time: a partial line is kept as parts.
function Host:pump(secs)
  local p = self.p
  local deadline = helpers.now() + secs
  local budget = 4 * 1024 * 1024 -- bytes per call, so a flood cannot keep it here
  repeat
    if p.fd < 0 or budget <= 0 then return end
    pfd[0].fd, pfd[0].events = p.fd, 1
    local left = math.max(0, deadline - helpers.now())
    if C.poll(pfd, 1, math.floor(left * 1000)) <= 0 then return end
    local got = tonumber(C.read(p.fd, readbuf, 65536))
    if got <= 0 then
      C.close(p.fd)
      p.fd = -1
      if #self.part > 0 then self:add_line(table.concat(self.part)) self.part = {} end
      return
    end
    budget = budget - got
    local chunk = ffi.string(readbuf, got)
    local start = 1
    while true do
      local nl = chunk:find("\n", start, true)
      if not nl then break end
      self.part[#self.part + 1] = chunk:sub(start, nl - 1)
      self:add_line(table.concat(self.part))
      self.part = {}
      start = nl + 1
    end
    if start <= #chunk then self.part[#self.part + 1] = chunk:sub(start) end
    -- keep reading while there is more, without waiting again
    deadline = math.min(deadline, helpers.now())
  until false
end

-- The exit status (as helpers' Process:wait) or nil while it runs; unlike
-- Process:alive it never reads the pipe behind pump's back.
local status_buf = ffi.new("int[1]")
function Host:status()
  local p = self.p
  if p.status == nil and C.waitpid(p.pid, status_buf, 1) == p.pid then
    local st = status_buf[0]
    p.status = bit.band(st, 0x7f) == 0 and bit.band(bit.rshift(st, 8), 0xff) or 128 + bit.band(st, 0x7f)
  end
  return p.status
end

function Host:add_line(line)
  if #line > LINE_KEEP then line = line:sub(1, LINE_KEEP) .. "…(" .. #line .. " bytes)" end
  self.lines[#self.lines + 1] = line
end

function Host:tail(n)
  n = n or 60
  local from = math.max(1, #self.lines - n + 1)
  return table.concat(self.lines, "\n", from)
end

function Host:fail(fmt, ...)
  error(("%s\n-- last lines of the host's log:\n%s"):format(fmt:format(...), self:tail()), 0)
end

-- (a space is added at the end so "controller=x " also matches a last field)
local function has_all(line, parts)
  line = line .. " "
  for _, part in ipairs(parts) do
    if not line:find(part, 1, true) then return false end
  end
  return true
end

-- Index of the first line at or after `from` containing every part in one
-- of the alternatives (a list of lists of plain substrings), or nil.
function Host:find(from, alternatives)
  for i = from, #self.lines do
    for _, parts in ipairs(alternatives) do
      if has_all(self.lines[i], parts) then return i end
    end
  end
end

-- Sanitizer reports and Lua panics end the check at once.
function Host:sane()
  for i = self.checked or 1, #self.lines do
    local l = self.lines[i]
    if l:find("AddressSanitizer", 1, true) or l:find("LeakSanitizer", 1, true)
      or l:find("runtime error:", 1, true) or l:find("PANIC", 1, true) then
      self:fail("the host reported: %s", l)
    end
  end
  self.checked = #self.lines + 1
end

function Host:wait(fn, secs, what)
  local deadline = helpers.now() + secs
  while true do
    self:pump(0.02)
    self:sane()
    local r = fn()
    if r then return r end
    if self:status() then
      self:pump(0.5)
      self:sane()
      self:fail("the host exited (status %s) while waiting for %s", tostring(self.p.status), what)
    end
    if helpers.now() > deadline then self:fail("timed out after %ss waiting for %s", secs, what) end
  end
end

function Host:wait_line(from, alternatives, secs, what)
  return self:wait(function() return self:find(from, alternatives) end, secs, what)
end

local function attack_source(a, ns)
  return (a.source:gsub("@NS@", ns))
end

function Host:write(attacks)
  for _, a in ipairs(attacks) do
    helpers.write_file(self.dir .. "/" .. a.file, attack_source(a, self.ns))
  end
end

function Host:remove(attacks)
  for _, a in ipairs(attacks) do os.remove(self.dir .. "/" .. a.file) end
end

-- Starts `luna run` on the canary plus `attacks` in fresh namespaces. With
-- opts.refused the host is expected to exit 1 (returns the Host after exit);
-- opts.files: more files { name = source } for the directory; opts.kubeconfig:
-- the host's kubeconfig (default: the server's); opts.args: more flags;
-- opts.tight: R.TIGHT's flags instead of the defaults.
function R.start(srv, attacks, opts)
  opts = opts or {}
  local h = setmetatable({ srv = srv, lines = {}, part = {}, dir = helpers.tmpdir(), tokens = 0,
                           tight = opts.tight or false,
                           cap_mib = opts.tight and R.CAP_MIB or R.DEFAULT_CAP_MIB,
                           probe_s = opts.tight and R.TIGHT_PROBE_S or R.DEFAULT_PROBE_S }, Host)
  h.canary_ns = support.fresh_namespace(srv)
  h.ns = support.fresh_namespace(srv)
  for _, name in ipairs({ "target-a", "target-b" }) do
    srv:request("POST", "/api/v1/namespaces/" .. h.ns .. "/configmaps", {
      apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = name, labels = { app = "target" } }, data = { k = "v" } })
  end
  helpers.write_file(h.dir .. "/canary.lua", (CANARY:gsub("@CANARY_NS@", h.canary_ns)))
  h:write(attacks)
  for name, source in pairs(opts.files or {}) do helpers.write_file(h.dir .. "/" .. name, source) end
  local argv = { helpers.luna, "run", "--kubeconfig", opts.kubeconfig or support.kubeconfig(srv), "--log-level", "debug",
                 "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0",
                 "--shutdown-grace-period", "5s" }
  if opts.tight then
    for _, a in ipairs(R.TIGHT) do argv[#argv + 1] = a end
  end
  for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = h.dir
  -- ASan keeps freed memory in a quarantine (256 MB by default), which
  -- would hide the host's own peak RSS: 32 MB still catches use-after-free.
  local asan = os.getenv("ASAN_OPTIONS")
  h.p = helpers.spawn(argv, { env = {
    KUBECONFIG = false, POD_NAME = "luna-attack",
    ASAN_OPTIONS = asan and (asan .. ":quarantine_size_mb=32") or false } })
  if opts.refused then
    local deadline = helpers.now() + 30
    while not h:status() and helpers.now() < deadline do h:pump(0.05) end
    h:pump(0.2)
    return h
  end
  h.health = h:wait(function()
    local i = h:find(1, { { "health probe server listening" } })
    return i and h.lines[i]:match("address=(%S+)")
  end, 20, "the health probe server")
  h:wait_line(1, { { "caches synced" } }, 30, "caches synced")
  return h
end

-- GET /healthz must answer 200 within the host's probe bound (1 s tight,
-- 3 s with the default 2 s time budget).
-- The host's output is read while curl waits: a host logging at debug
-- fills a pipe nobody reads in a fraction of a second and then blocks in
-- write(2), which would be the runner stopping its loop, not the attack.
function Host:healthz()
  local curl = helpers.spawn({ "env", "-u", "LD_PRELOAD", "curl", "-s", "-o", "/dev/null",
    "-w", "%{http_code}", "--max-time", tostring(self.probe_s), "http://" .. self.health .. "/healthz" })
  local deadline = helpers.now() + 30 -- curl's --max-time decides; this only bounds a stuck curl
  while curl:wait(0) == nil and helpers.now() < deadline do self:pump(0.02) end
  local out = curl:drain(2) -- to the end of its output (it has exited, or is killed next)
  curl:stop()
  if not out:match("200$") then
    self:fail("/healthz did not answer 200 within %s s (%s host; curl: %s)", self.probe_s,
      self.tight and "tight" or "default", out)
  end
end

-- A write the canary must reconcile: a new token, patched back by the canary.
function Host:canary_round()
  self.tokens = self.tokens + 1
  local token = tostring(self.tokens) .. "-" .. tostring(math.random(1e6))
  local path = "/api/v1/namespaces/" .. self.canary_ns .. "/configmaps"
  local code = self.srv:request("POST", path, { apiVersion = "v1", kind = "ConfigMap",
    metadata = { name = "canary-" .. self.tokens }, data = { token = token } })
  if code ~= 201 then
    local srv_out = self.srv.proc:drain(0.5)
    self:fail("the runner could not create the canary's ConfigMap: HTTP %s\n-- the server's output:\n%s",
      tostring(code), srv_out:sub(-3000))
  end
  local last = 0
  self:wait(function()
    if helpers.now() - last < 0.1 then return false end
    last = helpers.now()
    local c, obj = self.srv:request("GET", path .. "/canary-" .. self.tokens)
    local ann = c == 200 and obj.metadata.annotations
    return ann and ann["luna.dev/canary"] == token
  end, 30, "the canary to reconcile a write (token " .. token .. ")")
end

-- Each attack's controller shows it ran (see the header of this file).
function Host:reached(from, attacks)
  for _, a in ipairs(attacks) do
    local alts
    local c = "controller=" .. a.name .. " "
    if a.reached then
      alts = { { a.reached, c } }
    else
      alts = { { "reconcile done", c }, { "reconcile failed", c }, { "lua callback failed", c },
                { "index function failed", c }, { "reconcile abandoned", c } }
    end
    local ok, err = pcall(self.wait_line, self, from, alts, 30, "attack " .. a.file .. " to be exercised")
    if not ok then error(a.file .. ": " .. err, 0) end
  end
end

-- The host still serves: the canary reconciles, /healthz answers, no report.
function Host:check()
  self:canary_round()
  self:healthz()
  self:sane()
end

-- SIGHUP; returns the index of the "reload done" or "reload failed" line.
function Host:reload()
  local from = #self.lines + 1
  self.p:kill(SIGHUP)
  return self:wait_line(from, { { "reload done" }, { "reload failed" } }, 30, "the reload to finish"), from
end

-- extra_mib: more the caller's scenario may hold (default 0)
function Host:rss_ok(extra_mib)
  extra_mib = extra_mib or 0
  local status = helpers.read_file("/proc/" .. self.p.pid .. "/status") or ""
  local kb = tonumber(status:match("VmHWM:%s*(%d+)"))
  if not kb then self:fail("cannot read the host's VmHWM") end
  local limit = (self.cap_mib + R.MARGIN_MIB + extra_mib) * 1024
  if kb > limit then
    self:fail("peak RSS %.1f MiB is over the Lua cap + margin (%d + %d + %d MiB)", kb / 1024, self.cap_mib,
      R.MARGIN_MIB, extra_mib)
  end
  return kb
end

-- SIGTERM must exit 0 (LeakSanitizer included) within the grace period.
function Host:stop()
  self.p:kill(15)
  local deadline = helpers.now() + 20
  while not self:status() and helpers.now() < deadline do self:pump(0.05) end
  self:pump(0.2)
  local rc = self:status()
  if rc == nil then
    self.p:stop()
    self:fail("SIGTERM did not stop the host within 20 s")
  end
  self:sane()
  if rc ~= 0 then self:fail("the host exited %s after SIGTERM", tostring(rc)) end
end

function Host:kill() self.p:stop() end

-- ---- scenarios -----------------------------------------------------------

local function names(attacks)
  local t = {}
  for _, a in ipairs(attacks) do t[#t + 1] = a.file end
  return table.concat(t, ", ")
end

-- Runs fn(host) and always kills the host; re-raises fn's error.
local function with_host(srv, attacks, tight, fn)
  local h
  local ok, err = pcall(function()
    h = R.start(srv, attacks, { tight = tight })
    fn(h)
  end)
  if h then h:kill() end
  if not ok then error(err, 0) end
end

-- `runs` attacks: the host starts with `batch`; then a reload keeps `batch`
-- and adds `next_batch`; then a reload removes them all. After each step the
-- host must pass Host:check; at the end RSS and SIGTERM.
local function scenario(srv, batch, next_batch, tight)
  with_host(srv, batch, tight, function(h)
    h:reached(1, batch)
    h:check()
    if next_batch and #next_batch > 0 then
      h:write(next_batch)
      local i, from = h:reload()
      if not h.lines[i]:find("reload done", 1, true) then
        h:fail("the reload adding %s failed: %s", names(next_batch), h.lines[i])
      end
      h:reached(from, next_batch)
      h:check()
    end
    h:remove(batch)
    h:remove(next_batch or {})
    local i = h:reload()
    if not h.lines[i]:find("reload done", 1, true) then h:fail("the reload removing the attacks failed: %s", h.lines[i]) end
    h:check()
    h:rss_ok()
    h:stop()
  end)
end

-- One attack alone: started with it (then reloaded unchanged, and removed),
-- and added by a reload to a host running only the canary; the first host
-- with `tight`'s flags, the second with the others.
function R.run_alone(srv, a, tight)
  scenario(srv, { a }, nil, tight)
  with_host(srv, {}, not tight, function(h)
    h:check()
    h:write({ a })
    local i, from = h:reload()
    if not h.lines[i]:find("reload done", 1, true) then h:fail("the reload adding %s failed: %s", a.file, h.lines[i]) end
    h:reached(from, { a })
    h:check()
    -- reloaded unchanged while it runs
    i = h:reload()
    if not h.lines[i]:find("reload done", 1, true) then h:fail("the reload keeping %s failed: %s", a.file, h.lines[i]) end
    h:check()
    h:rss_ok()
    h:stop()
  end)
end

-- A batch of `runs` attacks (see scenario); when it fails, each attack is
-- re-run alone and the error names those that fail alone.
function R.run_batch(srv, batch, next_batch, tight)
  local ok, err = pcall(scenario, srv, batch, next_batch, tight)
  if ok then return end
  if #batch + #(next_batch or {}) <= 1 then error(err, 0) end
  local culprits = {}
  local all = {}
  for _, a in ipairs(batch) do all[#all + 1] = a end
  for _, a in ipairs(next_batch or {}) do all[#all + 1] = a end
  for _, a in ipairs(all) do
    local ok1, err1 = pcall(R.run_alone, srv, a, tight)
    if not ok1 then culprits[#culprits + 1] = ("attack %s failed alone: %s"):format(a.file, err1) end
  end
  if #culprits == 0 then
    error(("the batch [%s] then [%s] failed, but each attack passes alone:\n%s"):format(
      names(batch), names(next_batch or {}), err), 0)
  end
  error(table.concat(culprits, "\n\n"), 0)
end

-- The refusal of attack a is logged: a line naming its file with its error.
local function refusal_line(h, from, a)
  local path = h.dir .. "/" .. a.file
  return h:find(from, { { "controller load failed", path, a.error }, { "reload failed", path, a.error } })
end

-- `refused` attacks: a host started with all of them exits 1 naming each
-- one (an attack not named is tried alone), with the default flags; then
-- each is added by a reload to a running tight host, which must log its
-- error, keep the canary reconciling and stay healthy.
function R.run_refused(srv, attacks)
  local failures = {}
  local function startup(list)
    -- --require-all: a refused file ends the start (without it the host
    -- would run the files that load, docs/operations.md)
    local h = R.start(srv, list, { refused = true, args = { "--require-all" } })
    local ok, err = pcall(function()
      h:sane()
      local rc = h:status()
      if rc ~= 1 then h:fail("the host started with %s exited %s, want 1", names(list), tostring(rc)) end
    end)
    h:kill()
    if not ok then return nil, err end
    return h
  end
  local h, err = startup(attacks)
  local missing = {}
  if not h then
    missing = attacks
  else
    for _, a in ipairs(attacks) do
      if not refusal_line(h, 1, a) then missing[#missing + 1] = a end
    end
  end
  for _, a in ipairs(missing) do
    local h1, err1 = startup({ a })
    if not h1 then
      failures[#failures + 1] = ("attack %s at startup: %s"):format(a.file, err1 or err)
    elseif not refusal_line(h1, 1, a) then
      failures[#failures + 1] = ("attack %s at startup: no 'controller load failed' line naming %s with %q\n%s")
        :format(a.file, a.file, a.error, h1:tail())
    end
  end
  local ok, rerr = pcall(with_host, srv, {}, true, function(host)
    host:check()
    for _, a in ipairs(attacks) do
      host:write({ a })
      local i, from = host:reload()
      if not host.lines[i]:find("reload failed", 1, true) then
        failures[#failures + 1] = ("attack %s by reload: the reload did not fail: %s"):format(a.file, host.lines[i])
      elseif not refusal_line(host, from, a) then
        failures[#failures + 1] = ("attack %s by reload: no line naming %s with %q:\n%s")
          :format(a.file, a.file, a.error, host:tail(10))
      end
      host:remove({ a })
      local ok1, err1 = pcall(host.check, host)
      if not ok1 then error(("after attack %s by reload: %s"):format(a.file, err1), 0) end
    end
    host:rss_ok()
    host:stop()
  end)
  if not ok then failures[#failures + 1] = rerr end
  if #failures > 0 then error(table.concat(failures, "\n\n"), 0) end
end

return R
