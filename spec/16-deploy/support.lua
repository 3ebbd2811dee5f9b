-- Shared by the deploy specs: a Dockerfile reader, Makefile variables, dpkg
-- look-ups (which package owns a file, dependency closures), and kustomize
-- output as Lua tables. Nothing here needs a Docker engine or a cluster
-- (06-apply_dry_run talks to the dev server, or to KUBECONFIG's cluster).
local helpers = require("helpers")
local cjson = require("cjson")

local M = {}

-- `make test` runs busted with the ASan runtime preloaded and with make's
-- own variables in the environment; tools started from the specs (make, cc,
-- ldd, kubectl) must not inherit them.
local CLEAN_ENV = "env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS"
  .. " -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES "

function M.quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Runs a shell command in a clean environment: output, exit code.
function M.sh(cmd)
  return helpers.run(CLEAN_ENV .. "sh -c " .. M.quote(cmd))
end

-- Runs a command that must succeed; returns its output.
function M.must(cmd)
  local out, rc = M.sh(cmd)
  if rc ~= 0 then error(("command failed (exit %s): %s\n%s"):format(rc, cmd, out), 2) end
  return out
end

-- Polls fn until it returns a true value (an error counts as not yet) and
-- returns that, reading luna's output meanwhile (proc, a helpers.spawn
-- process, or nil), or raises after secs with what and luna's output.
function M.wait_for(proc, fn, what, secs)
  local deadline = helpers.now() + secs
  repeat
    local ok, v = pcall(fn)
    if ok and v then return v end
    if proc then proc:read_line(0.1) else helpers.run("sleep 0.1") end
  until helpers.now() > deadline
  error("timed out waiting for " .. what .. "\nluna output:\n" .. table.concat(proc and proc.out or {}, "\n"), 3)
end

-- A kubeconfig file for the cluster in $KUBECONFIG that authenticates with
-- `token` instead (a ServiceAccount's, from a TokenRequest): the specs that
-- run luna with only the permissions a role grants.
function M.kubeconfig_with_token(token)
  local cfg = cjson.decode((M.must("kubectl config view --raw --minify -o json")))
  local cluster = cfg.clusters[1].cluster
  local ca = cluster["certificate-authority-data"]
  if not ca and cluster["certificate-authority"] then
    ca = M.must("base64 -w0 " .. M.quote(cluster["certificate-authority"])):gsub("%s+$", "")
  end
  local path = helpers.tmpdir() .. "/kubeconfig"
  helpers.write_file(path, ([[
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "%s", certificate-authority-data: "%s"}}]
users: [{name: sa, user: {token: "%s"}}]
contexts: [{name: c, context: {cluster: c, user: sa}}]
current-context: c
]]):format(cluster.server, ca or "", token))
  return path
end

