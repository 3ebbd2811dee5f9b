/* controller.c — see controller.h. */
#include "controller/controller.h"

#include <lauxlib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "base/clock.h"
#include "base/cron.h"
#include "base/json.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/selector.h"
#include "lua/lua_json.h"
#include "controller/controller_impl.h"
#include "api/cache.h"
#include "lua/lua_util.h"
#include "queue/ratelimit.h"
#include "client/resource.h"
#include "serve/runtime_metrics.h"
#include "cluster/shard_set.h"
#include "script/watchdog.h"
#include "queue/workqueue.h"


/* A key a shadow candidate would have changed something for (uthash
 * keeps them in the order recorded). */
struct shadow_key {
    char *key, *what;
    UT_hash_handle hh;
};

struct tombstone {
    char *key;
    char uid[64];
    UT_hash_handle hh;
};

/* The shard set controllers built now follow (controller.h), or NULL. */
static struct luna_shard_set *sharding;

void luna_controller_set_sharding(struct luna_shard_set *set) { sharding = set; }

/* The controller whose predicate or map function is running, if any. */
static struct luna_controller *in_handler;

struct luna_controller *luna_controller_in_handler(void) { return in_handler; }

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

/* ---- event → key ------------------------------------------------------ */

/* The priority of an event's keys (controller-runtime's handlers): an
 * object from the informer's first list (or replayed to a handler added
 * later), a resync, or a relisted object that did not change (same
 * resourceVersion) is LOW; a live add, change or delete is DEFAULT, so it
 * is reconciled before a backlog of those. */
static int event_priority(struct luna_object *old, struct luna_object *obj, bool initial)
{
    if (initial)
        return LUNA_WORKQUEUE_PRIORITY_LOW;
    if (old && strcmp(luna_object_resource_version(old), luna_object_resource_version(obj)) == 0)
        return LUNA_WORKQUEUE_PRIORITY_LOW;
    return LUNA_WORKQUEUE_PRIORITY_DEFAULT;
}

static void enqueue(struct luna_controller *c, const char *key, int priority)
{
    if (luna_log_enabled(LUNA_LOG_DEBUG)) {
        char prio[16];
        snprintf(prio, sizeof prio, "%d", priority);
        luna_debug("enqueue", "controller", c->name, "key", key, "priority", prio);
    }
    if (luna_workqueue_add_priority(c->queue, key, priority) == LUNA_ENOMEM)
        luna_error("enqueue failed", "controller", c->name, "key", key, "error", "out of memory");
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
    case LUNA_WATCHDOG_RUNNING:
        break;
    }
}

/* Calls the function below nargs arguments on T (the callback thread) in a
 * watchdog guard with the controller's budgets, like luna_lua_pcall: on
 * error logs "lua callback failed" with `what`, pops it and returns
 * LUNA_ELUA; on success leaves nresults values. */
static int guarded_call(struct luna_controller *c, lua_State *T, int nargs, int nresults,
                        const char *what)
{
    int base = lua_gettop(T) - nargs;
    lua_pushcfunction(T, luna_lua_traceback);
    lua_insert(T, base);
    struct luna_watchdog_guard g = { .what = what, .owner = c->name, .limits = &c->limits };
    int rc = luna_watchdog_pcall(T, nargs, nresults, base, &g);
    lua_remove(T, base);
    if (rc == 0)
        return 0;
    char reason[256] = "";
    if (g.stop != LUNA_WATCHDOG_RUNNING) {
        luna_watchdog_describe(&g, reason, sizeof reason);
        luna_controller_count_stop(c, g.stop);
    }
    const char *msg = lua_tostring(T, -1);
    luna_log(LUNA_LOG_ERROR, "lua callback failed", "controller", c->name, "what", what,
             "error", reason[0] ? reason : msg ? msg : "?",
             "stopped", g.stop ? luna_watchdog_stop_name(g.stop) : NULL,
             "traceback", reason[0] && msg ? msg : NULL, NULL);
    lua_pop(T, 1);
    if (g.stop == LUNA_WATCHDOG_MEMORY)
        lua_gc(T, LUA_GCCOLLECT, 0);
    return LUNA_ELUA;
}

/* Runs the controller's predicates on the callback thread: true if every
 * one accepts the event (type "add", "update", "delete"). */
