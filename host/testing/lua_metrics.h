/*
 * lua_metrics.h — core.metrics: metric registries (metrics.h) from Lua, for
 * specs and tools; the runtime metric set (lua_runtime_metrics.h) and
 * workqueue exports (lua_workqueue_export.h) hang off the same table.
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
 *   core.metrics.runtime(reg), core.metrics.export_workqueue(reg, q):
 *   see lua_runtime_metrics.h and lua_workqueue_export.h.
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

#include "base/error.h"

struct luna_metrics;

/* Adds core.metrics to the table on top of the stack (lua_module.c adds
 * runtime and export_workqueue to it, whose files build on this one). */
void luna_lua_metrics_register(lua_State *L);

/* ---- shared with lua_runtime_metrics.c and lua_workqueue_export.c ---- */

/* The registry of the core.metrics.new() object at idx (raises if it is
 * not one). */
struct luna_metrics *luna_lua_metrics_check(lua_State *L, int idx);
/* A string / number argument (raises with `what` / a type error). */
const char *luna_lua_metrics_check_string(lua_State *L, int idx, const char *what);
lua_Number luna_lua_metrics_check_number(lua_State *L, int idx);
/* Raises for misuse (LUNA_EINVAL), else returns nil, err (2 values). */
int luna_lua_metrics_fail(lua_State *L, int rc, const luna_error *err);
/* Pushes a zeroed userdata of size with metatable mt whose environment is
 * the object at idx's (share) or a new table { object at idx }. */
void *luna_lua_metrics_push_object(lua_State *L, size_t size, const char *mt, int idx,
                                   int share);
/* Binding calls that may render, read or destroy a function series run
 * between enter (returns the outer state) and leave(outer): function
 * series are called with, and release their function on, that state. */
lua_State *luna_lua_metrics_enter(lua_State *L);
void luna_lua_metrics_leave(lua_State *outer);

/* A Lua function (at idx, anchored in the registry) as a series' value
 * source: pass luna_lua_metrics_fn_call and _release with it to the metrics
 * module, which then owns it.  NULL when out of memory.  If it is never
 * handed over, free it with luna_lua_metrics_fn_discard(). */
struct luna_lua_metrics_fn;
struct luna_lua_metrics_fn *luna_lua_metrics_fn_new(lua_State *L, int idx);
void luna_lua_metrics_fn_discard(lua_State *L, struct luna_lua_metrics_fn *fn);
double luna_lua_metrics_fn_call(void *fn);
void luna_lua_metrics_fn_release(void *fn);

#endif
