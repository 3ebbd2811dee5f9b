-- /metrics is secure by default, as controller-runtime's secure metrics
-- serving is: HTTPS only (a self-signed certificate, or the one in
-- --metrics-cert-path, re-read when it changes), and a scrape is answered
-- only when the API server authenticates its bearer token (TokenReview)
-- and authorizes the user to get the path (SubjectAccessReview). Answers
-- are cached; probes stay plain and open.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local scrapers = require("support.scrapers")
local S = require("15-production.support")

local CONTROLLER = [[
local luna = require "luna"
return luna.controller {
  name = "quiet",
  watch = { "v1/ConfigMap", namespace = %q },
  reconcile = function() end,
}
]]

-- Review requests luna sent (both are POSTs; the controller sends none).
local function reviews(parsed, host)
  local n = 0
  for _, code in ipairs({ "200", "201" }) do
    n = n + (S.value(parsed, "rest_client_requests_total", { code = code, method = "POST", host = host }) or 0)
  end
  return n
end

local function host_of(srv)
  if srv.real then
    local out = helpers.run("kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}'")
    return out:match("^https?://([^/%s]+)")
  end
  return srv.url:match("^https?://([^/]+)")
end

local make_cert = require("support.certs").make_cert

-- Publishes crt/key as a Secret volume does: a new timestamped directory
-- swapped in under ..data, tls.crt and tls.key links into it.
local function publish(dir, from, prefix)
  local ts = ("..%d_%d"):format(os.time(), math.random(1e6, 9e6))
  local out, rc = helpers.run(([[cd %s && mkdir %s && cp %s/%s.crt %s/tls.crt && cp %s/%s.key %s/tls.key \
    && ln -sfn %s ..data_tmp && mv -T ..data_tmp ..data \
    && { [ -L tls.crt ] || ln -s ..data/tls.crt tls.crt; } && { [ -L tls.key ] || ln -s ..data/tls.key tls.key; }]])
    :format(dir, ts, from, prefix, ts, from, prefix, ts, ts))
  assert(rc == 0, out)
end