static bool predicates_pass(struct luna_controller *c, const char *type,
                            struct luna_object *old, struct luna_object *obj)
{
    if (c->spec->predicates_ref == LUA_NOREF)
        return true;
    lua_State *T = c->env.T;
    int top = lua_gettop(T);
    lua_rawgeti(T, LUA_REGISTRYINDEX, c->spec->predicates_ref);
    int list = lua_gettop(T);
    int n = (int)lua_objlen(T, list);
    bool pass = true;
    luna_error err = { 0 };
    for (int i = 1; i <= n && pass; i++) {
        lua_rawgeti(T, list, i);
        lua_createtable(T, 0, 3);
        lua_pushstring(T, type);
        lua_setfield(T, -2, "type");
        if (old) {
            if (luna_lua_json_push(T, luna_object_json(old), old->json_len, &err) < 0)
                lua_pushnil(T);
            lua_setfield(T, -2, "old");
        }
        if (luna_lua_json_push(T, luna_object_json(obj), obj->json_len, &err) < 0)
            lua_pushnil(T);
        lua_setfield(T, -2, "object");
        if (guarded_call(c, T, 1, 1, "predicate") < 0) {
            pass = true; /* a broken predicate must not hide events */
        } else {
            pass = lua_toboolean(T, -1);
            lua_pop(T, 1);
        }
    }
    lua_settop(T, top);
    return pass;
}

/* The controller owner's name if it is of the primary's group and kind. */
struct owner_scan {
    const char *group, *kind;
    int key;              /* 1 apiVersion, 2 kind, 3 name, 4 controller */
    char api_version[320], okind[128], name[256];
    bool controller, in_refs, found;
    char result[256];
};

static bool api_group_is(const char *api_version, const char *group)
{
    const char *slash = strchr(api_version, '/');
    if (!slash)
        return !*group;
    return strlen(group) == (size_t)(slash - api_version) &&
           strncmp(api_version, group, (size_t)(slash - api_version)) == 0;
}

static int owner_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct owner_scan *s = ud;
    if (ev->depth == 1 && ev->type == LUNA_JSON_KEY) {
        s->in_refs = false;
        return 0;
    }
    if (ev->depth == 2 && ev->type == LUNA_JSON_KEY) {
        s->in_refs = ev->len == 15 && memcmp(ev->str, "ownerReferences", 15) == 0;
        return 0;
    }
    if (!s->in_refs || s->found)
        return 0;
    if (ev->depth == 3 && ev->type == LUNA_JSON_OBJECT_START) {
        s->api_version[0] = s->okind[0] = s->name[0] = '\0';
        s->controller = false;
    } else if (ev->depth == 3 && ev->type == LUNA_JSON_OBJECT_END) {
        if (s->controller && strcmp(s->okind, s->kind) == 0 &&
            api_group_is(s->api_version, s->group) && s->name[0]) {
            snprintf(s->result, sizeof s->result, "%s", s->name);
            s->found = true;
        }
    } else if (ev->depth == 4 && ev->type == LUNA_JSON_KEY) {
        s->key = 0;
        if (ev->len == 10 && memcmp(ev->str, "apiVersion", 10) == 0) s->key = 1;
        else if (ev->len == 4 && memcmp(ev->str, "kind", 4) == 0) s->key = 2;
        else if (ev->len == 4 && memcmp(ev->str, "name", 4) == 0) s->key = 3;
        else if (ev->len == 10 && memcmp(ev->str, "controller", 10) == 0) s->key = 4;
    } else if (ev->depth == 4 && ev->type == LUNA_JSON_STRING && s->key >= 1 && s->key <= 3) {
        char *dst = s->key == 1 ? s->api_version : s->key == 2 ? s->okind : s->name;
        size_t cap = s->key == 1 ? sizeof s->api_version : s->key == 2 ? sizeof s->okind
                                                                      : sizeof s->name;
        snprintf(dst, cap, "%.*s", (int)ev->len, ev->str);
    } else if (ev->depth == 4 && s->key == 4) {
        s->controller = ev->type == LUNA_JSON_TRUE;
    }
    return 0;
}

static void enqueue_owner(struct source *src, struct luna_object *obj, int priority)
{
    struct luna_controller *c = src->c;
    struct source *primary = &c->sources[0];
    struct owner_scan scan = { .group = primary->spec->group, .kind = primary->spec->kind };
    luna_error err = { 0 };
    if (luna_json_parse(luna_object_json(obj), obj->json_len, NULL, owner_event, &scan, &err) < 0 ||
        !scan.found)
        return;
    /* A namespaced child's owner shares its namespace, unless the owner's
     * kind is cluster-scoped (a Namespace, a cluster-scoped CRD): then the
     * key is the bare name (controller-runtime's EnqueueRequestForOwner). */
    char ns[256] = "", key[520];
    const struct luna_resource *res = luna_shared_informer_resource(primary->si);
    if (!res || res->namespaced)
        luna_object_namespace(obj, ns, sizeof ns);
    if (luna_object_make_key(key, sizeof key, ns, scan.result) > 0)
        enqueue(c, key, priority);
}

