/*
 * lua_crypto.h — core.crypto: the digests scripts need (content checksums
 * that roll workloads when their inputs change), from OpenSSL's libcrypto.
 *
 *   core.crypto.sha256(s) → 64 lowercase hex characters
 *
 * Part of the script-facing luna.core (lua_core.h).  Raises on a non-string
 * argument; holds no state.
 */
#ifndef LUNA_LUA_CRYPTO_H
#define LUNA_LUA_CRYPTO_H

#include <lua.h>

/* Adds core.crypto to the table on top of the stack. */
void luna_lua_crypto_register(lua_State *L);

#endif
