-- The hostile-response corpus (spec/12-isolation/responses/, see its
-- README.md): every case is an answer an attacker controlling or
-- impersonating the API server could send, played to the real host in place
-- of the server's answer to a LIST, a WATCH, a GET or a write of one
-- controller's resource.  The host must keep reconciling the canary, answer
-- /healthz within 1 s, log an error naming the problem, and, once the server
-- behaves again, bring the attacked informer's cache back to the server's
-- state and reconcile the attacked controller again; at the end its peak RSS
-- is under the stated bound and SIGTERM exits 0 with no sanitizer report.
local support = require("12-isolation.support")
local RR = require("12-isolation.response_runner")
local client = require("support.apiserver_client")

local corpus, problems = RR.corpus()

-- Behind the proxy, a real control plane only serves the recovery, and the
-- corpus takes minutes more there; LUNA_HOSTILE_KUBE=1 runs it there.  (The
-- one case whose recovery depends on the server's own answer,
-- watch-rv-huge, runs against both in spec/07-informer/11-unreached_rv_spec.lua.)
if client.real() and os.getenv("LUNA_HOSTILE_KUBE") ~= "1" then
  describe("the hostile-response corpus", function()
    it("runs against the dev server (LUNA_HOSTILE_KUBE=1 runs it against this cluster)", function()
      client.dev_only("the hostile answers are a proxy's; kube-apiserver behind it only serves the "
        .. "recovery (watch-rv-huge's recovery runs against it in spec/07-informer/11-unreached_rv_spec.lua)")
    end)
  end)
  return
end

describe("the hostile-response corpus", function()
  local srv, proxy
  setup(function()
    -- bookmarks every 0.5 s keep the healthy watches from going silent:
    -- the host of a case with '# idle-timeout: 2' (watch-rv-huge) replaces
    -- a watch silent for 2 s, and a dozen informers doing so every 2 s
    -- flooded the log and the proxy on a loaded machine
    srv = support.server{ args = { "--bookmark-interval", "0.5" } }
    proxy = RR.proxy(srv)
  end)
  teardown(function()
    if proxy then proxy:stop() end
    support.stop(srv)
  end)

  it("follows the convention (responses/README.md)", function()
    assert.is_true(#corpus >= (tonumber(os.getenv("LUNA_HOSTILE_MIN")) or 40), "fewer than 40 cases in " .. RR.DIR)
    assert.same({}, problems)
  end)

  -- a host syncs one way (--watch-list): cases batch with their mode's
  local batches, alone, open = {}, {}, {}
  -- LUNA_HOSTILE_ONLY=p1,p2: only the cases whose name matches one of the
  -- Lua patterns
  local only = os.getenv("LUNA_HOSTILE_ONLY")
  local function wanted(name)
    if not only then return true end
    for p in only:gmatch("[^,]+") do
      if name:match(p) then return true end
    end
    return false
  end
  for _, c in ipairs(corpus) do
    if not wanted(c.name) then -- left out
    elseif c.alone then
      alone[#alone + 1] = { c }
    else
      local b = open[c.host]
      if not b or #b >= RR.BATCH then
        b = {}
        open[c.host] = b
        batches[#batches + 1] = b
      end
      b[#b + 1] = c
    end
  end
  for _, b in ipairs(alone) do batches[#batches + 1] = b end
  for _, batch in ipairs(batches) do
    local list = {}
    for _, c in ipairs(batch) do list[#list + 1] = c.name end
    local how = batch[1].mode == "off" and "--watch-list=off"
      or ("--watch-list=%s --min-watch-timeout=%s"):format(batch[1].mode, batch[1].watch_timeout)
    if batch[1].idle_timeout then how = how .. (" --watch-idle-timeout=%ds"):format(batch[1].idle_timeout) end
    it(("survives %s (%s)"):format(table.concat(list, ", "), how), function()
      RR.run_batch(srv, proxy, batch)
    end)
  end
end)