/* Bounds on what a watches map may enqueue: keys per result, the length
 * of a key, and how many keys the queue may hold before map results are
 * refused (each queued key is C memory the Lua cap does not see). */
#define MAP_MAX_KEYS 1000
#define MAP_MAX_KEY_LEN 317          /* namespace (63) / name (253) */
#define MAP_MAX_QUEUED 100000

static bool name_ok(lua_State *T, int idx, size_t max)
{
    size_t len;
    const char *s = lua_tolstring(T, idx, &len);
    return len > 0 && len <= max && !memchr(s, '\0', len);
}

/* Checks one request of a watches map result: a non-empty key string or a
 * {namespace=, name=} table of names of Kubernetes length.  Writes its key
 * to key (size MAP_MAX_KEY_LEN + 1) and returns true, or returns false.
 * Raw reads only: no metamethod runs here, outside the protected call. */
static bool request_key(lua_State *T, int idx, char *key)
{
    if (lua_type(T, idx) == LUA_TSTRING) {
        if (!name_ok(T, idx, MAP_MAX_KEY_LEN))
            return false;
        snprintf(key, MAP_MAX_KEY_LEN + 1, "%s", lua_tostring(T, idx));
        return true;
    }
    if (!lua_istable(T, idx))
        return false;
    lua_pushliteral(T, "name");
    lua_rawget(T, idx);
    lua_pushliteral(T, "namespace");
    lua_rawget(T, idx);
    bool ok = lua_type(T, -2) == LUA_TSTRING && name_ok(T, -2, 253) &&
              (lua_isnil(T, -1) || (lua_type(T, -1) == LUA_TSTRING &&
                                    (lua_objlen(T, -1) == 0 || name_ok(T, -1, 63))));
    if (ok)
        ok = luna_object_make_key(key, MAP_MAX_KEY_LEN + 1, lua_tostring(T, -1),
                                  lua_tostring(T, -2)) > 0;
    lua_pop(T, 2);
    return ok;
}

/* Enqueues what a watches map returned at idx: nil (nothing), one request,
 * or a list of at most MAP_MAX_KEYS requests (not of lists: a result is
 * never walked deeper, so a cyclic table cannot recurse; a bad item is
 * logged, the others enqueued).  Anything else, a longer list, or a queue
 * already holding MAP_MAX_QUEUED keys is logged and the result ignored. */
static void enqueue_request(struct luna_controller *c, lua_State *T, int idx, int priority)
{
    char key[MAP_MAX_KEY_LEN + 1];
    if (lua_isnil(T, idx))
        return;
    const char *error = NULL;
    size_t n = 0;
    bool single = request_key(T, idx, key);
    if (!single) {
        bool list = lua_istable(T, idx);
        if (list) {
            lua_pushliteral(T, "name");
            lua_rawget(T, idx);
            list = lua_isnil(T, -1); /* else a request table with a bad name */
            lua_pop(T, 1);
        }
        n = list ? lua_objlen(T, idx) : 0;
        if (!list)
            error = "map must return a key, a {namespace=, name=} table, a list of them, or nil "
                    "(keys of at most 317 bytes, names of Kubernetes length)";
        else if (n > MAP_MAX_KEYS)
            error = "map returned more than 1000 requests";
    }
    if (!error && luna_workqueue_len(c->queue) >= MAP_MAX_QUEUED)
        error = "the workqueue already holds 100000 keys: map results are refused until it drains";
    if (error) {
        luna_error("watches map result ignored", "controller", c->name, "error", error);
        return;
    }
    if (single) {
        enqueue(c, key, priority);
        return;
    }
    /* a list: its good items are enqueued, a bad one is reported */
    bool bad = false;
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(T, idx, (int)i);
        if (request_key(T, lua_gettop(T), key))
            enqueue(c, key, priority);
        else
            bad = true;
        lua_pop(T, 1);
    }
    if (bad)
        luna_error("watches map result ignored", "controller", c->name, "error",
                   "map must return a key, a {namespace=, name=} table, a list of them, or nil "
                   "(keys of at most 317 bytes, names of Kubernetes length)");
}

static void enqueue_mapped(struct source *src, struct luna_object *obj, int priority)
{
    struct luna_controller *c = src->c;
    lua_State *T = c->env.T;
    int top = lua_gettop(T);
    luna_error err = { 0 };
    lua_rawgeti(T, LUA_REGISTRYINDEX, src->spec->map_ref);
    if (luna_lua_json_push(T, luna_object_json(obj), obj->json_len, &err) < 0) {
        lua_settop(T, top);
        return;
    }
    if (guarded_call(c, T, 1, 1, "watches map") == 0)
        enqueue_request(c, T, lua_gettop(T), priority);
    lua_settop(T, top);
}

