/*
 * controller_impl.h — the controller's state as controller.c and
 * reconcile.c share it.  No other file includes this header.
 *
 * Invariants (in addition to controller.h's):
 *   - active is the length of the running list;
 *   - queue_borrowed if and only if a successor took the queue over;
 *   - a coroutine is in idle if and only if it is no reconcile's: it
 *     returned normally, its stack is empty, nothing waits on it.
 */
#ifndef LUNA_CONTROLLER_IMPL_H
#define LUNA_CONTROLLER_IMPL_H

#include "base/loop.h"
#include <stdbool.h>
#include <stdint.h>

#include "controller/controller.h"
#include "controller/spec.h"
#include "controller/reconcile.h"
#include "script/watchdog.h"

struct source {
    struct luna_controller *c;
    const struct luna_source_spec *spec; /* in c->spec->sources */
    struct luna_shared_informer *si;
    int handler_id;
    bool not_served_logged;           /* "controller kind not served" said, not taken back */
    bool sharded;                     /* follows the shard set's claim (luna run --shards) */
};

/* A deleted primary object's uid, kept while its key waits in the queue
 * (uid sharding: the key's owner is found from the uid, and a deleted
 * object is no longer in the cache). */
struct tombstone;

/* Longest kind text the lister memo keeps (longer ones are resolved every
 * time). */
#define LUNA_CONTROLLER_LISTER_KIND_MAX 128

struct luna_controller {
    const struct luna_controller_spec *spec; /* borrowed from its userdata */
    int spec_ref;                     /* keeps the userdata alive */
    const char *name;                 /* spec->name */
    struct luna_controller_env env;
    struct luna_workqueue *queue;
    bool queue_borrowed;              /* retired: the queue moved to a successor */
    struct source *sources;           /* one per spec source, acquired */
    size_t nsources;
    char **index_names;               /* per spec index: its name in sources[0]'s
                                       * indexer, "<controller>/<name>#<instance>" */
    size_t nindexes;                  /* custom indexes added to sources[0] */
    int workers, active;
    unsigned trim_burst;              /* reconciles ended since the queue was last dry */
    struct luna_watchdog_limits limits; /* budgets of its Lua code */
    bool started, stopping;
    bool paused;                      /* takes no keys; its queue still fills (admin) */
    bool dispatching;                 /* inside dispatch(): it does not nest */
    unsigned deferrals;               /* dispatches held back by the slice or a breather
                                       * since c last started a reconcile */
    /* The line of controllers deferred by the time slice, oldest first: c
     * is in it if and only if it has keys and free workers but was
     * deferred since it last started a reconcile. */
    struct luna_controller *deferred_prev, *deferred_next;
    bool in_deferred_line;
    void (*drained)(void *ud);
    void *drained_ud;
    struct luna_reconcile *running;   /* list of in-flight reconciles */
    /* Coroutines of reconciles that returned normally, kept for the next
     * reconciles (see reconcile.c): idle[0..nidle), each anchored in the
     * registry by idle_ref[i] and protected from scripts' resume. */
    lua_State *idle[LUNA_RECONCILE_POOL];
    int idle_ref[LUNA_RECONCILE_POOL];
    int nidle;
    struct luna_controller_stats stats;
    /* luna_controller_lister_informer's memo: the last kind text it
     * resolved to a source's informer ("" : none yet). */
    char lister_kind[LUNA_CONTROLLER_LISTER_KIND_MAX];
    struct luna_informer *lister_informer;
    struct luna_controller_metrics *metrics; /* borrowed; NULL: none */
    ev_check dispatch_check;
    ev_idle dispatch_idle;
    /* Periodic work (spec every): the timer runs while started and not
     * stopping; every_due is the wall-clock time of the next tick (0: not
     * scheduled yet), every_base the unjittered slot it was drawn from. */
    /* Shadow candidate (a reload tried in shadow, runtime.h): every write
     * is a dry run; keys whose writes would change something are kept in
     * shadow_keys (at most LUNA_SHADOW_MAX_KEYS, the rest counted). */
    bool shadow;
    struct shadow_key *shadow_keys;
    struct tombstone *tombstones;     /* by key; only with uid sharding */
    struct luna_shard_set *sharding;  /* borrowed; NULL: not sharded */
    size_t nshadow_keys, shadow_keys_dropped;
    ev_timer every_timer;
    double every_base, every_due;
    uint64_t every_rng;
};

