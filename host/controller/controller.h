/*
 * controller.h — one controller: its event sources, its workqueue, and the
 * reconciles of its Lua `reconcile` function running as coroutines.
 *
 * Uses: controller_spec (what the script declared, read once),
 * informer_factory (shared informers), workqueue + ratelimit, reconcile
 * (the coroutines), the controller's Lua state (lua_host).  Runs on the
 * loop thread.
 *
 * Sources map informer events to keys ("ns/name") of the primary kind:
 *   watch    the object's own key (after the controller's predicates);
 *   owns     the key of the object's controller owner, when that owner's
 *            group and kind are the primary's (ownerReferences, controller:
 *            true); objects without one are ignored.  The owner is in the
 *            child's namespace unless the primary kind is cluster-scoped;
 *   watches  whatever the source's Lua `map(obj)` returns: a key, a
 *            {namespace=, name=} table, a list of either, or nil; other
 *            shapes (nested lists, numbers, ...) are logged and ignored.
 * Priorities (controller-runtime's handlers, workqueue.h): an object of a
 * first list or replayed to a handler added late, a resync and an unchanged
 * relisted object (old and new resourceVersion equal) enqueue their keys at
 * LUNA_WORKQUEUE_PRIORITY_LOW, as does enqueuing every key at once (reload,
 * start, admin all/selector); live adds, changes and deletes, periodic
 * ticks and single admin keys at DEFAULT.  priority_queue = false makes the
 * queue one FIFO.
 * The dispatcher takes keys from the workqueue while fewer than `workers`
 * reconciles are in flight: right after each informer drain step (so a
 * watch event's reconcile starts before the next event is parsed), and
 * from the loop when keys become ready otherwise.  Each reconcile is a coroutine: calling the
 * API yields it and the loop resumes it when the answer arrives, so a slow
 * call never blocks other reconciles or the watches.  The workqueue
 * guarantees a key is never reconciled twice at once.
 *
 * Results (client-go/controller-runtime semantics):
 *   nothing, true            done: forget the key's failures
 *   {requeue = true}         retry with rate limiting
 *   {requeue_after = s}      forget, then retry after s seconds
 *   {..., priority = n}      the retry's priority (an integer, |n| <= 1e9);
 *                            without it a retry keeps the key's priority
 *   nil, err / error()       logged with key, attempt and the error's text
 *   / false                  (__tostring of a table; traceback if raised;
 *                            err.where, the failed luna call, if a string);
 *                            retry with rate limiting
 *   {requeue_after = x} with x not a number of seconds: an error, as above.
 * Result tables are read raw (no metamethods run).
 *
 * Isolation (watchdog.h): every resume of a reconcile, every predicate,
 * watches map and error __tostring runs in a watchdog guard with the
 * controller's budgets (its `limits = { instructions =, seconds = }`, else
 * the state's defaults).  A reconcile the watchdog stops fails like any
 * error ("reconcile failed", stopped=instructions|time|memory, the reason
 * and traceback, retry with rate limiting); after a memory stop the state
 * is garbage-collected at once.  A stopped predicate or map logs "lua
 * callback failed" and counts as passing / mapping to nothing.  All of its
 * Lua code (its file at load, reconciles, predicates, maps, index
 * functions) is charged to one watchdog memory account (env->account),
 * named after the controller and capped by `limits.memory` (MiB) or the
 * operator's --controller-memory-limit: a controller that holds too much
 * fails its own code, not its neighbours' (luna_controller_lua_memory
 * reads it; the luna_controller_lua_memory_bytes metric).
 *
 * Invariants:
 *   - active (in-flight reconciles) <= workers;
 *   - a key is in flight if and only if the workqueue has it processing;
 *   - the dispatcher only runs once every source has synced.
 *
 * Ownership: the controller borrows the runtime and the Lua state (both
 * outlive it) and owns its workqueue, sources and reconciles.  Each source
 * holds one reference on a shared informer, released by free.
 */
