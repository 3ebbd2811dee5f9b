/*
 * lua_metrics.h — core.metrics: metric registries (metrics.h), the runtime
 * metric set (runtime_metrics.h) and workqueue exports (workqueue_export.h)
 * from Lua, for specs and tools.
 *
 *   core.metrics.new()                 a registry of its own
 *   core.metrics.content_type          "text/plain; version=0.0.4; charset=utf-8"
 *   core.metrics.format_value(v)       v as the exposition prints it
 *   reg:counter{ name=, help=, labels={...} }            -> family
 *   reg:gauge{ ... }, reg:histogram{ ..., buckets={...} }
 *       registering an identical family again returns it; a bad or
 *       conflicting description raises
 *   reg:find(name) -> family|nil       reg:unregister(name) -> bool
 *   reg:remove_matching(label, value) -> n (in every family with that label)
 *   reg:render() -> text               reg:count() -> number of families
 *   fam:labels(v1, ...) -> child       (created at 0 on first use)
 *   fam:func(fn, v1, ...) -> child     a counter/gauge series whose value is
 *                                      fn() at each render (NaN if fn
 *                                      raises or returns a non-number)
 *   fam:remove(v1, ...) -> bool        fam:remove_matching(label, value) -> n
 *   fam:clear()   fam:unregister() -> bool   fam:registered()   fam:count()
 *   fam:name() fam:help() fam:type() fam:label_names() fam:buckets()
 *   child:inc() child:add(v) child:dec() child:set(v) child:observe(v)
 *   child:value() -> number            child:histogram() -> { count, sum,
 *                                      buckets = { cumulative..., +Inf last } }
 *   child:remove() -> bool  child:listed() -> bool  child:labels() -> { v1, ... }
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
 *   core.metrics.export_workqueue(reg, q) -> x   q's workqueue_* series
 *   x:detach()                          removes them (so does collecting q)
 *
 * Misuse raises: wrong types, label values that are not strings (or hold
 * NUL bytes or bad UTF-8), a wrong number of them, inc on a histogram,
 * observe on a counter, a counter going down, structural changes from
 * inside a function series during a render.  Out of memory returns nil,
 * err.  Family and child objects hold references: they stay usable after
 * removal or unregistering (updates are then not exported) and keep their
 * registry alive.  A runtime set lives as long as its registry; a
 * controller handle's series are removed when it is removed or collected.
 * Function series are called with the state of the call that renders.
 */
#ifndef LUNA_LUA_METRICS_H
#define LUNA_LUA_METRICS_H

#include <lua.h>

void luna_lua_metrics_register(lua_State *L);

#endif
