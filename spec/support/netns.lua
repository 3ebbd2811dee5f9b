-- A network namespace for one process, joined to the host by a veth pair,
-- so a spec can cut that process off the network and join it again: a
-- real partition (the process runs on, its timers fire, its requests go
-- unanswered), not a stopped process.
--
--   netns.available() -> true, or false and the reason (needs root and
--       `ip netns`: iproute2, in the Makefile's deps)
--   net = netns.new(srv)   a namespace, a veth pair (10.213.X.1 on the
--       host, .2 inside), and a TCP relay (spec/fixtures/tcp_relay) in the
--       host namespace on the veth's host address to the API server on
--       127.0.0.1; inside, the name `kubernetes` resolves to that address
--       (/etc/netns/NAME/hosts, which `ip netns exec` mounts on /etc/hosts:
--       kube-apiserver's certificate names it)
--   net.kubeconfig         the server's kubeconfig, its server through the relay
--   net:argv(argv)         argv run inside the namespace (same pid: ip execs)
--   net:partition()        the host end of the veth goes down: every packet
--                          either way is dropped, connections hang, new ones
--                          time out (nothing is refused or reset)
--   net:heal()             it comes up again
--   net:close()            relay, namespace, veth and hosts file gone
local helpers = require("helpers")

local netns = {}
local Net = {}
Net.__index = Net

-- ip and the shell without the ASan runtime `make test` preloads.
local function sh(cmd)
  local out, rc = helpers.run("env -u LD_PRELOAD sh -c '" .. cmd:gsub("'", "'\\''") .. "'")
  return rc == 0, out
end

local function must(cmd)
  local ok, out = sh(cmd)
  assert(ok, cmd .. ": " .. tostring(out))
  return out
end

function netns.available()
  local id = sh("test \"$(id -u)\" = 0")
  if not id then return false, "needs root (ip netns add)" end
  local has_ip = sh("command -v ip")
  if not has_ip then return false, "needs iproute2's ip (make deps)" end
  local name = "luna-probe-" .. math.random(100000, 999999)
  local ok, out = sh("ip netns add " .. name)
  if not ok then return false, "ip netns add fails here: " .. out:gsub("%s+$", "") end
  sh("ip netns del " .. name)
  return true
end

-- The API server's URL and kubeconfig text (the real one's, or the dev
-- server's) with the server replaced by scheme://kubernetes:PORT.
local function server_of(srv)
  local S = require("support.luna_env")
  local text = assert(helpers.read_file(S.kubeconfig_for(srv)))
  local scheme, host, port = text:match("server:%s*\"?(https?)://([%d%.]+):(%d+)")
  assert(scheme, "no server URL in the kubeconfig:\n" .. text)
  return text, scheme, host, port
end

function netns.new(srv)
  local id = math.random(1000, 9999)
  local self = setmetatable({ name = "luna-part-" .. id, host_if = "lph" .. id,
                              ns_if = "lpn" .. id, octet = math.random(1, 254) }, Net)
  self.host_ip = ("10.213.%d.1"):format(self.octet)
  local ns_ip = ("10.213.%d.2"):format(self.octet)
  must("ip netns add " .. self.name)
  self.created = true
  must("ip link add " .. self.host_if .. " type veth peer name " .. self.ns_if)
  must("ip link set " .. self.ns_if .. " netns " .. self.name)
  must("ip addr add " .. self.host_ip .. "/30 dev " .. self.host_if)
  must("ip link set " .. self.host_if .. " up")
  must("ip netns exec " .. self.name .. " ip link set lo up")
  must("ip netns exec " .. self.name .. " ip addr add " .. ns_ip .. "/30 dev " .. self.ns_if)
  must("ip netns exec " .. self.name .. " ip link set " .. self.ns_if .. " up")
  must("mkdir -p /etc/netns/" .. self.name)
  helpers.write_file("/etc/netns/" .. self.name .. "/hosts",
                     "127.0.0.1 localhost\n" .. self.host_ip .. " kubernetes\n")
  local text, scheme, host, port = server_of(srv)
  self.relay = helpers.spawn({ "env", "-u", "LD_PRELOAD", helpers.fixtures .. "/tcp_relay",
                               self.host_ip .. ":0", host .. ":" .. port })
  local _, relay_port = self.relay:expect("relay listening on [%d%.]+:(%d+)", 10)
  self.kubeconfig = helpers.tmpdir() .. "/kubeconfig"
  helpers.write_file(self.kubeconfig, (text:gsub("(server:%s*\"?)https?://[%d%.]+:%d+",
    "%1" .. scheme .. "://kubernetes:" .. relay_port, 1)))
  return self
end

function Net:argv(argv)
  local out = { "env", "-u", "LD_PRELOAD", "ip", "netns", "exec", self.name, "env" }
  local preload = os.getenv("LD_PRELOAD")
  if preload then out[#out + 1] = "LD_PRELOAD=" .. preload end
  for _, a in ipairs(argv) do out[#out + 1] = a end
  return out
end

function Net:partition() must("ip link set " .. self.host_if .. " down") end
function Net:heal() must("ip link set " .. self.host_if .. " up") end

function Net:close()
  if self.relay then self.relay:stop() end
  if self.created then sh("ip netns del " .. self.name) end
  sh("ip link del " .. self.host_if .. " 2>/dev/null; rm -rf /etc/netns/" .. self.name)
end

return netns
