/*
 * lua_leader.h — core.leader: a leader elector (leader.h) from Lua, for
 * specs and tools; `luna run --leader-elect` runs the same C.
 *
 *   local le = core.leader.new{ kubeconfig = PATH [, context = NAME],
 *       name = LEASE, namespace = NS, identity = ID,
 *       [lease_duration = 15, renew_deadline = 10, retry_period = 2,]
 *       [jitter = 1.2 (false: none),] [clock = "real" | "fake",]
 *       [on_started_leading = fn(), on_stopped_leading = fn(),
 *        on_new_leader = fn(identity)] }
 *   le:start()            first attempt now
 *   le:advance(seconds)   fake clock only: moves it, then runs what is due
 *   le:tick()             runs what is due on the clock
 *   le:now()              the elector's clock
 *   le:is_leader()  le:holder()  le:busy()  le:healthy() -> ok, reason
 *   le:stats()            {attempts, failures, conflicts, acquisitions, renewals}
 *   le:release()          gives the Lease up if held; le:released() is nil
 *                         until that ended, then true (written) or false
 *   le:close()            frees it (also on garbage collection)
 *
 * Misuse raises: unknown fields, wrong types, invalid names or durations.
 * A kubeconfig that does not load returns nil, err.  With the real clock
 * the elector runs its own timers on the loop; with the fake one it acts
 * only on start/advance/tick and on answers (core.loop.run_until drives
 * those).  Callbacks run on a thread the object anchors; an error in one
 * is logged.  Runs on the loop thread.
 */
#ifndef LUNA_LUA_LEADER_H
#define LUNA_LUA_LEADER_H

#include <lua.h>

void luna_lua_leader_register(lua_State *L);

#endif
