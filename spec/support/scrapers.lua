-- Identities that scrape a secure /metrics, made on the API server the way
-- a cluster makes them: ServiceAccounts in the spec's namespace with tokens
-- from the TokenRequest API, one of them bound to a ClusterRole that may
-- `get` the non-resource URL /metrics (deploy/rbac.yaml's
-- luna-metrics-reader rule), one bound to nothing.
--
--   local scrapers = require("support.scrapers")
--   local ids = scrapers.make(srv)   -- srv: support.apiserver_client server
--   scrapers.make(srv, { rules = {...}, role = "x" })  other rules for the
--       allowed identity (the admin specs: deploy/rbac.yaml's luna-admin)
--   ids.allowed, ids.denied          bearer tokens
--   ids.allowed_user, ids.denied_user  their user names
--   ids:remove()                     the cluster-scoped role and binding
local cjson = require("cjson")

local M = {}
local Ids = {}
Ids.__index = Ids

local function token_for(srv, name)
  local code, sa = srv:request("POST", srv:ns_path("serviceaccounts"),
    { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = name } })
  assert(code == 201, "create serviceaccount " .. name .. ": " .. tostring(code) .. " " .. cjson.encode(sa or {}))
  local tcode, tr, raw = srv:request("POST", srv:ns_path("serviceaccounts", name) .. "/token",
    { apiVersion = "authentication.k8s.io/v1", kind = "TokenRequest",
      spec = { expirationSeconds = 3600 } })
  assert(tcode == 201, "TokenRequest for " .. name .. ": " .. tostring(tcode) .. " " .. tostring(raw))
  assert(type(tr.status) == "table" and type(tr.status.token) == "string" and #tr.status.token > 0,
    "TokenRequest answer without a token: " .. tostring(raw))
  return tr.status.token, ("system:serviceaccount:%s:%s"):format(srv.ns, name)
end

function M.make(srv, opts)
  opts = opts or {}
  local ids = setmetatable({ srv = srv, role = (opts.role or "luna-spec-metrics-reader-") .. srv.ns }, Ids)
  local code = srv:request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
    apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRole",
    metadata = { name = ids.role },
    rules = opts.rules or { { nonResourceURLs = { "/metrics" }, verbs = { "get" } } } })
  assert(code == 201, "create clusterrole: " .. tostring(code))
  code = srv:request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
    apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRoleBinding",
    metadata = { name = ids.role },
    roleRef = { apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = ids.role },
    subjects = { { kind = "ServiceAccount", name = "scraper", namespace = srv.ns } } })
  assert(code == 201, "create clusterrolebinding: " .. tostring(code))
  ids.allowed, ids.allowed_user = token_for(srv, "scraper")
  ids.denied, ids.denied_user = token_for(srv, "nobody")
  return ids
end

function Ids:remove()
  pcall(self.srv.request, self.srv, "DELETE",
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/" .. self.role)
  pcall(self.srv.request, self.srv, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/" .. self.role)
end

return M
