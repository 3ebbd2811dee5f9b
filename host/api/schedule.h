/*
 * api/schedule.h — per-key timers for scripts (luna.schedule in
 * lua/luna/api.lua):
 *
 *   core.runtime.schedule(key, at) -> true | false, why
 *
 * queues key, a key of the reconciling controller ("namespace/name" or
 * "name"; "@every" is the periodic key and refused), when `at` comes: a
 * number is a wall-clock time in seconds since the epoch (base/clock.h's
 * wall clock, so the fake clock's under `luna test`; a time already past
 * queues the key now), a table { after = seconds } a delay.  Either at
 * most LUNA_SCHEDULE_MAX_DELAY seconds away.  It is the workqueue's
 * add_after (queue/workqueue.h) at the default priority: a key already
 * waiting keeps the earlier of its two times (client-go's AddAfter), and
 * the timer lives in the controller's queue, so it survives a reload that
 * keeps the controller (generation.c hands the queue over) and is lost
 * with the process or when the controller is removed, as requeue_after.
 *
 * A controller holds at most LUNA_SCHEDULE_MAX_WAITING waiting keys (its
 * queue's, requeue_after and retry backoff included); past it a new key is
 * refused, a key already waiting may still move.  Misuse (outside a
 * reconcile, a bad key or time, the cap) returns false and the reason,
 * which luna.schedule raises at the script's line; nothing is scheduled.
 * When the controller is stopping (shutdown, retired by a reload that
 * removed it) the key is dropped, as the queue drops every add.
 *
 * Runs on the loop thread.  Nothing is kept but the queue's copy of key.
 */
#ifndef LUNA_API_SCHEDULE_H
#define LUNA_API_SCHEDULE_H

#include <lua.h>

#define LUNA_SCHEDULE_MAX_DELAY 31536000.0 /* a year (365 days) */
#define LUNA_SCHEDULE_MAX_WAITING 100000

/* Adds schedule to the table on top of L's stack. */
void luna_api_schedule_register(lua_State *L);

#endif