describe("luna run secure /metrics", function()
  local srv, ids, luna, host

  setup(function()
    srv = client.start({ args = { "--admin" } })
    ids = scrapers.make(srv)
    host = host_of(srv)
  end)
  teardown(function()
    if ids then ids:remove() end
    srv:stop()
  end)
  after_each(function()
    if luna then luna:stop() end
    luna = nil
  end)

  local function start(args)
    luna = S.start(srv, S.controllers({ ["quiet.lua"] = CONTROLLER:format(srv.ns) }),
                   { secure = true, args = args })
    luna:await("caches synced", 15)
  end

  it("serves HTTPS with a self-signed certificate; probes stay plain", function()
    start()
    luna:await("metrics server listening .*secure=true cert=self%-signed", 1)
    local code, _, _, out = S.get(luna.metrics:gsub("^https", "http") .. "/metrics", nil, { token = ids.allowed })
    assert.not_equal(200, code, "plain HTTP answered: " .. out)
    local port = luna.metrics:match(":(%d+)$")
    local cert = helpers.run(("echo | env -u LD_PRELOAD openssl s_client -connect 127.0.0.1:%s 2>/dev/null"
      .. " | env -u LD_PRELOAD openssl x509 -noout -subject -ext subjectAltName"):format(port))
    assert.matches("DNS:localhost", cert)
    assert.matches("IP Address:127%.0%.0%.1", cert)
    local c, b, h, o = S.get(luna.health .. "/readyz")
    assert.equal(200, c, luna.health .. " " .. o .. luna:output())
  end)

  it("answers 401 without a bearer token or with one the API server does not know", function()
    start()
    local code, body, headers = S.get(luna.metrics .. "/metrics")
    assert.same({ 401, "Unauthorized\n" }, { code, body })
    assert.matches("WWW%-Authenticate: Bearer", headers)
    code, body = S.get(luna.metrics .. "/metrics", nil, { token = "not-a-token-anyone-issued" })
    assert.same({ 401, "Unauthorized\n" }, { code, body })
    code = S.get(luna.metrics .. "/metrics", nil, { token = "" })
    assert.equal(401, code)
  end)

  it("answers 403 to a user RBAC does not allow to get /metrics", function()
    start()
    local code, body = S.get(luna.metrics .. "/metrics", nil, { token = ids.denied })
    assert.same({ 403, "Authorization denied for user " .. ids.denied_user .. "\n" }, { code, body })
  end)

  it("serves an allowed user, and caches both reviews", function()
    start()
    local first = S.scrape(luna, { token = ids.allowed })
    local second = S.scrape(luna, { token = ids.allowed })
    local n1, n2 = reviews(first, host), reviews(second, host)
    assert.is_true(n1 >= 2, "expected a TokenReview and a SubjectAccessReview before the first answer")
    assert.equal(n1, n2, "the second scrape asked the API server again")
    -- the denied answer is cached too: a second 403 costs no review
    assert.equal(403, (S.get(luna.metrics .. "/metrics", nil, { token = ids.denied })))
    local n3 = reviews(S.scrape(luna, { token = ids.allowed }), host)
    assert.equal(403, (S.get(luna.metrics .. "/metrics", nil, { token = ids.denied })))
    assert.equal(n3, reviews(S.scrape(luna, { token = ids.allowed }), host))
  end)

  it("serves the certificate in --metrics-cert-path and the next one published there", function()
    local work, certs = helpers.tmpdir(), helpers.tmpdir()
    local ca1, ca2 = make_cert(work, "one"), make_cert(work, "two")
    publish(certs, work, "one")
    start({ "--metrics-cert-path=" .. certs })
    luna:await("metrics server listening .*secure=true cert=files", 1)
    local port = luna.metrics:match(":(%d+)$")
    local url = "https://localhost:" .. port .. "/metrics"
    local opts = { token = ids.allowed, resolve = "localhost:" .. port .. ":127.0.0.1" }
    opts.cacert = ca1
    assert.equal(200, (S.get(url, nil, opts)))
    opts.cacert = ca2
    assert.equal(0, (S.get(url, nil, opts)), "verified against a CA that did not sign it")
    -- a pair that does not match is refused; the old certificate stays
    local out, rc = helpers.run(("cp %s/two.key %s/mixed.key && cp %s/one.crt %s/mixed.crt"):format(work, work, work, work))
    assert(rc == 0, out)
    publish(certs, work, "mixed")
    luna:await("metrics certificate not reloaded", 30)
    opts.cacert = ca1
    assert.equal(200, (S.get(url, nil, opts)))
    publish(certs, work, "two")
    luna:await("metrics certificate reloaded", 30)
    opts.cacert = ca2
    assert.equal(200, (S.get(url, nil, opts)))
    opts.cacert = ca1
    assert.equal(0, (S.get(url, nil, opts)))
  end)

  it("answers 503 beyond 32 scrapes waiting for a review, still serving cached scrapers", function()
    if srv.real then return pending("dev server only: slow reviews need its delay fault") end
    start()
    -- the allowed scraper's answers are cached before the flood; each review
    -- then takes 6 s (under luna's 10 s review timeout)
    assert.equal(200, (S.get(luna.metrics .. "/metrics", nil, { token = ids.allowed })))
    assert.equal(200, (srv:request("PUT", "/luna/v1/faults", "delay=6,delay-path=tokenreviews",
      { content_type = "text/plain" })))
    local url = luna.metrics .. "/metrics"
    local procs = {}
    -- from five addresses, 14 each: one address gets at most 16 connections
    -- (04-health_spec.lua), so only several clients can make 32 wait
    for i = 1, 70 do
      procs[i] = helpers.spawn({ "env", "-u", "LD_PRELOAD", "curl", "-sk", "-o", "/dev/null",
        "--interface", "127.0.0." .. (2 + i % 5),
        "-w", "%{http_code}\n", "--max-time", "30", "-H", "Authorization: Bearer made-up-" .. i, url })
    end
    -- while 32 reviews wait, the cached scraper is served at once
    helpers.eventually(function()
      local n = 0
      for _, p in ipairs(procs) do if p:read_line(0.01) == "503" then n = n + 1 end end
      return n > 0 or #procs == 0
    end, 10, "a 503")
    assert.equal(200, (S.get(luna.metrics .. "/metrics", nil, { token = ids.allowed })))
    local codes, seen = {}, {}
    for _, p in ipairs(procs) do
      local code = tostring(p.out[1] or p:read_line(35))
      codes[code] = (codes[code] or 0) + 1
      seen[#seen + 1] = code
      p:stop()
    end
    local all = table.concat(seen, " ")
    -- 32 reviews at a time: the first 32 are reviewed (401), the rest that
    -- came while they waited are turned away at once
    assert.is_true((codes["401"] or 0) >= 32, "answers: " .. all)
    assert.is_true((codes["503"] or 0) >= 1, "answers: " .. all)
    assert.equal(70, (codes["401"] or 0) + (codes["503"] or 0), "answers: " .. all)
    assert.equal(200, (srv:request("PUT", "/luna/v1/faults", "", { content_type = "text/plain" })))
    assert.equal(200, (S.get(luna.metrics .. "/metrics", nil, { token = ids.allowed })))
  end)

  it("answers 500 once the API server cannot review, after retrying", function()
    if srv.real then return pending("dev server only: failing reviews need its fault injection") end
    start()
    assert.equal(200, (srv:request("PUT", "/luna/v1/faults", "error-rate=1,error-code=503,error-on=write",
      { content_type = "text/plain" })))
    local t0 = helpers.now()
    local code, body = S.get(luna.metrics .. "/metrics", nil, { token = "a-token-never-reviewed" })
    assert.same({ 500, "Authentication failed\n" }, { code, body })
    assert.is_true(helpers.now() - t0 >= 1, "gave up without retrying")
    luna:await("metrics authorization failed review=TokenReview attempts=5", 5)
    assert.equal(200, (srv:request("PUT", "/luna/v1/faults", "", { content_type = "text/plain" })))
    assert.equal(200, (S.get(luna.metrics .. "/metrics", nil, { token = ids.allowed })))
  end)
end)

describe("luna run secure metrics flags", function()
  it("refuse a certificate directory that cannot be read, naming it", function()
    local dir = S.controllers({ ["quiet.lua"] = CONTROLLER:format("default") })
    -- refused before anything connects (the kubeconfig does not exist)
    local out, rc = helpers.run(("%s run --kubeconfig /nonexistent --metrics-cert-path %s/none %s")
      :format(helpers.luna, dir, dir))
    assert.equal(1, rc)
    assert.matches("startup failed error=\"metrics certificate " .. dir:gsub("%-", "%%-") .. "/none/tls%.crt", out)
    assert.is_nil(out:find("kubeconfig", 1, true), out)
  end)

  it("refuse cert names without a path and cert flags with --metrics-secure=false", function()
    local out, rc = helpers.run(helpers.luna .. " run --metrics-cert-name=a.crt /nonexistent")
    assert.equal(2, rc)
    assert.matches("need %-%-metrics%-cert%-path", out)
    out, rc = helpers.run(helpers.luna .. " run --metrics-secure=false --metrics-cert-path=/x /nonexistent")
    assert.equal(2, rc)
    assert.matches("need %-%-metrics%-secure", out)
    out, rc = helpers.run(helpers.luna .. " run --metrics-secure=maybe /nonexistent")
    assert.equal(2, rc)
    out, rc = helpers.run(helpers.luna .. " run --metrics-cert-path=/x --metrics-cert-key=a/b /nonexistent")
    assert.equal(2, rc)
    assert.matches("want a file name", out)
  end)
end)
