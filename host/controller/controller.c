/* controller.c — see controller.h. */
#include "controller/controller.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "base/log.h"
#include "base/selector.h"
#include "controller/controller_impl.h"
#include "controller/index_fn.h"
#include "lua/lua_util.h"
#include "cluster/shard_set.h"
#include "queue/workqueue.h"

/* A key a shadow candidate would have changed something for (uthash
 * keeps them in the order recorded). */
struct shadow_key {
    char *key, *what;
    UT_hash_handle hh;
};


struct luna_controller *luna_controller_current(lua_State *L, struct luna_reconcile **reconcile)
{
    struct luna_reconcile *r = luna_reconcile_of(L);
    if (reconcile)
        *reconcile = r;
    return r ? luna_reconcile_controller(r) : luna_controller_in_handler();
}

const char *luna_controller_name(const struct luna_controller *c) { return c->name; }

int luna_controller_workers(const struct luna_controller *c) { return c->workers; }
size_t luna_controller_lua_memory(const struct luna_controller *c)
{
    return c->limits.account ? luna_watchdog_account_memory(c->env.L, c->limits.account) : 0;
}

struct luna_workqueue *luna_controller_queue(struct luna_controller *c) { return c->queue; }
static double lua_memory_metric(void *ud) { return (double)luna_controller_lua_memory(ud); }

void luna_controller_set_metrics(struct luna_controller *c, struct luna_controller_metrics *cm)
{
    if (c->metrics)
        luna_runtime_metrics_lua_memory_unsource(c->metrics, c);
    c->metrics = cm;
    /* The series is kept by name across reloads: it reads the newest
     * controller of that name (wired last). */
    if (cm)
        luna_runtime_metrics_lua_memory_source(cm, lua_memory_metric, c);
    if (cm)
        luna_runtime_metrics_paused(cm, c->paused);
    if (cm && c->every_due > 0)
        luna_runtime_metrics_periodic_next(cm, c->every_due);
}

void luna_controller_count_api_warnings(struct luna_controller *c, unsigned n)
{
    if (c->metrics && n)
        luna_runtime_metrics_api_warnings(c->metrics, n);
}

void luna_controller_count_stop(struct luna_controller *c, enum luna_watchdog_stop stop)
{
    if (!c->metrics)
        return;
    switch (stop) {
    case LUNA_WATCHDOG_INSTRUCTIONS:
        luna_runtime_metrics_watchdog_stop(c->metrics, LUNA_WATCHDOG_STOP_INSTRUCTIONS);
        break;
    case LUNA_WATCHDOG_TIME:
        luna_runtime_metrics_watchdog_stop(c->metrics, LUNA_WATCHDOG_STOP_TIME);
        break;
    case LUNA_WATCHDOG_MEMORY:
        luna_runtime_metrics_watchdog_stop(c->metrics, LUNA_WATCHDOG_STOP_MEMORY);
        break;
    case LUNA_WATCHDOG_SHUTDOWN:
    case LUNA_WATCHDOG_RUNNING:
        break;
    }
}
/* Custom indexes on the primary informer.  Each controller instance names
 * its own "<controller>/<name>#<instance>": controllers sharing an
 * informer cannot collide, and neither can the old and the new code of one
 * controller during a reload (both live until the old one is freed).
 * Runs in a protected call (adding an index raises on a duplicate name):
 * c at 1. */
static int add_indexes(lua_State *L)
{
    static unsigned long instances;
    struct luna_controller *c = lua_touserdata(L, 1);
    unsigned long instance = ++instances;
    struct luna_indexer *idx =
        luna_informer_indexer(luna_shared_informer_informer(c->sources[0].si));
    c->index_names = calloc(c->spec->nindexes, sizeof *c->index_names);
    if (!c->index_names)
        return luaL_error(L, "out of memory");
    for (size_t i = 0; i < c->spec->nindexes; i++) {
        const struct luna_index_spec *ix = &c->spec->indexes[i];
        char serial[24];
        snprintf(serial, sizeof serial, "%lu", instance);
        lua_pushfstring(L, "%s/%s#%s", c->name, ix->name, serial);
        c->index_names[i] = strdup(lua_tostring(L, -1));
        if (!c->index_names[i])
            return luaL_error(L, "out of memory");
        lua_rawgeti(L, LUA_REGISTRYINDEX, ix->fn_ref);
        luna_index_fn_add(L, idx, c->index_names[i], lua_gettop(L), &c->env.T,
                          luna_index_fn_push_table, &c->limits);
        c->nindexes++;
        lua_pop(L, 2);
    }
    return 0;
}

