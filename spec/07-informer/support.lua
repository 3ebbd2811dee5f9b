-- Shared by the informer specs that break things: a kubeconfig for the
-- server under test, the server's and the cache's view of the spec
-- namespace, a handler set that mirrors every change it is told of (and
-- records any change that contradicts what it saw before), fault control
-- and writes made on the luna loop (core.http) so the informer keeps
-- running while they are in flight.
--
--   local S = require("07-informer.support")
local helpers = require("helpers")
local core = require("luna.core")

local S = {}

S.kubeconfig_for = require("support.luna_env").kubeconfig_for

-- In a describe block: each test gets a fresh server (client.start(opts))
-- and an informer env on it, handed to set(srv, env) before the test; the
-- server stops after it.  busted's before_each and after_each live in the
-- spec file's environment, not in this module's: taken from the caller's.
function S.server_each_test(opts, set)
  local busted = getfenv(2)
  local srv
  busted.before_each(function()
    srv = require("support.apiserver_client").start(opts)
    set(srv, assert(core.informer.env{ kubeconfig = S.kubeconfig_for(srv) }))
  end)
  busted.after_each(function()
    collectgarbage()
    srv:stop()
  end)
end

-- The server's ConfigMaps (or the objects of the collection at `path`) in
-- the spec namespace: key -> resourceVersion; each item also goes to
-- on_item(item) when given.
function S.server_state(srv, labels, path, on_item)
  local q = labels and ("?labelSelector=" .. labels) or ""
  path = path or srv:ns_path("configmaps")
  local code, list = srv:request("GET", path .. q)
  assert(code == 200, "list " .. path .. ": " .. tostring(code))
  local out = {}
  for _, item in ipairs(list.items) do
    out[item.metadata.namespace .. "/" .. item.metadata.name] = item.metadata.resourceVersion
    if on_item then on_item(item) end
  end
  return out
end

function S.cache_state(inf)
  local out = {}
  for _, o in ipairs(inf:list()) do out[o:key()] = o:resource_version() end
  return out
end

-- nil if a and b (key -> rv) are equal, else a description of the first
-- few differences.
function S.diff(a, b, a_name, b_name)
  local out = {}
  for k, v in pairs(a) do
    if b[k] ~= v then out[#out + 1] = ("%s: %s has %s, %s has %s"):format(k, a_name, v, b_name, tostring(b[k])) end
    if #out >= 5 then break end
  end
  for k, v in pairs(b) do
    if #out >= 5 then break end
    if a[k] == nil then out[#out + 1] = ("%s: only %s has it (%s)"):format(k, b_name, v) end
  end
  return #out > 0 and table.concat(out, "; ") or nil
end

-- Runs the loop until the cache (and the mirror, if given) equal `want`;
-- fails with the remaining difference.
function S.converge(inf, want, secs, mirror)
  local last
  local ok = core.loop.run_until(function()
    last = S.diff(want, S.cache_state(inf), "server", "cache")
    if not last and mirror then last = S.diff(want, mirror.state, "server", "handlers") end
    return last == nil
  end, secs or 10)
  if not ok then
    error(("cache never matched the server: %s (last error: %s)"):format(last, inf:last_error()), 2)
  end
end

-- Handlers keeping mirror.state (key -> rv) from on_add/on_update/on_delete,
-- recording in mirror.violations every call that contradicts the state the
-- handlers saw before: an add of a key already present, an update or delete
-- of one absent, an update whose old object is not the last one seen, or a
-- resourceVersion going backwards.
function S.mirror()
  local m = { state = {}, violations = {}, adds = 0, updates = 0, deletes = 0, unknown_deletes = {},
              deleted = {} }
  local function bad(msg)
    if #m.violations < 20 then m.violations[#m.violations + 1] = msg end
  end
  m.handlers = {
    on_add = function(o)
      m.adds = m.adds + 1
      local k = o:key()
      if m.state[k] then bad("add of " .. k .. " already at " .. m.state[k]) end
      m.state[k] = o:resource_version()
    end,
    on_update = function(old, new)
      m.updates = m.updates + 1
      local k = new:key()
      if m.state[k] ~= old:resource_version() then
        bad(("update of %s from %s, last seen %s"):format(k, old:resource_version(), tostring(m.state[k])))
      end
      if tonumber(new:resource_version()) < tonumber(old:resource_version()) then
        bad(("update of %s back from %s to %s"):format(k, old:resource_version(), new:resource_version()))
      end
      m.state[k] = new:resource_version()
    end,
    on_delete = function(o, unknown)
      m.deletes = m.deletes + 1
      local k = o:key()
      if not m.state[k] then bad("delete of " .. k .. " never seen") end
      m.state[k] = nil
      m.deleted[#m.deleted + 1] = o:name()
      if unknown then m.unknown_deletes[#m.unknown_deletes + 1] = o:name() end
    end,
  }
  return m
end

-- Sets the dev server's faults (needs --admin).
function S.faults(srv, spec)
  local code, body = srv:request("PUT", "/luna/v1/faults", spec, { content_type = "text/plain" })
  assert(code == 200, "set faults '" .. spec .. "': " .. tostring(code) .. " " .. tostring(body and body.message))
end

-- Non-blocking requests on the luna loop, to srv.url (the dev server, or
-- kubectl proxy).  w:request(method, path, body, on_done(status, decoded, err),
-- content_type): a table body is sent as JSON, a string as text/plain,
-- unless content_type says otherwise.
function S.writer(srv)
  local w = { in_flight = 0 }
  function w:request(method, path, body, on_done, content_type)
    self.in_flight = self.in_flight + 1
    local h, err = core.http.request{
      method = method, url = srv.url .. path, timeout = 30,
      headers = body and { ["Content-Type"] = content_type or
        (type(body) == "string" and "text/plain" or "application/json") } or nil,
      body = (type(body) == "table" and core.json.encode(body)) or body,
      on_done = function(resp, e)
        self.in_flight = self.in_flight - 1
        local decoded
        if resp and resp.body and resp.body ~= "" then
          local ok, v = pcall(core.json.decode, resp.body)
          decoded = ok and v or nil
        end
        on_done(resp and resp.status or 0, decoded, e)
      end,
    }
    if not h then
      self.in_flight = self.in_flight - 1
      error("request failed to start: " .. tostring(err))
    end
  end
  -- Blocking form (runs the loop until the answer comes).
  function w:call(method, path, body)
    local status, decoded, done
    self:request(method, path, body, function(s, d) status, decoded, done = s, d, true end)
    assert(core.loop.run_until(function() return done end, 30), method .. " " .. path .. " never answered")
    return status, decoded
  end
  return w
end

function S.configmap(name, data, labels)
  return { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name, labels = labels },
           data = data or { k = "v" } }
end

return S
