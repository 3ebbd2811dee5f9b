-- The container suite's harness: the image run as the Deployment in deploy/
-- runs it, against an API server the containers reach as pods reach
-- theirs.
--
--   C.skip_reason()            nil, or why the suite cannot run here (no
--                              Docker engine, no image)
--   local api = C.apiserver()  the API server: the dev server (default) or,
--                              when KUBECONFIG is set, that cluster; a
--                              throwaway namespace (api.ns), a Docker
--                              network, and a relay on the network's
--                              gateway that containers reach as
--                              kubernetes.default.svc:443-like
--                              KUBERNETES_SERVICE_HOST/PORT
--     api:request(method, path, body) -> code, decoded, raw (admin, from the host)
--     api:create_cm(name, data, labels), api.real, api.kind
--     api:slow(on)             the relay delays every answer (3 s) or stops
--     api.scrapers             tokens allowed / denied to scrape /metrics
--                              (support.scrapers)
--     api:stop()               removes containers, network, namespace, server
--   local cm = C.configmap(files)    a directory laid out as the kubelet lays
--                              out a ConfigMap volume; cm:update(files) swaps it
--                              as the kubelet does
--   local pod = C.pod(api, cm, opts) the Deployment's container as `docker
--                              run` flags (C.pod_spec() reads deploy/);
--                              opts.name, opts.args (replace/add flags), opts.start=false
--     pod:await(pattern, secs) a log line (text of the JSON message) matching
--     pod:records(msg)         decoded JSON log lines with that message
--     pod:ip(), pod:http(port, path) -> code, body (over the container network)
--     pod:stop() -> exit code, seconds;  pod:kill();  pod:disconnect()
--     pod:exit_code(), pod:running()
local helpers = require("helpers")
local client = require("support.apiserver_client")
local scrapers = require("support.scrapers")
local deploy = require("16-deploy.support")
local cjson = require("cjson")
local exposition = require("support.exposition")

local C = {}

local q = deploy.quote
C.quote = q

-- Runs a command outside the ASan preload: output, exit code.
function C.sh(cmd) return deploy.sh(cmd) end

function C.must(cmd)
  local out, rc = C.sh(cmd)
  if rc ~= 0 then error(("command failed (exit %s): %s\n%s"):format(rc, cmd, out), 2) end
  return out
end

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

C.image = os.getenv("LUNA_IMAGE")
if not C.image or C.image == "" then
  C.image = "luna:" .. deploy.make_var("VERSION")
end

-- Why the suite cannot run here, or nil.
function C.skip_reason()
  local out, rc = C.sh("docker version --format '{{.Server.Version}}'")
  if rc ~= 0 then
    return "no Docker engine reachable (`docker version` failed: " .. trim(out):gsub("\n", " ") .. ")"
  end
  local _, irc = C.sh("docker image inspect " .. q(C.image))
  if irc ~= 0 then return "image " .. C.image .. " not built (run `make image`)" end
  return nil
end

local function rand_hex(n)
  local t = {}
  for i = 1, n do t[i] = ("%x"):format(math.random(0, 15)) end
  return table.concat(t)
end

-- Everything made by this process, removed at exit even after a failure.
local cleanup = { containers = {}, networks = {} }
cleanup.gc = newproxy(true)
getmetatable(cleanup.gc).__gc = function()
  for name in pairs(cleanup.containers) do C.sh("docker rm -f " .. q(name) .. " >/dev/null 2>&1") end
  for name in pairs(cleanup.networks) do C.sh("docker network rm " .. q(name) .. " >/dev/null 2>&1") end
end

---------------------------------------------------------------------------
-- TLS material for the dev server: a CA and a serving certificate for the
-- names containers and the host use.

local SERVICE_NAME = "kubernetes.default.svc"

local function make_certs(dir)
  C.must(([[cd %s && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=luna-ct-ca \
      -keyout ca.key -out ca.crt 2>/dev/null \
    && openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout tls.key -out tls.csr 2>/dev/null \
    && printf 'subjectAltName=DNS:%s,DNS:localhost,IP:127.0.0.1\n' >ext \
    && openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile ext -out tls.crt 2>/dev/null]]):format(q(dir), SERVICE_NAME))
  return dir .. "/ca.crt", dir .. "/tls.crt", dir .. "/tls.key"
end

---------------------------------------------------------------------------
-- The API server

local Api = {}
Api.__index = Api

local function relay_bin()
  local b = os.getenv("LUNA_BUILD") or "build"
  return b .. "/fixtures/tcp_relay"
end

-- The real cluster's server URL and CA file from KUBECONFIG.
local function real_server(dir)
  local raw = C.must("kubectl config view --raw --minify -o json")
  local cfg = cjson.decode(raw)
  local cluster = cfg.clusters[1].cluster
  local ca = dir .. "/ca.crt"
  if cluster["certificate-authority-data"] then
    C.must(("printf %%s %s | base64 -d > %s"):format(q(cluster["certificate-authority-data"]), q(ca)))
  elseif cluster["certificate-authority"] then
    C.must(("cp %s %s"):format(q(cluster["certificate-authority"]), q(ca)))
  else
    error("KUBECONFIG's cluster has no certificate authority: the in-cluster path needs ca.crt")
  end
  return cluster.server, ca
end

-- The DNS names in the server certificate at host:port.
local function cert_dns_names(hostport)
  local out = C.sh(("echo | openssl s_client -connect %s 2>/dev/null | openssl x509 -noout -ext subjectAltName")
    :format(q(hostport)))
  local names = {}
  for n in out:gmatch("DNS:([^,%s]+)") do names[#names + 1] = n end
  return names
end

function C.apiserver(opts)
  opts = opts or {}
  local api = setmetatable({ tmp = helpers.tmpdir(), pods = {} }, Api)
  local upstream
  if client.real() then
    api.real, api.kind = true, "kube-apiserver"
    api.srv = client.start()
    local server
    server, api.ca = real_server(api.tmp)
    local host, port = server:match("^https://([^/:]+):(%d+)")
    assert(host, "KUBECONFIG server " .. server .. " is not https://HOST:PORT")
    if host == "localhost" then host = "127.0.0.1" end
    assert(host:match("^%d+%.%d+%.%d+%.%d+$"), "KUBECONFIG server host must be an IPv4 address: " .. server)
    upstream = host .. ":" .. port
    local names = cert_dns_names(upstream)
    local ok = false
    for _, n in ipairs(names) do if n == SERVICE_NAME then ok = true end end
    assert(ok, ("the API server's certificate names %s, not %s: containers reach it by that name")
      :format(table.concat(names, ","), SERVICE_NAME))
  else
    api.kind = "dev-server"
    local ca, crt, key = make_certs(api.tmp)
    api.ca = ca
    local admin = rand_hex(32)
    api.srv = client.start{ args = { "--tls-cert", crt, "--tls-key", key, "--token", admin },
      cacert = ca, headers = { "Authorization: Bearer " .. admin } }
    upstream = api.srv.url:match("^https://(.*)$")
  end
  api.ns = api.srv.ns
  api:grant_service_account()
  -- who may scrape /metrics (and who may not), as a cluster makes them
  api.scrapers = scrapers.make(api.srv)
  -- a network of our own: `docker network disconnect` cuts one replica off
  api.network = "luna-ct-" .. rand_hex(8)
  C.must("docker network create " .. q(api.network) .. " >/dev/null")
  cleanup.networks[api.network] = true
  api.gateway = trim(C.must(("docker network inspect -f '{{(index .IPAM.Config 0).Gateway}}' %s")
    :format(q(api.network))))
  api.relay = helpers.spawn({ relay_bin(), api.gateway .. ":0", upstream })
  local _, port = api.relay:expect("relay listening on [%d.]+:(%d+)", 10)
  api.port = port
  api.service_host = SERVICE_NAME
  return api
end

-- A ServiceAccount "luna" in the namespace and a token for it from the
-- TokenRequest API, as the kubelet gets the pod's; on a cluster, RBAC for
-- what the spec controllers, leader election and secure metrics need (the
-- dev server authorizes nothing, but authenticates only tokens it knows).
function Api:grant_service_account()
  local ns = self.srv.ns
  if not self.real then
    local code = self:request("POST", self:ns_path("serviceaccounts"),
      { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = "luna" } })
    assert(code == 201, "create serviceaccount luna: " .. tostring(code))
    self.token = self:issue_token("luna")
    return
  end
  self.review_role = "luna-ct-review-" .. ns
  local manifest = ([[
apiVersion: v1
kind: ServiceAccount
metadata: {name: luna, namespace: %s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: luna-ct, namespace: %s}
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: luna-ct, namespace: %s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: luna-ct}
subjects: [{kind: ServiceAccount, name: luna, namespace: %s}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %s}
rules:
- apiGroups: ["authentication.k8s.io"]
  resources: ["tokenreviews"]
  verbs: ["create"]
- apiGroups: ["authorization.k8s.io"]
  resources: ["subjectaccessreviews"]
  verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %s}
subjects: [{kind: ServiceAccount, name: luna, namespace: %s}]
]]):format(ns, ns, ns, ns, self.review_role, self.review_role, self.review_role, ns)
  local f = helpers.write_file(self.tmp .. "/sa.yaml", manifest)
  C.must("kubectl apply -f " .. q(f))
  self.token = self:issue_token("luna")
end

-- A token for the ServiceAccount `name` from the TokenRequest API.
function Api:issue_token(name)
  local code, tr, raw = self:request("POST", self:ns_path("serviceaccounts", name) .. "/token",
    { apiVersion = "authentication.k8s.io/v1", kind = "TokenRequest", spec = { expirationSeconds = 7200 } })
  assert(code == 201, "TokenRequest for " .. name .. ": " .. tostring(code) .. " " .. tostring(raw))
  return tr.status.token
end

function Api:request(method, path, body, opts) return self.srv:request(method, path, body, opts) end
function Api:create_cm(name, data, labels) return self.srv:create_cm(name, data, labels) end
function Api:ns_path(...) return self.srv:ns_path(...) end

-- The relay delays every answer by 3 s (on) or no longer (off).
function Api:slow(on)
  self.relay:kill(on and 10 or 12) -- SIGUSR1 / SIGUSR2
  self.relay:expect("relay delay " .. (on and "on" or "off"), 5)
end

function Api:stop()
  for _, p in ipairs(self.pods) do p:remove() end
  self.pods = {}
  if self.network then
    C.sh("docker network rm " .. q(self.network) .. " >/dev/null 2>&1")
    cleanup.networks[self.network] = nil
  end
  if self.relay then self.relay:stop() end
  if self.scrapers then self.scrapers:remove() end
  if self.review_role and self.srv then
    pcall(self.srv.request, self.srv, "DELETE",
      "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/" .. self.review_role)
    pcall(self.srv.request, self.srv, "DELETE",
      "/apis/rbac.authorization.k8s.io/v1/clusterroles/" .. self.review_role)
  end
  if self.srv then self.srv:stop() end
end

-- The service-account directory a pod gets: token, ca.crt, namespace.
function Api:service_account_dir()
  local dir = helpers.tmpdir()
  C.must("chmod 755 " .. q(dir))
  helpers.write_file(dir .. "/token", self.token)
  helpers.write_file(dir .. "/namespace", self.ns)
  C.must(("cp %s %s/ca.crt && chmod 644 %s/*"):format(q(self.ca), q(dir), q(dir)))
  return dir
end

---------------------------------------------------------------------------
-- A ConfigMap volume as the kubelet writes it (pkg/volume/util's
-- AtomicWriter): the files in a timestamped directory "..YYYY_MM_DD_HH_MM_SS.N",
-- "..data" a symlink to it, and each key a symlink "key -> ..data/key".
-- An update writes a new timestamped directory, adds links for new keys,
-- points "..data_tmp" at the new directory and renames it over "..data",
-- removes the links of keys that are gone, then the old directory.

local ConfigMap = {}
ConfigMap.__index = ConfigMap

local seq = 0
local function ts_name()
  seq = seq + 1
  return os.date("!..%Y_%m_%d_%H_%M_%S.") .. ("%09d"):format(math.random(0, 999999) * 1000 + seq % 1000)
end

function C.configmap(files)
  local cm = setmetatable({ dir = helpers.tmpdir(), keys = {} }, ConfigMap)
  C.must("chmod 755 " .. q(cm.dir))
  cm:update(files)
  return cm
end

function ConfigMap:update(files)
  local dir = self.dir
  local old = C.sh("readlink " .. q(dir .. "/..data") .. " 2>/dev/null")
  old = trim(old)
  local ts = ts_name()
  C.must(("mkdir %s && chmod 755 %s"):format(q(dir .. "/" .. ts), q(dir .. "/" .. ts)))
  for name, body in pairs(files) do
    helpers.write_file(dir .. "/" .. ts .. "/" .. name, body)
    C.must("chmod 644 " .. q(dir .. "/" .. ts .. "/" .. name))
  end
  for name in pairs(files) do
    if not self.keys[name] then C.must(("ln -s %s %s"):format(q("..data/" .. name), q(dir .. "/" .. name))) end
  end
  C.must(("ln -s %s %s && mv -T %s %s"):format(q(ts), q(dir .. "/..data_tmp"), q(dir .. "/..data_tmp"),
    q(dir .. "/..data")))
  for name in pairs(self.keys) do
    if files[name] == nil then C.must("rm " .. q(dir .. "/" .. name)) end
  end
  if old ~= "" then C.must("rm -rf " .. q(dir .. "/" .. old)) end
  self.keys = {}
  for name in pairs(files) do self.keys[name] = true end
  self.ts = ts
end

---------------------------------------------------------------------------
-- The Deployment's pod, read from deploy/ (kubectl kustomize), as docker
-- run flags.

local pod_spec_cache
function C.pod_spec()
  if pod_spec_cache then return pod_spec_cache end
  local dir = deploy.tree_with_controllers()
  local objects = deploy.kustomize(dir .. "/deploy")
  local d = deploy.one(objects, "Deployment", "luna")
  pod_spec_cache = { deployment = d, pod = d.spec.template.spec, container = d.spec.template.spec.containers[1] }
  return pod_spec_cache
end

local function volume(pod, name)
  for _, v in ipairs(pod.volumes or {}) do if v.name == name then return v end end
end

-- "64Mi" -> bytes
local function quantity(s)
  local n, unit = tostring(s):match("^(%d+)(%a*)$")
  local mult = { [""] = 1, Ki = 1024, Mi = 1024 ^ 2, Gi = 1024 ^ 3, k = 1e3, M = 1e6, G = 1e9 }
  assert(n and mult[unit], "quantity " .. tostring(s))
  return math.floor(tonumber(n) * mult[unit])
end
C.quantity = quantity

-- Flag name of "--name=value" / "--name".
local function flag_name(a) return a:match("^(%-%-[^=]+)") end

local Pod = {}
Pod.__index = Pod

-- opts.name, opts.args: flags that replace the Deployment's flag of the
-- same name or are added (a value false drops it: { ["--watch"] = false }
-- as a map, or a list of "--flag=value"); opts.start = false: only build.
function C.pod(api, cm, opts)
  opts = opts or {}
  local spec = C.pod_spec()
  local pod, ctr = spec.pod, spec.container
  local name = opts.name or ("luna-ct-" .. rand_hex(6))
  local uid = ("%s-%s-4%s-8%s-%s"):format(rand_hex(8), rand_hex(4), rand_hex(3), rand_hex(3),
                                         rand_hex(12))
  local env = { POD_NAME = name, POD_NAMESPACE = api.ns,
                KUBERNETES_SERVICE_HOST = api.service_host, KUBERNETES_SERVICE_PORT = api.port }
  local envs = {}
  for _, e in ipairs(ctr.env or {}) do
    local field = e.valueFrom and e.valueFrom.fieldRef and e.valueFrom.fieldRef.fieldPath
    if field == "metadata.name" then envs[#envs + 1] = { e.name, name }
    elseif field == "metadata.namespace" then envs[#envs + 1] = { e.name, api.ns }
    elseif field == "metadata.uid" then envs[#envs + 1] = { e.name, uid }
    elseif e.value then envs[#envs + 1] = { e.name, e.value }
    else error("pod env " .. e.name .. ": only fieldRef metadata.name/namespace/uid and values are emulated") end
    env[e.name] = envs[#envs][2]
  end
  -- args: $(VAR) expanded from the container's env, as the kubelet does
  local args = {}
  for _, a in ipairs(ctr.args or {}) do
    args[#args + 1] = a:gsub("%$%(([%w_]+)%)", function(v) return env[v] or ("$(" .. v .. ")") end)
  end
  local positional = table.remove(args) -- the controllers directory comes last
  assert(positional and not positional:match("^%-"), "the Deployment's last arg must be the controllers directory")
  local overrides, order = {}, {}
  for k, v in pairs(opts.args or {}) do
    if type(k) == "number" then
      local fname = flag_name(v)
      overrides[fname] = v
      order[#order + 1] = fname
    else
      overrides[k] = v
      order[#order + 1] = k
    end
  end
  table.sort(order)
  local final, seen = {}, {}
  for _, a in ipairs(args) do
    local fname = flag_name(a)
    if fname and overrides[fname] ~= nil then
      if overrides[fname] then final[#final + 1] = overrides[fname] end
      seen[fname] = true
    else
      final[#final + 1] = a
    end
  end
  for _, fname in ipairs(order) do
    if not seen[fname] and overrides[fname] then final[#final + 1] = overrides[fname] end
  end
  final[#final + 1] = positional

  local psc, csc = pod.securityContext or {}, ctr.securityContext or {}
  local function eff(f) if csc[f] ~= nil then return csc[f] end return psc[f] end
  local flags = { "docker", "run", "-d", "--name", name, "--hostname", name, "--network", api.network,
                  "--add-host", api.service_host .. ":" .. api.gateway }
  local user, group = eff("runAsUser"), eff("runAsGroup")
  assert(user, "the Deployment sets no runAsUser")
  flags[#flags + 1] = "--user=" .. user .. (group and (":" .. group) or "")
  if eff("readOnlyRootFilesystem") then flags[#flags + 1] = "--read-only" end
  if csc.allowPrivilegeEscalation == false then flags[#flags + 1] = "--security-opt=no-new-privileges" end
  for _, cap in ipairs((csc.capabilities or {}).drop or {}) do flags[#flags + 1] = "--cap-drop=" .. cap end
  for _, cap in ipairs((csc.capabilities or {}).add or {}) do flags[#flags + 1] = "--cap-add=" .. cap end
  local limits = (ctr.resources or {}).limits or {}
  if limits.memory then flags[#flags + 1] = "--memory=" .. quantity(limits.memory) end
  if limits.cpu then error("a CPU limit is not emulated") end
  for _, m in ipairs(ctr.volumeMounts or {}) do
    local v = assert(volume(pod, m.name), "volume " .. m.name)
    if v.configMap then
      flags[#flags + 1] = ("--volume=%s:%s:ro"):format(cm.dir, m.mountPath)
    elseif v.emptyDir then
      local size = v.emptyDir.sizeLimit and (",size=" .. quantity(v.emptyDir.sizeLimit)) or ""
      flags[#flags + 1] = ("--tmpfs=%s:rw,nosuid,nodev,mode=1777%s"):format(m.mountPath, size)
    else
      error("volume " .. m.name .. ": only configMap and emptyDir are emulated")
    end
  end
  if pod.automountServiceAccountToken ~= false then
    flags[#flags + 1] = ("--volume=%s:/var/run/secrets/kubernetes.io/serviceaccount:ro")
      :format(api:service_account_dir())
  end
  for _, kv in ipairs(envs) do flags[#flags + 1] = "--env=" .. kv[1] .. "=" .. kv[2] end
  flags[#flags + 1] = "--env=KUBERNETES_SERVICE_HOST=" .. api.service_host
  flags[#flags + 1] = "--env=KUBERNETES_SERVICE_PORT=" .. api.port
  flags[#flags + 1] = C.image
  for _, a in ipairs(final) do flags[#flags + 1] = a end

  local p = setmetatable({ name = name, api = api, flags = flags, args = final,
                           grace = pod.terminationGracePeriodSeconds or 30, lines = {} }, Pod)
  api.pods[#api.pods + 1] = p
  if opts.start ~= false then p:start() end
  return p
end

function Pod:start()
  local cmd = {}
  for _, f in ipairs(self.flags) do cmd[#cmd + 1] = q(f) end
  cleanup.containers[self.name] = true
  C.must(table.concat(cmd, " "))
  self.log = helpers.spawn({ "docker", "logs", "-f", self.name })
end

-- Reads what the container logged so far (non-blocking).
-- (read_line needs a positive wait to look at the pipe at all.)
function Pod:pump(secs)
  local wait = math.max(secs or 0, 0.005)
  while true do
    local line = self.log:read_line(wait)
    if not line then break end
    local ok, rec = pcall(cjson.decode, line)
    self.lines[#self.lines + 1] = ok and type(rec) == "table" and rec or { msg = line, raw = true }
    wait = 0.005
  end
end

-- A record as text: "msg k=v ..." (sorted keys), what patterns match.
local function text(rec)
  if rec.raw then return rec.msg end
  local keys = {}
  for k in pairs(rec) do if k ~= "msg" and k ~= "ts" and k ~= "level" then keys[#keys + 1] = k end end
  table.sort(keys)
  local parts = { tostring(rec.msg) }
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(rec[k]) end
  return table.concat(parts, " ")
end
C.text = text

-- Waits until a log record's text matches (records already read count);
-- returns the record.
function Pod:await(pattern, secs, from)
  local deadline = helpers.now() + (secs or 20)
  local i = from or 1
  while true do
    while i <= #self.lines do
      if text(self.lines[i]):find(pattern) then return self.lines[i], i end
      i = i + 1
    end
    if helpers.now() > deadline then
      error(("%s: no log line matching %q within %ss; log:\n%s"):format(self.name, pattern, secs or 20,
        self:dump()), 2)
    end
    self:pump(0.1)
  end
end

function Pod:dump()
  local out = {}
  for _, r in ipairs(self.lines) do out[#out + 1] = (r.ts or "") .. " " .. text(r) end
  return table.concat(out, "\n")
end

function Pod:records(msg)
  self:pump()
  local list = {}
  for _, r in ipairs(self.lines) do if r.msg == msg then list[#list + 1] = r end end
  return list
end

function Pod:count(pattern)
  self:pump()
  local n = 0
  for _, r in ipairs(self.lines) do if text(r):find(pattern) then n = n + 1 end end
  return n
end

function Pod:inspect(fmt)
  return trim(C.must(("docker inspect -f %s %s"):format(q(fmt), q(self.name))))
end

function Pod:ip()
  return self:inspect(("{{(index .NetworkSettings.Networks %q).IPAddress}}"):format(self.api.network))
end

function Pod:running() return self:inspect("{{.State.Running}}") == "true" end
function Pod:exit_code() return tonumber(self:inspect("{{.State.ExitCode}}")) end

-- GET over the container network: code, body, headers.  opts.https,
-- opts.token, opts.cacert.
function Pod:http(port, path, opts)
  opts = opts or {}
  local tmp = helpers.tmpdir()
  local scheme = opts.https and "https" or "http"
  local extra = ""
  if opts.https then extra = opts.cacert and (" --cacert " .. q(opts.cacert)) or " -k" end
  if opts.token then extra = extra .. " -H " .. q("Authorization: Bearer " .. opts.token) end
  local out = C.sh(("curl -s -S --max-time 10%s -D %s/h -o %s/b -w '%%{http_code}' %s"):format(
    extra, tmp, tmp, q(("%s://%s:%s%s"):format(scheme, self:ip(), port, path))))
  return tonumber(out:match("(%d%d%d)%s*$")), helpers.read_file(tmp .. "/b") or "",
         helpers.read_file(tmp .. "/h") or "", out
end

-- The containerPort of the Deployment's port `name`.
function C.port(name)
  for _, p in ipairs(C.pod_spec().container.ports or {}) do
    if p.name == name then return p.containerPort end
  end
  error("the Deployment's container has no port " .. name)
end

-- /metrics over the container network as an allowed scraper (HTTPS,
-- the self-signed certificate not verified, as Prometheus's
-- insecure_skip_verify), parsed strictly.
function Pod:metrics()
  local code, body, headers = self:http(C.port("metrics"), "/metrics",
    { https = true, token = self.api.scrapers.allowed })
  assert(code == 200, ("GET /metrics: %s %s"):format(tostring(code), body))
  assert(headers:find("text/plain; version=0.0.4", 1, true), headers)
  return exposition.parse(body)
end

-- The value of one series (labels exactly), or nil.
function C.metric(parsed, name, labels) return exposition.get(parsed, name, labels or {}) end

-- Samples the probe at port/path every 0.1 s until stopped:
-- sampler:codes() -> the status codes seen (0 when no answer).
function Pod:sampler(port, path)
  local url = ("http://%s:%s%s"):format(self:ip(), port, path)
  local p = helpers.spawn({ "sh", "-c", ("while :; do curl -s -o /dev/null --max-time 2 -w '%%{http_code}\n' %s;"
    .. " sleep 0.1; done"):format(q(url)) }, { env = { LD_PRELOAD = false } })
  local s = { p = p }
  function s.codes()
    while p:read_line(0.005) do end
    local codes = {}
    for _, l in ipairs(p.out) do codes[#codes + 1] = tonumber(l) or 0 end
    return codes
  end
  function s.stop()
    local codes = s.codes()
    p:stop()
    return codes
  end
  return s
end

-- `docker stop` with the pod's grace period: exit code and seconds taken.
function Pod:stop()
  local t0 = helpers.now()
  C.must(("docker stop -t %d %s >/dev/null"):format(self.grace, q(self.name)))
  local took = helpers.now() - t0
  self.log:wait(10)
  self:pump()
  return self:exit_code(), took
end

function Pod:kill()
  C.must("docker kill " .. q(self.name) .. " >/dev/null")
  self.log:wait(10)
  self:pump()
end

function Pod:disconnect()
  C.must(("docker network disconnect %s %s"):format(q(self.api.network), q(self.name)))
end

function Pod:signal(sig)
  C.must(("docker kill -s %s %s >/dev/null"):format(sig, q(self.name)))
end

function Pod:remove()
  if self.removed then return end
  self.removed = true
  C.sh("docker rm -f " .. q(self.name) .. " >/dev/null 2>&1")
  cleanup.containers[self.name] = nil
  if self.log then self.log:stop() end
end

-- The wall clock now, in milliseconds since the epoch (what log "ts" use).
local ffi = require("ffi")
local wall_t = ffi.typeof("struct { long s; long ns; }[1]")
function C.wall_ms()
  local t = wall_t()
  ffi.C.clock_gettime(0, ffi.cast("void *", t))
  return tonumber(t[0].s) * 1000 + math.floor(tonumber(t[0].ns) / 1e6)
end

-- Milliseconds since the epoch of a log record's "ts" (UTC, ms precision).
function C.ms(ts)
  local y, mo, d, h, mi, s, ms = ts:match("^(%d+)%-(%d+)%-(%d+)T(%d+):(%d+):(%d+)%.(%d+)Z$")
  assert(y, "timestamp " .. tostring(ts))
  -- days since 1970-01-01 of a proleptic Gregorian date (eras of 400 years)
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (mo + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local days = era * 146097 + doe - 719468
  return ((days * 24 + tonumber(h)) * 60 + tonumber(mi)) * 60000 + tonumber(s) * 1000 + tonumber(ms)
end

---------------------------------------------------------------------------
-- The spec controller: reconciles the ConfigMaps labelled app=luna-ct in
-- ns, logging "ct begin" and "ct end" (with controller, key and
-- reconcile_id, which luna.log attaches) around a GET of the object and,
-- when its annotation luna-ct/version differs, a patch stamping `version`.
-- Every object is reconciled again after `period` seconds.
function C.recorder(ns, version, period)
  return ([[
local luna = require "luna"
return luna.controller {
  name = "recorder",
  watch = { "v1/ConfigMap", namespace = %q, labels = { app = "luna-ct" } },
  workers = 2,
  reconcile = function(req)
    luna.log.info("ct begin", { version = %q })
    local cm, err = luna.get("v1/ConfigMap", req.namespace, req.name)
    if cm and luna.meta.annotation(cm, "luna-ct/version") ~= %q then
      cm, err = luna.patch("v1/ConfigMap", req.namespace, req.name,
        { metadata = { annotations = { ["luna-ct/version"] = %q } } })
    end
    luna.log.info("ct end", { version = %q, ok = tostring(err == nil) })
    if err then return nil, err end
    return { requeue_after = %s }
  end,
}
]]):format(ns, version, version, version, version, tostring(period or 30))
end

-- The luna-ct/version annotation of every labelled ConfigMap: name -> value|false.
function Api:versions()
  local code, list = self:request("GET", self:ns_path("configmaps") .. "?labelSelector=app%3Dluna-ct")
  assert(code == 200, "list configmaps: " .. tostring(code))
  local out = {}
  for _, cm in ipairs(list.items) do
    local a = cm.metadata.annotations
    out[cm.metadata.name] = a and a["luna-ct/version"] or false
  end
  return out
end

-- True when all n labelled ConfigMaps carry version.
function Api:all_stamped(version, n)
  local count = 0
  for _, v in pairs(self:versions()) do
    if v ~= version then return false end
    count = count + 1
  end
  return count == n
end

function Api:make_objects(n)
  for i = 1, n do self:create_cm("ct-" .. i, { k = "v" }, { app = "luna-ct" }) end
end

-- Polls fn until true (sleeping between tries); fails with `what`.
function C.wait(fn, secs, what)
  local deadline = helpers.now() + (secs or 30)
  while true do
    if fn() then return end
    if helpers.now() > deadline then error("timed out waiting for " .. (what or "condition"), 2) end
    C.sh("sleep 0.2")
  end
end

return C
