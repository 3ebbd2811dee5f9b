/*
 * reconcile.h — one reconcile: a call of a controller's Lua `reconcile`
 * function for one key, running as a coroutine of the controller's state,
 * and the one API call it may be waiting for.
 *
 * Uses: controller (its queue, budgets, stats), watchdog, workqueue.
 * Runs on the loop thread.
 *
 * The controller's dispatcher starts a reconcile for a key it took from
 * the workqueue.  The coroutine runs in a watchdog guard until it returns,
 * raises, is stopped, or yields in an API binding; a binding that starts
 * a request records it with luna_reconcile_wait before yielding, and the
 * request's completion resumes the coroutine (luna_reconcile_resume): at
 * once while the loop iteration's script-time slice lasts (dispatch.c),
 * else from the ready line, in the order the answers came, in later
 * iterations under the same slice and ahead of new starts.
 * When the coroutine ends, its result goes to the workqueue (see
 * controller.h for the result table), the key is marked done and the
 * reconcile is freed.
 *
 * Invariants:
 *   - a reconcile is in its controller's running list if and only if its
 *     coroutine is anchored in the registry;
 *   - luna_reconcile_of(L) finds a reconcile if and only if L is its
 *     coroutine and that coroutine is running (resumed by the host);
 *   - a reconcile waits for at most one operation, and it has a cancel
 *     callback if and only if it waits;
 *   - a reconcile is in the ready line if and only if its operation's
 *     answer came and it has not resumed since: its coroutine is
 *     suspended with the answer's values on its stack, and it has no
 *     cancel callback (freeing it takes it out of the line).
 *
 * Coroutines are reused: one that returned normally (no error, no watchdog
 * stop, nothing pending) goes, emptied, to its controller's idle pool and
 * runs a later reconcile of the same controller; creating a thread, growing
 * its stack and collecting it was a large share of a short reconcile.  A
 * coroutine that raised, was stopped or was abandoned is never reused.
 * Nothing of one reconcile reaches the next through it: its stack is
 * empty, its open upvalues were closed by the return, and its globals are
 * reset to the state's (scripts cannot call setfenv anyway).
 *
 * Ownership: the controller owns its reconciles and its idle coroutines; a
 * reconcile owns its key copy and the registry reference that keeps its
 * coroutine alive (handed to the pool, or released, when it ends).  The
 * pointer a binding keeps (as its operation's user data) is valid until
 * the reconcile is resumed or the operation is cancelled.
 */
#ifndef LUNA_RECONCILE_H
#define LUNA_RECONCILE_H

#include <lua.h>
#include <stdbool.h>

struct luna_controller;
struct luna_reconcile;

/* For the API bindings: the reconcile running on coroutine L (L is the
 * running coroutine), or NULL. */
struct luna_reconcile *luna_reconcile_of(lua_State *L);
struct luna_controller *luna_reconcile_controller(struct luna_reconcile *r);
const char *luna_reconcile_key(const struct luna_reconcile *r);
const char *luna_reconcile_id(struct luna_reconcile *r);
lua_State *luna_reconcile_thread(const struct luna_reconcile *r);
/* Reconciles are numbered from 1 as they start, across controllers and
 * reloads (the number reconcile_id shows in hex). */
unsigned long luna_reconcile_serial(const struct luna_reconcile *r);
/* The number of the newest reconcile started (0: none yet). */
unsigned long luna_reconcile_last_serial(void);

/* Records the asynchronous operation the reconcile waits for (one at a
 * time): cancel(ud) is called if the reconcile is abandoned first. */
void luna_reconcile_wait(struct luna_reconcile *r, void (*cancel)(void *ud), void *ud);
/* Ends the wait and resumes the coroutine with the nres values its stack
 * has on top: at once, or from the ready line when the dispatcher gives it
 * the turn (the values wait on the stack meanwhile). */
void luna_reconcile_resume(struct luna_reconcile *r, int nres);

/* For the dispatcher: resumes reconciles of the ready line, oldest first,
 * while the dispatcher gives them the turn; the line's watchers stop when
 * it is empty or until the breather's end.  Does nothing inside a
 * reconcile's stretch or nested in itself. */
void luna_reconcile_resume_ready(void);
/* Whether a reconcile waits in the ready line. */
bool luna_reconcile_ready_waiting(void);

/* The fields of the request table reconcile(req) gets (namespace, name,
 * key, attempt, periodic) and of the table it may return (requeue,
 * requeue_after, priority), NULL-terminated: the code below builds and reads them by
 * these names, and test_control.c's `api` command reports them for the
 * spec of the editor definitions. */
extern const char *const luna_reconcile_request_fields[];
extern const char *const luna_reconcile_result_fields[];

/* For the controller: starts a reconcile of key (borrowed; copied) taken
 * from c's workqueue at priority.  Its requeues (errors, requeue,
 * requeue_after, abandonment) keep that priority unless the result names
 * another ({priority = n}).  On failure to start, the key is requeued
 * with rate limiting and marked done. */
void luna_reconcile_start(struct luna_controller *c, const char *key, int priority);
/* The next reconcile in c's running list after r (NULL: the last). */
struct luna_reconcile *luna_reconcile_next(const struct luna_reconcile *r);
/* For the controller being freed: cancels r's pending operation, gives its
 * key back (requeued when requeue) and frees it. */
void luna_reconcile_abandon(struct luna_reconcile *r, bool requeue);

/* Idle coroutines a controller keeps for its next reconciles (at most this
 * many, fewer when it has fewer workers). */
#define LUNA_RECONCILE_POOL 16
/* When a controller's queue runs dry with nothing running after at least
 * this many reconciles ended since it was last dry, the heap's free pages
 * go back to the system (malloc_trim): a burst of reconciles (the initial
 * sync's keys, a resync) leaves the freed requests, keys and Lua garbage
 * as holes malloc keeps, and RSS would stay at the burst's peak. */
#define LUNA_RECONCILE_TRIM_BURST 10000
/* For the controller being freed: releases its idle coroutines. */
void luna_reconcile_pool_free(struct luna_controller *c);

#endif