const char *luna_controller_index_name(const struct luna_controller *c,
                                       const struct luna_informer *inf, const char *name)
{
    if (c->nsources == 0 || inf != luna_shared_informer_informer(c->sources[0].si))
        return NULL;
    for (size_t i = 0; i < c->nindexes; i++)
        if (strcmp(c->spec->indexes[i].name, name) == 0)
            return c->index_names[i];
    return NULL;
}

int luna_controller_new(const struct luna_controller_env *env, int ctl_idx,
                        struct luna_controller **out, luna_error *err)
{
    lua_State *L = env->L;
    *out = NULL;
    const struct luna_controller_spec *spec = luna_controller_spec_get(L, ctl_idx);
    if (!spec || spec->nsources == 0)
        return luna_error_set(err, LUNA_EINVAL, "not a controller made by luna.controller{}");
    struct luna_controller *c = calloc(1, sizeof *c);
    if (!c)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    lua_pushvalue(L, ctl_idx);
    c->spec_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    c->spec = spec;
    c->env = *env;
    c->name = spec->name;
    c->workers = spec->workers;
    c->sharding = env->sharding;
    c->limits = luna_controller_spec_limits(L, spec);
    /* Its code's memory, what its file kept at load included, is its
     * own account, capped by limits.memory or the operator's default. */
    c->limits.account = env->account;
    char account_name[256];
    snprintf(account_name, sizeof account_name, "controller %s", c->name);
    luna_watchdog_account_set(L, env->account, account_name,
                              spec->limits_set & LUNA_SPEC_LIMIT_MEMORY ? spec->memory : 0);
    int rc = 0;
    luna_controller_dispatch_init(c);
    luna_controller_periodic_init(c);

    struct luna_ratelimit *limiter = NULL;
    struct luna_workqueue_options qo = { .name = c->name, .clock = env->clock, .loop = luna_loop(),
                                         .fifo = spec->fifo };
    c->sources = calloc(c->spec->nsources, sizeof *c->sources);
    if (!c->sources || luna_ratelimit_new(&c->spec->rate_limit, env->clock, &limiter, err) < 0) {
        luna_controller_free(c);
        return err && err->code ? err->code : luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    qo.limiter = limiter;
    if (luna_workqueue_new(&qo, &c->queue, err) < 0) {
        luna_controller_free(c);
        return err ? err->code : LUNA_ENOMEM;
    }
    luna_controller_dispatch_follow(c);

    for (size_t i = 0; i < c->spec->nsources && rc == 0; i++)
        rc = luna_controller_source_add(c, &c->spec->sources[i], err);
    if (rc == 0 && c->spec->nindexes > 0) {
        lua_pushcfunction(L, add_indexes);
        lua_pushlightuserdata(L, c);
        if (lua_pcall(L, 1, 0, 0) != 0) {
            rc = luna_error_set(err, LUNA_ELUA, "%s", lua_tostring(L, -1));
            lua_pop(L, 1);
        }
    }
    if (rc < 0) {
        luna_error_wrap(err, "controller %s", c->name);
        luna_controller_free(c);
        return rc;
    }
    luna_controller_handlers_add(c);
    *out = c;
    return 0;
}

bool luna_controller_synced(const struct luna_controller *c)
{
    for (size_t i = 0; i < c->nsources; i++)
        if (!luna_informer_has_synced(luna_shared_informer_informer(c->sources[i].si)))
            return false;
    return true;
}

/* "example.com/v1/Widget", "v1/ConfigMap": the source's kind as written. */
static void kind_text(const struct luna_source_spec *ss, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s/%s", ss->group, *ss->group ? "/" : "", ss->version, ss->kind);
}

void luna_controller_status(const struct luna_controller *c, struct luna_controller_status *st)
{
    memset(st, 0, sizeof *st);
    st->sources = c->nsources;
    for (size_t i = 0; i < c->nsources; i++) {
        switch (luna_shared_informer_state(c->sources[i].si, NULL)) {
        case LUNA_SI_RESOLVING:  st->resolving++; break;
        case LUNA_SI_UNRESOLVED: st->unresolved++; break;
        case LUNA_SI_NOT_SERVED: st->not_served++; break;
        case LUNA_SI_LISTING:    st->listing++; break;
        case LUNA_SI_SYNCED:     st->synced++; break;
        }
    }
}

void luna_controller_check(struct luna_controller *c, struct luna_controller_status *st)
{
    luna_controller_status(c, st);
    if (c->metrics)
        luna_runtime_metrics_kinds_not_served(c->metrics, st->not_served);
    for (size_t i = 0; i < c->nsources; i++) {
        struct source *src = &c->sources[i];
        const char *why;
        enum luna_shared_informer_state state = luna_shared_informer_state(src->si, &why);
        char kind[512];
        kind_text(src->spec, kind, sizeof kind);
        if (state == LUNA_SI_NOT_SERVED && !src->not_served_logged) {
            src->not_served_logged = true;
            luna_error("controller kind not served", "controller", c->name, "kind", kind,
                       "error", why, "hint",
                       "a typo in the kind, or a CRD not installed yet: the controller starts "
                       "once the server serves it");
        } else if (state != LUNA_SI_NOT_SERVED && state != LUNA_SI_RESOLVING &&
                   src->not_served_logged) {
            src->not_served_logged = false;
            luna_info("controller kind served", "controller", c->name, "kind", kind);
        }
    }
}

size_t luna_controller_describe_waiting(const struct luna_controller *c, bool unresolved_only,
                                        char *buf, size_t size)
{
    size_t len = 0;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < c->nsources && len + 1 < size; i++) {
        const struct source *src = &c->sources[i];
        const char *why;
        enum luna_shared_informer_state state = luna_shared_informer_state(src->si, &why);
        if (state == LUNA_SI_SYNCED ||
            (unresolved_only && state != LUNA_SI_NOT_SERVED && state != LUNA_SI_UNRESOLVED))
            continue;
        char kind[512];
        kind_text(src->spec, kind, sizeof kind);
        const char *what = state == LUNA_SI_NOT_SERVED ? "not served"
                         : state == LUNA_SI_UNRESOLVED ? "discovery failed"
                         : state == LUNA_SI_RESOLVING ? "resolving" : "listing";
        int n = snprintf(buf + len, size - len, "%s%s %s%s%s%s", len ? ", " : "", kind, what,
                         why ? " (" : "", why ? why : "", why ? ")" : "");
        if (n < 0)
            break;
        len += (size_t)n < size - len ? (size_t)n : size - len - 1;
    }
    return len;
}

