-- TLS: CA and client certificates as PEM bytes or files, skip-verify,
-- bearer tokens over HTTPS, and HTTP/2 multiplexing (nghttpd).
local helpers = require("helpers")
local core = require("luna.core")
local cjson = require("cjson")

local dir, pem, server, base

-- A CA, a server certificate for 127.0.0.1 and a client certificate,
-- signed by the CA, plus an unrelated CA; all EC P-256, made by openssl.
local function make_certs(d)
  local script = [[
set -e
cd '%s'
EC="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
for ca in ca other-ca; do
  openssl req -x509 $EC -keyout $ca-key.pem -out $ca.pem -days 2 -subj /CN=luna-$ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
done
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > server.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
for who in server client; do
  openssl req $EC -keyout $who-key.pem -out $who.csr -subj /CN=luna-$who
  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
    -out $who.pem -days 2 -extfile $who.ext
done
]]
  helpers.write_file(d .. "/make-certs.sh", string.format(script, d))
  local out, rc = helpers.run("sh '" .. d .. "/make-certs.sh'")
  assert(rc == 0, "openssl failed:\n" .. out)
end

local function fetch(opts)
  local done, resp, err = false
  opts.on_done = function(r, e) resp, err, done = r, e, true end
  local h, start_err = core.http.request(opts)
  if not h then return nil, start_err end
  helpers.eventually(function() return done end, 10, "on_done of " .. opts.url)
  return resp, err
end

describe("core.http over TLS", function()
  setup(function()
    dir = helpers.tmpdir()
    make_certs(dir)
    pem = {}
    for _, name in ipairs({ "ca", "other-ca", "client", "client-key" }) do
      pem[name] = assert(helpers.read_file(dir .. "/" .. name .. ".pem"))
    end
    server = helpers.spawn({ helpers.fixtures .. "/httpd", "--cert", dir .. "/server.pem",
                             "--key", dir .. "/server-key.pem", "--client-ca", dir .. "/ca.pem" })
    base = select(2, server:expect("listening on (https://127%.0%.0%.1:%d+)"))
  end)

  teardown(function()
    if server then server:stop() end
  end)

  it("authenticates with the CA and client certificate given as PEM bytes", function()
    local resp, err = fetch{ url = base .. "/echo",
      tls = { ca_pem = pem.ca, cert_pem = pem.client, key_pem = pem["client-key"] } }
    assert.is_nil(err)
    assert.equal(200, resp.status)
    assert.equal("GET", cjson.decode(resp.body).method)
  end)

  it("authenticates with the CA and client certificate given as files", function()
    local resp, err = fetch{ url = base .. "/echo", tls = {
      ca_file = dir .. "/ca.pem", cert_file = dir .. "/client.pem", key_file = dir .. "/client-key.pem" } }
    assert.is_nil(err)
    assert.equal(200, resp.status)
  end)

  it("is refused by the server without a client certificate", function()
    local resp, err = fetch{ url = base .. "/echo", tls = { ca_pem = pem.ca } }
    assert.is_nil(err)
    assert.equal(401, resp.status)
    assert.equal("client certificate required\n", resp.body)
  end)

  it("fails with TLSError when the server's CA is not the one given", function()
    local resp, err = fetch{ url = base .. "/echo",
      tls = { ca_pem = pem["other-ca"], cert_pem = pem.client, key_pem = pem["client-key"] } }
    assert.is_nil(resp)
    assert.equal("TLSError", err.reason)
    assert.matches("^GET https://127%.0%.0%.1:%d+/echo: ", err.message)
  end)

  it("fails with TLSError by default: the test CA is not in the system store", function()
    local resp, err = fetch{ url = base .. "/echo" }
    assert.is_nil(resp)
    assert.equal("TLSError", err.reason)
  end)

  it("fails with TLSError on a CA that is not PEM", function()
    local resp, err = fetch{ url = base .. "/echo", tls = { ca_pem = "not a certificate" } }
    assert.is_nil(resp)
    assert.equal("TLSError", err.reason)
  end)

  it("connects without verification when insecure is set", function()
    local resp, err = fetch{ url = base .. "/echo",
      tls = { insecure = true, cert_pem = pem.client, key_pem = pem["client-key"] } }
    assert.is_nil(err)
    assert.equal(200, resp.status)
  end)

  it("sends the bearer token to the server", function()
    local resp, err = fetch{ url = base .. "/echo", bearer_token = "sa-token.abc",
      tls = { ca_pem = pem.ca, cert_pem = pem.client, key_pem = pem["client-key"] } }
    assert.is_nil(err)
    assert.equal("Bearer sa-token.abc", cjson.decode(resp.body).headers["authorization"])
  end)

  it("multiplexes concurrent requests on one HTTP/2 connection", function()
    local docs = dir .. "/docs"
    assert(select(2, helpers.run("mkdir -p '" .. docs .. "'")) == 0)
    helpers.write_file(docs .. "/hello.txt", "hello over h2\n")
    local port = helpers.run(helpers.fixtures .. "/httpd --free-port"):match("port (%d+)")
    -- stdbuf: nghttpd's verbose log (one "[id=N]" per connection N) reaches the pipe unbuffered
    local h2 = helpers.spawn({ "stdbuf", "-oL", "nghttpd", "-v", "-a", "127.0.0.1", "-d", docs,
                               port, dir .. "/server-key.pem", dir .. "/server.pem" })
    finally(function() h2:stop() end)
    h2:expect("listen 127%.0%.0%.1")
    local results = {}
    for i = 1, 10 do
      assert(core.http.request{ url = "https://127.0.0.1:" .. port .. "/hello.txt",
        tls = { ca_pem = pem.ca },
        on_done = function(resp, err) results[i] = resp or err end })
    end
    helpers.eventually(function()
      while h2:read_line(0) do end -- keep the pipe drained
      local n = 0
      for _ in pairs(results) do n = n + 1 end
      return n == 10
    end, 10, "10 HTTP/2 responses")
    for i = 1, 10 do
      assert.equal(200, results[i].status, tostring(results[i]))
      assert.equal("2", results[i].http_version)
      assert.equal("hello over h2\n", results[i].body)
    end
    local log = h2:drain(0.2)
    local conns = {}
    for id in log:gmatch("%[id=(%d+)%]") do conns[id] = true end
    assert.same({ ["1"] = true }, conns)
  end)
end)
