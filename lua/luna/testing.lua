-- luna.testing: the controller author's kit (docs/authoring.md).
--
-- Runs controllers on the real runtime (`luna run --dev-server
-- --test-control`, the same sandbox and budgets as in production) against
-- an embedded dev server, as a child process of `luna test`, and gives a
-- spec what it needs to drive and observe them:
--
--   local testing = require "luna.testing"
--   local env = testing.start{
--     controllers = { "configmap-mirror.lua" }, -- files (relative to the spec file's
--                                               --   directory) and the modules beside
--                                               --   them (*.mod.lua); default: that whole directory
--     dir = "path",                             -- or: run this directory as `luna run` would
--     seed = { "../deploy/crd-widgets.yaml" },  -- manifests the server starts with (CRDs)
--     objects = { {...}, ... },                 -- objects the server starts with
--     fake_clock = true,                        -- default true: delays and the scripts' time wait for env:advance
--     args = { "--reconcile-time-limit=1" },    -- extra `luna run` flags
--     webhooks = true,                          -- register the directory's webhooks with the
--                                               --   API server, which then calls them on writes
--   }
--   env:admit(webhook, request) -> answer: calls one webhook directly (below)
--   env:convert(crd, objects, api_version) -> answer: calls one converter directly
--   env:create(obj) env:update(obj) env:apply(obj) env:delete(kind, ns, name)
--   env:patch(kind, ns, name, patch [, type])  -- type: "merge" (default), "json", "strategic"
--   env:seed(objs | yaml_or_json_text)         -- creates (or replaces) each object
--   env:seed_file(path)                        -- the same from a manifest file
--   env:get(kind, ns, name) / env:get(kind, name) -> object | nil
--   env:list(kind [, { namespace =, labels = }]) -> items
--   env:wait_idle([secs])  -> status: waits until the controllers are idle
--   env:advance(secs)      -> steps the fake clock, then waits until idle
--   env:calls([filter])    -> the API calls reconciles made since the last call
--   env:events([namespace]) -> the Events recorded (events.k8s.io/v1)
--   env:status()           -> the runtime's status (test_control.h)
--   env:log()              -> what luna logged so far
--   env:stop()             -- also done at the end of every test
--
-- Kinds are written as in controllers ("v1/ConfigMap", "apps/v1/Deployment",
-- "example.com/v1/Widget"). Failed API requests raise with the server's
-- message; get returns nil on 404.
--
-- Under `luna test --kube` (testing.kube is true) the same calls go to the
-- cluster of KUBECONFIG instead of an embedded dev server
-- (docs/testing.md: "Against a real control plane"):
--   - each test has a namespace of its own (env.namespace; testing_cli
--     creates it before the test and deletes it after); the kit writes
--     what a test puts in "default" there and shows it back as "default"
--     (objects, paths, keys, the strings of answers), so one test file
--     runs both ways;
--   - Namespaces and other objects outside it that the kit creates are
--     deleted after the test (the next starts once they and its namespace
--     are gone), CRDs at the end of the run;
--   - env:list / env:events over all namespaces see only the test's own;
--   - idle is "idle, and nothing happened for a quiet spell" (a real
--     server cannot say its watchers are caught up): testing.quiet
--     seconds, 0.5 unless LUNA_TEST_QUIET says otherwise;
--   - the fake clock is the host's only: env:advance steps requeue_after,
--     retry backoff, luna.schedule and the time scripts read; the server's
--     timestamps and its own controllers (garbage collector, namespace
--     deletion) run on real time;
--   - testing.dev_only(reason) inside a test (or `dev_only = reason` in a
--     fixture case) ends it as skipped with the reason; the dev server's
--     own endpoints (/luna/v1/faults: fault injection) and env:seed into
--     a dev server raise instead of silently passing.
local ffi = require "ffi"
local core = require "luna.core"

local json = core.json
local testing = {}

for _, decl in ipairs {
  "typedef int pid_t;",
  "struct luna_testing_pollfd { int fd; short events; short revents; };",
  "int pipe(int fd[2]);",
  "int posix_spawn(pid_t *pid, const char *path, const void *file_actions, const void *attrp, char *const argv[], char *const envp[]);",
  "int posix_spawn_file_actions_init(void *fa);",
  "int posix_spawn_file_actions_adddup2(void *fa, int fd, int newfd);",
  "int posix_spawn_file_actions_addclose(void *fa, int fd);",
  "int posix_spawn_file_actions_addopen(void *fa, int fd, const char *path, int oflag, int mode);",
  "int posix_spawn_file_actions_destroy(void *fa);",
  "int kill(pid_t pid, int sig);",
  "pid_t waitpid(pid_t pid, int *status, int options);",
  "int close(int fd);",
  "long read(int fd, void *buf, size_t n);",
  "long write(int fd, const void *buf, size_t n);",
  "int poll(struct luna_testing_pollfd *fds, unsigned long nfds, int timeout);",
  "int fcntl(int fd, int cmd, ...);",
  "char *strerror(int errnum);",
  "char *mkdtemp(char *template);",
  "int symlink(const char *target, const char *linkpath);",
  "extern char **environ;",
  "int clock_gettime(int clk, void *ts);",
  "char *getcwd(char *buf, size_t size);",
} do pcall(ffi.cdef, decl) end
local C = ffi.C
local O_WRONLY, O_CREAT, O_TRUNC = 1, 64, 512
local F_SETFD, FD_CLOEXEC, POLLIN, WNOHANG = 2, 1, 1, 1
local SIGTERM, SIGKILL = 15, 9

local timespec_t = ffi.typeof("struct { long s; long ns; }[1]")
-- Monotonic seconds.
local function now()
  local t = timespec_t()
  C.clock_gettime(1, ffi.cast("void *", t))
  return tonumber(t[0].s) + tonumber(t[0].ns) / 1e9
end
testing.now = now

-- Waits up to secs without spinning (poll on nothing).
local function pause(secs)
  C.poll(nil, 0, math.floor(secs * 1000))
end

-- ---- values --------------------------------------------------------------

