-- bench/peers.lua (`make bench-peers`): the arithmetic of its medians and
-- ratio lines, and, when the Go peers are built (bench/peers/build.sh puts
-- them in ~/.cache/luna-peers), one tiny run end to end checking that every
-- line has every key with a number.  Nothing here is timed: the figures are
-- the benchmark's business, the spec checks their form.
local helpers = require("helpers")

package.path = "bench/?.lua;" .. package.path
local peers = require("peers")

local function keys_of(line)
  local t = {}
  for k, v in line:gmatch("(%S+)=(%S+)") do t[k] = v end
  return t
end

describe("bench/peers.lua arithmetic", function()
  it("takes the median of odd and even counts, ignoring missing values", function()
    assert.equal(2, peers.median({ 3, 1, 2 }))
    assert.equal(2.5, peers.median({ 4, 1, 3, 2 }))
    assert.is_nil(peers.median({}))
    local m = peers.medians({ luna = { { sync_s = 1 }, { sync_s = 3 }, { sync_s = 2, rss_mb = 10 } } })
    assert.equal(2, m.luna.sync_s)
    assert.equal(10, m.luna.rss_mb)
    assert.is_nil(m.luna.e2e_p50_ms)
  end)

  it("divides luna's median by the peer's for every ratio key, in order", function()
    local luna = { dispatch_per_s = 300, rss_mb = 10, sync_s = 1, relist_peak_rss_mb = 12,
                   watch_events_per_cpu_s = 50000, e2e_p50_ms = 0.5, e2e_p99_ms = 3,
                   status_cpu_s_per_100k = 20 }
    local peer = { dispatch_per_s = 100, rss_mb = 40, sync_s = 2, relist_peak_rss_mb = 48,
                   watch_events_per_cpu_s = 25000, e2e_p50_ms = 1, e2e_p99_ms = 0,
                   status_cpu_s_per_100k = 80 }
    local line = peers.ratio_line("client_go", luna, peer)
    assert.equal("bench ratio_client_go dispatch=3.00 rss=0.25 sync=0.50 relist_rss=0.25 " ..
      "watch=2.00 p50=0.50 p99=- status_cpu=0.25", line)
  end)

  it("prints a dash for a figure a run could not take", function()
    local line = peers.run_line("peers_run", "luna", 2, { sync_s = 0.25, rss_mb = 123.456 })
    local k = keys_of(line)
    assert.equal("luna", k.subject)
    assert.equal("2", k.round)
    assert.equal("0.250", k.sync_s)
    assert.equal("123", k.rss_mb)
    assert.equal("-", k.relist_peak_rss_mb)
  end)

  it("reads key=value fields from luna's log lines and the peers' lines alike", function()
    assert.equal("20000", peers.field("peer dispatched reconciles=20000 seconds=0.5", "reconciles"))
    assert.equal("relisted-r1-luna",
      peers.field('2026-11-26T17:00:00Z info peer marker controller=peers phase="relisted-r1-luna"', "phase"))
    assert.is_nil(peers.field("peer dispatched xreconciles=3", "reconciles"))
  end)
end)

describe("bench/peers.lua end to end", function()
  it("prints a run per subject, the medians and the two ratio lines", function()
    local dir = helpers.run("env -u LD_PRELOAD bench/peers/build.sh --print-dir"):match("[^\n]+")
    if not (dir and helpers.read_file(dir .. "/complete")) then
      pending("the Go peers are not built (bench/peers/build.sh or `make bench-peers` builds them " ..
        "from the Go module proxy, minutes): only the arithmetic above ran")
      return
    end
    local out, rc = helpers.run("env -u LD_PRELOAD -u ASAN_OPTIONS -u KUBECONFIG LUNA_BUILD=" ..
      helpers.build .. " luajit bench/peers.lua phases=peers objects=60 items=20 rounds=1 watch=100 rate=100 " ..
      "seconds=1 warmup=1 2>&1")
    assert.equal(0, rc, out)
    local runs, medians, ratios = {}, {}, {}
    for line in out:gmatch("[^\n]+") do
      local kind = line:match("^bench (%S+)")
      if kind == "peers_run" then runs[#runs + 1] = keys_of(line)
      elseif kind == "peers_median" then medians[#medians + 1] = keys_of(line)
      elseif kind and kind:match("^ratio_") then ratios[kind] = keys_of(line) end
    end
    assert.equal(3, #runs, out)
    assert.equal(3, #medians, out)
    local seen = {}
    for _, r in ipairs(runs) do
      seen[r.subject] = true
      for _, k in ipairs(peers.KEYS) do
        assert.is_number(tonumber(r[k[1]]), k[1] .. " of " .. r.subject .. ": " .. out)
      end
    end
    assert.same({ luna = true, client_go = true, controller_runtime = true }, seen)
    for _, name in ipairs({ "ratio_client_go", "ratio_controller_runtime" }) do
      local r = assert(ratios[name], out)
      for _, k in ipairs(peers.KEYS) do
        if k[2] then assert.is_number(tonumber(r[k[2]]), name .. " " .. k[2] .. ": " .. out) end
      end
    end
  end)
end)
