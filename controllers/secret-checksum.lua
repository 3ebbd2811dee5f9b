-- secret-checksum: rolls a Deployment when a Secret it depends on changes.
--
-- A Deployment annotated luna.dev/secret-checksum=<secret name> gets the
-- pod-template annotation luna.dev/secret-sha256 = a checksum of that
-- Secret's data; a new value makes the Deployment roll its pods. Secrets
-- are watched with a map function that finds the Deployments referring to
-- them through a custom index on the Deployment cache.
local luna = require "luna"
local core = require "luna.core"

local REF = "luna.dev/secret-checksum"
local SUM = "luna.dev/secret-sha256"

-- A checksum independent of table order: sorted key=value lines.
local function checksum(secret)
  if not secret then return "missing" end
  local keys = {}
  for k in pairs(secret.data or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = k .. "=" .. secret.data[k] end
  return core.crypto.sha256(table.concat(parts, "\n"))
end

return luna.controller {
  name = "secret-checksum",
  watch = "apps/v1/Deployment",
  watches = {
    { "v1/Secret", map = function(secret)
        local deps = luna.cache("apps/v1/Deployment"):by_index("by_secret",
          secret.metadata.namespace .. "/" .. secret.metadata.name)
        local keys = {}
        for i, d in ipairs(deps) do keys[i] = { namespace = d.metadata.namespace, name = d.metadata.name } end
        return keys
      end },
  },
  indexes = {
    by_secret = function(dep)
      local ref = luna.meta.annotation(dep, REF)
      return ref and (dep.metadata.namespace .. "/" .. ref) or nil
    end,
  },

  reconcile = function(req)
    local dep = luna.cache("apps/v1/Deployment"):get(req.namespace, req.name)
    if not dep then return end
    local ref = luna.meta.annotation(dep, REF)
    if not ref then return end
    local sum = checksum(luna.cache("v1/Secret"):get(req.namespace, ref))
    local tmpl = dep.spec.template.metadata or {}
    if tmpl.annotations and tmpl.annotations[SUM] == sum then return end
    local _, err = luna.patch("apps/v1/Deployment", req.namespace, req.name,
      { spec = { template = { metadata = { annotations = { [SUM] = sum } } } } })
    if luna.is_not_found(err) then return end -- deleted meanwhile
    if err then return nil, err end
    luna.log.info("rolled deployment", { secret = ref, sha256 = sum:sub(1, 12) })
    luna.event(dep, "Normal", "SecretChanged", "secret " .. ref .. " changed: rolling pods")
  end,
}
