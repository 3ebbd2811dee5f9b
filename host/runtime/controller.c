/* controller.c — see controller.h. */
#include "runtime/controller.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "base/clock.h"
#include "cache/event_latency.h"
#include "base/json.h"
#include "base/log.h"
#include "base/loop.h"
#include "lua/lua_json.h"
#include "runtime/lua_store.h"
#include "lua/lua_util.h"
#include "queue/ratelimit.h"
#include "client/resource.h"
#include "runtime/runtime_metrics.h"
#include "runtime/watchdog.h"
#include "queue/workqueue.h"

enum source_role { SOURCE_WATCH, SOURCE_OWNS, SOURCE_WATCHES };

struct source {
    struct luna_controller *c;
    enum source_role role;
    struct luna_shared_informer *si;
    int handler_id;
    int map_ref;                      /* watches: Lua map function */
    char group[256], version[64], kind[128];
};

struct luna_reconcile {
    struct luna_controller *c;
    char *key;
    char id[24];
    lua_State *co;
    int co_ref;
    unsigned attempt;
    double started;
    void (*cancel)(void *ud);         /* the operation waited for, if any */
    void *cancel_ud;
    struct luna_reconcile *prev, *next;
    UT_hash_handle hh;                /* by coroutine pointer */
};

struct luna_controller {
    char *name;
    struct luna_controller_env env;
    int ctl_ref;                      /* the controller table */
    int reconcile_ref;                /* its reconcile function */
    int predicates_ref;               /* list of predicate functions, or LUA_NOREF */
    struct luna_workqueue *queue;
    bool queue_borrowed;              /* retired: the queue moved to a successor */
    struct source *sources;
    size_t nsources;
    int nindexes;                     /* custom indexes added to sources[0] */
    int workers, active;
    struct luna_watchdog_limits limits; /* budgets of its Lua code */
    bool started, stopping;
    bool dispatching;                 /* inside dispatch(): it does not nest */
    void (*drained)(void *ud);
    void *drained_ud;
    struct luna_reconcile *running;   /* list of in-flight reconciles */
    unsigned long next_id;
    struct luna_controller_stats stats;
    struct luna_controller_metrics *metrics; /* borrowed; NULL: none */
    ev_check dispatch_check;
    ev_idle dispatch_idle;
};

/* Coroutine → reconcile, for the bindings. */
static struct luna_reconcile *by_thread;
/* The controller whose predicate or map function is running, if any. */
static struct luna_controller *in_handler;

struct luna_controller *luna_controller_in_handler(void) { return in_handler; }

struct luna_reconcile *luna_reconcile_of(lua_State *L)
{
    struct luna_reconcile *r;
    HASH_FIND_PTR(by_thread, &L, r);
    return r;
}

struct luna_controller *luna_reconcile_controller(struct luna_reconcile *r) { return r->c; }
const char *luna_reconcile_key(const struct luna_reconcile *r) { return r->key; }
const char *luna_reconcile_id(const struct luna_reconcile *r) { return r->id; }
lua_State *luna_reconcile_thread(const struct luna_reconcile *r) { return r->co; }
const char *luna_controller_name(const struct luna_controller *c) { return c->name; }
struct luna_controller_stats luna_controller_stats(const struct luna_controller *c)
{
    struct luna_controller_stats st = c->stats;
    st.active = c->active;
    return st;
}
struct luna_informer_factory *luna_controller_factory(struct luna_controller *c)
{
    return c->env.factory;
}
int luna_controller_workers(const struct luna_controller *c) { return c->workers; }
struct luna_workqueue *luna_controller_queue(struct luna_controller *c) { return c->queue; }
void luna_controller_set_metrics(struct luna_controller *c, struct luna_controller_metrics *cm)
{
    c->metrics = cm;
}

/* ---- event → key ------------------------------------------------------ */

