-- Secrets and transport (issue 23, class 7), end to end through `luna run`
-- with the default flags:
--   * userinfo in the server or proxy URL never reaches a log line, an error,
--     /readyz or a metric label (nor a query secret an error message);
--   * luna warns once when TLS does not protect the API connection;
--   * tls-server-name and proxy-url are applied, against a TLS dev server
--     whose certificate names another host and through a CONNECT proxy
--     (spec/fixtures/connect_proxy.c) that reports every tunnel.
-- The dev server is always started here (TLS needs its --tls-* flags), also
-- when KUBECONFIG names a cluster.
local helpers = require("helpers")
local core = require("luna.core")

local CONTROLLER = [[
local luna = require "luna"
return luna.controller { name = "demo", watch = "v1/ConfigMap", reconcile = function() end }
]]

-- A self-signed certificate and key naming san ("DNS:x" or "IP:x"); paths.
local function pki(san)
  local dir = helpers.tmpdir()
  local out, rc = helpers.run(("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 " ..
    "-nodes -days 2 -subj /CN=luna-spec -addext subjectAltName=%s -keyout %s/key.pem -out %s/cert.pem")
    :format(san, dir, dir))
  assert(rc == 0, out)
  return { cert = dir .. "/cert.pem", key = dir .. "/key.pem" }
end

-- A TLS dev server with that certificate; returns the process and its port.
local function tls_server(p)
  local srv = helpers.spawn({ helpers.luna, "dev-server", "--listen", "127.0.0.1:0",
                              "--tls-cert", p.cert, "--tls-key", p.key })
  local _, port = srv:expect("listening on https://127%.0%.0%.1:(%d+)", 10)
  return srv, port
end

