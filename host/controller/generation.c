/* controller/generation.c — see controller/generation.h. */
#include "controller/generation.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "controller/spec.h"
#include "controller/loader.h"
#include "script/sandbox.h"
#include "script/watchdog.h"

/* One controller file that loaded: its state and what came of it. */
struct unit {
    lua_State *L;                    /* owned: closed by luna_generation_free */
    int thread_ref;                  /* the callback thread, in L's registry */
    char *sha;                       /* the file's digest (owned; "" without a controller) */
    char *file;                      /* its path (owned) */
    bool controller;                 /* it declares one (else webhooks only) */
};

/* One that did not. */
struct failure {
    char *file, *error;              /* owned */
};

struct luna_generation {
    struct unit *units;              /* in name order; controller i is unit i's */
    size_t nunits, units_cap;
    size_t *unit_of;                 /* controller i's unit (owned; set by build) */
    struct failure *failures;
    size_t nfailures, failures_cap;
    struct luna_controller **controllers;
    struct luna_watchdog_budget *budget; /* one reference held */
    const struct luna_watchdog_config *limits; /* borrowed during load only */
    const char *lib_dir;             /* borrowed during load only */
    const struct luna_generation_host *host; /* borrowed: the runtime's */
    size_t n;
    size_t draining;
    void (*drained)(void *ud);
    void *drained_ud;
};

static int grow(void **items, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t more = *cap ? 2 * *cap : 8;
    void *p = realloc(*items, more * size);
    if (!p)
        return -1;
    *items = p;
    *cap = more;
    return 0;
}

/* luna_loader_each_file's load: a new state for the file, joined to the
 * budget, with the script API; kept if the file loads, closed if not. */
static int load_unit(void *ud, const char *path, luna_error *err)
{
    struct luna_generation *g = ud;
    if (grow((void **)&g->units, &g->units_cap, g->nunits, sizeof *g->units) < 0)
        return luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", path);
    lua_State *L = luna_loader_new(g->lib_dir, err);
    if (!L)
        return err ? err->code : LUNA_ENOMEM;
    if (g->limits)
        luna_watchdog_configure(L, g->limits);
    luna_watchdog_join(L, g->budget);
    g->host->install_api(L, g->host->ud);
    int rc = luna_loader_load_file(L, path, err);
    const char *file = NULL, *sha = NULL;
    /* a file declares its controller, or returns webhooks only (the
     * loader's check: luna.webhooks{} with an empty list loads too) */
    bool controller = rc == 0 && luna_loader_source(L, 1, &file, &sha) == 0;
    if (rc == 0) {
        char *copy = strdup(sha ? sha : ""), *name = strdup(path);
        if (!copy || !name) {
            free(copy);
            free(name);
            rc = luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", path);
        } else {
            g->units[g->nunits++] = (struct unit){ .L = L, .thread_ref = LUA_NOREF, .sha = copy,
                                                   .file = name, .controller = controller };
        }
    }
    if (rc < 0)
        lua_close(L);
    return rc;
}

static void record_failure(void *ud, const char *file, const char *msg)
{
    struct luna_generation *g = ud;
    if (grow((void **)&g->failures, &g->failures_cap, g->nfailures, sizeof *g->failures) < 0)
        return;
    char *f = strdup(file), *e = strdup(msg);
    if (!f || !e) {
        free(f);
        free(e);
        return;
    }
    g->failures[g->nfailures++] = (struct failure){ .file = f, .error = e };
}

static const struct luna_controller_spec *unit_spec(struct unit *u)
{
    if (!u->controller)
        return NULL;
    lua_getfield(u->L, LUA_REGISTRYINDEX, "luna.controllers");
    lua_rawgeti(u->L, -1, 1);
    const struct luna_controller_spec *s = luna_controller_spec_get(u->L, -1);
    lua_pop(u->L, 2); /* the registry keeps the spec */
    return s;
}

