-- Shared by the spec/15-production specs: `luna run` processes against a
-- dev server, their metrics and probe endpoints, and the leader Lease.
--
--   S.kubeconfig_for(srv)            a kubeconfig file for the server
--   S.controllers(files)             a directory of controller files
--   S.start(srv, dir, opts) -> luna  opts.name (POD_NAME), opts.pod_namespace
--       (POD_NAMESPACE), opts.leader (with
--       opts.lease = { duration, renew, retry }), opts.args, opts.lease_name,
--       opts.secure (metrics over HTTPS, authorized; default: plain HTTP)
--   luna:expect(pattern, secs)       the next line matching (raises with output)
--   luna:await(pattern, secs)        any line so far or to come matching
--   luna:output()                    every line so far (reads what is there)
--   luna:count(pattern)              lines so far matching
--   luna.metrics, luna.health        base URLs of the two servers
--   S.get(url) -> code, body         over HTTP (curl, outside the ASan preload)
--   S.scrape(luna) -> parsed exposition (strict parser, histograms checked)
--   S.lease(srv, name) -> the Lease object or nil
local helpers = require("helpers")
local exposition = require("support.exposition")
local cjson = require("cjson")

local S = {}

S.kubeconfig_for = require("support.luna_env").kubeconfig_for

function S.controllers(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files) do helpers.write_file(dir .. "/" .. name, body) end
  return dir
end

local Luna = {}
Luna.__index = Luna

function S.start(srv, dir, opts)
  opts = opts or {}
  -- metrics over plain HTTP unless opts.secure (08-secure_metrics_spec
  -- covers the default: HTTPS, scrapes authorized by the API server)
  local argv = { helpers.luna, "run", "--kubeconfig", S.kubeconfig_for(srv),
                 "--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0" }
  if not opts.secure then argv[#argv + 1] = "--metrics-secure=false" end
  if opts.leader then
    local l = opts.lease or { 2, 1.5, 0.3 }
    for _, a in ipairs({ "--leader-elect", "--leader-election-namespace=" .. srv.ns,
        "--leader-election-id=" .. (opts.lease_name or "luna-spec"),
        "--leader-elect-lease-duration=" .. l[1], "--leader-elect-renew-deadline=" .. l[2],
        "--leader-elect-retry-period=" .. l[3] }) do
      argv[#argv + 1] = a
    end
  end
  for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  argv[#argv + 1] = dir
  local p = helpers.spawn(argv, { env = { POD_NAME = opts.name or false,
                                          POD_NAMESPACE = opts.pod_namespace or false,
                                          KUBECONFIG = false } })
  local luna = setmetatable({ p = p, name = opts.name }, Luna)
  luna.metrics = (opts.secure and "https://" or "http://")
    .. select(2, luna:expect("metrics server listening address=(%S+)", 15))
  luna.health = "http://" .. select(2, luna:expect("health probe server listening address=(%S+)", 5))
  return luna
end

function Luna:expect(pattern, secs) return self.p:expect(pattern, secs) end

-- Waits until some line (already read or new) matches; returns that line.
function Luna:await(pattern, secs)
  local deadline = helpers.now() + (secs or 10)
  local seen = 0
  while true do
    for i = seen + 1, #self.p.out do
      if self.p.out[i]:find(pattern) then return self.p.out[i] end
    end
    seen = #self.p.out
    if helpers.now() > deadline then
      error(("no line matching %q within %ss; output:\n%s"):format(pattern, secs or 10,
        table.concat(self.p.out, "\n")), 2)
    end
    self.p:read_line(0.05)
  end
end

function Luna:output()
  while self.p:read_line(0.02) do end
  return table.concat(self.p.out, "\n")
end

function Luna:count(pattern)
  self:output()
  local n = 0
  for _, line in ipairs(self.p.out) do if line:find(pattern) then n = n + 1 end end
  return n
end

function Luna:kill(sig) self.p:kill(sig) end
function Luna:wait(secs) return self.p:wait(secs) end
function Luna:stop() return self.p:stop() end

-- opts.token (a bearer token), opts.cacert (verify https against it; else
-- https is not verified), opts.resolve ("host:port:addr" for curl),
-- opts.interface (the source address), opts.max_time (seconds, default 10).
-- Returns code (0: no HTTP answer), body, headers, curl's output.
function S.get(url, method, opts)
  opts = opts or {}
  local tmp = helpers.tmpdir()
  -- curl -X HEAD would wait for the body that Content-Length announces
  local m = method == "HEAD" and "-I" or ("-X " .. (method or "GET"))
  local extra = ""
  if url:match("^https:") then
    extra = opts.cacert and (" --cacert '" .. opts.cacert .. "'") or " -k"
  end
  if opts.token then extra = extra .. " -H 'Authorization: Bearer " .. opts.token .. "'" end
  if opts.resolve then extra = extra .. " --resolve '" .. opts.resolve .. "'" end
  if opts.interface then extra = extra .. " --interface '" .. opts.interface .. "'" end
  local out = helpers.run(("env -u LD_PRELOAD curl -s -S %s%s --max-time %s -D %s/h -o %s/b -w '%%{http_code}' '%s'")
    :format(m, extra, tostring(opts.max_time or 10), tmp, tmp, url))
  return tonumber(out:match("(%d%d%d)%s*$")) or 0, helpers.read_file(tmp .. "/b") or "",
         helpers.read_file(tmp .. "/h") or "", out
end

function S.scrape(luna, opts)
  local code, body, headers = S.get(luna.metrics .. "/metrics", nil, opts)
  assert(code == 200, "GET /metrics: " .. tostring(code))
  assert(headers:find("Content-Type: text/plain; version=0.0.4", 1, true), headers)
  local parsed = exposition.parse(body)
  exposition.check_histograms(parsed)
  return parsed
end

S.value = exposition.get

function S.lease(srv, name)
  local code, obj = srv:request("GET", "/apis/coordination.k8s.io/v1/namespaces/" .. srv.ns ..
                                       "/leases/" .. name)
  if code ~= 200 then return nil end
  return obj
end

S.MICRO_TIME = "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%d%d%d%dZ$"
S.json = cjson

return S