static void route(struct source *src, const char *type, struct luna_object *old,
                  struct luna_object *obj, int priority)
{
    struct luna_controller *c = src->c;
    if (c->stopping)
        return;
    struct luna_controller *outer = in_handler;
    in_handler = c;
    switch (src->spec->role) {
    case LUNA_SOURCE_WATCH:
        if (predicates_pass(c, type, old, obj))
            enqueue(c, luna_object_key(obj), priority);
        break;
    case LUNA_SOURCE_OWNS:
        if (old)
            enqueue_owner(src, old, priority);
        enqueue_owner(src, obj, priority);
        break;
    case LUNA_SOURCE_WATCHES:
        enqueue_mapped(src, obj, priority);
        break;
    }
    in_handler = outer;
}

static void on_add(void *ud, struct luna_object *obj, bool initial)
{
    route(ud, "add", NULL, obj, event_priority(NULL, obj, initial));
}
static void on_update(void *ud, struct luna_object *old, struct luna_object *obj)
{
    route(ud, "update", old, obj, event_priority(old, obj, false));
}
static void tombstone_drop(struct luna_controller *c, const char *key)
{
    struct tombstone *t;
    HASH_FIND_STR(c->tombstones, key, t);
    if (!t)
        return;
    HASH_DEL(c->tombstones, t);
    free(t->key);
    free(t);
}

/* Keeps a deleted primary object's uid for its key's owner check (uid
 * sharding); without memory the check finds no uid and drops the key. */
static void tombstone_keep(struct luna_controller *c, struct luna_object *obj)
{
    const char *key = luna_object_key(obj);
    const char *uid = luna_object_uid(obj);
    struct tombstone *t;
    HASH_FIND_STR(c->tombstones, key, t);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t || !(t->key = strdup(key))) {
            free(t);
            return;
        }
        HASH_ADD_KEYPTR(hh, c->tombstones, t->key, strlen(t->key), t);
    }
    snprintf(t->uid, sizeof t->uid, "%s", uid ? uid : "");
}

static void on_delete(void *ud, struct luna_object *obj, bool unknown)
{
    struct source *src = ud;
    if (src->sharded && src->c->sharding) {
        /* An object outside the informer's shard left it by a relist after
         * the claim moved: another replica owns it now; it is not gone. */
        char ns[256];
        luna_object_namespace(obj, ns, sizeof ns);
        if (!luna_shard_matches(luna_shard_set_informer_shard(src->c->sharding), ns,
                                luna_object_uid(obj))) {
            luna_shard_set_note_dropped(src->c->sharding, "handed_off");
            return;
        }
        if (src->spec->role == LUNA_SOURCE_WATCH && !src->c->stopping &&
            luna_shard_set_field(src->c->sharding) == LUNA_SHARD_UID)
            tombstone_keep(src->c, obj);
    }
    route(src, "delete", NULL, obj, LUNA_WORKQUEUE_PRIORITY_DEFAULT);
}

/* Whether this replica reconciles key (controller.h, sharding). */
static bool key_owned(struct luna_controller *c, const char *key)
{
    struct luna_shard_set *set = c->sharding;
    if (strcmp(key, LUNA_PERIODIC_KEY) == 0)
        return luna_shard_set_owns(set, key, key);
    char ns[256] = "";
    const char *slash = strchr(key, '/');
    if (slash && (size_t)(slash - key) < sizeof ns)
        snprintf(ns, sizeof ns, "%.*s", (int)(slash - key), key);
    if (luna_shard_set_field(set) == LUNA_SHARD_NAMESPACE)
        return luna_shard_set_owns(set, ns, NULL);
    struct luna_object *obj =
        luna_indexer_get(luna_informer_indexer(luna_shared_informer_informer(c->sources[0].si)),
                         key);
    if (obj)
        return luna_shard_set_owns(set, ns, luna_object_uid(obj));
    struct tombstone *t;
    HASH_FIND_STR(c->tombstones, key, t);
    return t && luna_shard_set_owns(set, ns, t->uid);
}

/* ---- reconciles -------------------------------------------------------- */

/* A sharded replica that may not act (stopped, or not yet confirmed)
 * leaves its keys queued: whose they are is unknown until it is. */
static bool shard_waits(const struct luna_controller *c)
{
    return c->sharding && !luna_shard_set_acting(c->sharding);
}

void luna_controller_kick(struct luna_controller *c)
{
    if (!c->started || c->stopping || c->paused || c->active >= c->workers ||
        !luna_workqueue_len(c->queue) || shard_waits(c))
        return;
    ev_check_start(luna_loop(), &c->dispatch_check);
    ev_idle_start(luna_loop(), &c->dispatch_idle);
}