function M.words(s)
  local list = {}
  for w in s:gmatch("%S+") do list[#list + 1] = w end
  return list
end

function M.set(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

function M.sorted_keys(t)
  local list = {}
  for k in pairs(t) do list[#list + 1] = k end
  table.sort(list)
  return list
end

-- The value of a Makefile variable as make computes it (in dir, default .).
function M.make_var(name, dir)
  local out = M.must(("make -s --no-print-directory -C %s --eval %s print-luna-var-%s"):format(
    M.quote(dir or "."), M.quote("print-luna-var-%: ; @: $(info $($*))"), name))
  return (out:gsub("%s+$", ""))
end

---------------------------------------------------------------------------
-- Dockerfile

-- Splits Dockerfile text into instructions {cmd=, args=, line=}, following
-- the Dockerfile rules the image uses: '#' comment lines (also inside a
-- continued instruction), '\' line continuation, case-insensitive keywords.
function M.parse_dockerfile(text)
  local instructions, cur, start = {}, nil, nil
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:match("^%s*#") or (cur == nil and line:match("^%s*$")) then
      -- comment or blank line
    else
      local continued = line:match("\\%s*$") ~= nil
      local body = continued and line:gsub("\\%s*$", "") or line
      if cur then cur = cur .. " " .. body else cur, start = body, n end
      if not continued then
        local cmd, args = cur:match("^%s*(%S+)%s*(.-)%s*$")
        instructions[#instructions + 1] = { cmd = cmd:upper(), args = args, line = start }
        cur = nil
      end
    end
  end
  if cur then error("Dockerfile ends inside a continued line (line " .. start .. ")") end
  return instructions
end

-- Groups instructions into stages: { from=, name=, instructions={...} }.
function M.stages(instructions)
  local stages = {}
  for _, ins in ipairs(instructions) do
    if ins.cmd == "FROM" then
      local w = M.words(ins.args)
      local image, name = w[1], nil
      if w[2] and w[2]:upper() == "AS" then name = w[3] end
      stages[#stages + 1] = { from = image, name = name, instructions = {}, line = ins.line }
    elseif #stages > 0 then
      local list = stages[#stages].instructions
      list[#list + 1] = ins
    end
  end
  return stages
end

-- The shell commands of a RUN instruction, split at && || ; (none of the
-- image's commands quotes those characters), each as a list of words.
function M.run_commands(args)
  local list = {}
  for part in (args:gsub("&&", "\0"):gsub("||", "\0"):gsub(";", "\0") .. "\0"):gmatch("([^%z]*)%z") do
    local w = M.words(part)
    if #w > 0 then list[#list + 1] = w end
  end
  return list
end

-- Every command of every RUN in a stage, each as a list of words.
function M.stage_commands(stage)
  local list = {}
  for _, ins in ipairs(stage.instructions) do
    if ins.cmd == "RUN" then
      for _, c in ipairs(M.run_commands(ins.args)) do
        c.line = ins.line
        list[#list + 1] = c
      end
    end
  end
  return list
end

-- The packages of the stage's `apt-get install` commands, and the options
-- each was called with: packages (list), installs = { {options=set, line=} }.
function M.apt_installs(stage)
  local packages, installs = {}, {}
  for _, c in ipairs(M.stage_commands(stage)) do
    if c[1] == "apt-get" then
      local install_at
      for i = 2, #c do if c[i] == "install" then install_at = i break end end
      if install_at then
        local options = {}
        for i = 2, #c do
          if c[i]:sub(1, 1) == "-" then options[c[i]] = true
          elseif i > install_at then packages[#packages + 1] = c[i] end
        end
        installs[#installs + 1] = { options = options, line = c.line }
      end
    end
  end
  return packages, installs
end

-- JSON (exec) form of ENTRYPOINT/CMD as a list, or nil for the shell form.
function M.exec_form(args)
  if args:sub(1, 1) ~= "[" then return nil end
  local ok, v = pcall(cjson.decode, args)
  return ok and v or nil
end

---------------------------------------------------------------------------
-- Shared libraries and Debian packages

-- The resolved paths of every shared library `ldd exe` lists.
function M.ldd(exe)
  local out = M.must("ldd " .. M.quote(exe))
  local paths = {}
  for line in out:gmatch("[^\n]+") do
    local path = line:match("=>%s*(/%S+)") or line:match("^%s*(/%S+)%s*%(")
    if line:find("=> not found", 1, true) then
      error("ldd " .. exe .. ": " .. line)
    end
    if path then paths[#paths + 1] = path end
  end
  return paths
end

-- The Debian package owning each path: { [path] = package } (architecture
-- qualifier dropped), and the list of paths no package owns. With merged
-- /usr, dpkg may record /lib/x or /usr/lib/x and tools may print either, and
-- paths may hold "..": so the path as given, with its directory resolved,
-- and (last) with its symlinks resolved are tried, each with both spellings.
function M.owners(paths)
  local owners, missing = {}, {}
  if #paths == 0 then return owners, missing end
  local q = {}
  for _, p in ipairs(paths) do q[#q + 1] = M.quote(p) end
  local resolved = M.must('for p in ' .. table.concat(q, " ")
    .. '; do d=$(readlink -f "$(dirname "$p")"); echo "$d/$(basename "$p")"; readlink -f "$p"; done')
  local lines = {}
  for line in resolved:gmatch("[^\n]+") do lines[#lines + 1] = line end
  assert(#lines == 2 * #paths, "readlink output does not match the paths")

  local candidates, all = {}, {}
  for i, p in ipairs(paths) do
    local list = {}
    for _, x in ipairs({ p, lines[2 * i - 1], lines[2 * i] }) do
      list[#list + 1] = x
      list[#list + 1] = x:match("^/usr/") and x:sub(5) or "/usr" .. x
    end
    candidates[p] = list
    for _, c in ipairs(list) do all[#all + 1] = M.quote(c) end
  end

  local out = M.sh("dpkg-query -S " .. table.concat(all, " ") .. " 2>/dev/null")
  local found = {}
  for line in out:gmatch("[^\n]+") do
    local pkgs, path = line:match("^([^:][^/]-): (/.*)$")
    if pkgs and not line:match("^diversion") then
      found[path] = (pkgs:match("^([^,:]+)"))
    end
  end
  for _, p in ipairs(paths) do
    for _, c in ipairs(candidates[p]) do
      if found[c] then owners[p] = found[c] break end
    end
    if not owners[p] then missing[#missing + 1] = p end
  end
  return owners, missing
end

-- Installed packages: { [name] = { deps = "Pre-Depends, Depends", priority=, essential= } }.
function M.installed()
  local out = M.must([[dpkg-query -W -f '${db:Status-Abbrev}\t${Package}\t${Priority}\t${Essential}\t${Pre-Depends}, ${Depends}\n']])
  local db = {}
  for line in out:gmatch("[^\n]+") do
    local st, pkg, pri, ess, deps = line:match("^(%S+)%s*\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
    if st and st:sub(2, 2) == "i" then
      db[pkg] = { deps = deps, priority = pri, essential = ess == "yes" }
    end
  end
  return db
end

-- Every installed package apt pulls in when installing roots: the closure
-- over Pre-Depends and Depends, taking the first installed alternative of
-- each "a | b". Returns a set.
function M.closure(roots, db)
  db = db or M.installed()
  local seen = {}
  local function visit(p)
    if seen[p] or not db[p] then return end
    seen[p] = true
    for alt in db[p].deps:gmatch("[^,]+") do
      for name in alt:gmatch("[^|]+") do
        name = name:match("^%s*([%w%.%+%-]+)")
        if name and db[name] then visit(name) break end
      end
    end
  end
  for _, r in ipairs(roots) do visit(r) end
  return seen
end

-- What debootstrap's minbase variant installs (the packages of
-- debian:bookworm-slim): Priority required and Essential packages with
-- their dependencies, as installed on this machine.
function M.minbase(db)
  db = db or M.installed()
  local roots = {}
  for p, info in pairs(db) do
    if info.priority == "required" or info.essential then roots[#roots + 1] = p end
  end
  return M.closure(roots, db)
end

---------------------------------------------------------------------------
-- kustomize

-- The controller files in controllers/ (name -> content), in name order;
-- the specs next to them (*_test.lua) are not controllers.
function M.controllers(dir)
  dir = dir or "controllers"
  local files, names = {}, {}
  local out = M.sh("cd " .. M.quote(dir) .. " 2>/dev/null && LC_ALL=C ls -1 -- *.lua 2>/dev/null")
  for name in out:gmatch("[^\n]+") do
    if not name:match("_test%.lua$") then
      names[#names + 1] = name
      files[name] = assert(helpers.read_file(dir .. "/" .. name))
    end
  end
  return files, names
end

-- Controllers to build the ConfigMap from while controllers/ has none yet.
M.SAMPLE_CONTROLLERS = {
  ["alpha.lua"] = 'local luna = require "luna"\n'
    .. 'return luna.controller { name = "alpha", watch = "v1/ConfigMap", reconcile = function() end }\n',
  ["beta-2.lua"] = "-- quotes ' \" and a colon: here\nreturn require('luna').controller {\n"
    .. '  name = "beta", watch = "apps/v1/Deployment", reconcile = function() end }\n',
}

-- deploy/ and controllers/ copied into a new directory, with
-- controllers/kustomization.yaml regenerated by deploy/sync-controllers.sh
-- from the controller files there: the repository's *.lua, or
-- SAMPLE_CONTROLLERS while it has none. Returns the directory and the
-- controller files (name -> content).
function M.tree_with_controllers()
  local dir = helpers.tmpdir()
  M.must(("mkdir -p %s/controllers && cp -R deploy %s/"):format(dir, dir))
  local files = M.controllers()
  if next(files) == nil then files = M.SAMPLE_CONTROLLERS end
  for name, body in pairs(files) do helpers.write_file(dir .. "/controllers/" .. name, body) end
  M.must(("deploy/sync-controllers.sh %s/controllers"):format(dir))
  return dir, files
end

-- `kubectl kustomize dir` as a list of objects (kubectl converts the YAML
-- to JSON offline: `label --local` with a no-op label removal).
function M.kustomize(dir)
  local out, rc = M.sh(("kubectl kustomize %s | kubectl label --local -f - luna-spec-none- -o json")
    :format(M.quote(dir)))
  if rc ~= 0 then error("kubectl kustomize " .. dir .. " failed:\n" .. out, 2) end
  local objects = {}
  -- kubectl prints one indented object after another; each ends with a
  -- closing brace in column 0.
  for chunk in out:gmatch("(\n?{.-\n})") do
    objects[#objects + 1] = cjson.decode(chunk)
  end
  return objects
end

-- Objects of a kind (and name, if given).
function M.find(objects, kind, name)
  local list = {}
  for _, o in ipairs(objects) do
    if o.kind == kind and (name == nil or o.metadata.name == name) then list[#list + 1] = o end
  end
  return list
end

function M.one(objects, kind, name)
  local list = M.find(objects, kind, name)
  assert(#list == 1, ("expected one %s%s, found %d"):format(kind, name and (" " .. name) or "", #list))
  return list[1]
end

return M
