/*
 * lua_loop.h — core.loop: drive the libev loop from Lua (specs, tools).
 *
 *   core.loop.run(seconds)          run until core.loop.stop() or the timeout;
 *                                   returns true if stopped, false on timeout
 *   core.loop.run_until(fn, secs)   run until fn() returns true (checked after
 *                                   every loop iteration); true, or false on timeout
 *   core.loop.stop()                make the innermost run return
 *   core.loop.now()                 the loop's cached time in seconds
 *
 * While one of these runs, watcher callbacks that call into Lua use the state
 * returned by luna_lua_loop_current(); outside a run it is NULL, and no such
 * callback can fire.
 */
#ifndef LUNA_LUA_LOOP_H
#define LUNA_LUA_LOOP_H

#include <lua.h>

void luna_lua_loop_register(lua_State *L);
lua_State *luna_lua_loop_current(void);

#endif