-- The proxy fixture; auth "user:password" or nil.  Returns process and port.
local function proxy(auth)
  local argv = { helpers.fixtures .. "/connect_proxy" }
  if auth then argv[#argv + 1] = "--auth"; argv[#argv + 1] = auth end
  argv[#argv + 1] = "127.0.0.1:0"
  local p = helpers.spawn(argv)
  local _, port = p:expect("connect proxy listening on 127%.0%.0%.1:(%d+)", 10)
  return p, port
end

local function free_port()
  local out = helpers.run(helpers.fixtures .. "/httpd --free-port")
  return assert(tonumber(out:match("port (%d+)")))
end

-- A kubeconfig whose cluster has the given YAML fields (name = value).
local function kubeconfig(cluster)
  local lines = {}
  for k, v in pairs(cluster) do lines[#lines + 1] = ("    %s: %s"):format(k, v) end
  local path = helpers.tmpdir() .. "/config"
  helpers.write_file(path, ([[
apiVersion: v1
kind: Config
current-context: main
clusters:
- name: c
  cluster:
%s
contexts:
- name: main
  context: {cluster: c, user: u}
users:
- name: u
  user: {token: spec-token}
]]):format(table.concat(lines, "\n")))
  return path
end

-- `luna run` with default flags but probe and metrics servers on free
-- loopback ports (plain http, to scrape them here).
local function luna_run(kc, env)
  local dir = helpers.tmpdir()
  helpers.write_file(dir .. "/a.lua", CONTROLLER)
  local base = { HOME = helpers.tmpdir(), KUBECONFIG = false, SSLKEYLOGFILE = false,
                 KUBERNETES_SERVICE_HOST = false, https_proxy = false, HTTPS_PROXY = false,
                 http_proxy = false, HTTP_PROXY = false, ALL_PROXY = false, all_proxy = false }
  for k, v in pairs(env or {}) do base[k] = v end
  return helpers.spawn({ helpers.luna, "run", "--kubeconfig", kc,
                         "--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false",
                         "--health-probe-bind-address=127.0.0.1:0", dir }, { env = base })
end

local function lines_with(p, text)
  local n = 0
  for _, l in ipairs(p.out) do if l:find(text, 1, true) then n = n + 1 end end
  return n
end

-- Stops luna with SIGTERM (it must exit 0); returns its whole output.
local function finish(p)
  p:kill(15)
  local rc = p:wait(20)
  local out = p:drain(1)
  p:stop()
  assert.equal(0, rc, out)
  return out
end

local function assert_clean(text, secrets)
  for _, s in ipairs(secrets) do
    assert(not text:find(s, 1, true), ("%q leaked into:\n%s"):format(s, text))
  end
end

describe("URL credentials", function()
  it("never reach the log, errors, /readyz or metrics (server and proxy userinfo)", function()
    local px, pport = proxy("pxuser:pxsecret-SPEC")
    local dead = free_port()   -- nothing listens: the proxy answers 502
    local kc = kubeconfig({ server = ("https://admin:hunter2-SPEC@127.0.0.1:%d"):format(dead),
                            ["proxy-url"] = ("http://pxuser:pxsecret-SPEC@127.0.0.1:%s"):format(pport),
                            ["certificate-authority"] = pki("IP:127.0.0.1").cert })
    local p = luna_run(kc)
    local _, mport = p:expect("metrics server listening address=127%.0%.0%.1:(%d+)", 20)
    local _, hport = p:expect("health probe server listening address=127%.0%.0%.1:(%d+)", 20)
    p:expect("informer kind not resolved", 20)
    local readyz = helpers.run(("env -u LD_PRELOAD curl -s -m 10 http://127.0.0.1:%s/readyz"):format(hport))
    local metrics
    helpers.eventually(function()
      metrics = helpers.run(("env -u LD_PRELOAD curl -s -m 10 http://127.0.0.1:%s/metrics"):format(mport))
      return metrics:find("rest_client_requests_total{", 1, true) ~= nil
    end, 20, "an API request counted")
    local out = finish(p)
    px:stop()
    local secrets = { "hunter2", "admin:", "admin@", "pxsecret", "pxuser" }
    assert_clean(out, secrets)
    assert_clean(readyz, secrets)
    assert_clean(metrics, secrets)
    -- what is shown instead: the URLs without their userinfo
    assert.matches(("kubeconfig loaded source=%s server=https://127%%.0%%.0%%.1:%d "):format(
      kc:gsub("%p", "%%%0"), dead), out)
    assert.matches(("proxy=http://127%%.0%%.0%%.1:%s"):format(pport), out)
    assert.matches(("through proxy http://127%%.0%%.0%%.1:%s"):format(pport), readyz)
    assert.matches(('host="127%%.0%%.0%%.1:%d"'):format(dead), metrics)
  end)

  it("never reach an HTTP error message, query secrets included", function()
    local port = free_port()
    local done, err
    local h = core.http.request{
      url = ("http://alice:pw-SPEC@127.0.0.1:%d/x?access_token=tok-SPEC&limit=5&apiKey=key-SPEC"):format(port),
      on_done = function(_, e) done, err = true, e end }
    assert.truthy(h)
    helpers.eventually(function() return done end, 10, "the request to fail")
    assert.equal("ConnectionFailed", err.reason)
    assert_clean(err.message, { "pw-SPEC", "alice", "tok-SPEC", "key-SPEC" })
    assert.matches(("GET http://127%%.0%%.0%%.1:%d/x%%?access_token=REDACTED&limit=5&apiKey=REDACTED"):format(port),
                   err.message)
  end)

  it("are removed by the one redaction, from URLs in free text too (C unit)", function()
    local out, rc = helpers.run_leak_checked(helpers.fixtures .. "/url_redact_c")
    assert.equal(0, rc, out)
    assert.matches("url_redact_c: all ok", out)
  end)

  it("never reach luna trigger's error", function()
    local out, rc = helpers.run(("%s trigger --server https://ops:trig-SPEC@127.0.0.1:%d list 2>&1")
      :format(helpers.luna, free_port()))
    assert.equal(1, rc, out)
    assert_clean(out, { "trig-SPEC", "ops:" })
    assert.matches("luna trigger: https://127%.0%.0%.1:%d+", out)
  end)
end)

describe("TLS that is off", function()
  local srv, port, cert
  setup(function()
    cert = pki("IP:127.0.0.1")
    srv, port = tls_server(cert)
  end)
  teardown(function() srv:stop() end)

  local WARN = "TLS verification is off (insecure-skip-tls-verify)"

  it("is warned about once with insecure-skip-tls-verify", function()
    local p = luna_run(kubeconfig({ server = "https://127.0.0.1:" .. port,
                                    ["insecure-skip-tls-verify"] = "true" }))
    p:expect("caches synced", 20)
    local out = finish(p)
    assert.equal(1, lines_with(p, WARN), out)
    assert.matches("WARN " .. WARN:gsub("%p", "%%%0"), out)
  end)

  it("is not warned about when the certificate is verified", function()
    local p = luna_run(kubeconfig({ server = "https://127.0.0.1:" .. port,
                                    ["certificate-authority"] = cert.cert }))
    p:expect("caches synced", 20)
    local out = finish(p)
    assert.equal(0, lines_with(p, "TLS verification is off"), out)
    assert.equal(0, lines_with(p, "plain http"), out)
  end)

  it("is warned about for plain http beyond this machine, not on loopback", function()
    local p = luna_run(kubeconfig({ server = "http://192.0.2.1:6443" }))   -- TEST-NET-1
    p:expect("kubeconfig loaded", 20)
    p:expect("the API server is reached over plain http", 20)
    finish(p)
    p = luna_run(kubeconfig({ server = "http://127.0.0.1:" .. free_port() }))
    p:expect("kubeconfig loaded", 20)
    local out = finish(p)
    assert.equal(0, lines_with(p, "plain http"), out)
  end)

  it("is warned about when SSLKEYLOGFILE makes libcurl write the session keys", function()
    local keys = helpers.tmpdir() .. "/keys"
    local p = luna_run(kubeconfig({ server = "https://127.0.0.1:" .. port,
                                    ["certificate-authority"] = cert.cert }),
                       { SSLKEYLOGFILE = keys })
    p:expect("caches synced", 20)
    local out = finish(p)
    assert.equal(1, lines_with(p, "TLS session keys are written to $SSLKEYLOGFILE"), out)
  end)
end)

describe("tls-server-name", function()
  local srv, port, cert
  setup(function()
    cert = pki("DNS:kubernetes.default.svc")   -- not 127.0.0.1, where it listens
    srv, port = tls_server(cert)
  end)
  teardown(function() srv:stop() end)

  local function cluster(extra)
    local c = { server = "https://127.0.0.1:" .. port, ["certificate-authority"] = cert.cert }
    for k, v in pairs(extra or {}) do c[k] = v end
    return kubeconfig(c)
  end

  it("is needed: without it verification fails with an error naming the host", function()
    local p = luna_run(cluster())
    local line = p:expect("informer kind not resolved", 20)
    local out = finish(p)
    assert.matches("certificate", line)
    assert.matches("127%.0%.0%.1", line)
    assert.equal(0, lines_with(p, "caches synced"), out)
  end)

  it("is applied: the certificate is verified against it and luna syncs", function()
    local p = luna_run(cluster({ ["tls-server-name"] = "kubernetes.default.svc" }))
    p:expect("kubeconfig loaded .* tls_server_name=kubernetes%.default%.svc", 20)
    p:expect("caches synced", 20)
    finish(p)
  end)

  it("still verifies: a name the certificate does not hold fails", function()
    local p = luna_run(cluster({ ["tls-server-name"] = "other.example" }))
    local line = p:expect("informer kind not resolved", 20)
    local out = finish(p)
    assert.matches("other%.example", line)
    assert.equal(0, lines_with(p, "caches synced"), out)
  end)
end)

describe("proxy-url", function()
  local srv, port, cert, named, nsrv, nport
  setup(function()
    cert = pki("IP:127.0.0.1")
    srv, port = tls_server(cert)
    named = pki("DNS:kubernetes.default.svc")
    nsrv, nport = tls_server(named)
  end)
  teardown(function()
    srv:stop()
    nsrv:stop()
  end)

  it("is applied: every connection goes through the proxy, with its credentials", function()
    local px, pport = proxy("pxuser:pxsecret-SPEC")
    local p = luna_run(kubeconfig({ server = "https://127.0.0.1:" .. port,
                                    ["certificate-authority"] = cert.cert,
                                    ["proxy-url"] = "http://pxuser:pxsecret-SPEC@127.0.0.1:" .. pport }))
    p:expect("caches synced", 20)
    local out = finish(p)
    px:expect("CONNECT 127%.0%.0%.1:" .. port .. " auth=ok result=200", 5)
    px:stop()
    assert_clean(out, { "pxsecret", "pxuser" })
  end)

  it("tunnels to the server's address while TLS names tls-server-name", function()
    local px, pport = proxy(nil)
    local p = luna_run(kubeconfig({ server = "https://127.0.0.1:" .. nport,
                                    ["certificate-authority"] = named.cert,
                                    ["tls-server-name"] = "kubernetes.default.svc",
                                    ["proxy-url"] = "http://127.0.0.1:" .. pport }))
    p:expect("caches synced", 20)
    finish(p)
    px:expect("CONNECT 127%.0%.0%.1:" .. nport .. " auth=none result=200", 5)
    px:stop()
  end)

  it("fails with an error naming the proxy (not its password) when it refuses", function()
    local px, pport = proxy("pxuser:right-SPEC")
    local p = luna_run(kubeconfig({ server = "https://127.0.0.1:" .. port,
                                    ["certificate-authority"] = cert.cert,
                                    ["proxy-url"] = "http://pxuser:wrong-SPEC@127.0.0.1:" .. pport }))
    local line = p:expect("informer kind not resolved", 20)
    local out = finish(p)
    px:expect("auth=wrong result=407", 5)
    px:stop()
    assert.matches("407", line)
    assert.matches("through proxy http://127%.0%.0%.1:" .. pport, line)
    assert_clean(out, { "wrong-SPEC", "right-SPEC", "pxuser" })
    assert.equal(0, lines_with(p, "caches synced"), out)
  end)
end)
