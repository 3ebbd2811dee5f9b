-- attack: load hand-made LuaJIT bytecode (bytecode can crash the VM)
-- expect: refused
-- error: binary chunks cannot be loaded
local f = assert(load("\27LJ\2\10\0\2\0\0\0\0\0\0\255\255\255\255"))
return f()
