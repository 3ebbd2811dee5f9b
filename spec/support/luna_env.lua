-- Specs that run controllers end to end: an API server (the dev server, or
-- the cluster in KUBECONFIG), a kubeconfig for it, and `luna run` over a
-- directory holding the controller files under test.
--
--   local env = luna_env.start{ controllers = { "controllers/widget.lua" },
--                               seed = { "deploy/crd-widgets.yaml" } }
--   env.srv            the apiserver.client server (env.srv.ns: a throwaway namespace)
--   env.luna           the luna process (helpers.spawn): :expect(pattern)
--   env:wait(fn, secs, what)   polls fn() (which may call env.srv:request) until true
--   env:stop()         SIGTERM luna (asserting a clean exit), stop the server
--
--   luna_env.kubeconfig_for(srv)   a kubeconfig for the server (cached on
--                                  srv; $KUBECONFIG against a real cluster)
--   luna_env.kubeconfig_file(url)  a kubeconfig file for a dev server URL
--
-- The one place specs and benchmarks get a kubeconfig for a server.
local helpers = require("helpers")
local client = require("support.apiserver_client")

local luna_env = {}
local Env = {}
Env.__index = Env

function luna_env.kubeconfig_file(url)
  local path = helpers.tmpdir() .. "/kubeconfig"
  helpers.write_file(path, ([[
apiVersion: v1
kind: Config
clusters: [{name: dev, cluster: {server: "%s"}}]
users: [{name: dev, user: {}}]
contexts: [{name: dev, context: {cluster: dev, user: dev}}]
current-context: dev
]]):format(url))
  return path
end

function luna_env.kubeconfig_for(srv)
  if srv.real then return os.getenv("KUBECONFIG") end
  srv.kubeconfig = srv.kubeconfig or luna_env.kubeconfig_file(srv.url)
  return srv.kubeconfig
end

-- opts.controllers: files to run, or opts.sources: { ["name.lua"] = code };
-- opts.seed: manifests the server needs first (CRDs): --seed for the dev
-- server, kubectl apply for a cluster; opts.args: extra `luna run` flags;
-- opts.server_args: extra dev server flags; opts.env: extra environment;
-- opts.wait: the log line to wait for (default "caches synced"; false: none);
-- opts.prepare(srv): runs once the server is up, before luna starts (the
-- objects its first lists should hold).
function luna_env.start(opts)
  local args = {}
  for _, f in ipairs(opts.seed or {}) do
    args[#args + 1] = "--seed"
    args[#args + 1] = f
  end
  for _, a in ipairs(opts.server_args or {}) do args[#args + 1] = a end
  local srv = client.start{ args = args }
  if srv.real then
    for _, f in ipairs(opts.seed or {}) do
      local out, rc = helpers.run("kubectl apply -f " .. f)
      assert(rc == 0, out)
    end
  end
  if opts.prepare then opts.prepare(srv) end
  local dir = helpers.tmpdir()
  for _, f in ipairs(opts.controllers or {}) do
    helpers.write_file(dir .. "/" .. f:match("[^/]+$"), assert(helpers.read_file(f)))
  end
  for name, code in pairs(opts.sources or {}) do helpers.write_file(dir .. "/" .. name, code) end
  local env = setmetatable({ srv = srv, dir = opts.dir or dir }, Env)
  -- no metrics or probe servers unless asked: specs run side by side
  local argv = { helpers.luna, "run", "--log-level", "debug", "--kubeconfig", luna_env.kubeconfig_for(srv),
                 "--metrics-bind-address=0", "--health-probe-bind-address=0" }
  for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = env.dir
  local penv = { POD_NAME = "luna-spec", KUBECONFIG = false }
  for k, v in pairs(opts.env or {}) do penv[k] = v end
  env.luna = helpers.spawn(argv, { env = penv })
  if opts.wait ~= false then env.luna:expect(opts.wait or "caches synced", 20) end
  return env
end

function Env:wait(fn, secs, what)
  local deadline = helpers.now() + (secs or 10)
  local last
  repeat
    local ok, res = pcall(fn)
    if ok and res then return res end
    last = ok and tostring(res) or res
    self.luna:read_line(0.05)
  until helpers.now() > deadline
  error(("timed out waiting for %s (last: %s)\nluna output:\n%s"):format(
    what or "condition", tostring(last), self.luna:drain(0.2)), 2)
end

-- GETs a path; returns the decoded object or nil when 404.
function Env:get(path)
  local code, obj = self.srv:request("GET", path)
  if code == 404 then return nil end
  assert(code == 200, path .. ": HTTP " .. tostring(code))
  return obj
end

function Env:stop()
  if self.stopped then return end
  self.stopped = true
  self.luna:kill()
  local rc = self.luna:wait(30)
  local out = self.luna:drain(1)
  self.luna:stop()
  self.srv:stop()
  assert(rc == 0, "luna exited " .. tostring(rc) .. "\n" .. out)
  return out
end

return luna_env
