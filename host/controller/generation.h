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
 * reload).  Free with luna_reload_free.
 */
#ifndef LUNA_RELOAD_H
#define LUNA_RELOAD_H

#include <stdbool.h>
#include <stddef.h>

#include <lua.h>

#include "controller/controller.h"
#include "client/discovery.h"
#include "base/error.h"
#include "cache/informer_factory.h"
#include "client/kube_client.h"

struct luna_reload;
struct luna_clock;

/* What a generation is given by the runtime that makes it. */
struct luna_generation_host {
    /* Gives a new state the script API (core.runtime), before its files
     * run, and again on luna_reload_connect. */
    void (*install_api)(lua_State *L, void *ud);
    void *ud;                        /* borrowed; outlives the generation */
    const struct luna_clock *clock;  /* the controllers' clock (borrowed) */
};

/* Loads every *.lua file of dir into a new state (controllers are not built yet).
 * host is copied. */
struct luna_watchdog_config;
/* limits: the scripts' budgets (watchdog.h); NULL keeps the defaults. */
int luna_reload_load(const char *lib_dir, const char *dir,
                     const struct luna_watchdog_config *limits,
                     const struct luna_generation_host *host, struct luna_reload **out,
                     luna_error *err);
/* Installs the script API again in a reload loaded before the runtime
 * connected. */
void luna_reload_connect(struct luna_reload *g);
/* Builds the controllers (acquiring their informers). */
int luna_reload_build(struct luna_reload *g, struct luna_informer_factory *factory,
                          luna_error *err);

lua_State *luna_reload_state(struct luna_reload *g);
size_t luna_reload_count(const struct luna_reload *g);
struct luna_controller *luna_reload_controller(struct luna_reload *g, size_t i);
/* The SHA-256 of the file controller i came from (borrowed). */
const char *luna_reload_sha256(struct luna_reload *g, size_t i);
struct luna_controller *luna_reload_find(struct luna_reload *g, const char *name);

bool luna_reload_synced(const struct luna_reload *g);
void luna_reload_start(struct luna_reload *g);

/* Takes over from `old`: queues of same-named controllers move over, and
 * controllers whose file changed re-enqueue every cached key once.  Returns
 * the number of changed controllers. */
size_t luna_reload_adopt(struct luna_reload *g, struct luna_reload *old);

/* Stops every controller from taking keys; drained(ud) once no reconcile
 * is in flight.  shutdown: also shut the workqueues down (process exit). */
void luna_reload_retire(struct luna_reload *g, bool shutdown,
                            void (*drained)(void *ud), void *ud);
/* Frees controllers (abandoning in-flight reconciles) and closes the state. */
void luna_reload_free(struct luna_reload *g);

#endif
