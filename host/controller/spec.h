/*
 * controller/spec.h — what a controller is, validated once and copied out
 * of the table the script passed to luna.controller{} into memory the
 * host owns.
 *
 *   core.controller_spec(table) → spec | nil, message, field
 *   core.is_controller_spec(v)  → boolean
 *
 * Uses: resource (kinds), selector (label and field selectors), ratelimit
 * (its defaults).  Runs on the loop thread (or in a spec's state).
 *
 * lua/luna/init.lua's luna.controller{} calls core.controller_spec: it
 * reads the script's table with raw reads only (no metamethod, no script
 * code runs: a table with __index, __pairs or a trapped metatable reads as
 * the plain table it is), checks every field against its type and range,
 * and copies what it needs into a C struct inside a userdata.  The script
 * gets that userdata (the "controller"): it has no fields to write, its
 * metatable is locked, and reading a field (c.name, c.watch, ...) returns
 * a fresh copy.  The host builds controllers from the struct only: the
 * script's tables are never touched again.  On a bad spec it returns nil,
 * a message naming the field (and the nearest known field for a
 * misspelled one), and the field's path ("watch.labels"), for
 * luna.controller to raise at the caller's line.
 *
 * Bounds (refused with a clear message beyond them): workers 1..1024;
 * resync 0 (off) or 1..31536000 s; every 1..31536000 s or a cron schedule
 * (cron.h) of at most 128 bytes that runs within five years, jitter 0..1
 * and only with every; limits.instructions and limits.seconds > 0 and at
 * most the operator's ceiling, the state's watchdog setting
 * (--reconcile-instruction-limit, --reconcile-time-limit; where that is 0,
 * 1e12 and 86400): a controller lowers its budgets, it can neither raise
 * nor remove them (0 is refused, and the message says so); limits.memory
 * in MiB, > 0 and at most the state's per-account cap
 * (--controller-memory-limit; without one, the heap cap; without either,
 * 1e6); rate_limit delays 0..1e6 s with base_delay <=
 * max_delay, qps in (0, 1e6], burst an integer 1..1e6; at most 64 sources
 * (watch + owns + watches), 64 indexes, 64 predicates; selectors of at most
 * 2047 bytes that parse; names and namespaces as Kubernetes spells them;
 * every number finite; a source's metadata_only a boolean.
 *
 * Invariants:
 *   - nsources >= 1 and sources[0] is the primary (`watch`) source;
 *   - a Lua value the spec needs later (reconcile, predicates, map and
 *     index functions) is a registry reference of the state that made it;
 *     the predicates are a private list only the host can reach.
 *
 * Ownership: the userdata owns the struct, its strings and its registry
 * references; its __gc releases them.  A controller built from it keeps
 * the userdata alive (a registry reference) and borrows the struct.
 */
#ifndef LUNA_CONTROLLER_SPEC_H
#define LUNA_CONTROLLER_SPEC_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/cron.h"
#include "queue/ratelimit.h"
#include "script/watchdog.h"

#define LUNA_SPEC_MAX_SOURCES 64
#define LUNA_SPEC_MAX_INDEXES 64
#define LUNA_SPEC_MAX_PREDICATES 64
#define LUNA_SPEC_MAX_WORKERS 1024
#define LUNA_SPEC_MAX_SELECTOR 2048

enum luna_source_role { LUNA_SOURCE_WATCH, LUNA_SOURCE_OWNS, LUNA_SOURCE_WATCHES };

struct luna_source_spec {
    enum luna_source_role role;
    char *kind_text;                  /* as written: "apps/v1/Deployment" */
    char group[256], version[64], kind[128];
    char *namespace_;                 /* NULL: every namespace */
    char *labels, *fields;            /* selectors in kube syntax; "" none */
    int map_ref;                      /* watches: the map function; else LUA_NOREF */
    bool metadata_only;               /* cache apiVersion, kind and metadata only */
};

struct luna_index_spec {
    char *name;                       /* as the script named it */
    int fn_ref;                       /* the index function */
};

/* limits_set bits */
#define LUNA_SPEC_LIMIT_INSTRUCTIONS 1u
#define LUNA_SPEC_LIMIT_SECONDS 2u
#define LUNA_SPEC_LIMIT_MEMORY 4u

struct luna_controller_spec {
    char *name;
    int workers;                      /* 1..LUNA_SPEC_MAX_WORKERS */
    double resync;                    /* seconds; 0: none */
    /* Periodic work (controller.h): every `every` seconds, or on the cron
     * schedule every_cron (then every is 0); neither: none. */
    double every;                     /* 0 or 1..31536000 */
    char *every_cron;                 /* as written, or NULL */
    struct luna_cron cron;            /* parsed every_cron */
    double jitter;                    /* 0..1, a fraction of the period */
    bool keep_managed_fields;
    bool fifo;                        /* priority_queue = false */
    struct luna_watchdog_limits limits; /* the fields limits_set names */
    size_t memory;                    /* limits.memory in bytes (LUNA_SPEC_LIMIT_MEMORY) */
    unsigned limits_set;
    struct luna_ratelimit_config rate_limit; /* defaults filled in */
    int reconcile_ref;
    int predicates_ref;               /* a private list of functions, or LUA_NOREF */
    size_t npredicates;
    struct luna_source_spec *sources;
    size_t nsources;
    struct luna_index_spec *indexes;
    size_t nindexes;
};

/* Adds controller_spec and is_controller_spec to the table on top of L's
 * stack (luna.core). */
void luna_lua_controller_spec_register(lua_State *L);

/* The spec of the controller userdata at idx, or NULL if the value is not
 * one (borrowed while the userdata lives). */
const struct luna_controller_spec *luna_controller_spec_get(lua_State *L, int idx);

/* The last spec core.controller_spec refused in L (message and field
 * path), then forgets it; false if none since the last call. */
bool luna_controller_spec_last_error(lua_State *L, char *msg, size_t msg_size, char *field,
                                     size_t field_size);
/* Calls fn for every field a spec may have, from the same lists the
 * validation checks against: group "spec" (the top level), "spec.source"
 * (watch/owns/watches entries), "spec.limits", "spec.rate_limit".  For the
 * spec of the editor definitions (test_control.c's `api` command). */
void luna_controller_spec_list_fields(void (*fn)(void *ud, const char *group, const char *field),
                                      void *ud);

/* " (did you mean 'x'?)" into buf for the name of the NULL-terminated
 * list `known` nearest to s (within a bound that grows with its length),
 * or "" when none is near: the hint of every misspelled-name message
 * (spec fields, reconcile result keys).  Returns buf. */
const char *luna_controller_spec_suggest(const char *const *known, const char *s, char *buf,
                                        size_t size);

/* The line of the file at path that sets the field of path `field`
 * ("watch.labels": the first line setting `watch`, then the next setting
 * `labels`), or 0 if no line does. */
int luna_controller_spec_field_line(const char *path, const char *field);

/* The watchdog budgets of spec: its own where they lower the state's
 * (luna_watchdog_limits_under), the state's for the rest. */
struct luna_watchdog_limits luna_controller_spec_limits(lua_State *L,
                                                        const struct luna_controller_spec *spec);

#endif
