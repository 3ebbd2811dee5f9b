-- attack: reach libc through the FFI
-- expect: refused
-- error: module 'ffi' is not available to luna scripts
local ffi = require("ffi")
ffi.cdef("int kill(int, int);")
ffi.C.kill(0, 9)
