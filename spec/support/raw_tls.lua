-- Raw HTTP/1.1 over TLS (LuaJIT FFI to OpenSSL's libssl), for specs that
-- must send a TLS server what curl will not: a body dribbled a byte at a
-- time, a chunked body that never ends, many uploads interleaved.  The
-- connection has raw_http's methods (response, closed) over TLS.
--
--   local tls = require("support.raw_tls")
--   local c = tls.connect(port, { from = "127.0.0.7" })  -- handshake done
--                                    -- (the certificate is not checked:
--                                    -- the server under test is ours)
--   c:send(bytes) -> true, or false once the peer has closed or reset
--   c:read_some(ms), c:response(secs), c:closed(secs), c:close()
local ffi = require("ffi")
local raw = require("support.raw_http")

pcall(ffi.cdef, [[
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;
typedef struct ssl_method_st SSL_METHOD;
const SSL_METHOD *TLS_client_method(void);
SSL_CTX *SSL_CTX_new(const SSL_METHOD *method);
void SSL_CTX_free(SSL_CTX *ctx);
SSL *SSL_new(SSL_CTX *ctx);
void SSL_free(SSL *ssl);
int SSL_set_fd(SSL *ssl, int fd);
int SSL_connect(SSL *ssl);
int SSL_write(SSL *ssl, const void *buf, int num);
int SSL_read(SSL *ssl, void *buf, int num);
int SSL_pending(const SSL *ssl);
]])

pcall(ffi.cdef, [[
typedef void (*luna_sighandler_t)(int);
luna_sighandler_t signal(int signum, luna_sighandler_t handler);
]])
-- SSL_write writes with write(2): a server that closed the connection
-- must fail the send, not kill the spec with SIGPIPE
ffi.C.signal(13, ffi.cast("luna_sighandler_t", 1))

local ssl = ffi.load("ssl")
-- freed when the spec's state closes (LeakSanitizer checks the process)
local ctx = ffi.gc(ssl.SSL_CTX_new(ssl.TLS_client_method()), ssl.SSL_CTX_free)
assert(ctx ~= nil, "SSL_CTX_new failed")

local tls = {}
local Raw -- raw_http's connection methods, from the first connection
local Conn = {}

-- raw_http's connection methods (response, closed) read through
-- self:read_some, so the TLS connection overrides send, read_some, close.
local function inherit(c)
  Raw = getmetatable(c).__index
  setmetatable(Conn, { __index = Raw })
  Conn.__index = Conn
end

function tls.connect(port, opts)
  local c = raw.connect(port, opts)
  if Conn.__index == nil then inherit(c) end
  local s = ffi.gc(ssl.SSL_new(ctx), ssl.SSL_free)
  assert(s ~= nil, "SSL_new failed")
  ssl.SSL_set_fd(s, c.fd)
  if ssl.SSL_connect(s) ~= 1 then
    c:close()
    return nil, "TLS handshake failed"
  end
  c.ssl = s
  return setmetatable(c, Conn)
end

function Conn:send(data)
  local off = 0
  while off < #data do
    local n = ssl.SSL_write(self.ssl, ffi.cast("const char *", data) + off,
      math.min(#data - off, 1048576))
    if n <= 0 then return false end
    off = off + n
  end
  return true
end

local pfd = ffi.new("struct luna_pollfd[1]")
local chunk = ffi.new("char[65536]")
function Conn:read_some(ms)
  if self.eof then return false end
  if ssl.SSL_pending(self.ssl) == 0 then
    pfd[0].fd, pfd[0].events = self.fd, 1
    if ffi.C.poll(pfd, 1, ms) <= 0 then return true end
  end
  local n = ssl.SSL_read(self.ssl, chunk, 65536)
  if n <= 0 then self.eof = true return false end
  self.buf = self.buf .. ffi.string(chunk, n)
  return true
end

function Conn:close()
  if self.ssl then ssl.SSL_free(ffi.gc(self.ssl, nil)) end
  self.ssl = nil
  Raw.close(self)
end

return tls
