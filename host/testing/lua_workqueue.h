/*
 * lua_workqueue.h — core.workqueue: the workqueue (workqueue.h) from Lua,
 * for specs and scripts.
 *
 *   core.workqueue.new{ name = "", clock = "real"|"fake", fifo = false,
 *                       base_delay = 0.005, max_delay = 1000, qps = 10, burst = 100 }
 *   core.workqueue.new{ ..., rate_limiter = { kind = ..., ... } }
 *       the four numbers configure the default limiter; rate_limiter takes
 *       any description core.ratelimit.new accepts (without clock) instead
 *       (giving both raises).  A "real" queue runs its delays on the luna
 *       loop (they fire while core.loop.run* runs); a "fake" one starts at
 *       time 0 and moves only through q:advance().  fifo = true ignores
 *       priorities (client-go's plain FIFO).
 *   q:add(key[, priority])   true; false if shutting down (dropped);
 *                            priority: an integer, default 0, higher first
 *   q:add_after(key, secs[, priority])  same; secs <= 0 adds now; NaN/inf raise
 *   q:add_rate_limited(key[, priority]) same
 *   q:get()                  key, or nil and "empty" / "shutdown"
 *   q:get_with_priority()    key and its priority, or as get
 *   q:depth_at(priority)     dirty keys at that priority
 *   q:set_fifo(bool)         priorities off (every dirty key to 0) or on
 *   q:done(key)              raises if key is not being processed
 *   q:forget(key), q:num_requeues(key), q:len()
 *   q:shutdown()             a pending drain callback gets false
 *   q:shutdown_with_drain([fn])  fn(true) once nothing is processing (now
 *                            if nothing is); raises if a drain is pending
 *   q:is_shutting_down()
 *   q:advance(secs)          fake clock only: move time, add what is due
 *   q:now()                  the queue's clock reading
 *   q:on_ready(fn|nil)       fn() whenever keys became available to get
 *   q:metrics()              { depth, queued, processing, waiting,
 *                              adds_total, retries_total,
 *                              queue_duration_sum, queue_duration_count,
 *                              work_duration_sum, work_duration_count,
 *                              unfinished_work_seconds,
 *                              longest_running_processor_seconds }
 *
 * Keys are strings without NUL bytes; misuse (wrong types, unknown
 * options) raises; out of memory returns nil, err.  Callbacks run through
 * luna_lua_pcall (an error is logged, never raised into the queue); from a
 * timer they run on luna_lua_loop_current().  They are kept in the object's
 * environment, so a callback referring to its own queue does not keep it
 * alive.  __gc stops the timer and frees the queue, its keys, limiter and
 * clock; a pending drain callback is then not called.
 */
#ifndef LUNA_LUA_WORKQUEUE_H
#define LUNA_LUA_WORKQUEUE_H

#include <lua.h>

void luna_lua_workqueue_register(lua_State *L);

struct luna_workqueue;
/* The queue of the workqueue object at idx (borrowed while that object
 * lives).  May raise: not a workqueue, or already collected. */
struct luna_workqueue *luna_lua_workqueue_check(lua_State *L, int idx);

#endif
