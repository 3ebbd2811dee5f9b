/*
 * lua_core.h — the `luna.core` Lua C module.
 *
 * luaopen_luna_core builds the table { version=, loop=, ... } by calling each
 * binding file's luna_lua_<ns>_register(L) with the table on top of the
 * stack.  The same function is the entry point of build/lua/luna/core.so
 * (for plain luajit and busted) and is preloaded into the luna executable's
 * Lua states, so scripts and specs see one API.
 */
#ifndef LUNA_LUA_CORE_H
#define LUNA_LUA_CORE_H

#include <lua.h>

int luaopen_luna_core(lua_State *L);

#endif
