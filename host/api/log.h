/*
 * api/log.h — structured logging for scripts (luna.log in
 * lua/luna/api.lua; the sandbox's print is lua_sandbox's).
 *
 *   core.runtime.log(level, msg [, fields [, host_fields]])
 *
 * level is debug, info, warn or error; msg any string; fields a table of
 * string keys whose values are logged through tostring (other keys are
 * skipped; more than LUNA_LOG_FIELDS_MAX raise).  Inside a reconcile the
 * line carries controller, key, reconcile_id, namespace and name.  The
 * script's fields are written where they cannot pass for the host's: one
 * named like a host key gets the "script." prefix (base/log.h).
 * host_fields are for luna's own Lua library (lua/luna/api.lua: the shadow
 * write line; scripts cannot reach core.runtime): they are the host's
 * pairs and replace an attached one of the same name.
 *
 * Uses: log.  Runs on the loop thread.  Nothing is kept after the call.
 */
#ifndef LUNA_API_LOG_H
#define LUNA_API_LOG_H

#include <lua.h>

/* Adds log to the table on top of L's stack. */
void luna_api_log_register(lua_State *L);

#endif