#ifndef LUNA_CONTROLLER_H
#define LUNA_CONTROLLER_H

#include <lua.h>
#include <stdbool.h>

#include "base/error.h"
#include "cache/informer_factory.h"
#include "controller/reconcile.h"
#include "serve/runtime_metrics.h"

struct luna_controller;

struct luna_controller_env {
    struct luna_informer_factory *factory;
    const struct luna_clock *clock;
    lua_State *L;        /* the state that loaded the controller */
    lua_State *T;        /* an idle thread of L for handler callbacks */
    unsigned account;    /* L's watchdog memory account its Lua code is
                          * charged to (its file's, loader.h); 0: the host's */
    struct luna_shard_set *sharding; /* the set it follows (luna run --shards),
                                      * or NULL (borrowed) */
};

struct luna_controller_stats {
    unsigned long reconciles, errors, requeues, requeue_afters, successes;
    unsigned long stopped;   /* errors that were watchdog stops */
    int active;
};

/* Builds the controller described by the table at ctl_idx of env->L (the
 * value luna.controller{} returned): reads it once into its spec
 * (controller/spec.h), acquires its informers and makes its workqueue.
 * It does not reconcile until luna_controller_start. */
int luna_controller_new(const struct luna_controller_env *env, int ctl_idx,
                        struct luna_controller **out, luna_error *err);
/* Cancels in-flight reconciles (their keys are dropped) and releases
 * everything. */
void luna_controller_free(struct luna_controller *c);

const char *luna_controller_name(const struct luna_controller *c);
/* Every source's informer has synced (so the controller may start). */
bool luna_controller_synced(const struct luna_controller *c);
/* Starts dispatching (once; logs "controller started"). */
void luna_controller_start(struct luna_controller *c);
bool luna_controller_started(const struct luna_controller *c);

/* Where the controller's sources are: their informers' states, counted
 * (informer_factory.h).  sources == synced when it may start. */
struct luna_controller_status {
    size_t sources;
    size_t resolving;    /* discovery has not answered yet */
    size_t unresolved;   /* discovery failed; retried */
    size_t not_served;   /* the server does not serve the kind; asked again */
    size_t listing;      /* the first list is not in yet */
    size_t synced;
};
void luna_controller_status(const struct luna_controller *c, struct luna_controller_status *st);
/* luna_controller_status, and: sets the controller's
 * luna_controller_kinds_not_served metric, and reports a source whose kind
 * the server does not serve when it is first seen so ("controller kind not
 * served" at error, with controller, kind, the discovery error and a hint)
 * and when it is served again ("controller kind served" at info). */
void luna_controller_check(struct luna_controller *c, struct luna_controller_status *st);
/* Writes what the sources that have not synced are waiting for into buf
 * ("example.com/v1/Gadget not served (no matches for kind ...), v1/Secret
 * listing"; "" when all have synced), cut to size; returns its length.
 * unresolved_only: only the sources not served or whose discovery failed. */
size_t luna_controller_describe_waiting(const struct luna_controller *c, bool unresolved_only,
                                        char *buf, size_t size);
/* Stops taking keys; calls drained(ud) once no reconcile is in flight
 * (maybe before returning). */
void luna_controller_shutdown(struct luna_controller *c, void (*drained)(void *ud), void *ud);
int luna_controller_workers(const struct luna_controller *c);

/* Reconcile metrics (runtime_metrics.h: active workers, reconcile_total by
 * result, errors, panics = Lua errors raised, time), borrowed until free
 * or the next call; NULL: none. */
struct luna_controller_metrics;
void luna_controller_set_metrics(struct luna_controller *c, struct luna_controller_metrics *cm);
/* The controller's workqueue (named after it), borrowed until free: for
 * workqueue_export. */
struct luna_workqueue *luna_controller_queue(struct luna_controller *c);
/* Bytes of its state's Lua heap charged to its memory account (0 without
 * one). */
size_t luna_controller_lua_memory(const struct luna_controller *c);

