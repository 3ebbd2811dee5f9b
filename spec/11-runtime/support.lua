-- Shared by the spec/11-runtime specs: `luna run` (JSON logs, debug level)
-- over small purpose-built controllers, and queries over its log lines.
--
--   local rt = require("11-runtime.support")
--   local token = rt.token()                   -- unique label value for this run
--   local env = rt.start{ sources = { ["a.lua"] = rt.source(code, { TOKEN = token }) },
--                         server_args = {...}, seed = {...} }
--   rt.records(env)                            -- every JSON log line so far, decoded
--   rt.find(env, pred) / rt.all(env, pred)     -- the first / every record pred accepts
--   rt.wait(env, pred, secs, what)             -- reads output until pred accepts a record
--   rt.msg("reconcile done", { key = k })      -- a pred: msg and fields equal
--   rt.seconds(record)                         -- its timestamp in seconds (of the day)
--   rt.line_of(code, text)                     -- the line of code where text first occurs
--   rt.create(env, path, obj)                  -- POST, asserting 201; returns the object
local cjson = require("cjson")
local luna_env = require("support.luna_env")

local rt = {}

-- The label every spec object carries, so controllers watching all
-- namespaces of a real cluster only see this run's objects.
rt.LABEL = "luna.dev/spec"

function rt.token()
  return ("t%d%d"):format(os.time() % 100000, math.random(100000, 999999))
end

-- Replaces @NAME@ in code with vars.NAME.
function rt.source(code, vars)
  return (code:gsub("@(%u+)@", function(k)
    assert(vars[k], "no value for @" .. k .. "@")
    return vars[k]
  end))
end

function rt.line_of(code, text)
  local n = 0
  for line in (code .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:find(text, 1, true) then return n end
  end
  error("no line with " .. text)
end

function rt.start(opts)
  local args = { "--log-format", "json" }
  for _, a in ipairs(opts.args or {}) do args[#args + 1] = a end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.args = args
  local env = luna_env.start(o)
  env.parsed = {}
  env.nparsed = 0
  return env
end

function rt.records(env)
  local out = env.luna.out
  for i = env.nparsed + 1, #out do
    local ok, rec = pcall(cjson.decode, out[i])
    if ok and type(rec) == "table" then env.parsed[#env.parsed + 1] = rec end
  end
  env.nparsed = #out
  return env.parsed
end

function rt.find(env, pred)
  for _, r in ipairs(rt.records(env)) do
    if pred(r) then return r end
  end
end

function rt.all(env, pred)
  local list = {}
  for _, r in ipairs(rt.records(env)) do
    if pred(r) then list[#list + 1] = r end
  end
  return list
end

function rt.wait(env, pred, secs, what)
  return env:wait(function() return rt.find(env, pred) end, secs or 15, what)
end

-- Waits until pred accepts at least n records; returns them all.
function rt.wait_count(env, pred, n, secs, what)
  return env:wait(function()
    local list = rt.all(env, pred)
    return #list >= n and list
  end, secs or 15, what)
end

function rt.msg(msg, fields)
  return function(r)
    if r.msg ~= msg then return false end
    for k, v in pairs(fields or {}) do
      if r[k] ~= v then return false end
    end
    return true
  end
end

-- "2026-11-21T06:55:04.305Z" → seconds since midnight (specs compare
-- records of one short run).
function rt.seconds(r)
  local h, m, s = r.ts:match("T(%d+):(%d+):([%d.]+)Z$")
  return tonumber(h) * 3600 + tonumber(m) * 60 + tonumber(s)
end

function rt.create(env, path, obj)
  local code, got, raw = env.srv:request("POST", path, obj)
  assert(code == 201, ("POST %s: HTTP %s %s"):format(path, tostring(code), raw))
  return got
end

function rt.cm(env, name, data, labels, extra)
  local meta = { name = name, labels = labels }
  for k, v in pairs(extra or {}) do meta[k] = v end
  return rt.create(env, env.srv:ns_path("configmaps"),
    { apiVersion = "v1", kind = "ConfigMap", metadata = meta, data = data or {} })
end

return rt
