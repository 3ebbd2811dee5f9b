/*
 * controller/generation.h — one load of the controllers directory (a "reload"): a Lua
 * state per controller file, the files run in them, and the controllers
 * built from them.
 *
 * Uses: the loader, controller, informer_factory; the script API and the
 * clock come from the caller (struct luna_generation_host), so this layer
 * does not reach up into api/ or the runtime.  Runs on the loop thread.
 *
 * `luna run` makes the first reload at start and a new one on every
 * SIGHUP (or change of the directory with --watch).  A new reload is
 * loaded and built completely before the running one is touched, so a
 * broken file changes nothing; then each new controller adopts the
 * workqueue of the old controller of the same name (queued keys, delays
 * and failure counts survive), informers still needed are shared (their
 * caches survive: no relist), and the old reload retires: it takes no new
 * keys, its in-flight reconciles finish on the old states, and it is freed
 * with them when they have (or when the grace period ends).
 *
 * Each controller file gets a state of its own (loader.h: the watchdog's
 * allocator, the sandbox, the script API), so nothing a controller makes
 * is shared with another: not its module tables, not its registry, not
 * the strings LuaJIT interns once per state (a hog that keeps the values
 * a neighbour reads from its cache holds copies charged to itself).  All
 * the states of a reload join one watchdog budget (watchdog.h, "Shared
 * budget"), so --lua-memory-limit bounds them together.  Each reload has
 * its own unless the host gives one: a reload is loaded, and its old
 * reload drains, each under the whole limit, as when a reload was one
 * state (a shared one would make a reload fail whenever the running
 * controllers hold more than half of it).  The log and metrics
 * count successful loads as "generation".
 *
 * Invariants:
 *   - each loaded file has a state, which holds nothing of another
 *     file's; a file declares at most one controller (none: webhooks
 *     only), which runs its Lua in that state;
 *   - a controller name appears at most once per reload.
 *
 * Ownership: a reload owns its states, their callback threads, its
 * controllers and the list of load failures, and holds one reference on
 * the budget; it borrows the factory, kube client and discovery (which
 * outlive every reload).  Free with luna_generation_free.
 */
#ifndef LUNA_GENERATION_H
#define LUNA_GENERATION_H

#include <stdbool.h>
#include <stddef.h>

#include <lua.h>

#include "controller/controller.h"
#include "client/discovery.h"
#include "base/error.h"
#include "cache/informer_factory.h"
#include "client/kube_client.h"

struct luna_generation;
struct luna_clock;
struct luna_shard_set;
struct luna_watchdog_budget;

/* What a generation is given by the runtime that makes it. */
struct luna_generation_host {
    /* Gives a new state the script API (core.runtime), before its files
     * run, and again on luna_generation_connect. */
    void (*install_api)(lua_State *L, void *ud);
    void *ud;                        /* borrowed; outlives the generation */
    const struct luna_clock *clock;  /* the controllers' clock (borrowed) */
    struct luna_shard_set *sharding; /* the set controllers built follow
                                      * (luna run --shards), or NULL */
    struct luna_watchdog_budget *budget; /* the heap budget every state
                                      * joins (referenced by each reload
                                      * that uses it); NULL: one per reload */
};

/* Loads every controller file of dir into a new state of its own
 * (controllers are not built yet; luna_loader_each_file).  host is
 * borrowed: it outlives the generation, and is read again when the
 * controllers are built (the shard set may come after the load).  A file
 * that fails to load fails the load when require_all is set (or no file
 * loads); else the generation holds the files that loaded and lists the
 * others (luna_generation_failure). */
struct luna_watchdog_config;
/* limits: the scripts' budgets (watchdog.h); NULL keeps the defaults. */
int luna_generation_load(const char *lib_dir, const char *dir,
                     const struct luna_watchdog_config *limits,
                     const struct luna_generation_host *host, bool require_all,
                     struct luna_generation **out, luna_error *err);
/* Installs the script API again in every state of a reload loaded before
 * the runtime connected. */
void luna_generation_connect(struct luna_generation *g);
/* Builds the controllers (acquiring their informers). */
int luna_generation_build(struct luna_generation *g, struct luna_informer_factory *factory,
                          luna_error *err);

/* The files that loaded, and file i's state (0-based, name order; not
 * controller i's when a webhooks-only file comes before it), or NULL past
 * the end. */
size_t luna_generation_loaded(const struct luna_generation *g);
/* The controllers its files declare (a webhooks-only file declares none):
 * what luna_generation_build will build. */
size_t luna_generation_declared(const struct luna_generation *g);
lua_State *luna_generation_state(struct luna_generation *g, size_t i);
/* The controller file i declares, once built; NULL for a file of webhooks
 * only, or before luna_generation_build. */
struct luna_controller *luna_generation_state_controller(struct luna_generation *g, size_t i);
/* The files that failed to load, in name order: their count, and failure
 * i's (0-based) path and message (borrowed from g; LUNA_ENOTFOUND past the
 * end). */
size_t luna_generation_failure_count(const struct luna_generation *g);
int luna_generation_failure(const struct luna_generation *g, size_t i, const char **file,
                            const char **error);
/* Bytes of the Lua heaps of its states together, as LuaJIT counts them
 * (ud: the generation; a metrics callback). */
double luna_generation_lua_memory(void *ud);
size_t luna_generation_count(const struct luna_generation *g);
struct luna_controller *luna_generation_controller(struct luna_generation *g, size_t i);
/* The SHA-256 of the file controller i came from (borrowed). */
const char *luna_generation_sha256(struct luna_generation *g, size_t i);
struct luna_controller *luna_generation_find(struct luna_generation *g, const char *name);

bool luna_generation_synced(const struct luna_generation *g);
void luna_generation_start(struct luna_generation *g);

/* Takes over from `old`: queues of same-named controllers move over, and
 * controllers whose file changed re-enqueue every cached key once.  Returns
 * the number of changed controllers. */
size_t luna_generation_adopt(struct luna_generation *g, struct luna_generation *old);

/* Stops every controller from taking keys; drained(ud) once no reconcile
 * is in flight.  shutdown: also shut the workqueues down (process exit). */
void luna_generation_retire(struct luna_generation *g, bool shutdown,
                            void (*drained)(void *ud), void *ud);
/* Frees controllers (abandoning in-flight reconciles) and closes the states. */
void luna_generation_free(struct luna_generation *g);

#endif
