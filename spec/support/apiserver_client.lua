-- A small Kubernetes API client for the apiserver specs, over the curl CLI.
--
--   local client = require("support.apiserver_client")  (spec/ is on the Lua path)
--   local srv = client.start{ args = {...} }  -- a dev server (extra flags), or
--                                               the real cluster when KUBECONFIG is set
--   srv.real, srv.url, srv.ns                   -- srv.ns: a throwaway namespace
--   srv:request(method, path, body, opts) -> code, decoded body (or nil), raw, headers
--   srv:watch(path, headers) -> w; w:event(secs) -> decoded event or nil; w:lines(); w:stop()
--   srv:stop()
-- Against a real cluster, `kubectl proxy` carries the credentials and the
-- namespace is deleted by srv:stop().
local helpers = require("helpers")
local cjson = require("cjson")
-- Objects may nest as deep as kube-apiserver accepts (10000 levels,
-- docs/informers.md); lua-cjson's default bound is 1000.
cjson.decode_max_depth(10010)

local client = {}
local Server = {}
Server.__index = Server

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

function client.real()
  local kc = os.getenv("KUBECONFIG")
  return kc ~= nil and kc ~= ""
end

-- Dev-server-only specs say so, with the reason, in busted's output (as
-- pending "dev server only: REASON"), never silently.  In a describe block:
--   if client.dev_only("--history cannot be set on kube-apiserver") then return end
-- Inside an it block (where pending() ends the test):
--   if srv.real then return pending(client.DEV_ONLY .. "reason") end
client.DEV_ONLY = "dev server only: "
function client.dev_only(reason)
  if not client.real() then return false end
  require("busted").pending(client.DEV_ONLY .. reason)
  return true
end

-- opts.args: extra dev-server flags; opts.scheme: "https" (with opts.cacert);
-- opts.dev: a dev server even when KUBECONFIG is set (specs comparing the
-- two); opts.ns: the throwaway namespace's name (default: a random one).
function client.start(opts)
  opts = opts or {}
  local srv = setmetatable({ real = not opts.dev and client.real(), tmp = helpers.tmpdir(),
                             opts = opts }, Server)
  if srv.real then
    srv.proc = helpers.spawn({ "kubectl", "proxy", "--port=0" })
    local _, port = srv.proc:expect("Starting to serve on 127%.0%.0%.1:(%d+)", 20)
    srv.url = "http://127.0.0.1:" .. port
  else
    local argv = { helpers.luna, "dev-server", "--listen", "127.0.0.1:0" }
    for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
    srv.proc = helpers.spawn(argv)
    local _, url = srv.proc:expect("listening on (https?://%S+)", 10)
    srv.url = url
  end
  srv.ns = opts.ns or ("luna-spec-" .. tostring(math.random(100000, 999999)))
  if not opts.no_namespace then
    local code = srv:request("POST", "/api/v1/namespaces",
      { apiVersion = "v1", kind = "Namespace", metadata = { name = srv.ns } })
    assert(code == 201, "cannot create namespace " .. srv.ns .. ": " .. tostring(code))
    if srv.real then srv:await_namespace() end
  end
  return srv
end

-- In a cluster a new namespace is usable once the controller-manager has
-- made its `default` ServiceAccount (Pods are refused until then) and its
-- kube-root-ca.crt ConfigMap, as Kubernetes' own e2e framework waits for.
function Server:await_namespace()
  local deadline = helpers.now() + 60
  for _, path in ipairs({ "/serviceaccounts/default", "/configmaps/kube-root-ca.crt" }) do
    while self:request("GET", "/api/v1/namespaces/" .. self.ns .. path) ~= 200 do
      assert(helpers.now() < deadline, "namespace " .. self.ns .. " has no " .. path ..
        " after 60 s: is kube-controller-manager running?")
      helpers.run("sleep 0.1")
    end
  end
end