static void on_ready(void *ud) { luna_controller_kick(ud); }


void luna_controller_maybe_drained(struct luna_controller *c)
{
    if (c->stopping && c->active == 0 && c->drained) {
        void (*cb)(void *) = c->drained;
        c->drained = NULL;
        cb(c->drained_ud);
    }
}

/* How much script time one loop iteration may spend before the
 * dispatchers stop starting reconciles and let the loop serve I/O
 * (probes, watches, API answers).  A reconcile that ends without yielding
 * frees its worker at once: without this, a queue of keys whose
 * reconciles each spin up to the time budget would hold the loop for
 * keys x budget. */
#define DISPATCH_SLICE 0.010
/* Iterations a controller lets pass while the slice is used up before it
 * starts one reconcile anyway (no controller starves). */
#define DISPATCH_MAX_DEFERRALS 3
/* After a stretch of script code longer than LONG_STRETCH (a reconcile
 * that spins close to its time budget, or dies deep in C recursion), no
 * reconcile starts for a quarter of that stretch (BREATHER_MIN to
 * BREATHER_MAX) and the loop blocks on I/O meanwhile.  The slice alone
 * lets one such reconcile start per iteration, and the iterations between
 * them run in microseconds (the dispatchers' idle watcher keeps the loop
 * from blocking), so a probe that needs two or three iterations (accept,
 * read, answer) waited two or three stretches: /healthz missed its 1 s
 * with a 0.5 s budget on a loaded machine.  Now it waits one stretch at
 * most, and such reconciles run at most ~80% of the time. */
#define LONG_STRETCH 0.050
#define BREATHER_MIN 0.020
#define BREATHER_MAX 0.250

static struct {
    unsigned int iteration;
    double used;                      /* script seconds in this iteration */
    unsigned starts;                  /* reconciles started in this iteration */
    bool valid;
} slice;

static void slice_roll(void)
{
    unsigned int it = ev_iteration(luna_loop());
    if (!slice.valid || it != slice.iteration) {
        slice.valid = true;
        slice.iteration = it;
        slice.used = 0;
        slice.starts = 0;
    }
}

/* The deferred line (controller_impl.h): once its head has waited
 * DISPATCH_MAX_DEFERRALS iterations, the next iteration's first start is
 * its, so every controller deferred by the slice gets its turn in the
 * order it was deferred, however many spin, and an iteration never runs
 * more than one reconcile past the slice. */
static struct {
    struct luna_controller *head, *tail;
} deferred_line;

/* The breather (see LONG_STRETCH): until `until` (ev_time), dispatchers
 * start nothing; the controllers that wanted to wait in the deferred line
 * with their watchers stopped, and the timer kicks them. */
static struct {
    double until;
    ev_timer timer;
    bool timer_init;
} breather;

static void deferred_join(struct luna_controller *c)
{
    if (c->in_deferred_line)
        return;
    c->in_deferred_line = true;
    c->deferred_next = NULL;
    c->deferred_prev = deferred_line.tail;
    if (deferred_line.tail)
        deferred_line.tail->deferred_next = c;
    else
        deferred_line.head = c;
    deferred_line.tail = c;
}

static void deferred_leave(struct luna_controller *c)
{
    if (!c->in_deferred_line)
        return;
    if (c->deferred_prev)
        c->deferred_prev->deferred_next = c->deferred_next;
    else
        deferred_line.head = c->deferred_next;
    if (c->deferred_next)
        c->deferred_next->deferred_prev = c->deferred_prev;
    else
        deferred_line.tail = c->deferred_prev;
    c->deferred_prev = c->deferred_next = NULL;
    c->in_deferred_line = false;
}

/* Stops c's dispatch watchers; it leaves the deferred line with them. */
static void dispatch_stop(struct luna_controller *c)
{
    ev_check_stop(luna_loop(), &c->dispatch_check);
    ev_idle_stop(luna_loop(), &c->dispatch_idle);
    deferred_leave(c);
}

static void breather_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
    /* kicking starts the watchers; the line keeps its order (the head
     * still goes first).  One with nothing to start leaves the line: the
     * end of its reconcile or a new key kicks it again. */
    struct luna_controller *next;
    for (struct luna_controller *c = deferred_line.head; c; c = next) {
        next = c->deferred_next;
        if (!c->started || c->stopping || c->paused || c->active >= c->workers ||
            !luna_workqueue_len(c->queue))
            deferred_leave(c);
        else
            luna_controller_kick(c);
    }
}

