-- attack: read /etc/passwd through io.open at load
-- expect: refused
-- error: undefined global 'io'
local f = io.open("/etc/passwd")
return f
