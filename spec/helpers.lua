-- Shared helpers for the busted specs (loaded through .busted's `helper`).
--
--   helpers.build               the build variant dir (LUNA_BUILD, default build/test)
--   helpers.luna                path of the luna executable under test
--   helpers.run(cmd)            run a shell command: output (stdout+stderr), exit code
--   helpers.spawn(argv, opts)   start a process with its output on a pipe; returns
--                               a Process with :expect(pattern, secs), :lines(),
--                               :kill(sig), :wait(secs), :alive(), .pid
--   helpers.tmpdir()            a fresh directory, removed when the process exits
--   helpers.write_file(p, s), helpers.read_file(p)
--   helpers.eventually(fn, secs, what)   runs the luna loop until fn() is true;
--                               fails the spec with `what` if it never is
local ffi = require("ffi")

local helpers = {}

helpers.build = os.getenv("LUNA_BUILD") or "build/test"
helpers.luna = helpers.build .. "/luna"
helpers.fixtures = helpers.build .. "/fixtures"

pcall(ffi.cdef, [[
typedef int pid_t;
struct luna_pollfd { int fd; short events; short revents; };
int pipe(int fd[2]);
int posix_spawnp(pid_t *pid, const char *file, const void *file_actions,
                 const void *attrp, char *const argv[], char *const envp[]);
int posix_spawn_file_actions_init(void *fa);
int posix_spawn_file_actions_adddup2(void *fa, int fd, int newfd);
int posix_spawn_file_actions_addclose(void *fa, int fd);
int posix_spawn_file_actions_destroy(void *fa);
int kill(pid_t pid, int sig);
pid_t waitpid(pid_t pid, int *status, int options);
int close(int fd);
long read(int fd, void *buf, size_t n);
int poll(struct luna_pollfd *fds, unsigned long nfds, int timeout);
int fcntl(int fd, int cmd, ...);
char *strerror(int errnum);
char *mkdtemp(char *template);
extern char **environ;
int clock_gettime(int clk, void *ts);
]])

local C = ffi.C
local SIGKILL, SIGTERM, WNOHANG, POLLIN = 9, 15, 1, 1
local F_GETFD, F_SETFD, FD_CLOEXEC = 1, 2, 1

-- Runs a command (a string for the shell) with LeakSanitizer reporting
-- rather than aborting, so its output can be checked: output, exit code.
function helpers.run_leak_checked(cmd)
  return helpers.run("ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 " .. cmd)
end

function helpers.run(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"__luna_rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("__luna_rc=(%d+)\n?$"))
  out = out:gsub("__luna_rc=%d+\n?$", "")
  return out, rc
end

local Process = {}
Process.__index = Process

-- One ctype for every call: ffi.new of an anonymous struct declares a new
-- type each time, and LuaJIT's ctype table overflows after ~64k of them.
local timespec_t = ffi.typeof("struct { long s; long ns; }[1]")
local function now()
  local t = timespec_t()
  ffi.C.clock_gettime(1, ffi.cast("void *", t))
  return tonumber(t[0].s) + tonumber(t[0].ns) / 1e9
end
helpers.now = now

-- Builds a NULL-terminated char*[] (kept alive by the returned anchor table).
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

local function environment(overrides)
  local env = {}
  local i = 0
  while C.environ[i] ~= nil do
    local entry = ffi.string(C.environ[i])
    local name = entry:match("^([^=]*)=")
    if name and overrides[name] == nil then env[#env + 1] = entry end
    i = i + 1
  end
  for k, v in pairs(overrides) do
    if v ~= false then env[#env + 1] = k .. "=" .. tostring(v) end
  end
  return env
end

-- opts.env: table of variables to set (false removes one); opts.stderr = false
-- leaves stderr on the spec's terminal instead of the pipe.
function helpers.spawn(argv, opts)
  opts = opts or {}
  local fds = ffi.new("int[2]")
  assert(C.pipe(fds) == 0, "pipe failed")
  C.fcntl(fds[0], F_SETFD, ffi.new("int", FD_CLOEXEC))
  local fa = ffi.new("char[256]")
  C.posix_spawn_file_actions_init(fa)
  C.posix_spawn_file_actions_adddup2(fa, fds[1], 1)
  if opts.stderr ~= false then C.posix_spawn_file_actions_adddup2(fa, fds[1], 2) end
  C.posix_spawn_file_actions_addclose(fa, fds[1])
  local cargv, a1 = cstrings(argv)
  local cenv, a2 = cstrings(environment(opts.env or {}))
  local pid = ffi.new("pid_t[1]")
  local rc = C.posix_spawnp(pid, argv[1], fa, nil, cargv, cenv)
  C.posix_spawn_file_actions_destroy(fa)
  C.close(fds[1])
  local _ = { a1, a2 }
  if rc ~= 0 then
    C.close(fds[0])
    error("spawn " .. argv[1] .. ": " .. ffi.string(C.strerror(rc)))
  end
  local p = setmetatable({ pid = pid[0], fd = fds[0], buf = "", out = {}, argv = argv }, Process)
  helpers._processes[p] = true
  return p
end
-- Strong references: every process a spec started is stopped at exit, even
-- one whose spec lost track of it after a failed assertion.
helpers._processes = {}

-- Reads what is available within `secs`; returns false at end of stream.
function Process:_fill(secs)
  if self.fd < 0 then return false end
  local pfd = ffi.new("struct luna_pollfd[1]")
  pfd[0].fd, pfd[0].events = self.fd, POLLIN
  local n = C.poll(pfd, 1, math.max(0, math.floor(secs * 1000)))
  if n <= 0 then return true end
  local buf = ffi.new("char[8192]")
  local got = tonumber(C.read(self.fd, buf, 8192))
  if got <= 0 then
    C.close(self.fd)
    self.fd = -1
    return false
  end
  self.buf = self.buf .. ffi.string(buf, got)
  return true
end

-- Returns the next complete output line, or nil after secs / end of stream.
function Process:read_line(secs)
  local deadline = now() + (secs or 5)
  while true do
    local line, rest = self.buf:match("^([^\n]*)\n(.*)$")
    if line then
      self.buf = rest
      self.out[#self.out + 1] = line
      return line
    end
    local left = deadline - now()
    if left <= 0 or not self:_fill(left) then
      return nil
    end
  end
end

-- Waits for an output line matching a Lua pattern; returns the line and its
-- captures, or raises with everything read so far.
function Process:expect(pattern, secs)
  local deadline = now() + (secs or 10)
  while true do
    local line = self:read_line(math.max(0, deadline - now()))
    if not line then
      error(string.format("no line matching %q from %s within %ss; output:\n%s",
        pattern, self.argv[1], secs or 10, table.concat(self.out, "\n")), 2)
    end
    if line:find(pattern) then return line, line:match(pattern) end
  end
end

-- Everything read so far plus whatever arrives until end of stream or secs.
function Process:drain(secs)
  local deadline = now() + (secs or 5)
  while self:read_line(math.max(0, deadline - now())) do end
  if self.buf ~= "" then self.out[#self.out + 1] = self.buf; self.buf = "" end
  return table.concat(self.out, "\n")
end

function Process:kill(sig)
  if self.status == nil then C.kill(self.pid, sig or SIGTERM) end
end

-- Waits for exit; returns the exit code (or 128+signal), or nil on timeout.
function Process:wait(secs)
  if self.status ~= nil then return self.status end
  local deadline = now() + (secs or 5)
  local st = ffi.new("int[1]")
  repeat
    local r = C.waitpid(self.pid, st, WNOHANG)
    if r == self.pid then
      local s = st[0]
      if bit.band(s, 0x7f) == 0 then
        self.status = bit.band(bit.rshift(s, 8), 0xff)
      else
        self.status = 128 + bit.band(s, 0x7f)
      end
      return self.status
    end
    self:_fill(0.02)
  until now() > deadline
  return nil
end

function Process:alive()
  return self:wait(0) == nil
end

-- Kills (TERM, then KILL) and reaps; safe to call twice.
function Process:stop()
  if self.status == nil then
    self:kill(SIGTERM)
    if not self:wait(5) then
      self:kill(SIGKILL)
      self:wait(5)
    end
  end
  if self.fd >= 0 then C.close(self.fd); self.fd = -1 end
  return self.status
end

local tmpdirs = {}
function helpers.tmpdir()
  local template = ffi.new("char[?]", 32, "/tmp/luna-spec-XXXXXX")
  assert(C.mkdtemp(template) ~= nil, "mkdtemp failed")
  local dir = ffi.string(template)
  tmpdirs[#tmpdirs + 1] = dir
  return dir
end

function helpers.write_file(path, content)
  local f = assert(io.open(path, "wb"))
  f:write(content)
  f:close()
  return path
end

function helpers.read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

function helpers.eventually(fn, secs, what)
  local core = require("luna.core")
  local ok = core.loop.run_until(fn, secs or 5)
  if not ok then error("timed out waiting for " .. (what or "condition"), 2) end
end

-- Clean up processes and directories when the busted process exits.
helpers._gc = newproxy(true)
getmetatable(helpers._gc).__gc = function()
  for p in pairs(helpers._processes) do pcall(p.stop, p) end
  for _, d in ipairs(tmpdirs) do os.execute("rm -rf '" .. d .. "'") end
end

package.loaded["helpers"] = helpers
return helpers
