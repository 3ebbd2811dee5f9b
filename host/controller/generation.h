/*
 * controller/generation.h — one load of the controllers directory (a "reload"): a Lua
 * state, the controller files run in it, and the controllers built from
 * them.
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
 * keys, its in-flight reconciles finish on the old state, and it is freed
 * when they have (or when the grace period ends).  The log and metrics
 * count successful loads as "generation".
 *
 * Invariants:
 *   - a reload's controllers all run Lua in its own state;
 *   - a controller name appears at most once per reload.
 *
 * Ownership: a reload owns its state, callback thread and controllers;
 * it borrows the factory, kube client and discovery (which outlive every
 * reload).  Free with luna_generation_free.
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

/* What a generation is given by the runtime that makes it. */
struct luna_generation_host {
    /* Gives a new state the script API (core.runtime), before its files
     * run, and again on luna_generation_connect. */
    void (*install_api)(lua_State *L, void *ud);
    void *ud;                        /* borrowed; outlives the generation */
    const struct luna_clock *clock;  /* the controllers' clock (borrowed) */
    struct luna_shard_set *sharding; /* the set controllers built follow
                                      * (luna run --shards), or NULL */
};

/* Loads every controller file of dir into a new state (controllers are
 * not built yet; luna_loader_load_dir).  host is borrowed: it outlives the
 * generation, and is read again when the controllers are built (the shard
 * set may come after the load).  A file that fails to load fails the load
 * when require_all is set (or no file loads); else the generation holds the
 * files that loaded and the state lists the others
 * (luna_loader_failure). */
struct luna_watchdog_config;
/* limits: the scripts' budgets (watchdog.h); NULL keeps the defaults. */
int luna_generation_load(const char *lib_dir, const char *dir,
                     const struct luna_watchdog_config *limits,
                     const struct luna_generation_host *host, bool require_all,
                     struct luna_generation **out, luna_error *err);
/* Installs the script API again in a reload loaded before the runtime
 * connected. */
void luna_generation_connect(struct luna_generation *g);
/* Builds the controllers (acquiring their informers). */
int luna_generation_build(struct luna_generation *g, struct luna_informer_factory *factory,
                          luna_error *err);

lua_State *luna_generation_state(struct luna_generation *g);
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
/* Frees controllers (abandoning in-flight reconciles) and closes the state. */
void luna_generation_free(struct luna_generation *g);

#endif
