-- Certificates the specs serve with, made with openssl.
local helpers = require("helpers")

local M = {}

-- A CA and a serving certificate for localhost and 127.0.0.1 in dir
-- (prefix.crt, prefix.key); returns the CA's path.
function M.make_cert(dir, prefix)
  local out, rc = helpers.run(([[cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -days 2 -subj /CN=%s-ca -keyout %s-ca.key -out %s-ca.crt 2>&1 && \
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout %s.key -out %s.csr 2>&1 && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > %s.ext && \
    openssl x509 -req -in %s.csr -CA %s-ca.crt -CAkey %s-ca.key -CAcreateserial -days 2 \
    -extfile %s.ext -out %s.crt 2>&1]]):format(dir, prefix, prefix, prefix, prefix, prefix, prefix,
      prefix, prefix, prefix, prefix, prefix))
  assert(rc == 0, out)
  return dir .. "/" .. prefix .. "-ca.crt"
end

return M
