-- The admin endpoints and `luna trigger`: reconcile one key, every cached
-- key or the keys a label selector picks, now; pause a controller (its
-- queue fills, deduplicated, nothing reconciles) and resume it, across a
-- reload.  Served beside /metrics and authorized the same way (TokenReview,
-- then a SubjectAccessReview for the path and the lowercased method); every
-- use logged with who asked, and counted.
local helpers = require("helpers")
local client = require("support.apiserver_client")
local scrapers = require("support.scrapers")
local S = require("15-production.support")
local cjson = require("cjson")

local CONTROLLER = [[
local luna = require "luna"
return luna.controller {
  name = "web",
  watch = { "v1/ConfigMap", namespace = %q, labels = { suite = %q } },
  reconcile = function(req)
    luna.log.info("reconciled", { object = req.namespace .. "/" .. req.name, code = %q })
  end,
}
]]

-- deploy/rbac.yaml's luna-admin rules, plus /metrics to read the counters.
local ADMIN_RULES = {
  { nonResourceURLs = { "/admin/controllers" }, verbs = { "get" } },
  { nonResourceURLs = { "/admin/controllers/*" }, verbs = { "post" } },
  { nonResourceURLs = { "/metrics" }, verbs = { "get" } },
}

local function wait_for(luna, fn, secs, what)
  local deadline = helpers.now() + secs
  while not fn() do
    if helpers.now() > deadline then
      error(("timed out waiting for %s; output:\n%s"):format(what, luna:output()), 2)
    end
    luna.p:read_line(0.1)
  end
end

local function quote(s) return (s:gsub("%p", "%%%0")) end

-- Reconciles of ns/name (by the code of that version) logged so far.
local function reconciled(luna, ns, name, code)
  luna:output()
  local object, n = "object=" .. quote(ns .. "/" .. name) .. "%f[%s%z]", 0
  for _, line in ipairs(luna.p.out) do
    if line:find("reconciled", 1, true) and line:find(object) and line:find("code=" .. (code or "v%d")) then
      n = n + 1
    end
  end
  return n
end

-- GET /admin/controllers on an open (plain) server: the one controller.
local function list_open(luna)
  local code, body = S.get(luna.metrics .. "/admin/controllers")
  assert.equal(200, code, body)
  return cjson.decode(body).controllers[1]
end