-- Deep equality of JSON-like values (json null == nil's sentinel).
local function same(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end
testing.same = same

-- True if every field of `want` is in `have` with the same value (tables
-- compared field by field; list entries by position).  Returns false and
-- the path of the first difference.
local function contains(have, want, path)
  path = path or ""
  if type(want) ~= "table" then
    if have == want then return true end
    return false, ("%s: want %s, have %s"):format(path ~= "" and path or "value",
      tostring(want), tostring(have))
  end
  if type(have) ~= "table" then
    return false, ("%s: want a table, have %s"):format(path ~= "" and path or "value", tostring(have))
  end
  for k, v in pairs(want) do
    local ok, why = contains(have[k], v, path .. (type(k) == "number" and ("[" .. k .. "]") or ("." .. k)))
    if not ok then return false, why end
  end
  return true
end
testing.contains = contains

local function show(v, indent)
  indent = indent or ""
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) ~= "table" then return tostring(v) end
  local ok, s = pcall(json.encode, v)
  if ok and s and #s <= 400 then return s end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(x, y) return tostring(x) < tostring(y) end)
  local out = { "{" }
  for _, k in ipairs(keys) do
    out[#out + 1] = indent .. "  " .. tostring(k) .. " = " .. show(v[k], indent .. "  ")
  end
  out[#out + 1] = indent .. "}"
  return table.concat(out, "\n")
end
testing.show = show

-- The differences between two JSON-like values, one line each
-- ("  .spec.replicas: want 3, have 5"), at most `max` (20) lines.
local function differences(want, have, max)
  max = max or 20
  local lines, more = {}, 0
  local function note(path, text)
    if #lines < max then lines[#lines + 1] = "  " .. (path == "" and "(the value)" or path) .. ": " .. text
    else more = more + 1 end
  end
  local function walk(w, h, path)
    if same(w, h) then return end
    if type(w) ~= "table" or type(h) ~= "table" or w == json.null or h == json.null then
      if h == nil then note(path, "want " .. show(w) .. ", missing")
      elseif w == nil then note(path, "not wanted, have " .. show(h))
      else note(path, "want " .. show(w) .. ", have " .. show(h)) end
      return
    end
    local keys, seen = {}, {}
    for k in pairs(w) do if not seen[k] then seen[k] = true; keys[#keys + 1] = k end end
    for k in pairs(h) do if not seen[k] then seen[k] = true; keys[#keys + 1] = k end end
    table.sort(keys, function(a, b)
      if type(a) == type(b) and type(a) ~= "table" then return a < b end
      return type(a) < type(b)
    end)
    for _, k in ipairs(keys) do
      walk(w[k], h[k], path .. (type(k) == "number" and ("[" .. k .. "]") or ("." .. tostring(k))))
    end
  end
  walk(want, have, "")
  if more > 0 then lines[#lines + 1] = ("  ... and %d more"):format(more) end
  return table.concat(lines, "\n")
end
testing.differences = differences

-- ---- assertions (busted's names for the common ones) ---------------------

local function fail(msg, level) error(msg, (level or 1) + 2) end

local function deep_copy_plain(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = deep_copy_plain(x) end
  return out
end

local function admission(res, name)
  if type(res) ~= "table" or res.allowed == nil or not res.review then
    fail(("assert.%s takes what env:admit returned, got %s"):format(name, show(res)), 2)
  end
  return ("webhook %s on %s"):format(res.webhook, res.what)
end

local assertions = {
  equal = function(want, have, msg)
    if want ~= have then fail((msg and msg .. ": " or "") .. ("expected %s, got %s"):format(show(want), show(have))) end
  end,
  same = function(want, have, msg)
    if not same(want, have) then
      local diff = type(want) == "table" and type(have) == "table" and
        ("\ndifferences:\n" .. differences(want, have)) or ""
      fail((msg and msg .. ": " or "") .. "expected (deep)\n" .. show(want) .. "\ngot\n" .. show(have) .. diff)
    end
  end,
  -- webhooks: what env:admit returned was allowed / denied (with a
  -- message containing `text`, plain), and the patch it sent
  allowed = function(res, msg)
    local what = admission(res, "allowed")
    if not res.allowed then
      fail((msg and msg .. ": " or "") .. ("%s: expected allowed, was denied (code %s): %s")
        :format(what, tostring(res.code), tostring(res.message)))
    end
  end,
  denied = function(res, text, msg)
    local what = admission(res, "denied")
    if res.allowed then
      fail((msg and msg .. ": " or "") .. ("%s: expected denied, was allowed%s"):format(what,
        #res.patch > 0 and (" with patch " .. show(res.patch)) or ""))
    end
    if text and not tostring(res.message):find(text, 1, true) then
      fail((msg and msg .. ": " or "") .. ("%s: denied with message %s, expected it to contain %q")
        :format(what, show(res.message), text))
    end
  end,
  patched = function(want_ops, res, msg)
    local what = admission(res, "patched")
    if not same(json.array(deep_copy_plain(want_ops)), res.patch) then
      local lines = { ("%s: the patch differs"):format(what), "expected:" }
      for _, op in ipairs(want_ops) do lines[#lines + 1] = "  " .. show(op) end
      lines[#lines + 1] = "sent:"
      for _, op in ipairs(res.patch) do lines[#lines + 1] = "  " .. show(op) end
      if #res.patch == 0 then lines[#lines + 1] = "  (no patch)" end
      fail((msg and msg .. ": " or "") .. table.concat(lines, "\n"))
    end
  end,
  contains = function(want, have, msg)
    local ok, why = contains(have, want)
    if not ok then fail((msg and msg .. ": " or "") .. why) end
  end,
  truthy = function(v, msg) if not v then fail(msg or ("expected a true value, got " .. show(v))) end end,
  falsy = function(v, msg) if v then fail(msg or ("expected a false value, got " .. show(v))) end end,
  is_true = function(v, msg) if v ~= true then fail(msg or ("expected true, got " .. show(v))) end end,
  is_false = function(v, msg) if v ~= false then fail(msg or ("expected false, got " .. show(v))) end end,
  is_nil = function(v, msg) if v ~= nil then fail(msg or ("expected nil, got " .. show(v))) end end,
  is_not_nil = function(v, msg) if v == nil then fail(msg or "expected a value, got nil") end end,
  matches = function(pattern, s, msg)
    if type(s) ~= "string" or not s:find(pattern) then
      fail((msg and msg .. ": " or "") .. ("%s does not match %q"):format(show(s), pattern))
    end
  end,
  has_error = function(fn, pattern, msg)
    local ok, err = pcall(fn)
    if ok then fail(msg or "expected an error") end
    if pattern and not tostring(err):find(pattern, 1, true) then
      fail((msg and msg .. ": " or "") .. ("error %q does not contain %q"):format(tostring(err), pattern))
    end
  end,
}
assertions.are = assertions
assertions.is_truthy, assertions.is_falsy = assertions.truthy, assertions.falsy
assertions.are_same, assertions.are_equal = assertions.same, assertions.equal
testing.assert = setmetatable(assertions, {
  __call = function(_, v, msg, ...)
    if not v then error(msg or "assertion failed!", 2) end
    return v, msg, ...
  end,
})

-- ---- kinds and paths -----------------------------------------------------

local function split_kind(kind)
  local gv, k = kind:match("^(.*)/([^/]+)$")
  if not gv then error(("kind %q: want \"v1/ConfigMap\", \"apps/v1/Deployment\", ..."):format(tostring(kind)), 3) end
  return gv, k
end

-- ---- the runtime under test ----------------------------------------------

local Env = {}
Env.__index = Env

-- Set by testing_cli: the luna executable, the current spec file's
-- directory, and the envs a test started (stopped after it).
testing._exe = nil
testing._dir = "."
testing._running = {}

local function cstrings(list)
  local arr = ffi.new("char *[?]", #list + 1)
  local anchor = { arr }
  for i, s in ipairs(list) do
    local buf = ffi.new("char[?]", #s + 1, s)
    anchor[#anchor + 1] = buf
    arr[i - 1] = buf
  end
  arr[#list] = nil
  return arr, anchor
end

local function environment()
  local out, i = {}, 0
  while C.environ[i] ~= nil do
    out[#out + 1] = ffi.string(C.environ[i])
    i = i + 1
  end
  return out
end

local function tmpdir()
  local buf = ffi.new("char[?]", 32, "/tmp/luna-test-XXXXXX")
  assert(C.mkdtemp(buf) ~= nil, "mkdtemp failed")
  return ffi.string(buf)
end

local function write_file(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function resolve(path)
  if path:sub(1, 1) == "/" then return path end
  return testing._dir .. "/" .. path
end

local function spawn(argv, log)
  local inp, out = ffi.new("int[2]"), ffi.new("int[2]")
  assert(C.pipe(inp) == 0 and C.pipe(out) == 0, "pipe failed")
  C.fcntl(inp[1], F_SETFD, ffi.new("int", FD_CLOEXEC))
  C.fcntl(out[0], F_SETFD, ffi.new("int", FD_CLOEXEC))
  local fa = ffi.new("char[256]")
  C.posix_spawn_file_actions_init(fa)
  C.posix_spawn_file_actions_adddup2(fa, inp[0], 0)
  C.posix_spawn_file_actions_adddup2(fa, out[1], 1)
  C.posix_spawn_file_actions_addopen(fa, 2, log, O_WRONLY + O_CREAT + O_TRUNC, 420)
  local cargv, a1 = cstrings(argv)
  local cenv, a2 = cstrings(environment())
  local pid = ffi.new("pid_t[1]")
  local rc = C.posix_spawn(pid, argv[1], fa, nil, cargv, cenv)
  C.posix_spawn_file_actions_destroy(fa)
  C.close(inp[0])
  C.close(out[1])
  local _ = { a1, a2 }
  if rc ~= 0 then
    C.close(inp[1])
    C.close(out[0])
    error("cannot start " .. argv[1] .. ": " .. ffi.string(C.strerror(rc)))
  end
  return pid[0], inp[1], out[0]
end

-- opts: see the top of this file.
function testing.start(opts)
  opts = opts or {}
  assert(testing._exe, "luna.testing runs under `luna test`")
  if testing.kube and not testing._ns then
    error("testing.start runs inside a test (it, before_each) under `luna test --kube`: " ..
      "the test's namespace exists only then", 2)
  end
  local dir, links = nil, {}
  if opts.dir then
    dir = resolve(opts.dir)
  elseif opts.controllers then
    dir = tmpdir()
    for _, f in ipairs(opts.controllers) do
      local src = resolve(f)
      if src:sub(1, 1) ~= "/" then
        local buf = ffi.new("char[4096]")
        assert(C.getcwd(buf, 4096) ~= nil, "getcwd failed")
        src = ffi.string(buf) .. "/" .. src
      end
      assert(read_file(src), "no controller file " .. src)
      local link = dir .. "/" .. src:match("[^/]+$")
      assert(C.symlink(src, link) == 0, "symlink " .. src)
      links[#links + 1] = link
      -- the modules the listed files may require (NAME.mod.lua) come
      -- along from their directories, as `luna run` would find them
      local src_dir = src:match("^(.*)/[^/]+$")
      local p = io.popen("ls -1 '" .. src_dir:gsub("'", "'\\''") .. "' 2>/dev/null")
      for name in p:lines() do
        local mod = dir .. "/" .. name
        if name:match("^[^.].*%.mod%.lua$") and not read_file(mod) then
          assert(C.symlink(src_dir .. "/" .. name, mod) == 0, "symlink " .. src_dir .. "/" .. name)
          links[#links + 1] = mod
        end
      end
      p:close()
    end
    links[#links + 1] = dir
  else
    dir = testing._dir
  end
  local work = tmpdir()
  -- --require-all: a controller file that fails to load fails the test,
  -- rather than the test running without it
  local argv = { testing._exe, "run", "--test-control", "--require-all",
                 "--metrics-bind-address=0", "--health-probe-bind-address=0",
                 "--log-level", opts.log_level or "debug" }
  if not testing.kube then table.insert(argv, 3, "--dev-server") end
  -- the webhook server on a free loopback port (under --kube the default
  -- would be :9443, which two runtimes of one test cannot share)
  argv[#argv + 1] = "--webhook-bind-address=127.0.0.1:0"
  if opts.fake_clock ~= false then argv[#argv + 1] = "--fake-clock" end
  if testing.kube then
    -- what the dev server would start with is in the cluster before the
    -- controllers start, as there
    local admin = testing._kube.admin
    for _, f in ipairs(opts.seed or {}) do
      local text = read_file(resolve(f))
      if not text then error("seed: cannot read " .. resolve(f), 2) end
      admin:seed(text)
    end
    if opts.objects and #opts.objects > 0 then admin:seed(opts.objects) end
  end
  for _, f in ipairs(testing.kube and {} or opts.seed or {}) do
    argv[#argv + 1] = "--seed"
    argv[#argv + 1] = resolve(f)
  end
  if not testing.kube and opts.objects and #opts.objects > 0 then
    local f = work .. "/objects.json"
    write_file(f, assert(json.encode({ apiVersion = "v1", kind = "List", items = json.array(opts.objects) })))
    argv[#argv + 1] = "--seed"
    argv[#argv + 1] = f
  end
  for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = dir
  local log = work .. "/luna.log"
  local pid, inp, out = spawn(argv, log)
  local env = setmetatable({ pid = pid, inp = inp, out = out, buf = "", logfile = log, work = work,
    resources = {}, links = links, timeout = opts.timeout or 30, fake_clock = opts.fake_clock ~= false,
    namespace = testing._ns or "default", dir = dir }, Env)
  testing._running[#testing._running + 1] = env
  local st = env:command("status")
  env.url = st.url
  env:wait_idle(opts.start_timeout or 60)
  if opts.webhooks then env:register_webhooks() end
  return env
end

-- The last lines of luna's log, for failure messages.
function Env:log(lines)
  local s = read_file(self.logfile) or ""
  if not lines then return s end
  local all = {}
  for l in s:gmatch("[^\n]+") do all[#all + 1] = l end
  return table.concat(all, "\n", math.max(1, #all - lines + 1))
end

function Env:_fail(msg, level)
  error(msg .. "\n--- luna log (last lines) ---\n" .. self:log(40), (level or 1) + 1)
end

-- Sends one command on the control channel and returns its decoded answer.
function Env:command(cmd, secs)
  if self.stopped then error("the runtime was stopped", 2) end
  local line = cmd .. "\n"
  if C.write(self.inp, line, #line) ~= #line then
    self.died = true
    self:_fail("luna exited (control channel closed)", 2)
  end
  local deadline = now() + (secs or self.timeout)
  local pfd = ffi.new("struct luna_testing_pollfd[1]")
  local buf = ffi.new("char[65536]")
  while true do
    local nl = self.buf:find("\n", 1, true)
    if nl then
      local answer = self.buf:sub(1, nl - 1)
      self.buf = self.buf:sub(nl + 1)
      local v, err = json.decode(answer)
      if not v then self:_fail("bad answer from luna: " .. tostring(err), 2) end
      if v.error then self:_fail(cmd .. ": " .. v.error, 2) end
      return v
    end
    pfd[0].fd, pfd[0].events = self.out, POLLIN
    local n = C.poll(pfd, 1, 200)
    if n > 0 then
      local got = C.read(self.out, buf, 65536)
      if got <= 0 then
        self.died = true
        self:_fail("luna exited before answering " .. cmd, 2)
      end
      self.buf = self.buf .. ffi.string(buf, got)
    elseif now() > deadline then
      self:_fail("luna did not answer " .. cmd, 2)
    end
  end
end

function Env:status() return self:command("status") end

-- Waits until the controllers are idle (test_control.h: nothing queued or
-- reconciling, every informer up to date with the server); returns the
-- status.  Delayed keys (requeue_after, retry backoff) do not count:
-- status.controllers[i].waiting / .next say when they are due.
function Env:wait_idle(secs)
  local deadline = now() + (secs or self.timeout)
  local st
  -- on a real server: idle, with "activity" unchanged, for testing.quiet
  -- seconds (test_control.h); an event still on its way moves activity
  local quiet, since, seen = testing.kube and testing.quiet or 0, nil, nil
  repeat
    st = self:command("status")
    if st.idle then
      if quiet <= 0 then return st end
      if st.activity ~= seen then
        seen, since = st.activity, now()
      elseif now() - since >= quiet then
        return self:_unalias(st)
      end
    else
      seen, since = nil, nil
    end
    pause(0.01)
  until now() > deadline
  self:_fail("controllers not idle after " .. (secs or self.timeout) .. " s: " ..
    table.concat(st.busy or {}, "; "), 2)
end

-- Steps the fake clock by secs, lets the keys now due run, waits until idle.
function Env:advance(secs)
  self:command("advance " .. tostring(secs))
  return self:wait_idle()
end

-- The API calls reconciles made since the last env:calls(), in order:
-- { controller, key, method, path, content_type, body (decoded JSON when
-- it is JSON), status }.  filter (optional): { method =, path = pattern,
-- controller = } keeps the matching ones.
function Env:calls(filter)
  local got = self:_unalias(self:command("calls"))
  self.dropped = tonumber(got.dropped) or 0 -- calls the runtime could not keep (test_control.h)
  self.all_calls = self.all_calls or {}
  for _, c in ipairs(got.calls) do
    if type(c.body) == "string" then
      local v = json.decode(c.body)
      if v ~= nil then c.body = v end
    else
      c.body = nil
    end
    if type(c.content_type) ~= "string" then c.content_type = nil end
    self.all_calls[#self.all_calls + 1] = c
  end
  local out = {}
  for _, c in ipairs(got.calls) do
    if not filter or ((not filter.method or filter.method == c.method) and
        (not filter.controller or filter.controller == c.controller) and
        (not filter.path or c.path:find(filter.path))) then
      out[#out + 1] = c
    end
  end
  return out
end

-- ---- the dev server ------------------------------------------------------

-- One request to the dev server, sent by the runtime under test (its
-- control channel's `request`): status, decoded body (nil if empty).
function Env:request(method, path, body, content_type)
  local status, obj = self:_exchange(method, path, body, content_type)
  return status, self:_unalias(obj)
end

-- The request as sent (the test namespace in place of "default" under
-- --kube), and the answer as the server gave it.
function Env:_exchange(method, path, body, content_type, raw)
  local ns = testing.kube and not raw and testing._ns
  if testing.kube and path:find("^/luna/") then
    error(("%s %s: a dev server endpoint (fault injection, the dev server's own state); a real " ..
      "API server has none: mark the test testing.dev_only(reason) to skip it under --kube"):format(method, path), 3)
  end
  if ns then
    path = path:gsub("/namespaces/default$", "/namespaces/" .. ns)
               :gsub("/namespaces/default([/?])", "/namespaces/" .. ns .. "%1")
    -- JSON text is decoded only to see its namespace: it is sent as the
    -- test wrote it (duplicate keys, key order, big integers kept) unless
    -- its namespace is rewritten below
    if type(body) == "string" and (content_type or "application/json"):find("json") then
      local ok, v = pcall(json.decode, body)
      if ok and type(v) == "table" and type(v.metadata) == "table" and v.metadata.namespace == "default" then
        body = v
      end
    end
    if type(body) == "table" and type(body.metadata) == "table" and body.metadata.namespace == "default" then
      local copy, md = {}, {}
      for k, v in pairs(body) do copy[k] = v end
      for k, v in pairs(body.metadata) do md[k] = v end
      md.namespace = ns
      copy.metadata, body = md, copy
    end
  end
  if body ~= nil and type(body) ~= "string" then body = assert(json.encode(body)) end
  local cmd = assert(json.encode { method = method, path = path, body = body,
    content_type = body ~= nil and (content_type or "application/json") or nil })
  local ans = self:command("request " .. cmd)
  -- what the server warned (an admission webhook's warnings among them)
  self.last_warnings = self:_unalias(ans.warnings or {})
  local obj = nil
  if type(ans.body) == "string" and ans.body ~= "" then obj = json.decode(ans.body) end
  if testing.kube and not raw then testing._kube_track(method, path, ans.status, obj) end
  return ans.status, obj
end

-- Under --kube: a copy of v with the test's namespace shown as "default"
-- in every string (the name is unique to the test, so only it matches).
function Env:_unalias(v)
  local ns = testing.kube and testing._ns
  if not ns then return v end
  local pat = ns:gsub("%p", "%%%0")
  local function walk(x)
    if type(x) == "string" then return (x:gsub(pat, "default")) end
    if type(x) ~= "table" or x == json.null then return x end
    local out = {}
    for k, val in pairs(x) do out[k] = walk(val) end
    return setmetatable(out, getmetatable(x))
  end
  return walk(v)
end

local function check(status, obj, what, ...)
  for _, ok in ipairs { ... } do if status == ok then return obj end end
  error(("%s: HTTP %d %s"):format(what, status, type(obj) == "table" and tostring(obj.message) or ""), 3)
end

-- The resource of a kind: { path = "/api/v1" | "/apis/g/v", name =, namespaced = }.
function Env:resource(kind)
  local r = self.resources[kind]
  if r then return r end
  local gv, k = split_kind(kind)
  local base = gv == "v1" and "/api/v1" or "/apis/" .. gv
  local status, list = self:request("GET", base)
  if status ~= 200 then error(("kind %s: the server does not serve %s (HTTP %d)"):format(kind, base, status), 3) end
  for _, res in ipairs(list.resources or {}) do
    if res.kind == k and not res.name:find("/") then
      r = { base = base, name = res.name, namespaced = res.namespaced }
      self.resources[kind] = r
      return r
    end
  end
  error(("kind %s: not served (no %s in %s)"):format(kind, k, base), 3)
end

function Env:path(kind, namespace, name)
  local r = self:resource(kind)
  local p = r.base
  if r.namespaced and namespace then p = p .. "/namespaces/" .. namespace end
  p = p .. "/" .. r.name
  if name then p = p .. "/" .. name end
  return p
end

local function kind_of(obj)
  assert(type(obj) == "table" and obj.apiVersion and obj.kind, "an object needs apiVersion and kind")
  return obj.apiVersion .. "/" .. obj.kind
end

local function ns_of(self, obj)
  local r = self:resource(kind_of(obj))
  if not r.namespaced then return nil end
  return obj.metadata and obj.metadata.namespace or "default"
end

-- get(kind, ns, name) or get(kind, name) for cluster-scoped kinds.
function Env:get(kind, namespace, name)
  if name == nil then namespace, name = nil, namespace end
  local status, obj = self:request("GET", self:path(kind, namespace, name))
  if status == 404 then return nil end
  return check(status, obj, "get " .. kind .. " " .. tostring(name), 200)
end

function Env:list(kind, opts)
  opts = opts or {}
  local p = self:path(kind, opts.namespace)
  if opts.labels then
    local sel = opts.labels
    if type(sel) == "table" then
      local parts = {}
      for k, v in pairs(sel) do parts[#parts + 1] = k .. "=" .. v end
      table.sort(parts)
      sel = table.concat(parts, ",")
    end
    p = p .. "?labelSelector=" .. sel:gsub("[^%w%-%._~]", function(c) return ("%%%02X"):format(c:byte()) end)
  end
  local status, obj = self:_exchange("GET", p)
  return self:_unalias(testing._own_items(check(status, obj, "list " .. kind, 200).items, opts.namespace))
end

function Env:create(obj)
  local status, out = self:request("POST", self:path(kind_of(obj), ns_of(self, obj)), obj)
  return check(status, out, "create " .. kind_of(obj), 200, 201)
end

function Env:update(obj)
  local status, out = self:request("PUT", self:path(kind_of(obj), ns_of(self, obj), obj.metadata.name), obj)
  return check(status, out, "update " .. kind_of(obj), 200)
end

-- Server-side apply as field manager "luna-test" (forced).
function Env:apply(obj)
  local p = self:path(kind_of(obj), ns_of(self, obj), obj.metadata.name) .. "?fieldManager=luna-test&force=true"
  local status, out = self:request("PATCH", p, obj, "application/apply-patch+yaml")
  return check(status, out, "apply " .. kind_of(obj), 200, 201)
end

local PATCH_TYPES = { merge = "application/merge-patch+json", json = "application/json-patch+json",
                      strategic = "application/strategic-merge-patch+json" }

function Env:patch(kind, namespace, name, patch, ptype)
  local ct = PATCH_TYPES[ptype or "merge"] or error("patch type: merge, json or strategic", 2)
  local status, out = self:request("PATCH", self:path(kind, namespace, name), patch, ct)
  return check(status, out, "patch " .. kind .. " " .. name, 200)
end

-- Deletes; true if it was there.
function Env:delete(kind, namespace, name)
  if name == nil then namespace, name = nil, namespace end
  local status, out = self:request("DELETE", self:path(kind, namespace, name))
  if status == 404 then return false end
  check(status, out, "delete " .. kind .. " " .. name, 200, 202)
  return true
end

-- Objects in: a list of tables or one table (each created, or replaced if
-- it exists, through the API), or YAML/JSON text with any number of
-- documents (loaded by the dev server as --seed loads a file).  Returns
-- the objects as stored (tables), or nothing (text).
function Env:seed(objs)
  if type(objs) == "string" then
    if not testing.kube then
      self:command("seed " .. assert(json.encode(objs)))
      return
    end
    -- no dev server to load them: the runtime parses, the kit creates
    local docs = self:command("documents " .. assert(json.encode(objs))).documents
    local flat = {}
    for _, d in ipairs(docs) do
      if type(d) == "table" and d.kind and tostring(d.kind):find("List$") then
        for _, item in ipairs(d.items or {}) do flat[#flat + 1] = item end
      elseif type(d) == "table" then
        flat[#flat + 1] = d
      end
    end
    self:seed(flat)
    return
  end
  if objs.kind and objs.kind:find("List$") then objs = objs.items or {} end
  if objs.apiVersion then objs = { objs } end
  if testing.kube then objs = testing._kube_order(self, objs) end
  local out = {}
  for i, obj in ipairs(objs) do
    local have = obj.metadata and obj.metadata.name and
      self:get(kind_of(obj), ns_of(self, obj), obj.metadata.name)
    if have then
      local copy = {}
      for k, v in pairs(obj) do copy[k] = v end
      copy.metadata = {}
      for k, v in pairs(obj.metadata) do copy.metadata[k] = v end
      copy.metadata.resourceVersion = have.metadata.resourceVersion
      out[i] = self:update(copy)
    else
      out[i] = self:create(obj)
    end
    if testing.kube and kind_of(obj) == "apiextensions.k8s.io/v1/CustomResourceDefinition" then
      testing._kube_established(self, obj.metadata.name)
    end
  end
  return out
end

-- The manifests of a file (relative to the spec file), as env:seed(text).
function Env:seed_file(path)
  local text = read_file(resolve(path))
  if not text then error("seed_file: cannot read " .. resolve(path), 2) end
  return self:seed(text)
end

-- Events (events.k8s.io/v1) in namespace (all namespaces if nil).
function Env:events(namespace)
  local p = "/apis/events.k8s.io/v1" .. (namespace and ("/namespaces/" .. namespace) or "") .. "/events"
  local status, obj = self:_exchange("GET", p)
  return self:_unalias(testing._own_items(check(status, obj, "list events", 200).items, namespace))
end

-- Stops the runtime (closing its control channel is its SIGTERM); returns
-- its exit status.
function Env:stop()
  if self.stopped then return self.exit_status end
  self.stopped = true
  C.close(self.inp)
  local st = ffi.new("int[1]")
  local deadline = now() + 30
  local rc
  repeat
    rc = C.waitpid(self.pid, st, WNOHANG)
    if rc == 0 then pause(0.02) end
  until rc ~= 0 or now() > deadline
  if rc == 0 then
    C.kill(self.pid, SIGTERM)
    pause(1)
    C.kill(self.pid, SIGKILL)
    C.waitpid(self.pid, st, 0)
    self.exit_status = -1
  else
    local s = st[0]
    self.exit_status = (s % 128 == 0) and math.floor(s / 256) % 256 or -(s % 128)
  end
  C.close(self.out)
  return self.exit_status
end

-- Kills every runtime the current test started (testing_cli, after each test).
function testing._stop_all()
  local bad
  for _, env in ipairs(testing._running) do
    -- `luna rbac` reads what the runtime did before it goes
    if testing._on_stop and not env.stopped and not env.died then pcall(testing._on_stop, env) end
    local rc = env:stop()
    if rc ~= 0 and not env.died and not bad then -- a death already reported is not reported twice
      bad = ("luna exited %s\n--- luna log (last lines) ---\n%s"):format(tostring(rc), env:log(40))
    end
    os.remove(env.logfile)
    os.remove(env.work .. "/objects.json")
    os.remove(env.work)
    for _, l in ipairs(env.links) do os.remove(l) end
  end
  testing._running = {}
  return bad
end

-- ---- webhooks (docs/webhooks.md, "Testing webhooks") ---------------------

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local B64_VALUE = {}
for i = 1, 64 do B64_VALUE[B64:byte(i)] = i - 1 end

local function base64_decode(s)
  local out, bits, n = {}, 0, 0
  for i = 1, #s do
    local v = B64_VALUE[s:byte(i)]
    if v then
      bits, n = bits * 64 + v, n + 6
      if n >= 8 then
        n = n - 8
        local byte = math.floor(bits / 2 ^ n)
        out[#out + 1] = string.char(byte)
        bits = bits - byte * 2 ^ n
      end
    end
  end
  return table.concat(out)
end

local function base64_encode(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    for k = 3, 0, -1 do
      local v = math.floor(n / 64 ^ k) % 64
      out[#out + 1] = B64:sub(v + 1, v + 1)
    end
    if not b then out[#out - 1], out[#out] = "=", "="
    elseif not c then out[#out] = "=" end
  end
  return table.concat(out)
end
testing._base64_decode = base64_decode

local function deep_copy(v)
  if type(v) ~= "table" or v == json.null then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = deep_copy(x) end
  if json.is_array(v) then json.array(out) end
  return out
end

-- RFC 6902 operations applied to a copy of doc (what the API server
-- stores); raises naming the operation that does not apply.
local function apply_patch(doc, ops)
  local root = { deep_copy(doc) }
  for i, op in ipairs(ops) do
    local parts = { 1 }
    for p in tostring(op.path):gmatch("/([^/]*)") do parts[#parts + 1] = (p:gsub("~1", "/"):gsub("~0", "~")) end
    local parent = root
    local function bad(why) error(("patch operation %d (%s %s): %s"):format(i, tostring(op.op), tostring(op.path), why), 0) end
    for k = 1, #parts - 1 do
      local key = parts[k]
      if k > 1 and json.is_array(parent) then key = tonumber(key) and tonumber(key) + 1 end
      parent = parent[key]
      if type(parent) ~= "table" or parent == json.null then bad("no such parent") end
    end
    local last = parts[#parts]
    if #parts > 1 and json.is_array(parent) then
      local idx = last == "-" and #parent + 1 or (tonumber(last) and tonumber(last) + 1)
      if not idx or idx < 1 or idx > #parent + 1 then bad("index out of range") end
      if op.op == "add" then table.insert(parent, idx, deep_copy(op.value))
      elseif op.op == "remove" then if parent[idx] == nil then bad("nothing to remove") end table.remove(parent, idx)
      elseif op.op == "replace" then if parent[idx] == nil then bad("nothing to replace") end parent[idx] = deep_copy(op.value)
      else bad("luna sends add, remove and replace only") end
    else
      if op.op == "add" then parent[last] = deep_copy(op.value)
      elseif op.op == "remove" then if parent[last] == nil then bad("nothing to remove") end parent[last] = nil
      elseif op.op == "replace" then if parent[last] == nil then bad("nothing to replace") end parent[last] = deep_copy(op.value)
      else bad("luna sends add, remove and replace only") end
    end
  end
  return root[1]
end
testing.apply_patch = apply_patch

-- What an author writes as a request (the fields the webhook function
-- gets) → AdmissionReview.request.
local REQUEST_FIELDS = {
  uid = "uid", operation = "operation", object = "object", old_object = "oldObject",
  user_info = "userInfo", dry_run = "dryRun", sub_resource = "subResource", name = "name",
  namespace = "namespace", kind = "kind", resource = "resource", options = "options",
  request_kind = "requestKind", request_resource = "requestResource",
  request_sub_resource = "requestSubResource",
}

local uid_serial = 0

-- One object: a table, or a manifest file (relative to the spec file)
-- holding one document.
function Env:_object(v, field)
  if type(v) ~= "string" then return v end
  local text = read_file(resolve(v))
  if not text then error(("%s: cannot read %s"):format(field, resolve(v)), 0) end
  local docs = self:command("documents " .. assert(json.encode(text))).documents
  if #docs ~= 1 or type(docs[1]) ~= "table" then
    error(("%s: %s holds %d documents, want one"):format(field, resolve(v), #docs), 0)
  end
  return docs[1]
end

-- The AdmissionReview of a request table (or file), as the API server
-- would send it: defaults filled in from the object.
function Env:_review(req)
  if type(req) == "string" then
    local doc = self:_object(req, "admit")
    if doc.kind == "AdmissionReview" then return doc end
    req = { object = doc }
  end
  if type(req) ~= "table" then
    error("admit: the request is a table { operation =, object =, old_object =, ... }, an " ..
      "AdmissionReview, or a YAML/JSON file of either; got " .. type(req), 0)
  end
  if req.kind == "AdmissionReview" or req.apiVersion then return req end
  local r = {}
  for k, v in pairs(req) do
    local field = REQUEST_FIELDS[k]
    if not field then
      local known = {}
      for name in pairs(REQUEST_FIELDS) do known[#known + 1] = name end
      table.sort(known)
      error(("admit: unknown request field %q (the fields a webhook gets: %s)")
        :format(tostring(k), table.concat(known, ", ")), 0)
    end
    r[field] = v
  end
  r.object = self:_object(r.object, "object")
  r.oldObject = self:_object(r.oldObject, "old_object")
  local obj = r.object or r.oldObject
  if type(obj) ~= "table" then
    error("admit: the request needs object (CREATE, UPDATE) or old_object (DELETE)", 0)
  end
  r.operation = r.operation or (r.object and r.oldObject and "UPDATE") or (r.object and "CREATE") or "DELETE"
  local md = type(obj.metadata) == "table" and obj.metadata or {}
  r.name = r.name or md.name
  r.namespace = r.namespace or md.namespace
  uid_serial = uid_serial + 1
  r.uid = r.uid or ("luna-test-%d-%d"):format(self.pid, uid_serial)
  if not r.kind or not r.resource then
    if type(obj.apiVersion) ~= "string" or type(obj.kind) ~= "string" then
      error("admit: the object needs apiVersion and kind (or give kind and resource)", 0)
    end
    local group, version = obj.apiVersion:match("^(.*)/([^/]+)$")
    if not group then group, version = "", obj.apiVersion end
    r.kind = r.kind or { group = group, version = version, kind = obj.kind }
    if not r.resource then
      -- the resource as discovery names it (the kind's CRD seeded), else
      -- the lowercase plural kube would most likely give it
      local ok, res = pcall(self.resource, self, obj.apiVersion .. "/" .. obj.kind)
      r.resource = { group = group, version = version,
                     resource = ok and res.name or (obj.kind:lower() .. "s") }
    end
  end
  r.requestKind = r.requestKind or r.kind
  r.requestResource = r.requestResource or r.resource
  r.userInfo = r.userInfo or { username = "luna-test", groups = json.array { "system:authenticated" } }
  r.dryRun = r.dryRun == true
  return { apiVersion = "admission.k8s.io/v1", kind = "AdmissionReview", request = r }
end

-- Under --kube: the object (a copy) in the test's namespace where it says
-- "default", as the kit's writes send it, so what a webhook reads from
-- the caches (filled from that namespace) matches.
function Env:_alias_object(obj)
  local ns = testing.kube and testing._ns
  if not ns or type(obj) ~= "table" or type(obj.metadata) ~= "table" or
     obj.metadata.namespace ~= "default" then
    return obj
  end
  local copy = {}
  for k, v in pairs(obj) do copy[k] = v end
  copy.metadata = {}
  for k, v in pairs(obj.metadata) do copy.metadata[k] = v end
  copy.metadata.namespace = ns
  return setmetatable(copy, getmetatable(obj))
end

function Env:_alias_review(review)
  local ns = testing.kube and testing._ns
  local r = review.request
  if not ns or type(r) ~= "table" then return review end
  local copy = {}
  for k, v in pairs(r) do copy[k] = v end
  if copy.namespace == "default" then copy.namespace = ns end
  copy.object = self:_alias_object(copy.object)
  copy.oldObject = self:_alias_object(copy.oldObject)
  return { apiVersion = review.apiVersion, kind = review.kind, request = copy }
end

-- Calls one webhook directly, as the API server would (the runtime's own
-- webhook server handler: the same sandbox, guard, failure policy, shadow):
-- webhook is its name ("widgets.default.example.com") or its path
-- ("/mutate/NAME"); request as Env:_review takes it.  Returns
-- { allowed, code, message, reason, warnings = {...}, patch = { ops },
--   object = the request's object with the patch applied, webhook, uid,
--   operation, review = the AdmissionReview answered }.
function Env:admit(webhook, request)
  if type(webhook) ~= "string" or webhook == "" then
    error("admit: the first argument is the webhook's name or path", 2)
  end
  local ok, review = pcall(self._review, self, request)
  if not ok then error(review, 2) end
  review = self:_alias_review(review)
  local body = assert(json.encode(review))
  local paths = webhook:sub(1, 1) == "/" and { webhook } or { "/validate/" .. webhook, "/mutate/" .. webhook }
  local ans
  for _, p in ipairs(paths) do
    ans = self:command("admit " .. assert(json.encode { path = p, body = body }))
    if ans.status ~= 404 then break end
  end
  if ans.status == 404 then
    local names = {}
    local hooks = testing._lib and self.dir and core.webhook_sources(testing._lib, self.dir)
    for _, h in ipairs(hooks or {}) do names[#names + 1] = h.name end
    table.sort(names)
    error(("admit: no webhook %s is loaded (loaded: %s)"):format(webhook,
      #names > 0 and table.concat(names, ", ") or "none"), 2)
  end
  if ans.status ~= 200 then
    error(("admit %s: HTTP %d: %s"):format(webhook, ans.status, tostring(ans.body):gsub("%s+$", "")), 2)
  end
  local answered = self:_unalias(json.decode(ans.body))
  review = self:_unalias(review)
  local resp = answered.response
  local st = type(resp.status) == "table" and resp.status or {}
  local r = review.request
  local out = {
    webhook = webhook, uid = resp.uid, operation = r.operation,
    what = ("%s %s%s"):format(tostring(r.operation), r.namespace and (r.namespace .. "/") or "", tostring(r.name)),
    allowed = resp.allowed == true, code = st.code, message = st.message, reason = st.reason,
    warnings = resp.warnings or json.array(), patch = json.array(), object = r.object,
    review = answered,
  }
  if resp.patch then
    out.patch = json.decode(base64_decode(resp.patch))
    out.object = apply_patch(r.object, out.patch)
  end
  return out
end

-- Calls one converter directly, as the API server would: crd is the CRD's
-- name ("widgets.example.com", the converter's name) or its path
-- ("/convert/widgets.example.com"); objects a list of objects (or one);
-- api_version the version wanted ("example.com/v1").  Returns
-- { ok = Success?, message, objects = the converted list, uid,
--   review = the ConversionReview answered }.  A Failure is an answer,
-- not an error: assert on ok and message.
function Env:convert(crd, objects, api_version)
  if type(crd) ~= "string" or crd == "" then
    error("convert: the first argument is the converter's CRD name or path", 2)
  end
  if type(objects) ~= "table" then error("convert: objects is a list of objects", 2) end
  if objects.apiVersion then objects = { objects } end
  if type(api_version) ~= "string" or not api_version:find("/", 1, true) then
    error("convert: api_version is the group/version wanted (e.g. example.com/v1)", 2)
  end
  local list = json.array()
  for i, o in ipairs(objects) do list[i] = self:_alias_object(o) end
  uid_serial = uid_serial + 1
  local uid = ("luna-test-%d-%d"):format(self.pid, uid_serial)
  local review = { apiVersion = "apiextensions.k8s.io/v1", kind = "ConversionReview",
                   request = { uid = uid, desiredAPIVersion = api_version, objects = list } }
  local path = crd:sub(1, 1) == "/" and crd or ("/convert/" .. crd)
  local ans = self:command("admit " .. assert(json.encode { path = path, body = assert(json.encode(review)) }))
  if ans.status == 404 then
    local names = {}
    local hooks = testing._lib and self.dir and core.webhook_sources(testing._lib, self.dir)
    for _, h in ipairs(hooks or {}) do
      if h.type == "conversion" then names[#names + 1] = h.name end
    end
    table.sort(names)
    error(("convert: no converter %s is loaded (loaded: %s)"):format(crd,
      #names > 0 and table.concat(names, ", ") or "none"), 2)
  end
  if ans.status ~= 200 then
    error(("convert %s: HTTP %d: %s"):format(crd, ans.status, tostring(ans.body):gsub("%s+$", "")), 2)
  end
  local answered = self:_unalias(json.decode(ans.body))
  local resp = answered.response or {}
  local result = type(resp.result) == "table" and resp.result or {}
  return { ok = result.status == "Success", message = result.message, uid = resp.uid,
           objects = resp.convertedObjects or json.array(), review = answered }
end

-- The webhook server of the runtime: { address = "127.0.0.1:PORT", cert = PEM }.
function Env:webhook_server() return self:command("webhook") end

local PROBE_LABEL = "luna.dev/test-probe"

-- Registers the directory's webhooks with the API server (the dev server,
-- or the cluster under --kube) as `luna webhooks manifest --url` would,
-- pointing at this runtime's webhook server, and returns once the server
-- calls them (a real API server picks configurations up from a watch: a
-- probe webhook that fails proves it has).
function Env:register_webhooks()
  if not testing._lib then error("register_webhooks: runs under `luna test`", 2) end
  local srv = self:webhook_server()
  local hooks, err = core.webhook_sources(testing._lib, self.dir)
  if not hooks then error("webhooks: " .. tostring(err), 2) end
  if #hooks == 0 then error("webhooks = true: the controllers declare no webhook", 2) end
  local name = testing.kube and ("luna-test-" .. testing._ns) or "luna-test"
  local url = "https://" .. srv.address
  local ca = base64_encode(srv.cert)
  -- the admission configurations are created; a converter's CRD (seeded
  -- by the test, as its controller needs it) is pointed at this runtime
  -- with the manifest's conversion stanza, as a merge patch would
  local yaml = require("luna.webhooks_cli").render(hooks, { name = name, url = url, ca_bundle = ca,
                                                             only = "admission" })
  if yaml then self:seed(yaml) end
  self.webhook_configurations = name
  for _, h in ipairs(hooks) do
    if h.type == "conversion" then
      local st, obj = self:_exchange("PATCH",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" .. h.name,
        { spec = { conversion = { strategy = "Webhook", webhook = {
            conversionReviewVersions = { "v1" },
            clientConfig = { url = url .. h.path, caBundle = ca } } } } },
        "application/merge-patch+json")
      if st ~= 200 then
        error(("webhooks: converter %s: patching CRD %s: HTTP %s %s (seed the CRD first)"):format(
          h.path, h.name, tostring(st), type(obj) == "table" and tostring(obj.message) or ""), 2)
      end
    end
  end
  if not yaml then return end
  for _, kind in ipairs { "Mutating", "Validating" } do
    local probe_name = "probe-" .. kind:lower() .. ".luna-test.luna.dev"
    local cfg = self:create {
      apiVersion = "admissionregistration.k8s.io/v1", kind = kind .. "WebhookConfiguration",
      metadata = { name = name .. "-probe" },
      webhooks = { { name = probe_name, admissionReviewVersions = { "v1" }, sideEffects = "None",
        failurePolicy = "Fail", timeoutSeconds = 5,
        clientConfig = { url = url .. "/luna-test-probe", caBundle = ca },
        objectSelector = { matchLabels = { [PROBE_LABEL] = kind:lower() } },
        rules = { { apiGroups = { "" }, apiVersions = { "v1" }, resources = { "configmaps" },
                    operations = { "CREATE" } } } } },
    }
    local deadline = now() + 60
    while true do
      local st, obj = self:request("POST", "/api/v1/namespaces/default/configmaps?dryRun=All", {
        apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = "luna-test-probe", namespace = "default", labels = { [PROBE_LABEL] = kind:lower() } } })
      if st ~= 201 and type(obj) == "table" and tostring(obj.message):find(probe_name, 1, true) then break end
      if now() > deadline then
        error(("webhooks: the API server does not call the %s webhooks after 60 s (last answer: HTTP %s %s)")
          :format(kind:lower(), tostring(st), type(obj) == "table" and tostring(obj.message) or ""), 2)
      end
      pause(0.05)
    end
    self:request("DELETE", self:path(kind_of(cfg), nil, cfg.metadata.name))
  end
end

-- ---- a real control plane (`luna test --kube`) -------------------------

-- Set by testing_cli for --kube: testing.kube = true, testing.quiet (the
-- idle quiet spell, seconds), and one session, testing._kube:
--   { admin = Env (a runtime of its own that only carries the kit's own
--     requests: namespaces, seeds, cleanup), run = id of this run,
--     crds = { {path, name} } (created by this run, deleted at its end),
--     gone = { {path, what} } (deleted, to wait for at the end) }
-- and, for the test running now, testing._ns (its namespace), testing._owned
-- ({path, name, kind} the kit created outside it, deleted after the test)
-- and testing._seen_ns (the namespaces its lists and events show).
testing.kube = false
testing.quiet = 0.5

-- Ends the running test as skipped on a real server, with the reason.
function testing.dev_only(reason)
  if testing.kube then
    error({ luna_skip = "dev server only: " .. tostring(reason) }, 0)
  end
end

local ADMIN = [[
-- The kit's own client runtime (luna test --kube): a controller that
-- watches nothing, so the runtime carries the kit's requests only.
local luna = require "luna"
return luna.controller { name = "luna-test-admin",
  watch = { "v1/Namespace", labels = { ["luna.dev/test-admin"] = "none" } },
  reconcile = function() end }
]]

local function strip_query(p) return (p:gsub("%?.*$", "")) end

-- Every write of the kit's under --kube: what it created outside the
-- test's namespace is noted for cleanup; namespaces touched are the test's.
function testing._kube_track(method, path, status, obj)
  local ns = path:match("/namespaces/([^/?]+)/")
  if ns and testing._seen_ns then testing._seen_ns[ns] = true end
  if status ~= 201 or type(obj) ~= "table" or type(obj.metadata) ~= "table" or not obj.metadata.name then
    return
  end
  if method ~= "POST" and method ~= "PATCH" then return end
  local base = strip_query(path)
  local objpath = method == "POST" and (base .. "/" .. obj.metadata.name) or base
  local kind = tostring(obj.apiVersion) .. "/" .. tostring(obj.kind)
  local sess = testing._kube
  if kind == "apiextensions.k8s.io/v1/CustomResourceDefinition" then
    for _, c in ipairs(sess.crds) do if c.path == objpath then return end end
    sess.crds[#sess.crds + 1] = { path = objpath, name = obj.metadata.name }
  elseif obj.metadata.namespace ~= testing._ns and testing._owned then
    testing._owned[#testing._owned + 1] = { path = objpath, kind = kind, name = obj.metadata.name }
    if kind == "v1/Namespace" and testing._seen_ns then testing._seen_ns[obj.metadata.name] = true end
  end
end

-- The items of a list across namespaces that belong to the running test.
function testing._own_items(items, namespace)
  if not testing.kube or namespace or not testing._ns then return items end
  local out = {}
  for _, it in ipairs(items or {}) do
    local ns = type(it.metadata) == "table" and it.metadata.namespace
    if not ns or ns == testing._ns or (testing._seen_ns and testing._seen_ns[ns]) or testing._about_own(it) then
      out[#out + 1] = it
    end
  end
  return out
end

-- An Event about a Namespace this test made: a cluster-scoped object's
-- Events are in the cluster's `default` namespace (as client-go records
-- them), outside the test's own.
function testing._about_own(it)
  local about = type(it.regarding) == "table" and it.regarding or it.involvedObject
  if type(about) ~= "table" or (about.namespace and about.namespace ~= "") then return false end
  return about.kind == "Namespace" and testing._seen_ns ~= nil and testing._seen_ns[about.name] == true
end

-- CRDs first (their kinds must be served before their objects come),
-- then Namespaces, then the rest, each in the order given.
function testing._kube_order(_, objs)
  local function rank(o)
    if o.kind == "CustomResourceDefinition" then return 0 end
    if o.kind == "Namespace" then return 1 end
    return 2
  end
  local idx = {}
  for i, o in ipairs(objs) do idx[o] = i end
  local sorted = {}
  for i, o in ipairs(objs) do sorted[i] = o end
  table.sort(sorted, function(a, b)
    local ra, rb = rank(a), rank(b)
    if ra ~= rb then return ra < rb end
    return idx[a] < idx[b]
  end)
  return sorted
end

-- Waits until a CRD is Established and its kind is in discovery.
function testing._kube_established(env, name)
  local deadline = now() + 60
  while true do
    local crd = env:get("apiextensions.k8s.io/v1/CustomResourceDefinition", name)
    local conds = type(crd) == "table" and type(crd.status) == "table" and crd.status.conditions
    for _, c in ipairs(type(conds) == "table" and conds or {}) do
      if c.type == "Established" and c.status == "True" then
        local v = type(crd.spec.versions) == "table" and crd.spec.versions[1]
        local st = v and env:request("GET", "/apis/" .. crd.spec.group .. "/" .. v.name)
        if not v or st == 200 then
          env.resources = {} -- the kind is served now
          return
        end
      end
    end
    if now() > deadline then error("CRD " .. name .. " not established within 60 s", 0) end
    pause(0.1)
  end
end

-- Deletes (background propagation) and notes it for waiting; false if it
-- was already gone.
local function kube_delete(admin, path)
  local st, obj = admin:_exchange("DELETE", path .. "?propagationPolicy=Background", nil, nil, true)
  if st == 404 then return false end
  if st ~= 200 and st ~= 202 then
    error(("delete %s: HTTP %d %s"):format(path, st, type(obj) == "table" and tostring(obj.message) or ""), 0)
  end
  return true
end

-- Starts the session: the kit's client runtime against KUBECONFIG's
-- cluster.  Returns true, or nil and a message for the user.
function testing._kube_open()
  testing.kube = true
  testing.quiet = tonumber(os.getenv("LUNA_TEST_QUIET") or "") or 0.5
  local dir = tmpdir()
  write_file(dir .. "/luna-test-admin.lua", ADMIN)
  local work = tmpdir()
  local log = work .. "/luna.log"
  local argv = { testing._exe, "run", "--test-control", "--metrics-bind-address=0",
                 "--health-probe-bind-address=0", "--log-level", "info", dir }
  local pid, inp, out = spawn(argv, log)
  local admin = setmetatable({ pid = pid, inp = inp, out = out, buf = "", logfile = log, work = work,
    resources = {}, links = { dir .. "/luna-test-admin.lua", dir }, timeout = 60 }, Env)
  local tag = ("%x%x"):format(os.time() % 0x100000, math.floor((now() % 1) * 0xfffff))
  testing._kube = { admin = admin, run = tag, crds = {}, gone = {}, count = 0 }
  local ok, st, obj = pcall(admin._exchange, admin, "GET", "/version", nil, nil, true)
  if not ok or st ~= 200 then
    local why = not ok and tostring(st):gsub("\n%-%-%- luna log.*", ""):gsub("^[^\n:]*:%d+: ", "")
      :gsub("^request %b{}: ", "") or
      ("HTTP %s %s"):format(tostring(st), type(obj) == "table" and tostring(obj.message) or "")
    local lines = {}
    for l in admin:log():gmatch("[^\n]+") do
      if l:find("ERROR") or l:find("WARN") then lines[#lines + 1] = "  " .. l end
    end
    pcall(testing._kube_close)
    return nil, ("cannot reach the cluster in KUBECONFIG=%s: %s\n%s\nCheck KUBECONFIG, or unset it to " ..
      "use the control plane `make kube` builds."):format(os.getenv("KUBECONFIG") or "",
      why, table.concat(lines, "\n", math.max(1, #lines - 4)))
  end
  testing._kube.version = obj and obj.gitVersion
  -- a cluster that makes each namespace a default ServiceAccount (kube-
  -- controller-manager's): tests wait for it, as Pods need it
  testing._kube.service_accounts =
    admin:_exchange("GET", "/api/v1/namespaces/default/serviceaccounts/default", nil, nil, true) == 200
  return true
end

-- Before a test: its namespace, created and ready (its default
-- ServiceAccount exists, as Pods need).
function testing._kube_begin()
  local sess = testing._kube
  sess.count = sess.count + 1
  local ns = ("luna-test-%s-%d"):format(sess.run, sess.count)
  local admin = sess.admin
  local st, obj = admin:_exchange("POST", "/api/v1/namespaces", assert(json.encode {
    apiVersion = "v1", kind = "Namespace",
    metadata = { name = ns, labels = { ["luna.dev/test-run"] = sess.run } } }), nil, true)
  if st ~= 201 then
    error(("creating the test namespace %s: HTTP %s %s"):format(ns, tostring(st),
      type(obj) == "table" and tostring(obj.message) or ""), 0)
  end
  testing._ns, testing._owned, testing._seen_ns = ns, {}, {}
  local deadline = now() + 10
  while sess.service_accounts and now() < deadline and
        admin:_exchange("GET", "/api/v1/namespaces/" .. ns .. "/serviceaccounts/default", nil, nil, true) ~= 200 do
    pause(0.1)
  end
  return ns
end

-- The finalizers left on objects in namespace ns, removed: the
-- controllers that would remove them were stopped with the test, and
-- nothing else will (the namespace would stay Terminating for ever).
local function strip_finalizers(admin, ns)
  local groups = { "/api/v1" }
  local st, apis = admin:_exchange("GET", "/apis", nil, nil, true)
  if st == 200 then
    for _, g in ipairs(apis.groups or {}) do
      if g.preferredVersion then groups[#groups + 1] = "/apis/" .. g.preferredVersion.groupVersion end
    end
  end
  for _, base in ipairs(groups) do
    local gst, list = admin:_exchange("GET", base, nil, nil, true)
    for _, r in ipairs(gst == 200 and list.resources or {}) do
      local verbs = table.concat(r.verbs or {}, ",")
      if r.namespaced and not r.name:find("/") and verbs:find("list") and verbs:find("patch") then
        local path = base .. "/namespaces/" .. ns .. "/" .. r.name
        local lst, items = admin:_exchange("GET", path, nil, nil, true)
        for _, it in ipairs(lst == 200 and items.items or {}) do
          if type(it.metadata.finalizers) == "table" and #it.metadata.finalizers > 0 then
            admin:_exchange("PATCH", path .. "/" .. it.metadata.name,
              '{"metadata":{"finalizers":null}}', "application/merge-patch+json", true)
          end
        end
      end
    end
  end
end

-- Waits until every path is gone (404); a Namespace still there after
-- `strip_after` seconds has the finalizers of its objects removed once.
-- Returns the paths still there.
local function kube_wait_gone(admin, paths, secs, strip_after)
  local started = now()
  local deadline, stripped = started + secs, {}
  local left = paths
  while #left > 0 do
    local still = {}
    for _, p in ipairs(left) do
      if admin:_exchange("GET", p, nil, nil, true) ~= 404 then
        still[#still + 1] = p
        local ns = p:match("^/api/v1/namespaces/([^/]+)$")
        if ns and not stripped[p] and now() - started >= (strip_after or 10) then
          stripped[p] = true
          strip_finalizers(admin, ns)
        end
      end
    end
    left = still
    if #left == 0 or now() > deadline then break end
    pause(0.25)
  end
  return left
end

-- After a test, while its runtimes still run (so its controllers finish
-- their finalizers): deletes its namespace and what the kit created
-- outside it.  Returns nil, or what went wrong.
function testing._kube_delete()
  local sess = testing._kube
  local ns, owned = testing._ns, testing._owned or {}
  if not ns or testing._deleted then return nil end
  testing._deleted = {}
  local bad = {}
  for i = #owned, 1, -1 do
    local ok, err = pcall(kube_delete, sess.admin, owned[i].path)
    if not ok then bad[#bad + 1] = tostring(err) elseif err then testing._deleted[#testing._deleted + 1] = owned[i].path end
  end
  local ok, err = pcall(kube_delete, sess.admin, "/api/v1/namespaces/" .. ns)
  if not ok then bad[#bad + 1] = tostring(err) end
  sess.gone[#sess.gone + 1] = "/api/v1/namespaces/" .. ns
  if #bad > 0 then return "cleanup: " .. table.concat(bad, "; ") end
  return nil
end

-- After a test (its runtimes stopped): waits until its namespace and
-- what it created outside it are gone, so nothing of it is left for the
-- next test's controllers to see (they watch the whole cluster) and the
-- next test can make the same names.  Returns nil, or what went wrong.
function testing._kube_end()
  local bad = testing._kube_delete()
  local wait = testing._deleted or {}
  if testing._ns then
    local p = "/api/v1/namespaces/" .. testing._ns
    wait[#wait + 1] = p
    local gone = testing._kube.gone
    if gone[#gone] == p then gone[#gone] = nil end
  end
  testing._ns, testing._owned, testing._seen_ns, testing._deleted = nil, nil, nil, nil
  -- the test's controllers are stopped: finalizers still there after a
  -- short while are nobody's
  local left = kube_wait_gone(testing._kube.admin, wait, 120, 2)
  if #left > 0 then
    bad = (bad and bad .. "; " or "cleanup: ") .. table.concat(left, ", ") .. " still there 120 s after it was deleted"
  end
  return bad
end

-- At the end of the run: deletes the CRDs it created, waits until they
-- and every test namespace are gone, stops the kit's runtime.  Returns
-- nil, or what is left behind.
function testing._kube_close()
  local sess = testing._kube
  if not sess then return nil end
  local bad = {}
  local admin = sess.admin
  if not admin.stopped and not admin.died then
    for _, c in ipairs(sess.crds) do
      local ok, err = pcall(kube_delete, admin, c.path)
      if not ok then bad[#bad + 1] = tostring(err) else sess.gone[#sess.gone + 1] = c.path end
    end
    local ok, left = pcall(kube_wait_gone, admin, sess.gone, 180, 20)
    if not ok then bad[#bad + 1] = tostring(left)
    else
      for _, p in ipairs(left) do bad[#bad + 1] = p .. " still there 180 s after it was deleted" end
    end
  end
  admin:stop()
  os.remove(admin.logfile)
  os.remove(admin.work)
  for _, l in ipairs(admin.links) do os.remove(l) end
  testing._kube = nil
  if #bad > 0 then return "cleanup: " .. table.concat(bad, "; ") end
  return nil
end

testing.read_file, testing.write_file = read_file, write_file
return testing