-- body: a table (sent as JSON) or a string; opts.content_type, opts.headers
-- (list of "Name: value"), opts.query (already encoded), opts.timeout.
function Server:request(method, path, body, opts)
  opts = opts or {}
  -- curl must not run with the ASan runtime `make test` preloads: it hangs.
  local args = { "env -u LD_PRELOAD curl", "-s", "-S", "-X", method, "--max-time", tostring(opts.timeout or 20),
                 "-D", self.tmp .. "/headers", "-o", self.tmp .. "/body", "-w", "'%{http_code}'" }
  if self.opts.cacert then
    args[#args + 1] = "--cacert " .. shell_quote(self.opts.cacert)
  end
  if body ~= nil then
    local data = type(body) == "string" and body or cjson.encode(body)
    helpers.write_file(self.tmp .. "/req", data)
    args[#args + 1] = "--data-binary @" .. self.tmp .. "/req"
    args[#args + 1] = "-H " .. shell_quote("Content-Type: " .. (opts.content_type or "application/json"))
  end
  for _, h in ipairs(opts.headers or {}) do args[#args + 1] = "-H " .. shell_quote(h) end
  for _, h in ipairs(self.opts.headers or {}) do args[#args + 1] = "-H " .. shell_quote(h) end
  args[#args + 1] = shell_quote(self.url .. path)
  local out = helpers.run(table.concat(args, " "))
  local code = tonumber(out:match("(%d%d%d)%s*$"))
  local raw = helpers.read_file(self.tmp .. "/body") or ""
  local headers = helpers.read_file(self.tmp .. "/headers") or ""
  local ok, decoded = pcall(cjson.decode, raw)
  return code, ok and decoded or nil, raw, headers
end

-- Shortcuts for a namespaced core resource path in the spec's namespace.
function Server:ns_path(res, name, group_version)
  local base = group_version and ("/apis/" .. group_version) or "/api/v1"
  local p = base .. "/namespaces/" .. self.ns .. "/" .. res
  if name then p = p .. "/" .. name end
  return p
end

function Server:create_cm(name, data, labels)
  local code, obj = self:request("POST", self:ns_path("configmaps"), {
    apiVersion = "v1", kind = "ConfigMap",
    metadata = { name = name, labels = labels }, data = data or { k = "v" } })
  assert(code == 201, "create configmap " .. name .. ": " .. tostring(code))
  return obj
end

local Watch = {}
Watch.__index = Watch

-- headers: extra request headers ("Name: value"), for this watch only.
function Server:watch(path, headers)
  local argv = { "env", "-u", "LD_PRELOAD", "curl", "-sN", "--max-time", "30" }
  for _, h in ipairs(headers or {}) do
    argv[#argv + 1] = "-H"
    argv[#argv + 1] = h
  end
  if self.opts.cacert then
    argv[#argv + 1] = "--cacert"
    argv[#argv + 1] = self.opts.cacert
  end
  for _, h in ipairs(self.opts.headers or {}) do
    argv[#argv + 1] = "-H"
    argv[#argv + 1] = h
  end
  argv[#argv + 1] = self.url .. path
  return setmetatable({ proc = helpers.spawn(argv, { stderr = false }) }, Watch)
end

-- The next event (decoded), or nil when none arrives within secs.
function Watch:event(secs)
  local line = self.proc:read_line(secs or 5)
  if not line then return nil end
  local ok, ev = pcall(cjson.decode, line)
  if not ok then return { raw = line } end
  return ev
end

-- Skips events until one satisfies pred; returns it (or nil after secs).
function Watch:until_event(pred, secs)
  local deadline = helpers.now() + (secs or 5)
  while helpers.now() < deadline do
    local ev = self:event(deadline - helpers.now())
    if not ev then return nil end
    if pred(ev) then return ev end
  end
  return nil
end

-- True if the stream ends (curl exits) within secs.
function Watch:ends(secs)
  local deadline = helpers.now() + (secs or 5)
  while helpers.now() < deadline do
    local line = self.proc:read_line(0.2)
    if not line and self.proc.fd < 0 then return true end
  end
  return false
end

function Watch:stop() self.proc:stop() end

-- Returns the exit status of the server (or of kubectl proxy).
function Server:stop()
  if self.stopped then return self.status end
  self.stopped = true
  if not self.opts.no_namespace then
    pcall(self.request, self, "DELETE", "/api/v1/namespaces/" .. self.ns)
  end
  self.status = self.proc:stop()
  return self.status
end

math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16) % 100000)

return client
