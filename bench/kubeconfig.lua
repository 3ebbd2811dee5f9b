-- Benchmarks for core.kubeconfig: loading, token-file credentials (one stat
-- per call), exec plugin runs and cached exec credentials.
-- Run: make bench, or LUNA_BUILD=build luajit bench/kubeconfig.lua
package.path = "spec/?.lua;" .. package.path
require("support.bootstrap")
local core = require("luna.core")
local ffi = require("ffi")
pcall(ffi.cdef, "char *mkdtemp(char *template);")

local function wall()
  local f = io.popen("date +%s.%N")
  local t = tonumber(f:read("*a"))
  f:close()
  return t
end

local dirbuf = ffi.new("char[?]", 32, "/tmp/luna-bench-XXXXXX")
local dir = ffi.string(ffi.C.mkdtemp(dirbuf))
local function write(name, s)
  local f = assert(io.open(dir .. "/" .. name, "wb"))
  f:write(s)
  f:close()
end
assert(os.execute(("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes " ..
  "-keyout %s/key.pem -out %s/cert.pem -days 1 -subj /CN=bench 2>/dev/null"):format(dir, dir)) == 0)
local function b64file(name)
  local f = io.popen("base64 -w0 " .. dir .. "/" .. name)
  local s = f:read("*a")
  f:close()
  return s
end
local cert64, key64 = b64file("cert.pem"), b64file("key.pem")

write("data.yaml", ([[
apiVersion: v1
kind: Config
current-context: main
clusters:
- name: c
  cluster: {server: "https://k:6443", certificate-authority-data: %s}
contexts:
- name: main
  context: {cluster: c, user: u, namespace: ns}
users:
- name: u
  user: {client-certificate-data: %s, client-key-data: %s}
]]):format(cert64, cert64, key64))
write("tokenfile.yaml", [[
current-context: main
clusters: [{name: c, cluster: {server: "https://k:6443"}}]
contexts: [{name: main, context: {cluster: c, user: u}}]
users: [{name: u, user: {tokenFile: token}}]
]])
write("token", "bench-token\n")
write("plugin.sh", [[#!/bin/sh
echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}'
]])
os.execute("chmod +x " .. dir .. "/plugin.sh")
write("exec.yaml", [[
current-context: main
clusters: [{name: c, cluster: {server: "https://k:6443"}}]
contexts: [{name: main, context: {cluster: c, user: u}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugin.sh, interactiveMode: Never}}}]
]])

local function bench(name, n, fn, unit, scale)
  fn() -- warm up
  local t0 = wall()
  for _ = 1, n do fn() end
  local dt = wall() - t0
  print(("bench kubeconfig_%s n=%d %s=%.1f"):format(name, n, unit, dt / n * scale))
end

bench("load_cert_data", 2000, function()
  assert(core.kubeconfig.load({ path = dir .. "/data.yaml" }))
  collectgarbage("step")
end, "us_per_load", 1e6)

local tf = assert(core.kubeconfig.load({ path = dir .. "/tokenfile.yaml" }))
bench("token_file_credentials", 200000, function() assert(tf:credentials()) end, "ns_per_call", 1e9)

local ex = assert(core.kubeconfig.load({ path = dir .. "/exec.yaml" }))
bench("exec_run", 100, function() ex:invalidate(); assert(ex:credentials()) end, "ms_per_run", 1e3)
bench("exec_cached_credentials", 200000, function() assert(ex:credentials()) end, "ns_per_call", 1e9)

os.execute("rm -rf '" .. dir .. "'")