bool luna_controller_started(const struct luna_controller *c) { return c->started; }

void luna_controller_start(struct luna_controller *c)
{
    if (c->started)
        return;
    c->started = true;
    char workers[16];
    snprintf(workers, sizeof workers, "%d", c->workers);
    luna_info("controller started", "controller", c->name, LUNA_LOG_NUM("workers"), workers);
    luna_controller_periodic_start(c);
    luna_controller_kick(c);
}

void luna_controller_shutdown(struct luna_controller *c, void (*drained)(void *ud), void *ud)
{
    c->stopping = true;
    c->drained = drained;
    c->drained_ud = ud;
    luna_controller_dispatch_stop(c);
    luna_controller_periodic_stop(c);
    luna_workqueue_shutdown(c->queue);
    luna_controller_maybe_drained(c);
}

struct luna_informer *luna_controller_informer_for(struct luna_controller *c,
                                                   const char *group, const char *version,
                                                   const char *kind)
{
    /* The first source of the kind that caches whole objects, else the
     * first metadata-only one. */
    struct source *found = NULL;
    for (size_t i = 0; i < c->nsources; i++) {
        struct source *s = &c->sources[i];
        if (strcmp(s->spec->group, group) == 0 && strcmp(s->spec->version, version) == 0 &&
            strcmp(s->spec->kind, kind) == 0) {
            if (!s->spec->metadata_only)
                return luna_shared_informer_informer(s->si);
            if (!found)
                found = s;
        }
    }
    return found ? luna_shared_informer_informer(found->si) : NULL;
}

struct luna_informer *luna_controller_lister_informer(struct luna_controller *c, const char *text,
                                                      luna_error *err)
{
    err->code = 0;
    if (c->lister_informer && strcmp(c->lister_kind, text) == 0)
        return c->lister_informer;
    char group[256], version[64], kind[128];
    if (luna_resource_parse_kind(text, group, sizeof group, version, sizeof version, kind,
                                 sizeof kind, err) < 0)
        return NULL;
    struct luna_informer *inf = luna_controller_informer_for(c, group, version, kind);
    if (inf && strlen(text) < sizeof c->lister_kind) {
        strcpy(c->lister_kind, text);
        c->lister_informer = inf;
    }
    return inf;
}

