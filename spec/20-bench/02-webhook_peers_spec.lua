-- bench/peers.lua's webhook phase (`make bench-peers`; docs/performance.md):
-- the ratio lines and their targets, the load generator's checking of the
-- answers (it must catch a webhook that defaults wrong), and, when the Go
-- peers are built, one tiny run end to end with every line and key.
-- Nothing here is timed.
local helpers = require("helpers")
local certs = require("support.certs")

package.path = "bench/?.lua;" .. package.path
local peers = require("peers")

local function keys_of(line)
  local t = {}
  for k, v in line:gmatch("(%S+)=(%S+)") do t[k] = v end
  return t
end

-- The built peers' directory, or nil (and the spec pending).
local function peers_dir()
  local dir = helpers.run("env -u LD_PRELOAD bench/peers/build.sh --print-dir"):match("[^\n]+")
  if dir and helpers.read_file(dir .. "/complete") then return dir end
  pending("the Go peers are not built (bench/peers/build.sh or `make bench-peers` builds them " ..
    "from the Go module proxy, minutes)")
end

describe("bench/peers.lua webhook phase: arithmetic and options", function()
  it("prints luna ÷ controller-runtime per figure, with the targets of p99 and CPU", function()
    local lines = peers.webhook_ratio_lines(
      { p50_ms = 1, p99_ms = 2, max_ms = 9, cpu_s_per_10k = 1.5, net_cpu_s_per_10k = 1 },
      { p50_ms = 2, p99_ms = 5, max_ms = 3, cpu_s_per_10k = 2.5, net_cpu_s_per_10k = 0 })
    assert.same({
      "bench ratio_webhook_p50 luna/controller-runtime=0.50",
      "bench ratio_webhook_p99 luna/controller-runtime=0.40 target=0.50 met=yes",
      "bench ratio_webhook_max luna/controller-runtime=3.00",
      "bench ratio_webhook_cpu_per_10k luna/controller-runtime=0.60 target=0.50 met=no",
      "bench ratio_webhook_net_cpu_per_10k luna/controller-runtime=-",
    }, lines)
  end)

  it("takes the medians of the webhook keys", function()
    local m = peers.medians({ luna = { { p99_ms = 3, requests = 10 }, { p99_ms = 1 }, { p99_ms = 2 } } },
      peers.WEBHOOK_KEYS)
    assert.equal(2, m.luna.p99_ms)
    assert.equal(10, m.luna.requests)
    assert.is_nil(m.luna.sync_s)
  end)

  it("refuses an unknown phase, naming the ones it knows", function()
    local out, rc = helpers.run("env -u LD_PRELOAD -u ASAN_OPTIONS LUNA_BUILD=" .. helpers.build ..
      " luajit bench/peers.lua phases=nope 2>&1")
    assert.equal(2, rc, out)
    assert.matches("bad argument phases=nope", out, 1, true)
    assert.matches("phases=all|peers|webhook", out, 1, true)
  end)
end)

describe("peers-load webhook", function()
  -- luna serving `hooks` (a webhooks file) with a certificate of the
  -- spec's CA; returns the process and the base URL.
  local function serve(dir, hooks)
    os.execute("mkdir -p " .. dir .. "/ctl")
    helpers.write_file(dir .. "/ctl/webhooks.lua", hooks)
    local p = helpers.spawn({ helpers.luna, "run", "--dev-server", "--metrics-bind-address=0",
      "--health-probe-bind-address=0", "--webhook-bind-address=127.0.0.1:0",
      "--webhook-cert-path=" .. dir, dir .. "/ctl" })
    local _, addr = p:expect('webhook server listening.*address="?([%d.:]+)', 60)
    return p, "https://" .. addr
  end

  local function load(bin, dir, p, url)
    return helpers.run(("env -u LD_PRELOAD %s/peers-load webhook %s %s/tls-ca.crt %d 200 1 1 2 2>&1"):format(
      bin, url, dir, p.pid))
  end

  it("finds the bench's Lua webhooks right and a wrong default wrong", function()
    local bin = peers_dir()
    if not bin then return end
    local dir = helpers.tmpdir()
    certs.make_cert(dir, "tls")

    local p, url = serve(dir, peers.WEBHOOKS)
    local out, rc = load(bin, dir, p, url)
    p:stop()
    assert.equal(0, rc, out)
    local k = keys_of(assert(out:match("load webhook [^\n]+"), out))
    assert.equal("0", k.errors, out)
    assert.equal("200", k.requests, out)
    for _, key in ipairs({ "p50_ms", "p99_ms", "max_ms", "cpu_s", "rate", "seconds" }) do
      assert.is_number(tonumber(k[key]), key .. ": " .. out)
    end

    -- the same webhooks defaulting spec.mode to "fast": every defaulted
    -- object comes back wrong, and the load generator says so
    local wrong = peers.WEBHOOKS:gsub('spec.mode = "safe"', 'spec.mode = "fast"')
    assert.are_not.equal(peers.WEBHOOKS, wrong)
    p, url = serve(dir, wrong)
    out, rc = load(bin, dir, p, url)
    p:stop()
    assert.equal(0, rc, out)
    k = keys_of(assert(out:match("load webhook [^\n]+"), out))
    assert.is_true(tonumber(k.errors) > 0, out)
    assert.matches("patched to mode=fast class=%w+, want safe", out)
  end)
end)

describe("bench/peers.lua webhook phase end to end", function()
  it("prints a run per subject, the medians and the ratio lines", function()
    if not peers_dir() then return end
    local out, rc = helpers.run("env -u LD_PRELOAD -u ASAN_OPTIONS -u KUBECONFIG LUNA_BUILD=" ..
      helpers.build .. " luajit bench/peers.lua phases=webhook objects=60 rounds=1 wrate=100 " ..
      "wseconds=1 warmup=1 churn=20 2>&1")
    assert.equal(0, rc, out)
    local runs, medians, ratios = {}, {}, {}
    for line in out:gmatch("[^\n]+") do
      local kind = line:match("^bench (%S+)")
      if kind == "webhook_run" then runs[#runs + 1] = keys_of(line)
      elseif kind == "webhook_median" then medians[#medians + 1] = keys_of(line)
      elseif kind and kind:match("^ratio_") then ratios[kind] = keys_of(line) end
    end
    assert.equal(2, #runs, out)
    assert.equal(2, #medians, out)
    assert.is_nil(out:match("peers_run"), out)   -- phases=webhook: the webhook phase only
    local seen = {}
    for _, r in ipairs(runs) do
      seen[r.subject] = true
      for _, k in ipairs(peers.WEBHOOK_KEYS) do
        assert.is_number(tonumber(r[k[1]]), k[1] .. " of " .. r.subject .. ": " .. out)
      end
      assert.equal("100", r.requests, out)
    end
    assert.same({ luna = true, controller_runtime = true }, seen)
    for _, r in ipairs(peers.WEBHOOK_RATIOS) do
      local line = assert(ratios[r[1]], r[1] .. ": " .. out)
      assert.is_number(tonumber(line["luna/controller-runtime"]), r[1] .. ": " .. out)
      if r[3] then assert.is_true(line.met == "yes" or line.met == "no", r[1] .. ": " .. out) end
    end
  end)
end)
