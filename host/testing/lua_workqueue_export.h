/*
 * lua_workqueue_export.h — core.metrics.export_workqueue: a core.workqueue's
 * workqueue_* series (workqueue_export.h) in a core.metrics registry, from
 * Lua, for specs and tools.
 *
 *   core.metrics.export_workqueue(reg, q) -> x   q's workqueue_* series
 *   x:detach()                          removes them (so does collecting q)
 *
 * The export anchors the registry and the queue.  Misuse raises; out of
 * memory returns nil, err.  Runs on the loop thread.
 */
#ifndef LUNA_LUA_WORKQUEUE_EXPORT_H
#define LUNA_LUA_WORKQUEUE_EXPORT_H

#include <lua.h>

/* Adds `export_workqueue` to the core.metrics table on top of the stack. */
void luna_lua_workqueue_export_register(lua_State *L);

#endif