void luna_controller_free(struct luna_controller *c)
{
    if (!c)
        return;
    lua_State *L = c->env.L;
    if (c->metrics)
        luna_runtime_metrics_lua_memory_unsource(c->metrics, c);
    luna_controller_dispatch_stop(c);
    luna_controller_periodic_stop(c);
    while (c->running)
        luna_reconcile_abandon(c->running, c->queue_borrowed);
    luna_reconcile_pool_free(c);
    if (c->nindexes > 0 && c->nsources > 0) {
        struct luna_indexer *idx =
            luna_informer_indexer(luna_shared_informer_informer(c->sources[0].si));
        for (size_t i = 0; i < c->nindexes; i++)
            luna_indexer_remove_index(idx, c->index_names[i]);
    }
    for (size_t i = 0; c->index_names && i < c->spec->nindexes; i++)
        free(c->index_names[i]);
    free(c->index_names);
    luna_controller_sources_free(c);
    struct shadow_key *k, *tmp;
    HASH_ITER(hh, c->shadow_keys, k, tmp) {
        HASH_DEL(c->shadow_keys, k);
        free(k->key);
        free(k->what);
        free(k);
    }
    if (!c->queue_borrowed)
        luna_workqueue_free(c->queue);
    luaL_unref(L, LUA_REGISTRYINDEX, c->spec_ref);
    free(c);
}

/* ---- reload ------------------------------------------------------------- */

void luna_controller_take_queue(struct luna_controller *to, struct luna_controller *from)
{
    luna_workqueue_free(to->queue);
    to->queue = from->queue;
    if (luna_workqueue_set_fifo(to->queue, to->spec->fifo) < 0)
        luna_error("priority_queue change failed", "controller", to->name, "error",
                   "out of memory: the queue keeps its priorities");
    to->paused = from->paused; /* a pause outlives the code it paused */
    luna_controller_periodic_take(to, from);
    from->queue_borrowed = true;
    luna_controller_dispatch_follow(to);
}

void luna_controller_retire(struct luna_controller *c, void (*drained)(void *ud), void *ud)
{
    c->stopping = true;
    c->drained = drained;
    c->drained_ud = ud;
    luna_controller_dispatch_stop(c);
    luna_controller_periodic_stop(c);
    if (!c->queue_borrowed)
        luna_workqueue_shutdown(c->queue);
    luna_controller_maybe_drained(c);
}

/* Every key at once (a reload, a start after leadership, a trigger of
 * all or by selector) is a backlog like a first list: LOW. */
static int enqueue_visit(struct luna_object *obj, void *ud)
{
    luna_controller_enqueue(ud, luna_object_key(obj), LUNA_WORKQUEUE_PRIORITY_LOW);
    return 0;
}

size_t luna_controller_enqueue_all(struct luna_controller *c)
{
    if (c->nsources == 0)
        return 0;
    struct luna_indexer *idx =
        luna_informer_indexer(luna_shared_informer_informer(c->sources[0].si));
    luna_indexer_each(idx, enqueue_visit, c);
    return luna_indexer_len(idx);
}

/* ---- on demand (admin.h) --------------------------------------------------- */

bool luna_controller_paused(const struct luna_controller *c) { return c->paused; }

void luna_controller_set_paused(struct luna_controller *c, bool paused)
{
    if (c->paused == paused)
        return;
    c->paused = paused;
    if (c->metrics)
        luna_runtime_metrics_paused(c->metrics, paused);
    if (paused) {
        luna_controller_dispatch_stop(c); /* and out of the deferred line: it starts nothing */
    } else {
        luna_controller_kick(c);
    }
}

int luna_controller_enqueue_key(struct luna_controller *c, const char *key)
{
    int rc = luna_workqueue_add(c->queue, key);
    if (rc == LUNA_ENOMEM)
        luna_error("enqueue failed", "controller", c->name, "key", key, "error", "out of memory");
    return rc;
}

struct match_visit {
    struct luna_controller *c;
    const struct luna_selector *sel;
    size_t n;
};

static const char *object_label(const char *key, void *ud) { return luna_object_label(ud, key); }