void luna_controller_charge(double seconds)
{
    slice_roll();
    slice.used += seconds;
    if (seconds > LONG_STRETCH) {
        double b = seconds / 4;
        b = b < BREATHER_MIN ? BREATHER_MIN : b > BREATHER_MAX ? BREATHER_MAX : b;
        double until = ev_time() + b;
        if (until > breather.until)
            breather.until = until;
    }
}

/* True (c waits in the deferred line, its watchers stopped, until the
 * breather's timer) while a breather lasts. */
static bool breathing(struct luna_controller *c)
{
    /* ev_now (this iteration's start) is never later than the real time:
     * past the breather by it, no clock read on each reconcile start */
    if (breather.until <= ev_now(luna_loop()))
        return false;
    double left = breather.until - ev_time();
    if (left <= 0)
        return false;
    /* a turn lost to the breather counts as a deferral: the breather lets
     * one reconcile start after it, and without the count the line's head
     * never came to wait, so whichever controller the loop happened to call
     * first took every such start (seen: 8 of 15 controllers, the canary
     * among them, never started in 30 s beside slow recursive ones) */
    c->deferrals++;
    deferred_join(c);
    ev_check_stop(luna_loop(), &c->dispatch_check);
    ev_idle_stop(luna_loop(), &c->dispatch_idle);
    if (!breather.timer_init) {
        ev_timer_init(&breather.timer, breather_cb, 0., 0.);
        breather.timer_init = true;
    }
    if (!ev_is_active(&breather.timer)) {
        /* libev counts from the iteration's cached time, which is behind
         * by the stretch that just ran: `left` from it would fire early */
        ev_timer_set(&breather.timer, breather.until - ev_now(luna_loop()), 0.);
        ev_timer_start(luna_loop(), &breather.timer);
    }
    return true;
}

/* Starts reconciles while keys and workers are free and the iteration's
 * script time is under the slice; past it, the watchers go on in the next
 * iteration.  A controller deferred DISPATCH_MAX_DEFERRALS times at the
 * head of the deferred line has the next fresh slice to itself: the others
 * wait until it started (no controller starves; one spinning reconcile per
 * iteration at most, so the loop still serves probes and watches).  Runs
 * from the dispatch watchers, and right after an informer drain step (so
 * an event's reconcile starts in the loop iteration the event arrived in);
 * never nested in itself. */
static void dispatch(struct luna_controller *c)
{
    if (!c->started || c->dispatching || c->paused)
        return;
    c->dispatching = true;
    bool started = false;
    while (!c->stopping && c->active < c->workers) {
        if (breathing(c)) {
            c->dispatching = false;
            return;
        }
        slice_roll();
        struct luna_controller *head = deferred_line.head;
        bool head_waits = head && head->deferrals >= DISPATCH_MAX_DEFERRALS;
        /* the waiting head starts even past the slice (script time spent
         * outside reconciles, index or map functions, cannot hold it back)
         * as long as no reconcile started in this iteration */
        bool head_goes = head_waits && head == c && !started && slice.starts == 0;
        if (!head_goes &&
            (slice.used > DISPATCH_SLICE || (head_waits && head != c && !started))) {
            if (!started) {
                deferred_join(c);
                c->deferrals++;
            }
            c->dispatching = false;
            luna_controller_kick(c);
            return;
        }
        const char *key;
        int priority;
        if (shard_waits(c) ||
            luna_workqueue_get_priority(c->queue, &key, &priority) != LUNA_WORKQUEUE_ITEM)
            break;
        if (c->sharding) {
            bool owned = key_owned(c, key);
            tombstone_drop(c, key);
            if (!owned) {
                luna_debug("shard: key not owned here", "controller", c->name, "key", key);
                luna_shard_set_note_dropped(c->sharding, "not_owned");
                luna_workqueue_forget(c->queue, key);
                luna_workqueue_done(c->queue, key);
                continue;
            }
        }
        /* key is borrowed from the queue until done: copy before Lua runs */
        c->deferrals = 0;
        deferred_leave(c);
        slice.starts++;
        luna_reconcile_start(c, key, priority);
        started = true;
    }
    c->dispatching = false;
    /* a sharded replica that may not act stops its watchers too (they
     * would spin the loop until it may): the shard set kicks every
     * controller when it acts again */
    if (c->stopping || c->active >= c->workers || !luna_workqueue_len(c->queue) ||
        shard_waits(c))
        dispatch_stop(c);
}

static void dispatch_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    dispatch((struct luna_controller *)((char *)w -
                                        offsetof(struct luna_controller, dispatch_check)));
}

static void on_batch_end(void *ud)
{
    struct source *src = ud;
    if (luna_workqueue_len(src->c->queue))
        dispatch(src->c);
}

