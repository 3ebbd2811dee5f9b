-- Runs the attack files of one isolation class (spec/12-isolation/attacks/
-- <class>-*.lua, headers as attacks/README.md describes) against the real
-- `luna`, for the class specs.  The corpus runner (05-attacks_spec.lua)
-- runs every file in more scenarios; this keeps each class spec honest on
-- its own.
--
--   local attacks = require("12-isolation.attack_files")
--   attacks.list("2")                  -- {{file=, name=, source=, expect=, error=, reached=, alone=}...}
--   attacks.refused(case)              -- asserts load fails naming the file and the error text
--   attacks.run(srv, cases, args)      -- one host with the cases and a canary, with the
--                                         flags a user gets (+ args): each is
--                                         exercised, the canary keeps reconciling,
--                                         /healthz answers 200, SIGTERM exits 0
local helpers = require("helpers")
local support = require("12-isolation.support")

local attacks = {}

local DIR = "spec/12-isolation/attacks"

function attacks.list(class)
  local out = {}
  local p = io.popen("ls " .. DIR .. "/" .. class .. "-*.lua 2>/dev/null")
  for file in p:lines() do
    local source = assert(helpers.read_file(file))
    local case = { file = file, name = file:match("([^/]+)%.lua$"), source = source }
    for key, value in source:gmatch("%-%- (%a+): ([^\n]*)") do
      if key == "attack" or key == "expect" or key == "error" or key == "reached" or key == "alone" then
        case[key] = case[key] or value
      end
    end
    assert(case.expect == "runs" or case.expect == "refused", file .. ": no '-- expect:' header")
    out[#out + 1] = case
  end
  p:close()
  assert(#out > 0, "no attack files for class " .. class)
  return out
end

local CANARY = [[
local luna = require "luna"
return luna.controller {
  name = "canary", watch = { "v1/ConfigMap", namespace = "@NS@", labels = { canary = "yes" } },
  reconcile = function(req)
    local cm = luna.cache("v1/ConfigMap"):get(req.namespace, req.name)
    if not cm then return end
    local token = cm.data and cm.data.token
    if luna.meta.annotation(cm, "seen") == token then return end
    local _, err = luna.patch("v1/ConfigMap", req.namespace, req.name,
      { metadata = { annotations = { seen = token } } })
    if err then return nil, err end
  end,
}
]]

-- Refused: `luna run` with the file exits 1 naming it, with its error text.
function attacks.refused(case)
  local out, rc = support.load_only({ [case.name .. ".lua"] = case.source:gsub("@NS@", "default") })
  assert(rc == 1, case.name .. ": expected the load to fail, rc=" .. tostring(rc) .. "\n" .. out)
  local line = out:match("[^\n]*controller load failed[^\n]*" .. case.name:gsub("%-", "%%-") .. "%.lua[^\n]*")
  assert(line, case.name .. ": no 'controller load failed' line naming the file\n" .. out)
  assert(line:find(case.error, 1, true), case.name .. ": the error lacks '" .. case.error .. "'\n" .. line)
  assert(not out:find("PANIC", 1, true) and not out:find("Sanitizer", 1, true), out)
  return line
end

-- Reads everything the host has written so far: a host whose log pipe is
-- full blocks in write(2) and would look hung.
local function drain(p)
  local deadline = helpers.now() + 0.2
  while helpers.now() < deadline and p:read_line(0.001) do end
end

-- GET /healthz with curl while the host's output keeps being read (a host
-- blocked on a full log pipe would look dead): the status and seconds.
local function healthz(p, port)
  local t0 = helpers.now()
  local c = helpers.spawn({ "curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
    "http://127.0.0.1:" .. port .. "/healthz" }, { env = { LD_PRELOAD = false } })
  while c:alive() do drain(p) c:wait(0.005) end
  local secs = helpers.now() - t0
  c:_fill(0.2)
  c:stop()
  return (table.concat(c.out, "\n") .. (c.buf or "")):match("%d+"), secs
end

local function canary_round(srv, p, round)
  local name = "canary-" .. round
  srv:request("POST", srv:ns_path("configmaps"), { apiVersion = "v1", kind = "ConfigMap",
    metadata = { name = name, labels = { canary = "yes" } }, data = { token = "t" .. round } })
  local deadline = helpers.now() + 30
  repeat
    local code, cm = srv:request("GET", srv:ns_path("configmaps", name))
    if code == 200 and cm.metadata.annotations and cm.metadata.annotations.seen == "t" .. round then
      return true
    end
    drain(p)
    p:read_line(0.05)
  until helpers.now() > deadline
  error("the canary stopped reconciling (round " .. round .. ")\n" .. table.concat(p.out, "\n"))
end

-- Every case in one host next to the canary, exercised on target-a and
-- target-b; then the canary, /healthz and a clean SIGTERM.
function attacks.run(srv, cases, args)
  local files = { ["canary.lua"] = CANARY }
  for _, case in ipairs(cases) do files[case.name .. ".lua"] = case.source end
  -- the budgets and the heap cap a user gets (no tightened flags: a class
  -- spec shows what holds for them; args may add flags)
  local argv = { "--health-probe-bind-address", "127.0.0.1:0", "--shutdown-grace-period", "5s" }
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  local p = support.run(srv, files, argv)
  local ok, err = pcall(function()
    local listen = support.wait_line(p, { "health probe server listening" }, 20)
    local port = listen:match("address=[^%s]*:(%d+)")
    support.wait_line(p, { "caches synced" }, 30)
    for _, t in ipairs({ "target-a", "target-b" }) do
      srv:request("POST", srv:ns_path("configmaps"), { apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = t, labels = { app = "target" } }, data = { k = "v" } })
    end
    -- Each line is looked at once, as it comes, for every case: scanning
    -- the whole output again on each poll made the reader fall behind a
    -- host that logs every retry, on a busy machine (a case's line was
    -- still unread in the pipe when its 30 s ran out).
    local marks = { "reconcile done", "reconcile failed", "lua callback failed", "index function failed",
                    "watches map result ignored", "requeue after",
                    "reconcile abandoned" }
    local seen, scanned = {}, 0
    local function scan()
      for i = scanned + 1, #p.out do
        local line = p.out[i]
        for _, case in ipairs(cases) do
          if not seen[case.name] and line:find("controller=" .. case.name, 1, true) then
            if case.reached then
              seen[case.name] = line:find(case.reached, 1, true) ~= nil
            else
              for _, m in ipairs(marks) do seen[case.name] = seen[case.name] or line:find(m, 1, true) ~= nil end
            end
          end
        end
      end
      scanned = #p.out
    end
    for _, case in ipairs(cases) do
      local deadline = helpers.now() + 30
      repeat
        scan()
        if not seen[case.name] then drain(p) p:read_line(0.05) end
      until seen[case.name] or helpers.now() > deadline or not p:alive()
      scan()
      assert(seen[case.name], case.name .. " was not exercised")
    end
    for round = 1, 2 do
      canary_round(srv, p, round)
      local code, secs = healthz(p, port)
      -- liveness, not a latency figure (timing is for bench/; the corpus
      -- runner holds the 1 s bound): the loop answers while attacked
      assert(code == "200", ("/healthz: %s in %.2f s"):format(tostring(code), secs))
    end
    local all = table.concat(p.out, "\n")
    assert(not all:find("PANIC", 1, true) and not all:find("Sanitizer", 1, true), all)
  end)
  if not ok then
    p:stop()
    error(tostring(err) .. "\n-- last lines:\n" .. table.concat(p.out, "\n", math.max(1, #p.out - 40)), 0)
  end
  p:kill(15)
  local rc = p:wait(20)
  assert(rc == 0, "SIGTERM exit status " .. tostring(rc) .. "\n" .. table.concat(p.out, "\n", math.max(1, #p.out - 40)))
  return p
end

return attacks