/* Reload: `to` (the new code) takes over `from`'s workqueue, with its
 * queued keys, delays and failure counts; `from` keeps a borrowed pointer
 * so its in-flight reconciles can still mark their keys done (and the
 * queue never hands a key out twice at once across the two). */
void luna_controller_take_queue(struct luna_controller *to, struct luna_controller *from);
/* Stops taking keys (and routing events) without shutting a queue it no
 * longer owns; drained(ud) once no reconcile of it is in flight.  Freeing
 * it before then abandons its reconciles and requeues their keys. */
void luna_controller_retire(struct luna_controller *c, void (*drained)(void *ud), void *ud);
/* Adds every cached key of the primary kind; returns how many. */
size_t luna_controller_enqueue_all(struct luna_controller *c);

/* On demand (admin.h).  A paused controller starts no reconcile (those in
 * flight finish) while its queue still takes keys, deduplicated as ever;
 * resuming dispatches what accumulated.  The pause passes to the
 * controller that takes its queue over at a reload. */
bool luna_controller_paused(const struct luna_controller *c);
void luna_controller_set_paused(struct luna_controller *c, bool paused);
/* Adds one key ("ns/name" or "name") now; 0 or LUNA_ENOMEM (logged). */
int luna_controller_enqueue_key(struct luna_controller *c, const char *key);
/* Adds the key of every cached primary object whose labels match;
 * returns how many (borrowed selector). */
struct luna_selector;
size_t luna_controller_enqueue_matching(struct luna_controller *c,
                                        const struct luna_selector *labels);

/* Reconciles in flight. */
int luna_controller_active(const struct luna_controller *c);
/* Counts an admin request in the controller's metrics (runtime_metrics.h). */
void luna_controller_note_trigger(struct luna_controller *c, enum luna_trigger_action action,
                                  size_t keys);

/* Periodic work: a controller with `every = seconds` (or a cron schedule)
 * adds the key LUNA_PERIODIC_KEY to its own workqueue on that schedule,
 * as a source.Channel fed by a ticker would, so the reconcile gets
 * {key = "@every", name = "@every", periodic = true}.  The workqueue's
 * rules hold for it as for any key: a tick while the last one still runs
 * or waits is folded into it (ticks never pile up), an error retries it
 * with backoff, {requeue_after = s} adds a run, a paused controller queues
 * it.  The schedule: with `every = s`, a tick when the controller starts,
 * then every s seconds after the previous slot (missed slots are skipped,
 * not caught up); with a cron schedule, at its minutes (UTC).  Each tick
 * comes up to jitter x period late, uniformly (client-go's JitterUntil
 * factor), so replicas and controllers do not poll in step.  A reload that
 * keeps the schedule (every and jitter unchanged) keeps the next due time;
 * a changed schedule starts over as at startup.  Counted in
 * luna_periodic_ticks_total, the next run in
 * luna_periodic_next_run_timestamp_seconds. */
#define LUNA_PERIODIC_KEY "@every"
/* Whether c has a schedule (`every`): only then is LUNA_PERIODIC_KEY a key
 * its reconcile expects. */
bool luna_controller_periodic(const struct luna_controller *c);

/* Counts a shadowed write (luna run --shadow) in the controller's metrics;
 * for a shadow candidate, a changing write also records its key
 * (reconcile key, and "verb kind ns/name" of the first such write). */
void luna_controller_note_shadow(struct luna_controller *c, const char *key, const char *verb,
                                 const char *what, bool changed);

/* A shadow candidate (runtime.h, --shadow-reload): every write of its
 * reconciles is a dry run (api/client.h), whatever the state's flag. */
#define LUNA_SHADOW_MAX_KEYS 1000
#define LUNA_SHADOW_MAX_WHAT 512   /* bytes kept of each key's description */
void luna_controller_set_shadow(struct luna_controller *c, bool shadow);
/* n warnings the API server sent with a call of c's reconciles
 * (luna_api_warnings_total{controller}). */