static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents) {}

/* ---- construction -------------------------------------------------------- */

static void periodic_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* Acquires the informer of c's next source and adds the handlers. */
static int add_source(struct luna_controller *c, const struct luna_source_spec *ss,
                      luna_error *err)
{
    struct source *src = &c->sources[c->nsources];
    memset(src, 0, sizeof *src);
    src->c = c;
    src->spec = ss;
    struct luna_informer_spec spec = {
        .group = ss->group, .version = ss->version, .kind = ss->kind,
        .namespace_ = ss->namespace_,
        .label_selector = ss->labels,
        .field_selector = ss->fields,
        .keep_managed_fields = c->spec->keep_managed_fields,
        .metadata_only = ss->metadata_only,
        .resync = ss->role == LUNA_SOURCE_WATCH ? c->spec->resync : 0,
    };
    /* the primary follows the claim; `owns` children too when they hash
     * as their owner does (same namespace); the rest is cached whole */
    src->sharded = c->sharding &&
                   (ss->role == LUNA_SOURCE_WATCH ||
                    (ss->role == LUNA_SOURCE_OWNS &&
                     luna_shard_set_field(c->sharding) == LUNA_SHARD_NAMESPACE));
    if (src->sharded)
        spec.shard = luna_shard_set_informer_shard(c->sharding);
    src->si = luna_informer_factory_acquire(c->env.factory, &spec, err);
    if (!src->si)
        return err ? err->code : LUNA_EINVAL;
    c->nsources++;
    return 0;
}

/* Routes the events of every source to c.  A synced informer replays its
 * cache to a new handler at once, running predicates and map functions:
 * so this comes after the indexes they may read exist. */