static int enqueue_matching_visit(struct luna_object *obj, void *ud)
{
    struct match_visit *v = ud;
    if (luna_selector_matches(v->sel, object_label, obj)) {
        luna_controller_enqueue(v->c, luna_object_key(obj), LUNA_WORKQUEUE_PRIORITY_LOW);
        v->n++;
    }
    return 0;
}

size_t luna_controller_enqueue_matching(struct luna_controller *c,
                                        const struct luna_selector *labels)
{
    if (c->nsources == 0)
        return 0;
    struct match_visit v = { c, labels, 0 };
    luna_indexer_each(luna_informer_indexer(luna_shared_informer_informer(c->sources[0].si)),
                      enqueue_matching_visit, &v);
    return v.n;
}

int luna_controller_active(const struct luna_controller *c) { return c->active; }

void luna_controller_note_trigger(struct luna_controller *c, enum luna_trigger_action action,
                                  size_t keys)
{
    if (c->metrics)
        luna_runtime_metrics_trigger(c->metrics, action, keys);
}

void luna_controller_note_shadow(struct luna_controller *c, const char *key, const char *verb,
                                 const char *what, bool changed)
{
    if (!c)
        return;
    if (c->metrics)
        luna_runtime_metrics_shadow_write(c->metrics, verb, changed);
    if (!c->shadow || !changed || !key)
        return;
    struct shadow_key *k;
    HASH_FIND_STR(c->shadow_keys, key, k);
    if (k)
        return;
    if (c->nshadow_keys >= LUNA_SHADOW_MAX_KEYS) {
        c->shadow_keys_dropped++;
        return;
    }
    k = calloc(1, sizeof *k);
    /* what names a write the server accepted ("patch v1/ConfigMap ns/name"):
     * a lying server could make it long, so it is kept to
     * LUNA_SHADOW_MAX_WHAT bytes (the keys list is for people to read) */
    if (!k || !(k->key = strdup(key)) ||
        !(k->what = strndup(what ? what : verb, LUNA_SHADOW_MAX_WHAT))) {
        if (k)
            free(k->key);
        free(k);
        c->shadow_keys_dropped++;
        return;
    }
    HASH_ADD_KEYPTR(hh, c->shadow_keys, k->key, strlen(k->key), k);
    c->nshadow_keys++;
}

void luna_controller_set_shadow(struct luna_controller *c, bool shadow) { c->shadow = shadow; }

bool luna_controller_shadow(const struct luna_controller *c) { return c->shadow; }
unsigned long luna_controller_errors(const struct luna_controller *c) { return c->stats.errors; }

size_t luna_controller_shadow_keys(const struct luna_controller *c,
                                   void (*fn)(void *ud, const char *key, const char *what),
                                   void *ud, size_t *dropped)
{
    /* uthash keeps insertion order in its app order list */
    for (const struct shadow_key *k = c->shadow_keys; k; k = k->hh.next)
        fn(ud, k->key, k->what);
    *dropped = c->shadow_keys_dropped;
    return c->nshadow_keys;
}

/* ---- sharding ------------------------------------------------------------------ */

int luna_controller_reshard(struct luna_controller *c)
{
    if (!c->sharding)
        return 0;
    const struct luna_shard_selector *shard = luna_shard_set_informer_shard(c->sharding);
    int rc = 0;
    for (size_t i = 0; i < c->nsources; i++) {
        if (!c->sources[i].sharded)
            continue;
        luna_error err = { 0 };
        if (luna_informer_factory_set_shard(c->env.factory, c->sources[i].si, shard, &err) < 0) {
            luna_error("shard: moving an informer failed", "controller", c->name, "error",
                       err.msg);
            rc = err.code ? err.code : LUNA_EINVAL;
        }
    }
    return rc;
}

void luna_controller_resume(struct luna_controller *c) { luna_controller_kick(c); }

void luna_controller_abandon_running(struct luna_controller *c)
{
    while (c->running)
        luna_reconcile_abandon(c->running, true);
    luna_controller_maybe_drained(c);
}

unsigned long luna_controller_oldest_running(const struct luna_controller *c)
{
    unsigned long oldest = 0;
    for (const struct luna_reconcile *r = c->running; r; r = luna_reconcile_next(r)) {
        unsigned long n = luna_reconcile_serial(r);
        if (!oldest || n < oldest)
            oldest = n;
    }
    return oldest;
}
