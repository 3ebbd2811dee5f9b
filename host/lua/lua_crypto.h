/* lua_crypto.h — core.crypto; see lua_crypto.c for the Lua API. */
#ifndef LUNA_LUA_CRYPTO_H
#define LUNA_LUA_CRYPTO_H

#include <lua.h>

void luna_lua_crypto_register(lua_State *L);

#endif
