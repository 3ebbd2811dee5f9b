/*
 * lua_core.h — the script-facing part of the `luna.core` Lua module: what
 * luna's own Lua library (lua/luna/) and controller scripts use.
 *
 *   core.version   the luna version string
 *   core.error     luna's error constructor (lua_util.h; luna.errors.new)
 *   core.now()     seconds since the epoch, wall clock (base/clock.h: the
 *                  fake clock's under `luna test`), with a fraction:
 *                  luna.time.now (a C function: an FFI call costs ten
 *                  times more where the JIT is off); scripts' view of
 *                  luna.core leaves it out, they call luna.time.now
 *   core.cron_next(text, after)  the host's cron schedules (base/cron.h)
 *                  for luna.cron.next: a time, nil, or false, why
 *   core.json      JSON <-> Lua (lua_json.h)
 *   core.crypto    hashes and HMACs (lua_crypto.h)
 *
 * The runtime's Lua states preload `luna.core` as this table plus what the
 * runtime itself adds (controller/loader.c); controller scripts see only a
 * read-only view of it (script/sandbox.c).  The spec-facing module
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
