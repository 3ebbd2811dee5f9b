/*
 * controller_spec.h — what a controller is, read once out of the table
 * luna.controller{} returned into memory the host owns.
 *
 * Uses: the Lua state that loaded the file, watchdog, resource (kinds).
 * Runs on the loop thread.
 *
 * luna_controller_spec_read runs the whole read in one protected call in
 * a watchdog guard: any script code a read triggers is bounded, and an
 * error in it is a load error of the controller, never a raise in the
 * host.  After it returns, the host reads the spec only: the script's
 * tables are not touched again.
 *
 * Invariants:
 *   - nsources >= 1 and sources[0] is the primary (`watch`) source;
 *   - a Lua value the spec needs later (reconcile, predicates, map and
 *     index functions) is a registry reference of the reading state.
 *
 * Ownership: the spec owns its strings and arrays and holds its registry
 * references; luna_controller_spec_free(L, spec) releases both (L is the
 * state it was read from).  Moving the spec into a controller moves all
 * of it (zero the source afterwards).
 */
#ifndef LUNA_CONTROLLER_SPEC_H
#define LUNA_CONTROLLER_SPEC_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "queue/ratelimit.h"
#include "runtime/watchdog.h"

enum luna_source_role { LUNA_SOURCE_WATCH, LUNA_SOURCE_OWNS, LUNA_SOURCE_WATCHES };

struct luna_source_spec {
    enum luna_source_role role;
    char group[256], version[64], kind[128];
    char *namespace_;                 /* NULL: every namespace */
    char *labels, *fields;            /* selectors in kube syntax; "" none */
    int map_ref;                      /* watches: the map function; else LUA_NOREF */
};

struct luna_index_spec {
    char *name;                       /* as the script named it */
    int fn_ref;                       /* the index function */
};

struct luna_controller_spec {
    char *name;
    int workers;                      /* >= 1 */
    double resync;                    /* seconds; 0: none */
    bool keep_managed_fields;
    struct luna_watchdog_limits limits; /* its budgets (the state's defaults filled in) */
    struct luna_ratelimit_config rate_limit;
    int reconcile_ref;
    int predicates_ref;               /* a list of functions, or LUA_NOREF */
    struct luna_source_spec *sources;
    size_t nsources;
    struct luna_index_spec *indexes;
    size_t nindexes;
};

/* Reads the controller table at idx of L into *spec (zeroed first).  On
 * failure returns a negative code with err set, and *spec holds nothing
 * (already freed). */
int luna_controller_spec_read(lua_State *L, int idx, struct luna_controller_spec *spec,
                              luna_error *err);
/* Releases what the spec holds; L is the state it was read from. */
void luna_controller_spec_free(lua_State *L, struct luna_controller_spec *spec);

#endif