describe("luna run admin endpoints", function()
  local srv, ids, luna, dir, suite
  local suites = 0

  setup(function()
    srv = client.start({ args = { "--admin" } })
    ids = scrapers.make(srv, { rules = ADMIN_RULES, role = "luna-spec-admin-" })
  end)
  teardown(function()
    if ids then ids:remove() end
    srv:stop()
  end)
  after_each(function()
    if luna then luna:stop() end
    luna = nil
  end)

  -- Each test watches only its own objects (label suite=N).
  local function start(code, opts)
    opts = opts or {}
    suites = suites + 1
    suite = tostring(suites)
    dir = S.controllers({ ["web.lua"] = CONTROLLER:format(srv.ns, suite, code or "v1") })
    luna = S.start(srv, dir, { secure = opts.secure ~= false, args = opts.args })
    luna:await("controller started", 15)
  end

  local function make(name, labels)
    labels = labels or {}
    labels.suite = suite
    return srv:create_cm(name, nil, labels)
  end

  -- `luna trigger` against the running luna, with the allowed identity.
  local function trigger(...)
    local args = { helpers.luna, "trigger", "--server", luna.metrics, "--insecure-skip-tls-verify" }
    for _, a in ipairs({ ... }) do args[#args + 1] = "'" .. a .. "'" end
    local out, rc = helpers.run("LUNA_TOKEN=" .. ids.allowed .. " " .. table.concat(args, " "))
    return out, rc
  end

  local function list()
    local out, rc = trigger("list")
    assert.equal(0, rc, out)
    local web = cjson.decode(out).controllers[1]
    assert.equal("web", web.name)
    return web
  end

  it("authenticates and authorizes like /metrics, and logs who asked", function()
    start()
    local url = luna.metrics .. "/admin/controllers"
    local code, body = S.get(url)
    assert.same({ 401, "Unauthorized\n" }, { code, body })
    code, body = S.get(url, nil, { token = ids.denied })
    assert.same({ 403, "Authorization denied for user " .. ids.denied_user .. "\n" }, { code, body })
    luna:await("admin request refused user=" .. quote(ids.denied_user)
      .. " remote=127%.0%.0%.1:%d+ method=GET path=/admin/controllers .*status=403", 5)
    luna:await("admin request refused user=anonymous remote=127%.0%.0%.1:%d+ method=GET "
      .. "path=/admin/controllers .*status=401", 5)
    -- no spelling of an admin path gets past authentication
    for _, p in ipairs({ "/admin/../admin/controllers", "/admin%2Fcontrollers", "/%61dmin/controllers",
        "/admin/controllers/web/pause%00x", "/admin", "//admin/controllers", "/admin/controllers/" }) do
      code, body = S.get(luna.metrics .. p, "POST")
      assert.is_true(code == 401 or code == 404 or code == 400, p .. ": " .. code .. " " .. body)
    end
    -- the refused line names the path a client chose: a terminal escape and a
    -- byte that is not UTF-8 are escaped, not written raw
    code = S.get(luna.metrics .. "/admin/%1B%5B31mred%FF", "POST")
    assert.equal(401, code)
    luna:await("admin request refused .*path=\"/admin/\\u001b%[31mred\\ufffd\"", 5)
    for _, line in ipairs(luna.p.out) do
      if line:find("red", 1, true) then assert.is_nil(line:find("[\27\128-\255]"), line) end
    end
    -- a GET grant does not cover POST: the verb is the method
    code = S.get(luna.metrics .. "/admin/controllers/web/pause", "POST", { token = ids.denied })
    assert.equal(403, code)
    code, body = S.get(url, nil, { token = ids.allowed })
    assert.equal(200, code, body)
    local web = cjson.decode(body).controllers[1]
    assert.same({ "web", true, false, 1 }, { web.name, web.started, web.paused, web.workers })

    make("one")
    wait_for(luna, function() return reconciled(luna, srv.ns, "one") == 1 end, 10, "the first reconcile")
    local out, rc = trigger("reconcile", "web", srv.ns .. "/one")
    assert.equal(0, rc, out)
    assert.same({ controller = "web", action = "reconcile", enqueued = 1, paused = false }, cjson.decode(out))
    luna:await("admin request user=" .. quote(ids.allowed_user) .. " remote=127%.0%.0%.1:%d+ action=reconcile "
      .. "controller=web what=\"?key=" .. quote(srv.ns) .. "/one\"? enqueued=1 status=200", 5)
    wait_for(luna, function() return reconciled(luna, srv.ns, "one") == 2 end, 10, "the triggered reconcile")
    -- a key that is not cached is reconciled too (the script sees it gone)
    out, rc = trigger("reconcile", "web", srv.ns .. "/never-made")
    assert.equal(0, rc, out)
    wait_for(luna, function() return reconciled(luna, srv.ns, "never-made") == 1 end, 10, "an absent key")

    local m = S.scrape(luna, { token = ids.allowed })
    assert.equal(2, S.value(m, "luna_triggers_total", { controller = "web", action = "reconcile" }))
    assert.equal(0, S.value(m, "luna_triggers_total", { controller = "web", action = "pause" }))
    assert.equal(2, S.value(m, "luna_trigger_keys_total", { controller = "web" }))
    assert.equal(0, S.value(m, "luna_controller_paused", { controller = "web" }))
  end)

  it("pauses: keys queue up deduplicated, survive a reload, and run once on resume", function()
    start("v1")
    local out, rc = trigger("pause", "web")
    assert.equal(0, rc, out)
    local answer = cjson.decode(out)
    assert.same({ "pause", true, true }, { answer.action, answer.paused, answer.changed })
    luna:await("admin request .*action=pause controller=web what=changed status=200", 5)
    assert.is_true(cjson.decode((trigger("pause", "web"))).changed == false, "pausing twice changes nothing")

    make("held")
    for i = 1, 3 do
      local code = srv:request("PATCH", srv:ns_path("configmaps", "held"), { data = { n = tostring(i) } },
        { content_type = "application/merge-patch+json" })
      assert.equal(200, code)
    end
    wait_for(luna, function() return list().queued == 1 end, 10, "one queued key for four events")
    assert.equal(1, S.value(S.scrape(luna, { token = ids.allowed }), "luna_controller_paused", { controller = "web" }))

    -- a reload keeps the pause and the queue
    helpers.write_file(dir .. "/web.lua", CONTROLLER:format(srv.ns, suite, "v2"))
    luna:kill(1) -- SIGHUP
    luna:await("reload done .*result=success", 15)
    make("later")
    wait_for(luna, function() return list().queued == 2 end, 10, "two queued keys after the reload")
    local web = list()
    assert.is_true(web.paused)
    assert.equal(0, reconciled(luna, srv.ns, "held") + reconciled(luna, srv.ns, "later"))
    assert.equal(1, S.value(S.scrape(luna, { token = ids.allowed }), "luna_controller_paused", { controller = "web" }))

    out, rc = trigger("resume", "web")
    assert.equal(0, rc, out)
    assert.is_false(cjson.decode(out).paused)
    wait_for(luna, function()
      local w = list()
      return w.queued == 0 and w.active == 0 and reconciled(luna, srv.ns, "later", "v2") == 1
    end, 10, "the queue to drain")
    assert.equal(1, reconciled(luna, srv.ns, "held", "v2"), "four events and a reload: one reconcile")
    assert.equal(0, reconciled(luna, srv.ns, "held", "v1"))
    local m = S.scrape(luna, { token = ids.allowed })
    assert.equal(0, S.value(m, "luna_controller_paused", { controller = "web" }))
    assert.equal(2, S.value(m, "luna_triggers_total", { controller = "web", action = "pause" }))
    assert.equal(1, S.value(m, "luna_triggers_total", { controller = "web", action = "resume" }))
  end)

  it("reconciles every cached key, or those a label selector picks; refuses bad requests", function()
    -- open admin endpoints on a plain metrics server, as for development
    start("v1", { secure = false, args = { "--admin-endpoints=true" } })
    luna:await("admin endpoints enabled .*authorization=\"none", 1)
    make("a1", { tier = "a" })
    make("a2", { tier = "a" })
    make("b1", { tier = "b" })
    wait_for(luna, function() return reconciled(luna, srv.ns, "b1") == 1 and reconciled(luna, srv.ns, "a2") == 1 end,
      10, "the first reconciles")
    local base = luna.metrics .. "/admin/controllers/web/reconcile"
    local code, body = S.get(base .. "?selector=tier%3Da", "POST")
    assert.equal(200, code, body)
    assert.equal(2, cjson.decode(body).enqueued)
    luna:await("admin request user=anonymous .*action=reconcile controller=web what=\"selector=tier=a\" enqueued=2", 5)
    wait_for(luna, function() return reconciled(luna, srv.ns, "a1") == 2 and reconciled(luna, srv.ns, "a2") == 2 end,
      10, "the selected keys")
    assert.equal(1, reconciled(luna, srv.ns, "b1"))
    code, body = S.get(base .. "?all=true", "POST")
    assert.equal(200, code, body)
    assert.equal(3, cjson.decode(body).enqueued)
    wait_for(luna, function() return reconciled(luna, srv.ns, "b1") == 2 end, 10, "every key")

    local bad = {
      { "?key=a%20b", 400, "key: want NAMESPACE/NAME or NAME" },
      { "?key=a/b/c", 400, "key: want NAMESPACE/NAME or NAME" },
      -- web has no `every`: its reconcile would get a periodic request it never expects
      { "?key=%40every", 400, "key: @every is periodic work, and this controller has no 'every'" },
      { "?key=x&all=true", 400, "want one of" },
      { "", 400, "want one of" },
      { "?all=yes", 400, "all: want true" },
      { "?colour=red", 400, "unknown parameter" },
      { "?selector=a%20b", 400, "selector: unable to parse requirement" },
      { "?selector=", 400, "selector: empty" },
    }
    for _, case in ipairs(bad) do
      code, body = S.get(base .. case[1], "POST")
      assert.equal(case[2], code, case[1] .. ": " .. body)
      assert.matches(case[3], cjson.decode(body).error, 1, true)
    end
    code, body = S.get(luna.metrics .. "/admin/controllers/nope/reconcile?all=true", "POST")
    assert.same({ 404, "no such controller" }, { code, cjson.decode(body).error })
    code, body = S.get(luna.metrics .. "/admin/controllers/web/explode", "POST")
    assert.equal(404, code, body)
    -- a 405's Allow names what the path takes (it said "GET, HEAD" for the actions)
    local headers
    code, body, headers = S.get(luna.metrics .. "/admin/controllers/web/pause")
    assert.equal(405, code, body)
    assert.matches("\r?\n[Aa]llow: POST\r?\n", headers)
    code, body, headers = S.get(luna.metrics .. "/admin/controllers", "POST")
    assert.equal(405, code, body)
    assert.matches("\r?\n[Aa]llow: GET, HEAD\r?\n", headers)
    luna:await("admin request user=anonymous .*action=reconcile controller=nope status=404 error=\"no such controller\"", 5)
    -- nothing of that reached the queue: the counts stayed
    assert.equal(2, reconciled(luna, srv.ns, "b1"))
    assert.equal(0, list_open(luna).queued)
  end)

  -- The documented bound is 1000 keys; they travel in the query, which
  -- libmicrohttpd's default 32 KB connection memory cut at ~900 short keys
  -- (HTTP 414), so `luna trigger` with 1000 ordinary keys failed.
  it("takes 1000 keys of the longest Kubernetes names in one request, and refuses 1001 keys", function()
    start("v1", { secure = false, args = { "--admin-endpoints=true" } })
    local ns = ("n"):rep(63)
    local keys = {}
    for i = 1, 1000 do keys[i] = ns .. "/" .. ("k"):rep(245) .. ("%08d"):format(i) end
    -- 320 KB of arguments: through xargs (one sh -c argument is at most 128 KB)
    local tmp = helpers.tmpdir()
    helpers.write_file(tmp .. "/keys", table.concat(keys, "\n") .. "\n")
    local out, rc = helpers.run(("xargs -x -n 2000 -s 1000000 -a %s/keys %s trigger --server %s --token t "
      .. "--insecure reconcile web"):format(tmp, helpers.luna, luna.metrics))
    assert.equal(0, rc, out:sub(1, 400))
    assert.equal(1000, cjson.decode(out).enqueued)
    -- the audit line names the keys that fit in 4000 bytes (12 of these),
    -- then how many more
    luna:await("admin request user=anonymous .*action=reconcile controller=web what=\"keys="
      .. quote(table.concat(keys, ",", 1, 12)) .. " %(and 988 more%)\" enqueued=1000 status=200", 5)
    -- read the 1000 reconciles' lines (a full stderr pipe would stall luna)
    wait_for(luna, function() return luna:count("reconciled.*" .. ("k"):rep(245)) >= 1000 end, 60,
      "the 1000 reconciles")
    local short = {}
    for i = 1, 1001 do short[i] = "k" .. i end
    local code, body, _, said = S.get(luna.metrics .. "/admin/controllers/web/reconcile?key="
      .. table.concat(short, "&key="), "POST")
    assert.equal(400, code, said)
    assert.same({ 400, "at most 1000 keys per request" }, { code, cjson.decode(body).error })
  end)

  it("has no admin endpoints on a plain metrics server unless asked", function()
    start("v1", { secure = false })
    local code = S.get(luna.metrics .. "/admin/controllers")
    assert.equal(404, code)
    assert.equal(0, luna:count("admin endpoints enabled"))
  end)
end)

describe("luna trigger", function()
  it("refuses bad usage with status 2", function()
    for _, args in ipairs({ "", "frobnicate", "reconcile", "reconcile web", "reconcile web k --all",
        "pause", "pause a b", "list x", "--all list", "--server ftp://x list",
        "--token a --token-file b list", "--certificate-authority x --insecure-skip-tls-verify list" }) do
      local out, rc = helpers.run(helpers.luna .. " trigger " .. args)
      assert.equal(2, rc, args .. ": " .. out)
      assert.matches("luna trigger: ", out, 1, true)
    end
  end)

  it("says why when nothing answers, with status 1", function()
    local out, rc = helpers.run(helpers.luna .. " trigger --insecure --server http://127.0.0.1:1 --token t list")
    assert.equal(1, rc, out)
    assert.matches("luna trigger: http://127.0.0.1:1: ", out, 1, true)
  end)

  -- Issue 24: `luna trigger` trusted whatever answered at --server.
  describe("against a server it has no reason to trust", function()
    local server, base
    setup(function()
      server = helpers.spawn({ helpers.fixtures .. "/httpd" })
      base = select(2, server:expect("listening on (http://127%.0%.0%.1:%d+)"))
    end)
    teardown(function() server:stop() end)

    -- The fixture's /echo answers with the request's headers; the query
    -- swallows the admin path luna appends.
    it("sends no bearer token over plain http unless told --insecure", function()
      -- the fixture's count of connections it accepted (read with no token)
      local function connections()
        local out = helpers.run(("%s trigger --server '%s/connections?x=' list"):format(helpers.luna, base))
        return assert(tonumber(out:match("^%d+")), out)
      end
      local before = connections()
      local out, rc = helpers.run(("%s trigger --server '%s/echo?x=' --token sekrit list")
        :format(helpers.luna, base))
      assert.equal(before + 1, connections(), "luna trigger did not even connect")
      assert.equal(2, rc, out)
      assert.matches("luna trigger: refusing to send the bearer token over plain http://", out, 1, true)
      assert.matches("--insecure", out, 1, true)
      assert.is_nil(out:find("sekrit", 1, true), out)
      out, rc = helpers.run(("%s trigger --insecure --server '%s/echo?x=' --token sekrit list")
        :format(helpers.luna, base))
      assert.equal(0, rc, out)
      assert.equal("Bearer sekrit", cjson.decode(out).headers.authorization)
      -- without a token there is nothing to protect: no flag needed (the
      -- count above is read that way)
    end)

    it("reads at most 4 MiB of an answer, and says so", function()
      for _, chunked in ipairs({ "0", "1" }) do
        local out, rc = helpers.run(("{ %s trigger --server '%s/bytes?chunked=%s&n=209715200&x=' list >/dev/null; }")
          :format(helpers.luna, base, chunked))
        assert.equal(1, rc, out:sub(1, 300))
        assert.matches("luna trigger: the answer is larger than 4 MiB", out, 1, true)
        assert.is_true(#out < 4096, "nothing of the answer is printed")
      end
      -- an answer under the bound is printed whole
      local out, rc = helpers.run(("%s trigger --server '%s/bytes?n=3000000&x=' list"):format(helpers.luna, base))
      assert.equal(0, rc, out:sub(1, 300))
      assert.equal(3000000, #out)
    end)
  end)
end)