int luna_generation_load(const char *lib_dir, const char *dir,
                     const struct luna_watchdog_config *limits,
                     const struct luna_generation_host *host, bool require_all,
                     struct luna_generation **out, luna_error *err)
{
    *out = NULL;
    struct luna_generation *g = calloc(1, sizeof *g);
    if (!g)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    g->host = host;
    /* the runtime's budget (every reload's states charge it), else one of
     * this reload's own */
    if (host->budget) {
        g->budget = host->budget;
        luna_watchdog_budget_ref(g->budget);
    } else {
        g->budget = luna_watchdog_budget_new();
    }
    if (!g->budget) {
        free(g);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    g->limits = limits;
    g->lib_dir = lib_dir;
    int n = luna_loader_each_file(dir, require_all, load_unit, record_failure, g, err);
    g->limits = NULL;
    g->lib_dir = NULL;
    if (n < 0) {
        luna_generation_free(g);
        return n;
    }
    /* Two files declaring the same controller name would fight over one
     * workqueue: refuse like any load error. */
    for (size_t i = 0; i < g->nunits; i++) {
        const struct luna_controller_spec *si = unit_spec(&g->units[i]);
        for (size_t j = 0; si && j < i; j++) {
            const struct luna_controller_spec *sj = unit_spec(&g->units[j]);
            if (sj && strcmp(si->name, sj->name) == 0) {
                const char *file, *sha;
                luna_loader_source(g->units[i].L, 1, &file, &sha);
                luna_error_set(err, LUNA_ELUA, "%s: controller name \"%s\" is already used", file,
                               si->name);
                luna_generation_free(g);
                return LUNA_ELUA;
            }
        }
    }
    /* Two files serving one webhook path: the server could call only one
     * (in one state the loader refuses the second; here each file has its
     * own state, so the reload compares them). */
    for (size_t i = 0; i < g->nunits; i++) {
        lua_State *L = g->units[i].L;
        for (int a = 1; a <= luna_loader_webhook_count(L); a++) {
            if (luna_loader_push_webhook(L, a) < 0)
                continue;
            lua_getfield(L, -1, "path");
            const char *path = lua_tostring(L, -1);
            for (size_t j = 0; path && j < i; j++) {
                lua_State *M = g->units[j].L;
                for (int b = 1; b <= luna_loader_webhook_count(M); b++) {
                    if (luna_loader_push_webhook(M, b) < 0)
                        continue;
                    lua_getfield(M, -1, "path");
                    bool dup = lua_tostring(M, -1) && strcmp(lua_tostring(M, -1), path) == 0;
                    lua_pop(M, 2);
                    if (dup) {
                        luna_error_set(err, LUNA_ELUA, "%s: webhook %s is already declared in %s",
                                       g->units[i].file, path, g->units[j].file);
                        lua_pop(L, 2);
                        luna_generation_free(g);
                        return LUNA_ELUA;
                    }
                }
            }
            lua_pop(L, 2);
        }
    }
    *out = g;
    return 0;
}

void luna_generation_connect(struct luna_generation *g)
{
    for (size_t i = 0; i < g->nunits; i++)
        g->host->install_api(g->units[i].L, g->host->ud);
}

int luna_generation_build(struct luna_generation *g, struct luna_informer_factory *factory,
                          luna_error *err)
{
    g->controllers = calloc(g->nunits ? g->nunits : 1, sizeof *g->controllers);
    if (!g->controllers)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    g->unit_of = calloc(g->nunits ? g->nunits : 1, sizeof *g->unit_of);
    if (!g->unit_of)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    for (size_t i = 0; i < g->nunits; i++) {
        struct unit *u = &g->units[i];
        if (!u->controller)
            continue; /* webhooks only: served from its state, nothing to build */
        lua_State *L = u->L;
        lua_State *T = lua_newthread(L);
        luna_sandbox_protect_top(L);
        u->thread_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        struct luna_controller_env env = {
            .factory = factory, .clock = g->host->clock, .sharding = g->host->sharding, .L = L,
            .T = T, .account = luna_loader_account(L, 1),
        };
        lua_getfield(L, LUA_REGISTRYINDEX, "luna.controllers");
        lua_rawgeti(L, -1, 1);
        int rc = luna_controller_new(&env, -1, &g->controllers[g->n], err);
        lua_pop(L, 2);
        if (rc < 0)
            return rc;
        g->unit_of[g->n++] = i;
    }
    return 0;
}

size_t luna_generation_loaded(const struct luna_generation *g) { return g->nunits; }

size_t luna_generation_declared(const struct luna_generation *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->nunits; i++)
        n += g->units[i].controller;
    return n;
}

lua_State *luna_generation_state(struct luna_generation *g, size_t i)
{
    return i < g->nunits ? g->units[i].L : NULL;
}

struct luna_controller *luna_generation_state_controller(struct luna_generation *g, size_t i)
{
    for (size_t c = 0; g->unit_of && c < g->n; c++)
        if (g->unit_of[c] == i)
            return g->controllers[c];
    return NULL;
}

size_t luna_generation_failure_count(const struct luna_generation *g) { return g->nfailures; }

