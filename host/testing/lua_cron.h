/*
 * lua_cron.h — core.cron, cron schedules (base/cron.h), for specs.
 *
 *   core.cron.next(text, after) → the next run after `after` (Unix
 *                                 seconds, UTC) | nil, message
 */
#ifndef LUNA_LUA_CRON_H
#define LUNA_LUA_CRON_H

#include <lua.h>

void luna_lua_cron_register(lua_State *L);

#endif
