/* controller/sources.c — events to keys: what a controller enqueues for an
 * informer event (predicates, owner references, watches map functions), and
 * the tombstones uid sharding keeps (controller_impl.h). */

#include "base/log.h"
#include "cluster/shard_set.h"
#include "controller/controller_impl.h"
#include "lua/lua_json.h"
#include "lua/lua_util.h"
#include "queue/workqueue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* The controller whose predicate or map function is running, if any. */
static struct luna_controller *in_handler;

struct luna_controller *luna_controller_in_handler(void) { return in_handler; }

/* The webhook running now, if any (its name, borrowed from its state). */
static const char *in_webhook;

struct luna_controller_scope luna_controller_webhook_enter(struct luna_controller *c,
                                                           const char *name)
{
    struct luna_controller_scope outer = { in_handler, in_webhook };
    in_handler = c;
    in_webhook = name;
    return outer;
}

void luna_controller_webhook_leave(struct luna_controller_scope outer)
{
    in_handler = outer.c;
    in_webhook = outer.webhook;
}

const char *luna_controller_in_webhook(void) { return in_webhook; }

struct tombstone {
    char *key;
    char uid[64];
    UT_hash_handle hh;
};

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

void luna_controller_enqueue(struct luna_controller *c, const char *key, int priority)
{
    if (luna_log_enabled(LUNA_LOG_DEBUG)) {
        char prio[16];
        snprintf(prio, sizeof prio, "%d", priority);
        luna_debug("enqueue", "controller", c->name, "key", key, LUNA_LOG_NUM("priority"), prio);
    }
    if (luna_workqueue_add_priority(c->queue, key, priority) == LUNA_ENOMEM)
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
        luna_watchdog_collect(T);
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
        luna_controller_enqueue(c, key, priority);
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
        luna_controller_enqueue(c, key, priority);
        return;
    }
    /* a list: its good items are enqueued, a bad one is reported */
    bool bad = false;
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(T, idx, (int)i);
        if (request_key(T, lua_gettop(T), key))
            luna_controller_enqueue(c, key, priority);
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
            luna_controller_enqueue(c, luna_object_key(obj), priority);
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

void luna_controller_tombstone_drop(struct luna_controller *c, const char *key)
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
bool luna_controller_key_owned(struct luna_controller *c, const char *key)
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
bool luna_controller_shard_waits(const struct luna_controller *c)
{
    return c->sharding && !luna_shard_set_acting(c->sharding);
}

/* Acquires the informer of c's next source and adds the handlers. */
int luna_controller_source_add(struct luna_controller *c, const struct luna_source_spec *ss,
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
void luna_controller_handlers_add(struct luna_controller *c)
{
    for (size_t i = 0; i < c->nsources; i++) {
        struct source *src = &c->sources[i];
        /* resync is the handler's own (informer.h): a neighbour sharing
         * the informer neither takes nor imposes it; only the primary
         * source resyncs, as controller-runtime's Kind source does */
        struct luna_informer_handler h = {
            on_add, on_update, on_delete, src, luna_controller_on_batch_end,
            src->spec->role == LUNA_SOURCE_WATCH ? c->spec->resync : 0,
        };
        src->handler_id = luna_informer_add_handler(luna_shared_informer_informer(src->si), &h);
    }
}

void luna_controller_sources_free(struct luna_controller *c)
{
    for (size_t i = 0; i < c->nsources; i++) {
        struct source *s = &c->sources[i];
        if (s->handler_id > 0)
            luna_informer_remove_handler(luna_shared_informer_informer(s->si), s->handler_id);
        luna_informer_factory_release(c->env.factory, s->si);
    }
    free(c->sources);
    c->sources = NULL;
    c->nsources = 0;
    struct tombstone *t, *ttmp;
    HASH_ITER(hh, c->tombstones, t, ttmp) {
        HASH_DEL(c->tombstones, t);
        free(t->key);
        free(t);
    }
}