static void enqueue(struct luna_controller *c, const char *key)
{
    luna_debug("enqueue", "controller", c->name, "key", key);
    if (luna_workqueue_add(c->queue, key) == LUNA_ENOMEM)
        luna_error("enqueue failed", "controller", c->name, "key", key, "error", "out of memory");
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
    if (g.stop != LUNA_WATCHDOG_RUNNING)
        luna_watchdog_describe(&g, reason, sizeof reason);
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
    if (c->predicates_ref == LUA_NOREF)
        return true;
    lua_State *T = c->env.T;
    int top = lua_gettop(T);
    lua_rawgeti(T, LUA_REGISTRYINDEX, c->predicates_ref);
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

static void enqueue_owner(struct source *src, struct luna_object *obj)
{
    struct luna_controller *c = src->c;
    struct source *primary = &c->sources[0];
    struct owner_scan scan = { .group = primary->group, .kind = primary->kind };
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
        enqueue(c, key);
}

/* Enqueues one request of a watches map result: a non-empty key string or
 * a {namespace=, name=} table.  Returns false (enqueuing nothing) if the
 * value at idx is neither.  Raw reads only: no metamethod runs here,
 * outside the protected call. */
static bool enqueue_one(struct luna_controller *c, lua_State *T, int idx)
{
    if (lua_type(T, idx) == LUA_TSTRING) {
        if (lua_objlen(T, idx) == 0)
            return false;
        enqueue(c, lua_tostring(T, idx));
        return true;
    }
    if (!lua_istable(T, idx))
        return false;
    lua_pushliteral(T, "name");
    lua_rawget(T, idx);
    lua_pushliteral(T, "namespace");
    lua_rawget(T, idx);
    bool ok = lua_type(T, -2) == LUA_TSTRING && lua_objlen(T, -2) > 0 &&
              (lua_isnil(T, -1) || lua_type(T, -1) == LUA_TSTRING);
    char key[520];
    if (ok && luna_object_make_key(key, sizeof key, lua_tostring(T, -1), lua_tostring(T, -2)) > 0)
        enqueue(c, key);
    lua_pop(T, 2);
    return ok;
}

/* Enqueues what a watches map returned at idx: nil (nothing), one request,
 * or a list of requests (not of lists: a result is never walked deeper, so
 * a cyclic table cannot recurse).  Anything else is logged and ignored. */
static void enqueue_request(struct luna_controller *c, lua_State *T, int idx)
{
    if (lua_isnil(T, idx) || enqueue_one(c, T, idx))
        return;
    bool bad = !lua_istable(T, idx);
    if (!bad) {
        lua_pushliteral(T, "name");
        lua_rawget(T, idx);
        bad = !lua_isnil(T, -1); /* a request table with a bad name */
        lua_pop(T, 1);
    }
    int n = bad ? 0 : (int)lua_objlen(T, idx);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(T, idx, i);
        if (!enqueue_one(c, T, lua_gettop(T)))
            bad = true;
        lua_pop(T, 1);
    }
    if (bad)
        luna_warn("watches map result ignored", "controller", c->name, "error",
                  "map must return a key, a {namespace=, name=} table, a list of them, or nil");
}

static void enqueue_mapped(struct source *src, struct luna_object *obj)
{
    struct luna_controller *c = src->c;
    lua_State *T = c->env.T;
    int top = lua_gettop(T);
    luna_error err = { 0 };
    lua_rawgeti(T, LUA_REGISTRYINDEX, src->map_ref);
    if (luna_lua_json_push(T, luna_object_json(obj), obj->json_len, &err) < 0) {
        lua_settop(T, top);
        return;
    }
    if (guarded_call(c, T, 1, 1, "watches map") == 0)
        enqueue_request(c, T, lua_gettop(T));
    lua_settop(T, top);
}

static void route(struct source *src, const char *type, struct luna_object *old,
                  struct luna_object *obj)
{
    struct luna_controller *c = src->c;
    if (c->stopping)
        return;
    struct luna_controller *outer = in_handler;
    in_handler = c;
    switch (src->role) {
    case SOURCE_WATCH:
        if (predicates_pass(c, type, old, obj))
            enqueue(c, luna_object_key(obj));
        break;
    case SOURCE_OWNS:
        if (old)
            enqueue_owner(src, old);
        enqueue_owner(src, obj);
        break;
    case SOURCE_WATCHES:
        enqueue_mapped(src, obj);
        break;
    }
    in_handler = outer;
}

static void on_add(void *ud, struct luna_object *obj, bool initial) { route(ud, "add", NULL, obj); }
static void on_update(void *ud, struct luna_object *old, struct luna_object *obj)
{
    route(ud, "update", old, obj);
}
static void on_delete(void *ud, struct luna_object *obj, bool unknown)
{
    route(ud, "delete", NULL, obj);
}

/* ---- reconciles -------------------------------------------------------- */

static void kick(struct luna_controller *c)
{
    if (!c->started || c->stopping || c->active >= c->workers || !luna_workqueue_len(c->queue))
        return;
    ev_check_start(luna_loop(), &c->dispatch_check);
    ev_idle_start(luna_loop(), &c->dispatch_idle);
}

static void on_ready(void *ud) { kick(ud); }

