/*
 * lua_core.h — the script-facing part of the `luna.core` Lua module: what
 * luna's own Lua library (lua/luna/) and controller scripts use.
 *
 *   core.version   the luna version string
 *   core.json      JSON <-> Lua (lua_json.h)
 *   core.crypto    hashes and HMACs (lua_crypto.h)
 *
 * The runtime's Lua states preload `luna.core` as this table plus what the
 * runtime itself adds (runtime/lua_host.c); controller scripts see only a
 * read-only view of it (runtime/lua_sandbox.c).  The spec-facing module
 * (testing/lua_module.h, build/lua/luna/core.so) is this table plus the
 * bindings only specs and benchmarks use (loop, informer, http, workqueue,
 * ...), so those never exist in a controller's Lua state.
 */
#ifndef LUNA_LUA_CORE_H
#define LUNA_LUA_CORE_H

#include <lua.h>

/* [-0, +1] Pushes a new table with the script-facing bindings. */
void luna_lua_core_push(lua_State *L);

#endif