void luna_controller_count_api_warnings(struct luna_controller *c, unsigned n);
bool luna_controller_shadow(const struct luna_controller *c);
/* Calls fn for each key the candidate recorded, in the order recorded;
 * returns how many were recorded and sets *dropped to those beyond the
 * bound. */
size_t luna_controller_shadow_keys(const struct luna_controller *c,
                                   void (*fn)(void *ud, const char *key, const char *what),
                                   void *ud, size_t *dropped);
/* Reconciles of the controller that failed so far. */
unsigned long luna_controller_errors(const struct luna_controller *c);

/* Sharding (`luna run --shards`, shard_set.h): a controller built with a
 * shard set in its env (env->sharding) lists and watches its primary kind
 * (and, with namespace sharding, their `owns` kinds, whose children live
 * in their owner's namespace) through the set's claim; other sources are
 * cached whole.  Such a controller reconciles a key only when the set
 * says this replica owns it: by the key's namespace, or by the uid of the
 * cached primary object (of the deleted one, for a deletion still
 * queued); the periodic key by its own text's hash.  Keys not owned are
 * forgotten at dispatch.  An object that leaves the shard (a relist after
 * the claim shrank) is handed over, not deleted: it enqueues nothing.
 * The set is borrowed for the controller's life. */

/* Moves c's sharded sources to the set's current claim (a relist each);
 * 0, or the factory's error (logged). */
int luna_controller_reshard(struct luna_controller *c);
/* Abandons every reconcile in flight (their keys are requeued). */
void luna_controller_abandon_running(struct luna_controller *c);
/* The set may act again (shard_set.h on_resume): dispatch the keys that
 * waited in c's queue while it could not. */
void luna_controller_resume(struct luna_controller *c);
/* The serial of c's oldest reconcile in flight, 0 when none is. */
unsigned long luna_controller_oldest_running(const struct luna_controller *c);

/* The one context lookup of the script API: the controller whose code L
 * runs (a reconcile, or a predicate or watches map function, where its
 * cache may be read), or NULL.  *reconcile (if given) is set to the
 * reconcile L is the coroutine of, or NULL in a handler. */
struct luna_controller *luna_controller_current(lua_State *L, struct luna_reconcile **reconcile);

/* Admission webhooks read the caches of their file's controller
 * (docs/webhooks.md, "Reading the caches"): while webhook `name` runs,
 * luna_controller_current answers c (NULL for a file of webhooks only),
 * with no reconcile, so listers work and API calls still raise.  enter
 * returns the scope it replaced; leave restores it. */
struct luna_controller_scope {
    struct luna_controller *c;
    const char *webhook;
};
struct luna_controller_scope luna_controller_webhook_enter(struct luna_controller *c,
                                                           const char *name);
void luna_controller_webhook_leave(struct luna_controller_scope outer);
/* The name of the webhook running now (borrowed), or NULL. */
const char *luna_controller_in_webhook(void);

/* The informer a controller declared for a kind ("v1/ConfigMap"); NULL if
 * none of its sources watches that kind.  With several sources of the
 * kind, the first that caches whole objects wins over metadata-only ones. */
struct luna_informer *luna_controller_informer_for(struct luna_controller *c,
                                                   const char *group, const char *version,
                                                   const char *kind);
/* The same for the kind text a lister names ("v1/ConfigMap"): NULL with
 * err set when text is not a kind, NULL (err code 0) when no source
 * watches it.  The controller remembers the last text it resolved (a
 * reconcile reads the same kind every time; its sources never change), so
 * a repeat costs one string comparison. */
struct luna_informer *luna_controller_lister_informer(struct luna_controller *c, const char *text,
                                                      luna_error *err);
struct luna_informer_factory *luna_controller_factory(struct luna_controller *c);
/* The name the index c declared as `name` has in inf's indexer (borrowed
 * until c is freed), or NULL if c declares no such index on inf (indexes
 * live on the primary informer only). */
const char *luna_controller_index_name(const struct luna_controller *c,
                                       const struct luna_informer *inf, const char *name);

#endif