/* ---- dispatch.c: the fair dispatcher ---- */

/* Starts the dispatch watchers if keys and workers are free. */
void luna_controller_kick(struct luna_controller *c);
/* Adds script time run in this loop iteration (the dispatch slice). */
void luna_controller_charge(double seconds);
/* Whether a reconcile whose API answer came may resume now (counted as
 * the iteration's resume if so), or waits in the ready line
 * (reconcile.c) until the next iteration or the breather's end. */
enum luna_resume_turn {
    LUNA_RESUME_NOW,
    LUNA_RESUME_NEXT_ITERATION,       /* kick the ready line's watchers */
    LUNA_RESUME_AFTER_BREATHER,       /* the breather's timer kicks them */
};
enum luna_resume_turn luna_controller_resume_turn(void);
/* Starts / stops the ready line's watchers (a check, and an idle watcher
 * so the loop does not block while the line waits). */
void luna_controller_ready_kick(void);
void luna_controller_ready_stop(void);
/* Counts a watchdog stop of c's code in its metrics (none: no-op). */
void luna_controller_count_stop(struct luna_controller *c, enum luna_watchdog_stop stop);
/* Calls the drained callback once stopping and nothing is in flight. */
void luna_controller_maybe_drained(struct luna_controller *c);
/* Sets up c's dispatch watchers (once, at construction). */
void luna_controller_dispatch_init(struct luna_controller *c);
/* Has c->queue tell the dispatcher when a key is ready (again after a
 * reload hands c another controller's queue). */
void luna_controller_dispatch_follow(struct luna_controller *c);
/* Stops c's watchers and takes it out of the deferred line. */
void luna_controller_dispatch_stop(struct luna_controller *c);
/* An informer handler's batch end (ud: the struct source): dispatches at
 * once what the batch queued. */
void luna_controller_on_batch_end(void *ud);

/* ---- sources.c: events to keys ---- */

/* Acquires the informer of c's next source (ss) for c: 0, or the
 * factory's error. */
int luna_controller_source_add(struct luna_controller *c, const struct luna_source_spec *ss,
                               luna_error *err);
/* Routes every source's events to c (after the indexes they may read). */
void luna_controller_handlers_add(struct luna_controller *c);
/* Removes the handlers, releases the informers and frees the tombstones. */
void luna_controller_sources_free(struct luna_controller *c);
/* Queues key with priority (logged if out of memory). */
void luna_controller_enqueue(struct luna_controller *c, const char *key, int priority);
/* The controller whose predicate or map function is running, or NULL. */
struct luna_controller *luna_controller_in_handler(void);
/* Sharding: c may not start reconciles now (its set is not settled). */
bool luna_controller_shard_waits(const struct luna_controller *c);
/* Sharding: whether c's replica owns key now. */
bool luna_controller_key_owned(struct luna_controller *c, const char *key);
/* Forgets key's tombstone (its reconcile starts). */
void luna_controller_tombstone_drop(struct luna_controller *c, const char *key);

/* ---- periodic.c: periodic work ---- */

/* Sets up c's periodic timer (once, at construction). */
void luna_controller_periodic_init(struct luna_controller *c);
/* At start: a fresh schedule (or the one a reload handed over) is armed. */
void luna_controller_periodic_start(struct luna_controller *c);
void luna_controller_periodic_stop(struct luna_controller *c);
/* Reload: the same schedule keeps its next due time. */
void luna_controller_periodic_take(struct luna_controller *to, const struct luna_controller *from);

#endif
