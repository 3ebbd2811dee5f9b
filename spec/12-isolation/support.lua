-- Shared by the isolation specs: runs `luna run` on controller files against
-- the dev server (or the cluster in KUBECONFIG) and reads its log.
--
--   support.server()                    a started server (apiserver.client)
--   support.fresh_namespace(srv)        makes srv.ns a new, empty namespace
--   support.stop(srv)                   deletes those namespaces, stops srv
--   support.run(srv, files, args)       `luna run --log-level debug` on a fresh
--                                       directory of files {name = source}
--                                       (`@NS@` in a source is the spec namespace);
--                                       returns the Process
--   support.wait_line(p, parts, secs)   the first line (read already or
--                                       arriving within secs) containing every
--                                       plain substring in parts; raises with
--                                       the output if none does
--   support.lines(p, parts)             every line read so far that contains
--                                       all parts
--   support.load_only(files, args)      `luna run` with no cluster: loads the
--                                       files, then fails; returns the output
--   support.controller(name, body, extra)
--                                       the source of a controller watching the
--                                       spec namespace's ConfigMaps; extra goes
--                                       into the spec table, body into reconcile
--   support.stop_host(p, forbidden)     SIGTERM p and assert it exits 0 and its
--                                       output has none of the forbidden strings
local helpers = require("helpers")
local assert = require("luassert")
local client = require("support.apiserver_client")

local support = {}

-- opts: client.start's (e.g. args for the dev server)
function support.server(opts)
  local srv = client.start(opts)
  srv.namespaces = {}
  return srv
end

-- A namespace of its own for a case.  Names are drawn at random, and a
-- spec file may reseed math.random (busted does not restore it), so a
-- name already taken (409) is drawn again rather than failing the case.
function support.fresh_namespace(srv)
  local ns, code
  for _ = 1, 5 do
    ns = "luna-spec-" .. tostring(math.random(100000, 999999))
    code = srv:request("POST", "/api/v1/namespaces",
      { apiVersion = "v1", kind = "Namespace", metadata = { name = ns } })
    if code ~= 409 then break end
  end
  assert(code == 201, "cannot create namespace " .. ns .. ": " .. tostring(code))
  srv.namespaces[#srv.namespaces + 1] = ns
  srv.ns = ns
  return ns
end

function support.stop(srv)
  for _, ns in ipairs(srv.namespaces) do
    if ns ~= srv.ns then pcall(srv.request, srv, "DELETE", "/api/v1/namespaces/" .. ns) end
  end
  srv:stop()
end

support.kubeconfig = require("support.luna_env").kubeconfig_for

local function write_files(files, ns)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do
    local sub = name:match("^(.*)/[^/]+$")
    if sub then helpers.run("mkdir -p '" .. dir .. "/" .. sub .. "'") end
    helpers.write_file(dir .. "/" .. name, ns and (body:gsub("@NS@", ns)) or body)
  end
  return dir
end

function support.run(srv, files, args)
  local dir = write_files(files, srv.ns)
  local argv = { helpers.luna, "run", "--kubeconfig", support.kubeconfig(srv),
                 "--log-level", "debug", "--metrics-bind-address=0", "--health-probe-bind-address=0" }
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = dir
  local p = helpers.spawn(argv)
  p.dir = dir
  return p
end

local function has_all(line, parts)
  for _, part in ipairs(parts) do
    if not line:find(part, 1, true) then return false end
  end
  return true
end

function support.wait_line(p, parts, secs)
  for _, line in ipairs(p.out) do
    if has_all(line, parts) then return line end
  end
  local deadline = helpers.now() + (secs or 10)
  while true do
    local line = p:read_line(math.max(0, deadline - helpers.now()))
    if not line then
      error(string.format("no line with %s within %ss; output:\n%s",
        table.concat(parts, " + "), secs or 10, table.concat(p.out, "\n")), 2)
    end
    if has_all(line, parts) then return line end
  end
end

function support.lines(p, parts)
  local out = {}
  for _, line in ipairs(p.out) do
    if has_all(line, parts) then out[#out + 1] = line end
  end
  return out
end

-- Loads the files with no reachable cluster: the output of the load.
function support.load_only(files, args)
  local dir = write_files(files)
  -- timeout: a host that hangs on a file fails the spec instead of hanging it
  local cmd = { "timeout", "30", "env", "KUBECONFIG=" .. dir .. "/no-such-kubeconfig",
                helpers.luna, "run", "--metrics-bind-address=0", "--health-probe-bind-address=0" }
  for _, a in ipairs(args or {}) do cmd[#cmd + 1] = a end
  cmd[#cmd + 1] = dir
  local out, rc = helpers.run(table.concat(cmd, " "))
  return out, rc, dir
end

function support.controller(name, body, extra)
  return ([[
local luna = require "luna"
return luna.controller {
  name = %q, watch = { "v1/ConfigMap", namespace = "@NS@" }, %s
  reconcile = function(req)
%s
  end,
}
]]):format(name, extra or "", body)
end

function support.stop_host(p, forbidden)
  p:kill(15)
  local rc = p:wait(20)
  local out = table.concat(p.out, "\n")
  p:stop()
  assert.equal(0, rc, out)
  for _, s in ipairs(forbidden or {}) do assert.is_nil(out:find(s, 1, true), out) end
end

return support