static void reconcile_free(struct luna_reconcile *r)
{
    struct luna_controller *c = r->c;
    HASH_DEL(by_thread, r);
    if (r->prev)
        r->prev->next = r->next;
    else
        c->running = r->next;
    if (r->next)
        r->next->prev = r->prev;
    luaL_unref(c->env.L, LUA_REGISTRYINDEX, r->co_ref);
    free(r->key);
    free(r);
    c->active--;
}

static void maybe_drained(struct luna_controller *c)
{
    if (c->stopping && c->active == 0 && c->drained) {
        void (*cb)(void *) = c->drained;
        c->drained = NULL;
        cb(c->drained_ud);
    }
}

/* "ns/name" → ns into buf ("" when cluster-scoped); returns the name. */
static const char *split_key(const char *key, char *buf, size_t size)
{
    const char *slash = strchr(key, '/');
    size_t n = slash ? (size_t)(slash - key) : 0;
    if (n >= size)
        n = size - 1;
    memcpy(buf, key, n);
    buf[n] = '\0';
    return slash ? slash + 1 : key;
}

static void log_result_stopped(struct luna_reconcile *r, const char *msg, const char *result,
                               const char *error, const char *where, enum luna_log_level level,
                               const char *stopped)
{
    char attempt[16], ms[32];
    snprintf(attempt, sizeof attempt, "%u", r->attempt);
    snprintf(ms, sizeof ms, "%.3f",
             (luna_clock_now(r->c->env.clock) - r->started) * 1000.0);
    char ns[256];
    const char *name = split_key(r->key, ns, sizeof ns);
    luna_log(level, msg, "controller", r->c->name, "key", r->key, "reconcile_id", r->id,
             "attempt", attempt, "result", result, "duration_ms", ms, "error", error,
             "where", where, "stopped", stopped, "namespace", ns[0] ? ns : NULL, "name", name,
             NULL);
}

static void log_result(struct luna_reconcile *r, const char *msg, const char *result,
                       const char *error, const char *where, enum luna_log_level level)
{
    log_result_stopped(r, msg, result, error, where, level, NULL);
}

/* Runs in a protected call: the text of an error value (a string, a
 * number, what its __tostring makes of it, or its type). */
static int error_value_text(lua_State *L)
{
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
        return 1;
    if (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER)
        lua_pushstring(L, lua_tostring(L, 1));
    else
        lua_pushfstring(L, "(%s error value)", luaL_typename(L, 1));
    return 1;
}

/* The text of the value at idx of co (an error value raised or returned),
 * computed on the controller's state: __tostring may itself fail, and co
 * may be a coroutine that died with an error. */
