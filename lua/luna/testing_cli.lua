-- `luna test` and `luna stubs` (host/main.c runs main() in a plain LuaJIT
-- state with the full luna.core preloaded).  docs/authoring.md is the
-- user's guide.
--
-- luna test [--kube] [--filter TEXT] [--verbose] [DIR|FILE]...
--   runs every DIR/*_test.lua (default: the current directory) and each
--   FILE.  --kube: against the cluster of KUBECONFIG, else the control
--   plane `make kube` built (started for the run by spec/kube/cluster.sh),
--   each test in a namespace of its own (lua/luna/testing.lua; docs/
--   testing.md "Against a real control plane").  A spec file is either busted-style (describe/it/before_each/
--   after_each/pending, assert.*), a table of fixture cases it returns
--   (run_fixture below), or both (its describe/it tests first).  Every test runs in order; the runtimes a test
--   started are stopped after it.  Prints one line a test, the failures
--   with luna's log, and "N passed, N failed, N pending"; exits 0 when
--   nothing failed, 1 otherwise, 2 on bad usage.
--
-- luna rbac [options] DIR
--   prints the ClusterRole DIR's controllers need (lua/luna/rbac_cli.lua).
--
-- luna stubs DIR
--   writes the LuaLS definitions of the script API and the testing kit
--   (lua/luna/stubs/*.lua, one ---@meta file per module) into DIR.
local testing = require "luna.testing"

local cli = {}

-- Where the runner's report goes: stdout for `luna test`, stderr for
-- `luna rbac` (whose stdout is the role it prints).
cli.report = io.stdout
local function out(...)
  cli.report:write(...)
  cli.report:flush()
end

-- ---- collecting tests ----------------------------------------------------

-- A file's tests: { name, fn, befores = {...}, afters = {...}, pending = why }.
local function collect(chunk_env, run_chunk)
  local tests, stack = {}, { { name = nil, before = {}, after = {} } }
  local function full(name)
    local parts = {}
    for _, b in ipairs(stack) do if b.name then parts[#parts + 1] = b.name end end
    parts[#parts + 1] = name
    return table.concat(parts, " ")
  end
  local function hooks()
    local befores, afters = {}, {}
    for _, b in ipairs(stack) do for _, f in ipairs(b.before) do befores[#befores + 1] = f end end
    for i = #stack, 1, -1 do for _, f in ipairs(stack[i].after) do afters[#afters + 1] = f end end
    return befores, afters
  end
  chunk_env.describe = function(name, fn)
    stack[#stack + 1] = { name = tostring(name), before = {}, after = {} }
    fn()
    stack[#stack] = nil
  end
  chunk_env.context = chunk_env.describe
  chunk_env.it = function(name, fn)
    local befores, afters = hooks()
    tests[#tests + 1] = { name = full(tostring(name)), fn = fn, befores = befores, afters = afters }
  end
  chunk_env.pending = function(name)
    tests[#tests + 1] = { name = full(tostring(name)), pending = "pending" }
  end
  chunk_env.before_each = function(fn) table.insert(stack[#stack].before, fn) end
  chunk_env.after_each = function(fn) table.insert(stack[#stack].after, fn) end
  local returned = run_chunk()
  return tests, returned
end

-- ---- fixture files -------------------------------------------------------

-- A fixture file returns
--   { controllers = {...}, seed = {...}, fake_clock =, args =,   -- as testing.start
--     cases = { { name =, objects = { objects the server starts with },
--                 act = function(env) end,       -- optional, after the first idle
--                 advance = seconds,             -- optional, then steps the clock
--                 expect = { objects = { partial objects },   -- each must exist and contain these fields
--                            absent = { { kind, namespace, name } },
--                            events = { partial Events },     -- each must match a recorded Event
--                            calls = { { method =, path = pattern, body = partial } },
--                            no_calls = true },               -- or: no API call at all
--               }, ... } }
local function kind_of(o) return o.apiVersion .. "/" .. o.kind end

local function check_case(env, expect)
  local A = testing.assert
  for _, want in ipairs(expect.objects or {}) do
    local md = want.metadata or {}
    local have = env:get(kind_of(want), md.namespace or (env:resource(kind_of(want)).namespaced and "default" or nil), md.name)
    A.is_not_nil(have, ("expected %s %s/%s to exist"):format(kind_of(want), tostring(md.namespace), tostring(md.name)))
    local ok, why = testing.contains(have, want)
    if not ok then error(("%s %s: %s"):format(kind_of(want), tostring(md.name), why), 0) end
  end
  for _, a in ipairs(expect.absent or {}) do
    local have = env:get(a[1], a[2], a[3])
    if have then error(("expected %s %s/%s to be absent"):format(a[1], tostring(a[2]), tostring(a[3])), 0) end
  end
  if expect.events then
    local events = env:events()
    for _, want in ipairs(expect.events) do
      local found = false
      for _, e in ipairs(events) do if testing.contains(e, want) then found = true break end end
      if not found then error("no Event matches " .. testing.show(want), 0) end
    end
  end
  if expect.calls or expect.no_calls then
    local calls = env.all_calls or {}
    if expect.no_calls and #calls > 0 then
      error(("expected no API call, got %d: %s %s"):format(#calls, calls[1].method, calls[1].path), 0)
    end
    for _, want in ipairs(expect.calls or {}) do
      local found = false
      for _, c in ipairs(calls) do
        if (not want.method or want.method == c.method) and (not want.path or c.path:find(want.path)) and
           (want.body == nil or testing.contains(c.body, want.body)) and
           (not want.controller or want.controller == c.controller) then
          found = true
          break
        end
      end
      if not found then
        local seen = {}
        for _, c in ipairs(calls) do seen[#seen + 1] = c.method .. " " .. c.path end
        error("no API call matches " .. testing.show(want) .. "; calls: " .. table.concat(seen, ", "), 0)
      end
    end
  end
end

local function fixture_tests(spec, file)
  local tests = {}
  if type(spec.cases) ~= "table" then error(file .. ": a fixture file returns { cases = { ... } }", 0) end
  for i, case in ipairs(spec.cases) do
    local name = tostring(case.name or ("case " .. i))
    tests[#tests + 1] = { name = name, befores = {}, afters = {}, fn = function()
      if case.dev_only then testing.dev_only(case.dev_only) end
      local opts = {}
      for k, v in pairs(spec) do if k ~= "cases" then opts[k] = v end end
      opts.objects = case.objects
      local env = testing.start(opts)
      env:calls() -- what the first reconciles did counts too; keep it in env.all_calls
      if case.act then case.act(env); env:wait_idle() end
      if case.advance then env:advance(case.advance) end
      env:calls()
      if not testing.kube then
        check_case(env, case.expect or {})
        return
      end
      -- a real server's own controllers (garbage collector, Deployments)
      -- run on real time, after luna is idle: expectations are waited for
      local deadline = testing.now() + 90
      while true do
        local ok, err = pcall(check_case, env, case.expect or {})
        if ok then return end
        if testing.now() > deadline then error(err, 0) end
        env:wait_idle()
        env:calls()
      end
    end }
  end
  return tests
end

-- ---- running -------------------------------------------------------------

local function run_test(t, verbose)
  local function tb(e)
    if type(e) == "table" and e.luna_skip then return e end
    return debug.traceback(tostring(e), 2)
  end
  local ok, err = true, nil
  if testing.kube then
    ok, err = xpcall(testing._kube_begin, tb)
  end
  for _, f in ipairs(ok and t.befores or {}) do
    ok, err = xpcall(f, tb)
    if not ok then break end
  end
  if ok then ok, err = xpcall(t.fn, tb) end
  for _, f in ipairs(t.afters) do
    local aok, aerr = xpcall(f, tb)
    if ok and not aok then ok, err = false, aerr end
  end
  if verbose then
    for _, env in ipairs(testing._running) do out("--- luna log ---\n", env:log(), "\n") end
  elseif not ok and not (type(err) == "table" and err.luna_skip) and
         not tostring(err):find("--- luna log", 1, true) then
    for _, env in ipairs(testing._running) do
      err = tostring(err) .. "\n--- luna log (last lines) ---\n" .. env:log(40)
    end
  end
  if testing.kube then
    -- while the runtimes run, so its controllers let go of their
    -- finalizers (kcm's namespace deletion waits for them)
    local dbad = testing._kube_delete()
    for _, env in ipairs(testing._running) do
      if not env.stopped and not env.died then pcall(env.wait_idle, env, 10) end
    end
    if dbad and ok then ok, err = false, dbad end
  end
  local bad = testing._stop_all()
  if ok and bad then ok, err = false, bad end
  if testing.kube then
    -- also after a failure: the test's namespace and what it made go
    local cok, cbad = pcall(testing._kube_end)
    if not cok then cbad = tostring(cbad) end
    if cbad then
      if ok or (type(err) == "table" and err.luna_skip) then ok, err = false, cbad
      else err = tostring(err) .. "\n" .. cbad end
    end
  end
  return ok, err
end

local function list_dir(dir)
  local p = io.popen("ls -1 '" .. dir:gsub("'", "'\\''") .. "' 2>/dev/null")
  local names = {}
  for line in p:lines() do
    if line:match("_test%.lua$") then names[#names + 1] = dir .. "/" .. line end
  end
  p:close()
  table.sort(names)
  return names
end

local function is_dir(path)
  local f = io.open(path .. "/.", "rb")
  if f then f:close() return true end
  return false
end

local function usage(to)
  to:write("usage: luna test [--kube] [--filter TEXT] [--verbose] [DIR|FILE]...\n" ..
    "  runs DIR/*_test.lua (default: .) and each FILE against the real runtime and an\n" ..
    "  embedded dev server (docs/authoring.md); --kube: against a real control plane,\n" ..
    "  KUBECONFIG's or the one `make kube` built, a namespace a test (docs/testing.md)\n" ..
    "       luna stubs DIR\n" ..
    "  writes LuaLS definitions of the script API and the testing kit into DIR\n")
end

local function cmd_test(args)
  local paths, filter, verbose, kube = {}, nil, false, false
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--filter" then
      i = i + 1
      filter = args[i]
      if not filter then usage(io.stderr) return 2 end
    elseif a:match("^%-%-filter=") then
      filter = a:match("^%-%-filter=(.*)")
    elseif a == "--verbose" or a == "-v" then
      verbose = true
    elseif a == "--kube" then
      kube = true
    elseif a == "--help" or a == "-h" then
      usage(io.stdout)
      return 0
    elseif a:sub(1, 1) == "-" then
      io.stderr:write("luna test: unknown option ", a, "\n")
      usage(io.stderr)
      return 2
    else
      paths[#paths + 1] = (a:gsub("/+$", ""))
    end
    i = i + 1
  end
  if #paths == 0 then paths = { "." } end
  if kube and (os.getenv("KUBECONFIG") or "") == "" then return cli.with_local_cluster(args) end
  return cli.run_paths(paths, filter, verbose, kube)
end

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

-- spec/kube/cluster.sh of luna's source tree: beside the executable
-- (build/luna, build/test/luna) or above the current directory.
local function find_cluster_sh()
  local starts = { (testing._exe or ""):match("^(.*)/[^/]*$") or ".", "." }
  for _, start in ipairs(starts) do
    local dir = start
    for _ = 1, 4 do
      if exists(dir .. "/spec/kube/cluster.sh") and exists(dir .. "/spec/kube/build.sh") then
        return dir .. "/spec/kube"
      end
      dir = dir .. "/.."
    end
  end
  return nil
end

-- No KUBECONFIG: the control plane `make kube` built, started for this
-- run by cluster.sh (which stops it after, Ctrl-C included) with this same
-- command inside; or a clear error saying how to get a cluster.
function cli.with_local_cluster(args)
  local kube_dir = find_cluster_sh()
  local bins
  if kube_dir then
    local p = io.popen(sh_quote(kube_dir .. "/build.sh") .. " --print-dir 2>/dev/null")
    bins = p:read("*l")
    p:close()
  end
  if not (bins and bins ~= "" and exists(bins .. "/complete")) then
    io.stderr:write("luna test --kube: no cluster to run against: KUBECONFIG is not set",
      kube_dir and (", and the control plane `make kube` builds is not built" ..
        (bins and bins ~= "" and (" (no " .. bins .. "/complete)") or "")) or
        ", and there is no control plane of luna's source tree (spec/kube/cluster.sh) beside " ..
        tostring(testing._exe),
      ".\nSet KUBECONFIG to a cluster's kubeconfig, or run `make kube` in luna's source tree " ..
      "(it builds kube-apiserver, etcd and kube-controller-manager; luna test --kube then starts them).\n")
    return 2
  end
  local cmd = { sh_quote(kube_dir .. "/cluster.sh"), "run", "--", sh_quote(testing._exe), "test", "--kube" }
  for _, a in ipairs(args) do
    if a ~= "--kube" then cmd[#cmd + 1] = sh_quote(a) end
  end
  out("luna test --kube: no KUBECONFIG: starting the control plane `make kube` built (", bins, ")\n")
  local r1, _, r3 = os.execute(table.concat(cmd, " "))
  local code = type(r1) == "number" and r1 or r3
  if type(code) ~= "number" then return r1 and 0 or 1 end
  if code >= 256 then code = math.floor(code / 256) end
  return code
end

-- Runs the specs of paths (directories and files) as `luna test` does;
-- returns its exit status.
function cli.run_paths(paths, filter, verbose, kube)
  local files = {}
  for _, p in ipairs(paths) do
    if is_dir(p) then
      for _, f in ipairs(list_dir(p)) do files[#files + 1] = f end
    elseif io.open(p, "rb") then
      files[#files + 1] = p
    else
      io.stderr:write("luna test: ", p, ": no such file or directory\n")
      return 2
    end
  end
  if #files == 0 then
    io.stderr:write("luna test: no *_test.lua files in ", table.concat(paths, ", "), "\n")
    return 2
  end
  if kube then
    local ok, why = testing._kube_open()
    if not ok then
      io.stderr:write("luna test --kube: ", why, "\n")
      return 2
    end
    out("luna test --kube: ", os.getenv("KUBECONFIG") or "", " (", tostring(testing._kube.version),
        "); a namespace luna-test-", testing._kube.run, "-N a test\n")
  end
  local passed, failed, pending, failures = 0, 0, 0, {}
  for _, file in ipairs(files) do
    out(file, "\n")
    testing._dir = file:match("^(.*)/[^/]*$") or "."
    local chunk, lerr = loadfile(file)
    local tests
    if chunk then
      -- one run of the chunk: its describe/it calls and its return value
      local env = setmetatable({ assert = testing.assert, testing = testing }, { __index = _G })
      setfenv(chunk, env)
      local cok, t, returned = pcall(collect, env, chunk)
      if not cok then
        lerr = t
      elseif type(returned) == "table" and (#t == 0 or returned.cases ~= nil) then
        -- fixture cases, after the file's describe/it tests if it has both
        local fok, ft = pcall(fixture_tests, returned, file)
        if fok then
          for _, f in ipairs(ft) do t[#t + 1] = f end
          tests = t
        else
          lerr = ft
        end
      else
        tests = t
      end
    end
    if not tests then
      failed = failed + 1
      out("  FAIL  (loading) ", tostring(lerr), "\n")
      failures[#failures + 1] = file .. ": " .. tostring(lerr)
    else
      for _, t in ipairs(tests) do
        if filter and not t.name:find(filter, 1, true) then
          -- skipped by --filter
        elseif t.pending then
          pending = pending + 1
          out("  pend  ", t.name, "\n")
        else
          local started = testing.now()
          local ok, err = run_test(t, verbose)
          local secs = testing.now() - started
          if ok then
            passed = passed + 1
            out(("  ok    %s (%.1f s)\n"):format(t.name, secs))
          elseif type(err) == "table" and err.luna_skip then
            pending = pending + 1
            out(("  skip  %s (%s)\n"):format(t.name, err.luna_skip))
          else
            failed = failed + 1
            out(("  FAIL  %s (%.1f s)\n"):format(t.name, secs))
            failures[#failures + 1] = file .. ": " .. t.name .. "\n" .. tostring(err)
          end
        end
      end
    end
  end
  if kube then
    local bad = testing._kube_close()
    if bad then
      failed = failed + 1
      failures[#failures + 1] = "after the run: " .. bad
    end
  end
  if #failures > 0 then
    out("\nFailures:\n")
    for _, f in ipairs(failures) do out("\n", f, "\n") end
  end
  out(("\n%d passed, %d failed, %d pending\n"):format(passed, failed, pending))
  return failed == 0 and 0 or 1
end

local function cmd_stubs(args, lib)
  if #args ~= 1 or args[1]:sub(1, 1) == "-" then
    local help = args[1] == "--help" or args[1] == "-h"
    usage(help and io.stdout or io.stderr)
    return help and 0 or 2
  end
  local dir = args[1]
  local src_dir = lib .. "/luna/stubs"
  local names = {}
  local p = io.popen("ls -1 '" .. src_dir:gsub("'", "'\\''") .. "' 2>/dev/null")
  for line in p:lines() do if line:match("%.lua$") then names[#names + 1] = line end end
  p:close()
  if #names == 0 then
    io.stderr:write("luna stubs: no definitions in ", src_dir, ": reinstall luna\n")
    return 2
  end
  os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "'")
  for _, name in ipairs(names) do
    local body = testing.read_file(src_dir .. "/" .. name)
    local f, err = io.open(dir .. "/" .. name, "wb")
    if not (body and f) then
      io.stderr:write("luna stubs: ", tostring(err or name), "\n")
      return 2
    end
    f:write(body)
    f:close()
  end
  out(("wrote %d definition files to %s\n"):format(#names, dir),
      "add it to workspace.library in your .luarc.json (runtime.version: LuaJIT)\n")
  return 0
end

-- exe: the luna executable; lib: the Lua library directory; args[1] is
-- "test", "stubs" or "rbac".  Returns the exit status.
function cli.main(exe, lib, args)
  testing._exe = exe
  testing._lib = lib -- the webhooks of a directory (Env:register_webhooks, admit's errors)
  local cmd = table.remove(args, 1)
  if cmd == "stubs" then return cmd_stubs(args, lib) end
  if cmd == "rbac" then return require("luna.rbac_cli").main(cli, lib, args) end
  if cmd == "webhooks" then return require("luna.webhooks_cli").main(cli, lib, args) end
  return cmd_test(args)
end

return cli
