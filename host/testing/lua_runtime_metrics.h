/*
 * lua_runtime_metrics.h — core.metrics.runtime: luna's runtime metric set
 * (runtime_metrics.h) registered in a core.metrics registry, from Lua, for
 * specs and tools.
 *
 *   core.metrics.runtime(reg) -> rt    the runtime set registered in reg
 *   rt:controller(name, workers) -> ctl
 *   ctl:reconcile_start()  ctl:reconcile_done(result, seconds)  ctl:panic()
 *   ctl:set_workers(n)  ctl:script(sha256)  ctl:remove()
 *       result: "success", "error", "requeue", "requeue_after"
 *   rt:rest_request(code, method, host)
 *   rt:informer(resource, fn)   rt:informer_remove(resource)
 *   rt:relist(resource)         rt:watch_restart(resource, reason)
 *   rt:reload(ok, unix_seconds)  rt:leader(lease, leading)
 *   rt:lua_state(name)          rt:lua_state_remove(name)
 *       (the memory of the Lua state making the call)
 *
 * A runtime set lives as long as its registry (the registry anchors it); a
 * controller handle's series are removed when it is removed or collected.
 * Misuse raises; out of memory returns nil, err.  Runs on the loop thread.
 */
#ifndef LUNA_LUA_RUNTIME_METRICS_H
#define LUNA_LUA_RUNTIME_METRICS_H

#include <lua.h>

/* Adds `runtime` to the core.metrics table on top of the stack. */
void luna_lua_runtime_metrics_register(lua_State *L);

#endif