static void value_text(struct luna_controller *c, lua_State *co, int idx, char *buf, size_t size)
{
    lua_State *L = c->env.L;
    lua_pushcfunction(L, error_value_text);
    lua_pushvalue(co, idx);
    lua_xmove(co, L, 1);
    /* __tostring is script code: run it with the controller's budgets */
    struct luna_watchdog_guard g = { .what = "tostring of an error", .owner = c->name,
                                     .limits = &c->limits };
    if (luna_watchdog_pcall(L, 1, 1, 0, &g) == 0)
        snprintf(buf, size, "%s", lua_tostring(L, -1));
    else
        snprintf(buf, size, "(error value whose __tostring failed: %s)",
                 lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?");
    lua_pop(L, 1);
}

/* Reports a finished reconcile to the metrics: its result is the stats
 * counter finish() moved. */
static void observe_done(struct luna_controller *c, const struct luna_controller_stats *before,
                         bool raised, double started)
{
    if (!c->metrics)
        return;
    const struct luna_controller_stats *st = &c->stats;
    enum luna_reconcile_result res =
        st->errors != before->errors ? LUNA_RECONCILE_ERROR
        : st->requeue_afters != before->requeue_afters ? LUNA_RECONCILE_REQUEUE_AFTER
        : st->requeues != before->requeues ? LUNA_RECONCILE_REQUEUE
        : LUNA_RECONCILE_SUCCESS;
    if (raised)
        luna_runtime_metrics_reconcile_panic(c->metrics);
    luna_runtime_metrics_reconcile_done(c->metrics, res, luna_clock_now(c->env.clock) - started);
}

/* Applies the finished coroutine's result to the queue.  stop is why the
 * watchdog stopped it (LUNA_WATCHDOG_RUNNING if it did not), reason its
 * description. */
static void finish(struct luna_reconcile *r, int status, enum luna_watchdog_stop stop,
                   const char *reason)
{
    struct luna_controller *c = r->c;
    lua_State *co = r->co;
    struct luna_workqueue *q = c->queue;
    struct luna_controller_stats before = c->stats;
    c->stats.reconciles++;
    if (stop != LUNA_WATCHDOG_RUNNING) {
        /* The error value may be "not enough memory" or a message a pcall
         * in the script re-raised: the guard says what happened.  The
         * hook's own message also has the script position: keep it. */
        const char *msg = lua_type(co, -1) == LUA_TSTRING ? lua_tostring(co, -1) : NULL;
        luaL_traceback(c->env.L, co, msg && strstr(msg, reason) ? msg : reason, 0);
        log_result_stopped(r, "reconcile failed", "error", lua_tostring(c->env.L, -1), NULL,
                           LUNA_LOG_ERROR, luna_watchdog_stop_name(stop));
        lua_pop(c->env.L, 1);
        c->stats.errors++;
        c->stats.stopped++;
        luna_workqueue_add_rate_limited(q, r->key);
    } else if (status != 0) {
        char msg[1024];
        value_text(c, co, -1, msg, sizeof msg);
        luaL_traceback(c->env.L, co, msg, 0);
        const char *trace = lua_tostring(c->env.L, -1);
        log_result(r, "reconcile failed", "error", trace, NULL, LUNA_LOG_ERROR);
        lua_pop(c->env.L, 1);
        c->stats.errors++;
        luna_workqueue_add_rate_limited(q, r->key);
    } else {
        int n = lua_gettop(co);
        if (n >= 2 && lua_isnil(co, 1) && !lua_isnil(co, 2)) {
            /* nil, err */
            char msg[1024], where[512] = "";
            value_text(c, co, 2, msg, sizeof msg);
            if (lua_istable(co, 2)) {
                /* luna API errors name the failed call: "luna.get at file:line" */
                lua_pushliteral(co, "where");
                lua_rawget(co, 2);
                if (lua_type(co, -1) == LUA_TSTRING)
                    snprintf(where, sizeof where, "%s", lua_tostring(co, -1));
                lua_pop(co, 1);
            }
            log_result(r, "reconcile failed", "error", msg, where[0] ? where : NULL,
                       LUNA_LOG_ERROR);
            c->stats.errors++;
            luna_workqueue_add_rate_limited(q, r->key);
        } else if (n >= 1 && lua_istable(co, 1)) {
            /* Raw reads: a metamethod must not run outside a protected call. */
            lua_pushliteral(co, "requeue_after");
            lua_rawget(co, 1);
            lua_pushliteral(co, "requeue");
            lua_rawget(co, 1);
            double after_s = lua_tonumber(co, -2);
            if (!lua_isnil(co, -2) &&
                (lua_type(co, -2) != LUA_TNUMBER || !(after_s >= 0) || after_s > 1e9)) {
                /* A typo'd type must not pass silently as done. */
                log_result(r, "reconcile failed", "error",
                           "reconcile returned an invalid result: requeue_after must be a "
                           "number of seconds from 0 to 1e9", NULL, LUNA_LOG_ERROR);
                c->stats.errors++;
                luna_workqueue_add_rate_limited(q, r->key);
            } else if (after_s > 0) {
                double after = lua_tonumber(co, -2);
                char secs[32];
                snprintf(secs, sizeof secs, "%g", after);
                luna_workqueue_forget(q, r->key);
                luna_workqueue_add_after(q, r->key, after);
                c->stats.requeue_afters++;
                log_result(r, "requeue after", secs, NULL, NULL, LUNA_LOG_DEBUG);
            } else if (lua_toboolean(co, -1)) {
                luna_workqueue_add_rate_limited(q, r->key);
                c->stats.requeues++;
                log_result(r, "reconcile done", "requeue", NULL, NULL, LUNA_LOG_DEBUG);
            } else {
                luna_workqueue_forget(q, r->key);
                c->stats.successes++;
                log_result(r, "reconcile done", "success", NULL, NULL, LUNA_LOG_DEBUG);
            }
            lua_pop(co, 2);
        } else if (n >= 1 && lua_type(co, 1) == LUA_TBOOLEAN && !lua_toboolean(co, 1)) {
            log_result(r, "reconcile failed", "error", "reconcile returned false", NULL,
                       LUNA_LOG_ERROR);
            c->stats.errors++;
            luna_workqueue_add_rate_limited(q, r->key);
        } else {
            luna_workqueue_forget(q, r->key);
            c->stats.successes++;
            log_result(r, "reconcile done", "success", NULL, NULL, LUNA_LOG_DEBUG);
        }
    }
    observe_done(c, &before, status != 0, r->started);
    luna_workqueue_done(q, r->key);
    reconcile_free(r);
    /* The heap went past the cap: collect what the failed reconcile left
     * (its coroutine is unreferenced now) before the next one runs. */
    if (stop == LUNA_WATCHDOG_MEMORY)
        lua_gc(c->env.L, LUA_GCCOLLECT, 0);
    kick(c);
    maybe_drained(c);
}

static void resume(struct luna_reconcile *r, int nargs)
{
    struct luna_controller *c = r->c;
    struct luna_watchdog_guard g = { .what = "reconcile", .owner = c->name, .key = r->key,
                                     .limits = &c->limits };
    int rc = luna_watchdog_resume(r->co, nargs, &g);
    if (g.stop != LUNA_WATCHDOG_RUNNING) {
        char reason[256];
        luna_watchdog_describe(&g, reason, sizeof reason);
        if (rc == LUA_YIELD && r->cancel) {
            /* stopped, yet it got to yield in an API call: abandon the call */
            r->cancel(r->cancel_ud);
            r->cancel = NULL;
            r->cancel_ud = NULL;
        }
        finish(r, rc == LUA_YIELD ? LUA_ERRRUN : rc, g.stop, reason);
        return;
    }
    if (rc == LUA_YIELD) {
        if (r->cancel)
            return; /* waiting for an API answer */
        lua_settop(r->co, 0);
        lua_pushstring(r->co, "reconcile yielded outside a luna API call "
                              "(coroutine.yield is not allowed in reconcile)");
        finish(r, LUA_ERRRUN, LUNA_WATCHDOG_RUNNING, NULL);
        return;
    }
    finish(r, rc, LUNA_WATCHDOG_RUNNING, NULL);
}

void luna_reconcile_wait(struct luna_reconcile *r, void (*cancel)(void *ud), void *ud)
{
    r->cancel = cancel;
    r->cancel_ud = ud;
}

void luna_reconcile_resume(struct luna_reconcile *r, int nres)
{
    r->cancel = NULL;
    r->cancel_ud = NULL;
    resume(r, nres);
}

static void start_reconcile(struct luna_controller *c, const char *key)
{
    luna_event_latency_reconcile(key);
    lua_State *L = c->env.L;
    struct luna_reconcile *r = calloc(1, sizeof *r);
    if (!r || !(r->key = strdup(key))) {
        free(r);
        luna_error("reconcile start failed", "controller", c->name, "key", key, "error",
                   "out of memory");
        luna_workqueue_add_rate_limited(c->queue, key);
        luna_workqueue_done(c->queue, key);
        return;
    }
    r->c = c;
    r->attempt = luna_workqueue_num_requeues(c->queue, key) + 1;
    r->started = luna_clock_now(c->env.clock);
    /* Unique across controllers and reloads: log readers pair start/done. */
    static unsigned long next_reconcile_id;
    snprintf(r->id, sizeof r->id, "%lx", ++next_reconcile_id);
    c->next_id++;
    r->co = lua_newthread(L);
    r->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    HASH_ADD_PTR(by_thread, co, r);
    r->next = c->running;
    if (c->running)
        c->running->prev = r;
    c->running = r;
    c->active++;
    if (c->metrics)
        luna_runtime_metrics_reconcile_start(c->metrics);

    if (luna_log_enabled(LUNA_LOG_DEBUG)) {
        char ns[256];
        const char *name = split_key(key, ns, sizeof ns);
        luna_debug("reconcile start", "controller", c->name, "key", key, "reconcile_id", r->id,
                   "namespace", ns[0] ? ns : NULL, "name", name);
    }
    lua_State *co = r->co;
    lua_rawgeti(co, LUA_REGISTRYINDEX, c->reconcile_ref);
    lua_createtable(co, 0, 4);
    const char *slash = strchr(key, '/');
    if (slash) {
        lua_pushlstring(co, key, (size_t)(slash - key));
        lua_setfield(co, -2, "namespace");
        lua_pushstring(co, slash + 1);
    } else {
        lua_pushstring(co, key);
    }
    lua_setfield(co, -2, "name");
    lua_pushstring(co, key);
    lua_setfield(co, -2, "key");
    lua_pushinteger(co, (lua_Integer)r->attempt);
    lua_setfield(co, -2, "attempt");
    resume(r, 1);
}

/* Starts reconciles while keys and workers are free.  Runs from the
 * dispatch watchers, and right after an informer drain step (so an event's
 * reconcile starts in the loop iteration the event arrived in); never
 * nested in itself. */
static void dispatch(struct luna_controller *c)
{
    if (!c->started || c->dispatching)
        return;
    c->dispatching = true;
    while (!c->stopping && c->active < c->workers) {
        const char *key;
        if (luna_workqueue_get(c->queue, &key) != LUNA_WORKQUEUE_ITEM)
            break;
        /* key is borrowed from the queue until done: copy before Lua runs */
        start_reconcile(c, key);
    }
    c->dispatching = false;
    if (c->stopping || c->active >= c->workers || !luna_workqueue_len(c->queue)) {
        ev_check_stop(luna_loop(), &c->dispatch_check);
        ev_idle_stop(luna_loop(), &c->dispatch_idle);
    }
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

static int add_source(struct luna_controller *c, lua_State *L, int desc, enum source_role role,
                      bool keep_managed, luna_error *err)
{
    struct source *src = &c->sources[c->nsources];
    memset(src, 0, sizeof *src);
    src->c = c;
    src->role = role;
    src->map_ref = LUA_NOREF;
    lua_getfield(L, desc, "kind");
    const char *kind_text = lua_tostring(L, -1);
    int rc = luna_parse_kind(kind_text ? kind_text : "", src->group, sizeof src->group,
                             src->version, sizeof src->version, src->kind, sizeof src->kind, err);
    lua_pop(L, 1);
    if (rc < 0)
        return rc;
    struct luna_informer_spec spec = {
        .group = src->group, .version = src->version, .kind = src->kind,
        .namespace_ = luna_lua_opt_string_field(L, desc, "namespace", NULL),
        .keep_managed_fields = keep_managed,
    };
    if (role == SOURCE_WATCH) {
        lua_getfield(L, 1, "resync");
        spec.resync = lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    /* labels / fields: { k = v } tables from luna.controller */
    char labels[2048] = "", fields[2048] = "";
    const char *names[2] = { "labels", "fields" };
    char *bufs[2] = { labels, fields };
    for (int i = 0; i < 2; i++) {
        lua_getfield(L, desc, names[i]);
        if (lua_type(L, -1) == LUA_TSTRING) {
            if (lua_objlen(L, -1) >= sizeof labels) {
                lua_pop(L, 1);
                return luna_error_set(err, LUNA_EINVAL, "%s selector too long", names[i]);
            }
            snprintf(bufs[i], sizeof labels, "%s", lua_tostring(L, -1));
        } else if (lua_istable(L, -1)) {
            size_t len = 0;
            for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
                int n = snprintf(bufs[i] + len, sizeof labels - len, "%s%s=%s", len ? "," : "",
                                 lua_tostring(L, -2), lua_tostring(L, -1));
                if (n < 0 || (size_t)n >= sizeof labels - len) {
                    lua_pop(L, 3);
                    return luna_error_set(err, LUNA_EINVAL, "%s selector too long", names[i]);
                }
                len += (size_t)n;
            }
        }
        lua_pop(L, 1);
    }
    spec.label_selector = labels;
    spec.field_selector = fields;
    if (role == SOURCE_WATCHES) {
        lua_getfield(L, desc, "map");
        src->map_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    src->si = luna_informer_factory_acquire(c->env.factory, &spec, err);
    if (!src->si) {
        luaL_unref(L, LUA_REGISTRYINDEX, src->map_ref);
        return err ? err->code : LUNA_EINVAL;
    }
    c->nsources++;
    struct luna_informer_handler h = { on_add, on_update, on_delete, src, on_batch_end };
    src->handler_id = luna_informer_add_handler(luna_shared_informer_informer(src->si), &h);
    return 0;
}

static void read_rate_limit(lua_State *L, int ctl, struct luna_ratelimit_config *cfg)
{
    luna_ratelimit_config_init(cfg, LUNA_RATELIMIT_DEFAULT);
    lua_getfield(L, ctl, "rate_limit");
    int t = lua_gettop(L);
    if (lua_istable(L, t)) {
        cfg->base_delay = luna_lua_opt_number_field(L, t, "base_delay", cfg->base_delay);
        cfg->max_delay = luna_lua_opt_number_field(L, t, "max_delay", cfg->max_delay);
        cfg->qps = luna_lua_opt_number_field(L, t, "qps", cfg->qps);
        cfg->burst = luna_lua_opt_number_field(L, t, "burst", cfg->burst);
    }
    lua_pop(L, 1);
}

static int count_list(lua_State *L, int ctl, const char *field)
{
    lua_getfield(L, ctl, field);
    int n = lua_istable(L, -1) ? (int)lua_objlen(L, -1) : 0;
    lua_pop(L, 1);
    return n;
}

/* Runs with the controller table at index 1 of a protected call. */
static int build(lua_State *L)
{
    struct luna_controller *c = lua_touserdata(L, 2);
    luna_error *err = lua_touserdata(L, 3);
    lua_getfield(L, 1, "keep_managed_fields");
    bool keep = lua_toboolean(L, -1);
    lua_pop(L, 1);

    lua_getfield(L, 1, "watch");
    int rc = add_source(c, L, lua_gettop(L), SOURCE_WATCH, keep, err);
    lua_pop(L, 1);
    const char *lists[2] = { "owns", "watches" };
    enum source_role roles[2] = { SOURCE_OWNS, SOURCE_WATCHES };
    for (int l = 0; l < 2 && rc == 0; l++) {
        lua_getfield(L, 1, lists[l]);
        int t = lua_gettop(L);
        int n = lua_istable(L, t) ? (int)lua_objlen(L, t) : 0;
        for (int i = 1; i <= n && rc == 0; i++) {
            lua_rawgeti(L, t, i);
            rc = add_source(c, L, lua_gettop(L), roles[l], keep, err);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    /* Custom indexes on the primary informer, named "<controller>/<name>"
     * so controllers sharing an informer cannot collide. */
    lua_getfield(L, 1, "indexes");
    int t = lua_gettop(L);
    if (rc == 0 && lua_istable(L, t)) {
        struct luna_indexer *idx =
            luna_informer_indexer(luna_shared_informer_informer(c->sources[0].si));
        for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
            lua_pushfstring(L, "%s/%s", c->name, lua_tostring(L, -2));
            luna_lua_store_add_index(L, idx, lua_tostring(L, -1), lua_gettop(L) - 1, &c->env.T);
            c->nindexes++;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    lua_pushinteger(L, rc);
    return 1;
}

int luna_controller_new(const struct luna_controller_env *env, int ctl_idx,
                        struct luna_controller **out, luna_error *err)
{
    lua_State *L = env->L;
    *out = NULL;
    ctl_idx = ctl_idx < 0 ? lua_gettop(L) + ctl_idx + 1 : ctl_idx;
    struct luna_controller *c = calloc(1, sizeof *c);
    if (!c)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    c->env = *env;
    c->ctl_ref = c->reconcile_ref = c->predicates_ref = LUA_NOREF;
    ev_check_init(&c->dispatch_check, dispatch_cb);
    ev_idle_init(&c->dispatch_idle, idle_cb);

    lua_getfield(L, ctl_idx, "name");
    c->name = strdup(lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_pop(L, 1);
    lua_getfield(L, ctl_idx, "workers");
    c->workers = lua_tointeger(L, -1) > 0 ? (int)lua_tointeger(L, -1) : 1;
    lua_pop(L, 1);
    c->limits = luna_watchdog_get_config(L).limits;
    lua_getfield(L, ctl_idx, "limits");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "instructions");
        if (lua_isnumber(L, -1))
            c->limits.instructions = lua_tonumber(L, -1);
        lua_getfield(L, -2, "seconds");
        if (lua_isnumber(L, -1))
            c->limits.seconds = lua_tonumber(L, -1);
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    lua_getfield(L, ctl_idx, "reconcile");
    c->reconcile_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_getfield(L, ctl_idx, "predicates");
    if (lua_istable(L, -1) && lua_objlen(L, -1) > 0)
        c->predicates_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    else
        lua_pop(L, 1);
    lua_pushvalue(L, ctl_idx);
    c->ctl_ref = luaL_ref(L, LUA_REGISTRYINDEX);

    struct luna_ratelimit_config rl;
    read_rate_limit(L, ctl_idx, &rl);
    int nsrc = 1 + count_list(L, ctl_idx, "owns") + count_list(L, ctl_idx, "watches");

    struct luna_ratelimiter *limiter = NULL;
    struct luna_workqueue_options qo = { .name = c->name, .clock = env->clock, .loop = luna_loop() };
    c->sources = calloc((size_t)nsrc, sizeof *c->sources);
    if (!c->name || !c->sources || luna_ratelimiter_new(&rl, env->clock, &limiter, err) < 0) {
        luna_controller_free(c);
        return err && err->code ? err->code : luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    qo.limiter = limiter;
    if (luna_workqueue_new(&qo, &c->queue, err) < 0) {
        luna_controller_free(c);
        return err ? err->code : LUNA_ENOMEM;
    }
    luna_workqueue_set_ready_cb(c->queue, on_ready, c);

    lua_pushcfunction(L, build);
    lua_pushvalue(L, ctl_idx);
    lua_pushlightuserdata(L, c);
    lua_pushlightuserdata(L, err);
    int rc;
    /* build reads tables the script made (rate_limit, labels): their
     * metamethods are script code */
    struct luna_watchdog_guard g = { .what = "controller setup", .owner = c->name,
                                     .limits = &c->limits };
    if (luna_watchdog_pcall(L, 3, 1, 0, &g) != 0) {
        rc = luna_error_set(err, LUNA_ELUA, "%s", lua_tostring(L, -1));
    } else {
        rc = (int)lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
    if (rc < 0) {
        luna_error_wrap(err, "controller %s", c->name);
        luna_controller_free(c);
        return rc;
    }
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

void luna_controller_start(struct luna_controller *c)
{
    if (c->started)
        return;
    c->started = true;
    char workers[16];
    snprintf(workers, sizeof workers, "%d", c->workers);
    luna_info("controller started", "controller", c->name, "workers", workers);
    kick(c);
}

void luna_controller_shutdown(struct luna_controller *c, void (*drained)(void *ud), void *ud)
{
    c->stopping = true;
    c->drained = drained;
    c->drained_ud = ud;
    ev_check_stop(luna_loop(), &c->dispatch_check);
    ev_idle_stop(luna_loop(), &c->dispatch_idle);
    luna_workqueue_shutdown(c->queue);
    maybe_drained(c);
}

struct luna_informer *luna_controller_informer_for(struct luna_controller *c,
                                                   const char *group, const char *version,
                                                   const char *kind)
{
    for (size_t i = 0; i < c->nsources; i++) {
        struct source *s = &c->sources[i];
        if (strcmp(s->group, group) == 0 && strcmp(s->version, version) == 0 &&
            strcmp(s->kind, kind) == 0)
            return luna_shared_informer_informer(s->si);
    }
    return NULL;
}

void luna_controller_free(struct luna_controller *c)
{
    if (!c)
        return;
    lua_State *L = c->env.L;
    ev_check_stop(luna_loop(), &c->dispatch_check);
    ev_idle_stop(luna_loop(), &c->dispatch_idle);
    while (c->running) {
        struct luna_reconcile *r = c->running;
        if (r->cancel)
            r->cancel(r->cancel_ud);
        if (c->queue) {
            /* An abandoned reconcile's key goes back to the queue (it has
             * a successor after a reload, or nobody after shutdown). */
            if (c->queue_borrowed)
                luna_workqueue_add(c->queue, r->key);
            luna_workqueue_done(c->queue, r->key);
        }
        luna_warn("reconcile abandoned", "controller", c->name, "key", r->key,
                  "reconcile_id", r->id);
        reconcile_free(r);
    }
    if (c->nindexes > 0 && c->nsources > 0) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, c->ctl_ref);
        lua_getfield(L, -1, "indexes");
        struct luna_indexer *idx =
            luna_informer_indexer(luna_shared_informer_informer(c->sources[0].si));
        if (lua_istable(L, -1)) {
            for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
                char name[512];
                snprintf(name, sizeof name, "%s/%s", c->name, lua_tostring(L, -2));
                luna_indexer_remove_index(idx, name);
            }
        }
        lua_pop(L, 2);
    }
    for (size_t i = 0; i < c->nsources; i++) {
        struct source *s = &c->sources[i];
        luna_informer_remove_handler(luna_shared_informer_informer(s->si), s->handler_id);
        luna_informer_factory_release(c->env.factory, s->si);
        luaL_unref(L, LUA_REGISTRYINDEX, s->map_ref);
    }
    free(c->sources);
    if (!c->queue_borrowed)
        luna_workqueue_free(c->queue);
    luaL_unref(L, LUA_REGISTRYINDEX, c->ctl_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, c->reconcile_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, c->predicates_ref);
    free(c->name);
    free(c);
}

/* ---- reload ------------------------------------------------------------- */

void luna_controller_take_queue(struct luna_controller *to, struct luna_controller *from)
{
    luna_workqueue_free(to->queue);
    to->queue = from->queue;
    from->queue_borrowed = true;
    luna_workqueue_set_ready_cb(to->queue, on_ready, to);
}

void luna_controller_retire(struct luna_controller *c, void (*drained)(void *ud), void *ud)
{
    c->stopping = true;
    c->drained = drained;
    c->drained_ud = ud;
    ev_check_stop(luna_loop(), &c->dispatch_check);
    ev_idle_stop(luna_loop(), &c->dispatch_idle);
    if (!c->queue_borrowed)
        luna_workqueue_shutdown(c->queue);
    maybe_drained(c);
}

static int enqueue_visit(struct luna_object *obj, void *ud)
{
    enqueue(ud, luna_object_key(obj));
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
