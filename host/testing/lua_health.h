/*
 * lua_health.h — core.health: liveness/readiness state (health.h) from Lua.
 *
 *   core.health.new{ clock = "real"|"fake", interval = 1, timeout = 10 } -> h
 *       "real": the heartbeat timer runs on the luna loop (while
 *       core.loop.run* runs); "fake": time starts at 0 and moves only
 *       through h:advance(), and only h:beat() stamps the heartbeat.
 *   h:set(name, ok, [reason])   h:remove(name) -> bool
 *   h:check(name) -> ok, reason (nil if no such check)
 *   h:beat()   h:advance(seconds)   h:age() -> seconds since the heartbeat
 *   h:live() -> bool   h:ready() -> bool   h:count() -> number of checks
 *   h:render("healthz"|"readyz", [{ verbose = bool, exclude = { names } }])
 *       -> body, status (200 or 500)
 *
 * Misuse (wrong types, a bad check name, bad options, advance on a real
 * clock) raises; out of memory returns nil, err.  __gc stops the timer and
 * frees the state.
 */
#ifndef LUNA_LUA_HEALTH_H
#define LUNA_LUA_HEALTH_H

#include <lua.h>

void luna_lua_health_register(lua_State *L);

#endif
