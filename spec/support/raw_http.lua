-- Raw HTTP/1.1 over a TCP socket (LuaJIT FFI), for specs that must send
-- what curl will not: a body cut short, two framings, headers with no body
-- yet, many uploads interleaved.
--
--   local raw = require("support.raw_http")
--   local c = raw.connect(port)          -- 127.0.0.1
--   local c = raw.connect(port, { from = "127.0.0.7" })
--                                        -- from that source address (any of
--                                        -- loopback's 127.0.0.0/8: "many
--                                        -- clients" from one host)
--   c:send(bytes) -> true, or false once the peer has closed or reset
--   c:response(secs) -> the status code and the bytes read, or nil if no
--                       status line came within secs
--   c:closed(secs) -> true if the peer closed the connection within secs
--   c:close()
local ffi = require("ffi")
local helpers = require("helpers")

pcall(ffi.cdef, [[
struct luna_raw_sockaddr_in { unsigned short family; unsigned short port; unsigned int addr;
                              char zero[8]; };
int socket(int domain, int type, int protocol);
int connect(int fd, const void *addr, unsigned int len);
int bind(int fd, const void *addr, unsigned int len);
long send(int fd, const void *buf, size_t n, int flags);
long recv(int fd, void *buf, size_t n, int flags);
]])
pcall(ffi.cdef, [[
struct luna_pollfd { int fd; short events; short revents; };
int poll(struct luna_pollfd *fds, unsigned long nfds, int timeout);
int close(int fd);
]])

local C = ffi.C
local AF_INET, SOCK_STREAM, MSG_NOSIGNAL, POLLIN = 2, 1, 0x4000, 1

local raw = {}
local Conn = {}
Conn.__index = Conn

local function htons(n) return bit.bor(bit.lshift(bit.band(n, 0xff), 8), bit.rshift(n, 8)) end

-- "127.0.0.7" in network order, as an unsigned int's bytes
local function inet_addr(text)
  local a, b, c, d = text:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  assert(a, "want a dotted IPv4 address: " .. tostring(text))
  return bit.bor(tonumber(a), bit.lshift(tonumber(b), 8), bit.lshift(tonumber(c), 16),
                 bit.lshift(tonumber(d), 24))
end

function raw.connect(port, opts)
  local fd = C.socket(AF_INET, SOCK_STREAM, 0)
  assert(fd >= 0, "socket failed")
  if opts and opts.from then
    local src = ffi.new("struct luna_raw_sockaddr_in")
    src.family = AF_INET
    src.addr = inet_addr(opts.from)
    assert(C.bind(fd, src, ffi.sizeof(src)) == 0, "bind to " .. opts.from .. " failed")
  end
  local sa = ffi.new("struct luna_raw_sockaddr_in")
  sa.family = AF_INET
  sa.port = htons(port)
  sa.addr = 0x0100007f   -- 127.0.0.1 in network order
  assert(C.connect(fd, sa, ffi.sizeof(sa)) == 0, "connect to port " .. port .. " failed")
  return setmetatable({ fd = fd, buf = "", eof = false }, Conn)
end

function Conn:send(data)
  local off = 0
  while off < #data do
    local n = C.send(self.fd, ffi.cast("const char *", data) + off, #data - off, MSG_NOSIGNAL)
    if n <= 0 then return false end
    off = off + tonumber(n)
  end
  return true
end

-- Reads what has arrived within ms milliseconds; false at EOF or reset.
local chunk = ffi.new("char[65536]")
function Conn:read_some(ms)
  if self.eof then return false end
  local p = ffi.new("struct luna_pollfd[1]")
  p[0].fd, p[0].events = self.fd, POLLIN
  if C.poll(p, 1, ms) <= 0 then return true end
  local n = C.recv(self.fd, chunk, 65536, 0)
  if n <= 0 then self.eof = true return false end
  self.buf = self.buf .. ffi.string(chunk, n)
  return true
end

function Conn:response(secs)
  local deadline = helpers.now() + (secs or 5)
  repeat
    local code = self.buf:match("^HTTP/1%.1 (%d%d%d)")
    if code and self.buf:find("\r\n\r\n", 1, true) then
      -- the head is in; take what of the body has come by now
      self:read_some(50)
      return tonumber(code), self.buf
    end
    if not self:read_some(100) and not self.buf:match("^HTTP/1%.1 %d%d%d") then return nil end
  until helpers.now() > deadline
  return nil
end

function Conn:closed(secs)
  local deadline = helpers.now() + (secs or 5)
  while not self.eof and helpers.now() < deadline do self:read_some(100) end
  return self.eof
end

function Conn:close()
  if self.fd >= 0 then C.close(self.fd) end
  self.fd = -1
end

return raw
