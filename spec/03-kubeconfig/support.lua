-- Shared by the kubeconfig specs: temp kubeconfig files, test PKI, base64,
-- and the secrets every error message is checked against.
local helpers = require("helpers")
local core = require("luna.core")
local assert = require("luassert")

local M = {}

-- Values planted in configs; no error message or log line may contain them.
M.TOKEN = "tok-SECRET-5f2a9c"
M.PASSWORD = "pw-SECRET-81bd44"

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
function M.b64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local c1 = math.floor(n / 262144) % 64
    local c2 = math.floor(n / 4096) % 64
    local c3 = math.floor(n / 64) % 64
    local c4 = n % 64
    out[#out + 1] = B64:sub(c1 + 1, c1 + 1) .. B64:sub(c2 + 1, c2 + 1)
      .. (b and B64:sub(c3 + 1, c3 + 1) or "=") .. (c and B64:sub(c4 + 1, c4 + 1) or "=")
  end
  return table.concat(out)
end

-- Writes files (name -> content, names may contain '/') under a new tmpdir;
-- returns the dir.
function M.tree(files)
  local dir = helpers.tmpdir()
  for name, body in pairs(files or {}) do
    local sub = name:match("^(.*)/[^/]*$")
    if sub then os.execute("mkdir -p '" .. dir .. "/" .. sub .. "'") end
    helpers.write_file(dir .. "/" .. name, body)
  end
  return dir
end

-- A self-signed certificate with its key (PEM strings), made once per name.
local pki_cache = {}
function M.pki(name)
  name = name or "a"
  if pki_cache[name] then return pki_cache[name] end
  local dir = helpers.tmpdir()
  local out, rc = helpers.run(string.format(
    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes " ..
    "-keyout %s/key.pem -out %s/cert.pem -days 2 -subj /CN=luna-spec-%s",
    dir, dir, name))
  assert(rc == 0, out)
  local p = { cert = helpers.read_file(dir .. "/cert.pem"), key = helpers.read_file(dir .. "/key.pem") }
  pki_cache[name] = p
  return p
end

-- Every secret a spec may have planted, including key material.
function M.secrets()
  local list = { M.TOKEN, M.PASSWORD }
  for _, p in pairs(pki_cache) do
    list[#list + 1] = p.key:match("\n(.-)\n")          -- first line of key body
    list[#list + 1] = M.b64(p.key):sub(1, 40)
  end
  return list
end

function M.assert_no_secrets(text)
  for _, s in ipairs(M.secrets()) do
    assert(not text:find(s, 1, true), "secret leaked into: " .. text)
  end
end

-- load() that must fail: returns the message after checking it is clean.
function M.load_error(opts)
  local cfg, err = core.kubeconfig.load(opts)
  assert(cfg == nil, "expected an error, got a config")
  assert.is_table(err)
  local msg = tostring(err)
  M.assert_no_secrets(msg)
  return msg, err
end

-- Plain-text pattern escape for assert.matches.
function M.lit(s)
  return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0"))
end

-- A minimal valid kubeconfig with one context; extra YAML for the user body.
function M.simple(user_yaml, cluster_yaml, ns)
  return ([[
apiVersion: v1
kind: Config
current-context: main
clusters:
- name: c
  cluster:
    server: https://k.example:6443
%s
contexts:
- name: main
  context:
    cluster: c
    user: u
%s
users:
- name: u
  user:
%s
]]):format(cluster_yaml or "", ns and ("    namespace: " .. ns) or "", user_yaml or "    {}")
end

return M
