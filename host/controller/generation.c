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

struct luna_generation {
    lua_State *L;
    int thread_ref;
    struct luna_controller **controllers;
    char **sha;                      /* per controller: file digest */
    const struct luna_generation_host *host; /* borrowed: the runtime's */
    size_t n;
    size_t draining;
    void (*drained)(void *ud);
    void *drained_ud;
};

int luna_generation_load(const char *lib_dir, const char *dir,
                     const struct luna_watchdog_config *limits,
                     const struct luna_generation_host *host, bool require_all,
                     struct luna_generation **out, luna_error *err)
{
    *out = NULL;
    struct luna_generation *g = calloc(1, sizeof *g);
    if (!g)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    g->thread_ref = LUA_NOREF;
    g->L = luna_loader_new(lib_dir, err);
    if (!g->L) {
        free(g);
        return err ? err->code : LUNA_ENOMEM;
    }
    if (limits)
        luna_watchdog_configure(g->L, limits);
    g->host = host;
    g->host->install_api(g->L, g->host->ud);
    int n = luna_loader_load_dir(g->L, dir, require_all, err);
    if (n < 0) {
        luna_generation_free(g);
        return n;
    }
    /* Two files declaring the same controller name would fight over one
     * workqueue: refuse like any load error. */
    lua_getfield(g->L, LUA_REGISTRYINDEX, "luna.controllers");
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(g->L, -1, i);
        const struct luna_controller_spec *si = luna_controller_spec_get(g->L, -1);
        for (int j = 1; si && j < i; j++) {
            lua_rawgeti(g->L, -2, j);
            const struct luna_controller_spec *sj = luna_controller_spec_get(g->L, -1);
            bool dup = sj && strcmp(si->name, sj->name) == 0;
            lua_pop(g->L, 1);
            if (dup) {
                const char *file, *sha;
                luna_loader_source(g->L, i, &file, &sha);
                luna_error_set(err, LUNA_ELUA, "%s: controller name \"%s\" is already used", file,
                               si->name);
                lua_pop(g->L, 2);
                luna_generation_free(g);
                return LUNA_ELUA;
            }
        }
        lua_pop(g->L, 1);
    }
    lua_pop(g->L, 1);
    *out = g;
    return 0;
}

void luna_generation_connect(struct luna_generation *g)
{
    g->host->install_api(g->L, g->host->ud);
}

int luna_generation_build(struct luna_generation *g, struct luna_informer_factory *factory,
                          luna_error *err)
{
    lua_State *L = g->L;
    int n = luna_loader_count(L);
    g->controllers = calloc((size_t)(n ? n : 1), sizeof *g->controllers);
    g->sha = calloc((size_t)(n ? n : 1), sizeof *g->sha);
    if (!g->controllers || !g->sha)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    lua_State *T = lua_newthread(L);
    luna_sandbox_protect_top(L);
    g->thread_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    struct luna_controller_env env = {
        .factory = factory, .clock = g->host->clock, .sharding = g->host->sharding, .L = L,
        .T = T,
    };
    lua_getfield(L, LUA_REGISTRYINDEX, "luna.controllers");
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        env.account = luna_loader_account(L, i);
        int rc = luna_controller_new(&env, -1, &g->controllers[g->n], err);
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return rc;
        }
        const char *file, *sha;
        g->sha[g->n] = strdup(luna_loader_source(L, i, &file, &sha) == 0 && sha ? sha : "");
        g->n++;
    }
    lua_pop(L, 1);
    return 0;
}

lua_State *luna_generation_state(struct luna_generation *g) { return g->L; }
size_t luna_generation_count(const struct luna_generation *g) { return g->n; }

struct luna_controller *luna_generation_controller(struct luna_generation *g, size_t i)
{
    return i < g->n ? g->controllers[i] : NULL;
}

const char *luna_generation_sha256(struct luna_generation *g, size_t i)
{
    return i < g->n && g->sha[i] ? g->sha[i] : "";
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
    for (size_t i = 0; i < g->n; i++) {
        luna_controller_free(g->controllers[i]);
        free(g->sha[i]);
    }
    free(g->controllers);
    free(g->sha);
    if (g->L)
        lua_close(g->L);
    free(g);
}