int luna_generation_failure(const struct luna_generation *g, size_t i, const char **file,
                            const char **error)
{
    if (i >= g->nfailures)
        return LUNA_ENOTFOUND;
    *file = g->failures[i].file;
    *error = g->failures[i].error;
    return 0;
}

double luna_generation_lua_memory(void *ud)
{
    struct luna_generation *g = ud;
    double bytes = 0;
    for (size_t i = 0; i < g->nunits; i++)
        bytes += (double)lua_gc(g->units[i].L, LUA_GCCOUNT, 0) * 1024.0 +
                 (double)lua_gc(g->units[i].L, LUA_GCCOUNTB, 0);
    return bytes;
}

size_t luna_generation_count(const struct luna_generation *g) { return g->n; }

struct luna_controller *luna_generation_controller(struct luna_generation *g, size_t i)
{
    return i < g->n ? g->controllers[i] : NULL;
}

const char *luna_generation_sha256(struct luna_generation *g, size_t i)
{
    return i < g->n && g->units[g->unit_of[i]].sha ? g->units[g->unit_of[i]].sha : "";
}

struct luna_controller *luna_generation_find(struct luna_generation *g, const char *name)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(luna_controller_name(g->controllers[i]), name) == 0)
            return g->controllers[i];
    return NULL;
}

bool luna_generation_synced(const struct luna_generation *g)
{
    for (size_t i = 0; i < g->n; i++)
        if (!luna_controller_synced(g->controllers[i]))
            return false;
    return true;
}

void luna_generation_start(struct luna_generation *g)
{
    for (size_t i = 0; i < g->n; i++)
        luna_controller_start(g->controllers[i]);
}

size_t luna_generation_adopt(struct luna_generation *g, struct luna_generation *old)
{
    size_t changed = 0;
    for (size_t i = 0; i < g->n; i++) {
        struct luna_controller *c = g->controllers[i];
        const char *name = luna_controller_name(c);
        struct luna_controller *prev = NULL;
        size_t j;
        for (j = 0; old && j < old->n; j++)
            if (strcmp(luna_controller_name(old->controllers[j]), name) == 0) {
                prev = old->controllers[j];
                break;
            }
        if (!prev) {
            luna_info("controller added", "controller", name);
            continue;
        }
        luna_controller_take_queue(c, prev);
        if (strcmp(luna_generation_sha256(g, i), luna_generation_sha256(old, j)) != 0) {
            /* New code must see every object once; a primary informer
             * still listing will deliver them anyway. */
            changed++;
            size_t keys = luna_controller_synced(c) ? luna_controller_enqueue_all(c) : 0;
            char count[24];
            snprintf(count, sizeof count, "%zu", keys);
            luna_info("controller changed", "controller", name, LUNA_LOG_NUM("enqueued"), count);
        }
    }
    for (size_t j = 0; old && j < old->n; j++)
        if (!luna_generation_find(g, luna_controller_name(old->controllers[j])))
            luna_info("controller removed", "controller", luna_controller_name(old->controllers[j]));
    return changed;
}

static void one_drained(void *ud)
{
    struct luna_generation *g = ud;
    if (g->draining > 0 && --g->draining == 0 && g->drained) {
        void (*cb)(void *) = g->drained;
        g->drained = NULL;
        cb(g->drained_ud);
    }
}

void luna_generation_retire(struct luna_generation *g, bool shutdown,
                            void (*drained)(void *ud), void *ud)
{
    g->drained = drained;
    g->drained_ud = ud;
    g->draining = g->n + 1;
    for (size_t i = 0; i < g->n; i++) {
        if (shutdown)
            luna_controller_shutdown(g->controllers[i], one_drained, g);
        else
            luna_controller_retire(g->controllers[i], one_drained, g);
    }
    one_drained(g); /* the +1: also ends a reload with no controllers */
}

void luna_generation_free(struct luna_generation *g)
{
    if (!g)
        return;
    /* controllers first: they hold references into their states */
    for (size_t i = 0; i < g->n; i++)
        luna_controller_free(g->controllers[i]);
    free(g->controllers);
    for (size_t i = 0; i < g->nunits; i++) {
        lua_close(g->units[i].L);
        free(g->units[i].sha);
        free(g->units[i].file);
    }
    free(g->units);
    free(g->unit_of);
    for (size_t i = 0; i < g->nfailures; i++) {
        free(g->failures[i].file);
        free(g->failures[i].error);
    }
    free(g->failures);
    luna_watchdog_budget_release(g->budget);
    free(g);
}