static void add_handlers(struct luna_controller *c)
{
    for (size_t i = 0; i < c->nsources; i++) {
        struct source *src = &c->sources[i];
        struct luna_informer_handler h = { on_add, on_update, on_delete, src, on_batch_end };
        src->handler_id = luna_informer_add_handler(luna_shared_informer_informer(src->si), &h);
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
        luna_lua_cache_add_index(L, idx, c->index_names[i], lua_gettop(L), &c->env.T,
                                 luna_lua_cache_push_table, &c->limits);
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
    c->sharding = sharding;
    c->limits = luna_controller_spec_limits(L, spec);
    /* Its code's memory, what its file kept at load included, is its
     * own account, capped by limits.memory or the operator's default. */
    c->limits.account = env->account;
    char account_name[256];
    snprintf(account_name, sizeof account_name, "controller %s", c->name);
    luna_watchdog_account_set(L, env->account, account_name,
                              spec->limits_set & LUNA_SPEC_LIMIT_MEMORY ? spec->memory : 0);
    int rc = 0;
    ev_check_init(&c->dispatch_check, dispatch_cb);
    ev_idle_init(&c->dispatch_idle, idle_cb);
    ev_timer_init(&c->every_timer, periodic_cb, 0., 0.);
    c->every_rng = ((uint64_t)(uintptr_t)c ^ (uint64_t)(ev_time() * 1e6)) | 1;

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
    luna_workqueue_set_ready_cb(c->queue, on_ready, c);

    for (size_t i = 0; i < c->spec->nsources && rc == 0; i++)
        rc = add_source(c, &c->spec->sources[i], err);
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
    add_handlers(c);
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

/* ---- periodic work ---------------------------------------------------------- */

static bool has_schedule(const struct luna_controller_spec *s)
{
    return s->every > 0 || s->every_cron;
}

bool luna_controller_periodic(const struct luna_controller *c) { return has_schedule(c->spec); }

/* A uniform draw in [0, 1) (xorshift64*; jitter needs no more). */
static double periodic_rand(struct luna_controller *c)
{
    uint64_t x = c->every_rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->every_rng = x;
    return (double)((x * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* The period the jitter is a fraction of: every, or the gap from the cron
 * slot `base` to the one after it. */
static double periodic_period(const struct luna_controller *c, double base)
{
    if (c->spec->every > 0)
        return c->spec->every;
    double after = luna_cron_next(&c->spec->cron, base);
    return after > base ? after - base : 60;
}

static void periodic_arm(struct luna_controller *c)
{
    /* libev counts a timer from the loop's time (ev_now), which lags the
     * clock while an iteration runs: from ev_time() the tick could come
     * before it is due */
    double delay = c->every_due - ev_now(luna_loop());
    ev_timer_set(&c->every_timer, delay > 0 ? delay : 0., 0.);
    ev_timer_start(luna_loop(), &c->every_timer);
    if (c->metrics)
        luna_runtime_metrics_periodic_next(c->metrics, c->every_due);
}

/* Draws the due time of the slot base. */
static void periodic_schedule(struct luna_controller *c, double base)
{
    c->every_base = base;
    c->every_due = base + periodic_rand(c) * c->spec->jitter * periodic_period(c, base);
}

static void periodic_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct luna_controller *c =
        (struct luna_controller *)((char *)w - offsetof(struct luna_controller, every_timer));
    if (!c->started || c->stopping)
        return;
    double now = ev_time();
    luna_debug("periodic tick", "controller", c->name);
    if (c->metrics)
        luna_runtime_metrics_periodic_tick(c->metrics);
    enqueue(c, LUNA_PERIODIC_KEY, LUNA_WORKQUEUE_PRIORITY_DEFAULT);
    double base;
    if (c->spec->every > 0) {
        base = c->every_base + c->spec->every;
        if (base <= now)
            base = now + c->spec->every; /* missed slots are skipped */
    } else {
        base = luna_cron_next(&c->spec->cron, c->every_base > now ? c->every_base : now);
        if (base < 0)
            return; /* no slot within five years */
    }
    periodic_schedule(c, base);
    periodic_arm(c);
}

/* At start: a fresh schedule (or the one a reload handed over) is armed. */
static void periodic_start(struct luna_controller *c)
{
    if (!has_schedule(c->spec))
        return;
    if (c->every_due == 0) {
        double now = ev_time();
        if (c->spec->every > 0) {
            c->every_base = c->every_due = now; /* the first tick at once */
        } else {
            double base = luna_cron_next(&c->spec->cron, now);
            if (base < 0)
                return;
            periodic_schedule(c, base);
        }
    }
    periodic_arm(c);
}

static void periodic_stop(struct luna_controller *c)
{
    ev_timer_stop(luna_loop(), &c->every_timer);
}

/* Reload: the same schedule keeps its next due time. */
static void periodic_take(struct luna_controller *to, const struct luna_controller *from)
{
    const struct luna_controller_spec *a = to->spec, *b = from->spec;
    bool same = has_schedule(a) && a->every == b->every && a->jitter == b->jitter &&
                (a->every_cron ? b->every_cron && strcmp(a->every_cron, b->every_cron) == 0
                               : !b->every_cron);
    if (same && from->every_due > 0) {
        to->every_base = from->every_base;
        to->every_due = from->every_due;
    }
}

void luna_controller_start(struct luna_controller *c)
{
    if (c->started)
        return;
    c->started = true;
    char workers[16];
    snprintf(workers, sizeof workers, "%d", c->workers);
    luna_info("controller started", "controller", c->name, "workers", workers);
    periodic_start(c);
    luna_controller_kick(c);
}

void luna_controller_shutdown(struct luna_controller *c, void (*drained)(void *ud), void *ud)
{
    c->stopping = true;
    c->drained = drained;
    c->drained_ud = ud;
    dispatch_stop(c);
    periodic_stop(c);
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
    dispatch_stop(c);
    periodic_stop(c);
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
    for (size_t i = 0; i < c->nsources; i++) {
        struct source *s = &c->sources[i];
        if (s->handler_id > 0)
            luna_informer_remove_handler(luna_shared_informer_informer(s->si), s->handler_id);
        luna_informer_factory_release(c->env.factory, s->si);
    }
    free(c->sources);
    struct tombstone *t, *ttmp;
    HASH_ITER(hh, c->tombstones, t, ttmp) {
        HASH_DEL(c->tombstones, t);
        free(t->key);
        free(t);
    }
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
    periodic_take(to, from);
    from->queue_borrowed = true;
    luna_workqueue_set_ready_cb(to->queue, on_ready, to);
}

void luna_controller_retire(struct luna_controller *c, void (*drained)(void *ud), void *ud)
{
    c->stopping = true;
    c->drained = drained;
    c->drained_ud = ud;
    dispatch_stop(c);
    periodic_stop(c);
    if (!c->queue_borrowed)
        luna_workqueue_shutdown(c->queue);
    luna_controller_maybe_drained(c);
}

/* Every key at once (a reload, a start after leadership, a trigger of
 * all or by selector) is a backlog like a first list: LOW. */
static int enqueue_visit(struct luna_object *obj, void *ud)
{
    enqueue(ud, luna_object_key(obj), LUNA_WORKQUEUE_PRIORITY_LOW);
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
        dispatch_stop(c); /* and out of the deferred line: it starts nothing */
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
        enqueue(v->c, luna_object_key(obj), LUNA_WORKQUEUE_PRIORITY_LOW);
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
    if (!k || !(k->key = strdup(key)) || !(k->what = strdup(what ? what : verb))) {
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
