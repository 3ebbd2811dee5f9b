/*
 * lua_backoff.h — core.backoff, the reflector's retry delays, for specs.
 *
 *   core.backoff.new{ base=0.8, max=30, factor=2, jitter=1, reset_after=120, seed=1 }
 *   b:next(now) → delay     b:reset()
 */
#ifndef LUNA_LUA_BACKOFF_H
#define LUNA_LUA_BACKOFF_H

#include <lua.h>

void luna_lua_backoff_register(lua_State *L);

#endif
