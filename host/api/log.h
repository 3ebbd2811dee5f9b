/*
 * api/log.h — structured logging for scripts (luna.log in
 * lua/luna/api.lua; the sandbox's print is lua_sandbox's).
 *
 *   core.runtime.log(level, msg [, fields])
 *
 * level is debug, info, warn or error; fields is a table of string keys
 * whose values are logged through tostring.  Inside a reconcile the line
 * carries controller, key, reconcile_id, namespace and name; a field the
 * script sets itself replaces the attached one.  At most 24 fields.
 *
 * Uses: log.  Runs on the loop thread.  Nothing is kept after the call.
 */
#ifndef LUNA_LUA_LOG_H
#define LUNA_LUA_LOG_H

#include <lua.h>

/* Adds log to the table on top of L's stack. */
void luna_lua_log_register(lua_State *L);

#endif
