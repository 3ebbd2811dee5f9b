/*
 * lister_access — what a reconcile pays to read cached objects, by access
 * pattern, for each way luna.cache(kind):get/list could hand them to Lua
 * (issue 5: a fresh copy, or a read-only view).  Release build.
 *
 *   build/bench/lister_access [seconds=0.5]
 *
 * Prints, per object kind, access pattern and mode:
 *   bench lister_access kind=K pattern=P mode=M ns_per_op=N bytes=B
 * patterns (one op = what one reconcile does):
 *   typical  get one object; read metadata.name, namespace, resourceVersion,
 *            one label and three data/spec/status fields
 *   full     get one object and read every value in it (a deep walk)
 *   list100  list 100 objects and read metadata.name of each
 * modes:
 *   copy          what luna.cache returns today: luna_lua_json_push of the
 *                 cached JSON, a fresh table the script may change
 *   proxy         a lazy read-only view: on the first read the object's JSON
 *                 is parsed once (the yajl wrapper, a reused parser) into a C
 *                 tape; members are pushed on demand, objects and arrays as
 *                 further views (userdata with __index, __len, __newindex;
 *                 not remembered: remembering them in a table per view
 *                 measured slower)
 *   proxy_lookup  a lazy read-only view without a tape: each read finds its
 *                 value with luna_json_lookupv (a parse of the document up
 *                 to that value)
 *   proxy_table   the copy hidden behind read-only proxies, one per table,
 *                 made on access (decode once, then wrap)
 *   parse_only    (get and typical only) the yajl wrapper parsing the object
 *                 with an empty handler: the floor under copy and proxy
 * bytes is the cached JSON's size.  CPU time per op, garbage collection
 * included; the objects are realistic ConfigMaps and Deployments as the
 * API server sends them, managedFields dropped as luna's cache does.
 *
 * The proxies live here, not in host/: the measurements (README "Event
 * latency and cached objects") decided for the copy.
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "testing/lua_module.h"
#include "lua/lua_json.h"
#include "cache/object.h"

#define MAX_OBJECTS 100
#define EXACT_INT 9007199254740992.0 /* 2^53 */
#define MAX_DEPTH 1000
#define TAPE_MT "bench.tape_view"
#define LOOKUP_MT "bench.lookup_view"
#define READ_ONLY "cached objects are read-only: use luna.copy(obj)"

static struct luna_object *objects[MAX_OBJECTS + 1];
static luna_json_parser *parser;      /* reused, like lua_json's cached decoder */

static struct luna_object *object_arg(lua_State *L, int idx)
{
    lua_Integer i = luaL_checkinteger(L, idx);
    if (i < 1 || i > MAX_OBJECTS || !objects[i])
        luaL_error(L, "no object %d", (int)i);
    return objects[i];
}

/* bench.load(i, namespace, name, json) */
static int bench_load(lua_State *L)
{
    lua_Integer i = luaL_checkinteger(L, 1);
    size_t len;
    const char *json = luaL_checklstring(L, 4, &len);
    struct luna_object_fields f = {
        .namespace_ = luaL_checkstring(L, 2), .name = luaL_checkstring(L, 3),
        .json = json, .json_len = len,
    };
    luna_error err;
    if (i < 1 || i > MAX_OBJECTS)
        return luaL_error(L, "index out of range");
    luna_object_unref(objects[i]);
    objects[i] = NULL;
    if (luna_object_new(&f, &objects[i], &err) < 0)
        return luaL_error(L, "%s", err.msg);
    return 0;
}

/* ---- copy ------------------------------------------------------------------ */

static int bench_copy(lua_State *L)
{
    struct luna_object *o = object_arg(L, 1);
    luna_error err;
    if (luna_lua_json_push(L, luna_object_json(o), o->json_len, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    return 1;
}

/* ---- parse only ------------------------------------------------------------ */

static int no_event(void *ud, const luna_json_event *ev, luna_error *err) { return 0; }

struct trampoline {
    luna_json_handler fn;
    void *ud;
};

static struct trampoline current;

static int trampoline(void *ud, const luna_json_event *ev, luna_error *err)
{
    return current.fn(current.ud, ev, err);
}

static int parse_object(const struct luna_object *o, luna_json_handler fn, void *ud,
                        luna_error *err)
{
    luna_json_options opts = { .max_depth = MAX_DEPTH };
    if (!parser && !(parser = luna_json_parser_new(&opts, trampoline, NULL)))
        return LUNA_ENOMEM;
    current.fn = fn;
    current.ud = ud;
    int rc = luna_json_parser_reset(parser, NULL);
    if (rc == 0)
        rc = luna_json_parser_feed(parser, luna_object_json(o), o->json_len, err);
    if (rc == 0)
        rc = luna_json_parser_finish(parser, err);
    return rc;
}

static int bench_parse_only(lua_State *L)
{
    luna_error err;
    if (parse_object(object_arg(L, 1), no_event, NULL, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    return 0;
}

/* ---- proxy: a tape parsed on first read ------------------------------------ */

struct vnode {
    uint32_t next;      /* the next member of the same container; 0: none */
    uint32_t n;         /* OBJECT/ARRAY: number of members */
    uint32_t key, key_len; /* object members: key text in the pool */
    uint32_t a, b;      /* STRING/NUMBER: pool offset and length */
    double d;           /* NUMBER, when exact */
    uint8_t type;       /* luna_json_event_type (OBJECT_START/ARRAY_START) */
    uint8_t exact;
};

struct tape {
    int refs;
    struct luna_object *obj;
    struct vnode *nodes;       /* NULL until built */
    uint32_t nnodes, cap;
    char *pool;
    size_t plen, pcap;
};

struct view {
    struct tape *t;
    uint32_t node;
    uint32_t walk_i, walk_node; /* arrays: the last element reached */
};

struct builder {
    struct tape *t;
    uint32_t key, key_len;
    int depth;
    uint32_t open[MAX_DEPTH], last[MAX_DEPTH];
};

static struct builder the_builder;

static int pool_add(struct tape *t, const char *s, size_t len, uint32_t *off)
{
    if (t->plen + len + 1 > t->pcap) {
        size_t cap = t->pcap ? t->pcap : 1024;
        while (cap < t->plen + len + 1)
            cap *= 2;
        char *p = realloc(t->pool, cap);
        if (!p)
            return LUNA_ENOMEM;
        t->pool = p;
        t->pcap = cap;
    }
    memcpy(t->pool + t->plen, s, len);
    t->pool[t->plen + len] = '\0';
    *off = (uint32_t)t->plen;
    t->plen += len + 1;
    return 0;
}

static int add_node(struct builder *b, enum luna_json_event_type type, uint32_t *out)
{
    struct tape *t = b->t;
    if (t->nnodes == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 128;
        struct vnode *v = realloc(t->nodes, cap * sizeof *v);
        if (!v)
            return LUNA_ENOMEM;
        t->nodes = v;
        t->cap = cap;
    }
    uint32_t i = t->nnodes++;
    struct vnode *nd = &t->nodes[i];
    memset(nd, 0, sizeof *nd);
    nd->type = (uint8_t)type;
    if (b->depth > 0) {
        int d = b->depth - 1;
        if (b->last[d])
            t->nodes[b->last[d]].next = i;
        b->last[d] = i;
        t->nodes[b->open[d]].n++;
        nd->key = b->key;
        nd->key_len = b->key_len;
    }
    *out = i;
    return 0;
}

static int build_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct builder *b = ud;
    struct tape *t = b->t;
    uint32_t i;
    switch (ev->type) {
    case LUNA_JSON_KEY:
        b->key_len = (uint32_t)ev->len;
        return pool_add(t, ev->str, ev->len, &b->key);
    case LUNA_JSON_OBJECT_START:
    case LUNA_JSON_ARRAY_START:
        if (add_node(b, ev->type, &i) < 0)
            return LUNA_ENOMEM;
        b->open[b->depth] = i;
        b->last[b->depth] = 0;
        b->depth++;
        return 0;
    case LUNA_JSON_OBJECT_END:
    case LUNA_JSON_ARRAY_END:
        b->depth--;
        return 0;
    default:
        if (add_node(b, ev->type, &i) < 0)
            return LUNA_ENOMEM;
        break;
    }
    if (ev->type == LUNA_JSON_STRING || ev->type == LUNA_JSON_NUMBER) {
        uint32_t off;
        if (pool_add(t, ev->str, ev->len, &off) < 0)
            return LUNA_ENOMEM;
        t->nodes[i].a = off;
        t->nodes[i].b = (uint32_t)ev->len;
    }
    if (ev->type == LUNA_JSON_NUMBER &&
        (ev->kind == LUNA_JSON_DOUBLE ||
         (ev->kind == LUNA_JSON_INT && ev->i >= -(int64_t)EXACT_INT &&
          ev->i <= (int64_t)EXACT_INT))) {
        t->nodes[i].d = ev->d;
        t->nodes[i].exact = 1;
    }
    return 0;
}

static void ensure_built(lua_State *L, struct tape *t)
{
    if (t->nodes)
        return;
    struct builder *b = &the_builder;
    b->t = t;
    b->depth = 0;
    b->key = b->key_len = 0;
    luna_error err = { 0 };
    if (parse_object(t->obj, build_event, b, &err) < 0 || t->nnodes == 0) {
        free(t->nodes);
        t->nodes = NULL;
        t->nnodes = t->cap = 0;
        t->plen = 0;
        luaL_error(L, "cached object %s: %s", luna_object_key(t->obj), err.msg);
    }
}

static void tape_unref(struct tape *t)
{
    if (--t->refs > 0)
        return;
    luna_object_unref(t->obj);
    free(t->nodes);
    free(t->pool);
    free(t);
}

static struct view *new_view(lua_State *L)
{
    struct view *v = lua_newuserdata(L, sizeof *v);
    memset(v, 0, sizeof *v);
    luaL_getmetatable(L, TAPE_MT);
    lua_setmetatable(L, -2);
    return v;
}

static int bench_view(lua_State *L)
{
    struct luna_object *o = object_arg(L, 1);
    struct view *v = new_view(L);
    struct tape *t = calloc(1, sizeof *t);
    if (!t)
        return luaL_error(L, "out of memory");
    t->obj = luna_object_ref(o);
    t->refs = 1;
    v->t = t;
    return 1;
}

static void push_node(lua_State *L, struct tape *t, uint32_t i)
{
    const struct vnode *nd = &t->nodes[i];
    switch (nd->type) {
    case LUNA_JSON_NULL:
        lua_pushlightuserdata(L, NULL);
        return;
    case LUNA_JSON_TRUE:
    case LUNA_JSON_FALSE:
        lua_pushboolean(L, nd->type == LUNA_JSON_TRUE);
        return;
    case LUNA_JSON_STRING:
        lua_pushlstring(L, t->pool + nd->a, nd->b);
        return;
    case LUNA_JSON_NUMBER:
        if (nd->exact) {
            lua_pushnumber(L, nd->d);
        } else {
            luna_error err;
            if (luna_lua_json_push(L, t->pool + nd->a, nd->b, &err) < 0)
                luaL_error(L, "%s", err.msg);
        }
        return;
    default: {
        struct view *v = new_view(L);
        v->t = t;
        v->node = i;
        t->refs++;
        return;
    }
    }
}

static uint32_t find_member(lua_State *L, struct view *v, int k)
{
    struct tape *t = v->t;
    const struct vnode *c = &t->nodes[v->node];
    if (c->n == 0)
        return 0;
    if (c->type == LUNA_JSON_OBJECT_START) {
        if (lua_type(L, k) != LUA_TSTRING)
            return 0;
        size_t len;
        const char *s = lua_tolstring(L, k, &len);
        for (uint32_t i = v->node + 1; i; i = t->nodes[i].next)
            if (t->nodes[i].key_len == len && memcmp(t->pool + t->nodes[i].key, s, len) == 0)
                return i;
        return 0;
    }
    if (lua_type(L, k) != LUA_TNUMBER)
        return 0;
    lua_Number n = lua_tonumber(L, k);
    if (n < 1 || n > c->n || n != (lua_Number)(uint32_t)n)
        return 0;
    uint32_t want = (uint32_t)n, at = 1, i = v->node + 1;
    if (v->walk_i && v->walk_i <= want) {
        at = v->walk_i;
        i = v->walk_node;
    }
    for (; at < want; at++)
        i = t->nodes[i].next;
    v->walk_i = at;
    v->walk_node = i;
    return i;
}

static int view_index(lua_State *L)
{
    struct view *v = lua_touserdata(L, 1);
    ensure_built(L, v->t);
    uint32_t i = find_member(L, v, 2);
    if (!i) {
        lua_pushnil(L);
        return 1;
    }
    push_node(L, v->t, i);
    return 1;
}

static int view_len(lua_State *L)
{
    struct view *v = lua_touserdata(L, 1);
    ensure_built(L, v->t);
    const struct vnode *nd = &v->t->nodes[v->node];
    lua_pushinteger(L, nd->type == LUNA_JSON_ARRAY_START ? (lua_Integer)nd->n : 0);
    return 1;
}

static int view_gc(lua_State *L)
{
    struct view *v = lua_touserdata(L, 1);
    if (v->t)
        tape_unref(v->t);
    v->t = NULL;
    return 0;
}

/* iter(view, previous key): upvalue 1 the next member's node (0: done),
 * upvalue 2 its position. */
static int view_iter(lua_State *L)
{
    struct view *v = luaL_checkudata(L, 1, TAPE_MT);
    uint32_t i = (uint32_t)lua_tointeger(L, lua_upvalueindex(1));
    lua_Integer pos = lua_tointeger(L, lua_upvalueindex(2));
    if (!i)
        return 0;
    struct tape *t = v->t;
    lua_pushinteger(L, t->nodes[i].next);
    lua_replace(L, lua_upvalueindex(1));
    lua_pushinteger(L, pos + 1);
    lua_replace(L, lua_upvalueindex(2));
    if (t->nodes[v->node].type == LUNA_JSON_OBJECT_START)
        lua_pushlstring(L, t->pool + t->nodes[i].key, t->nodes[i].key_len);
    else
        lua_pushinteger(L, pos + 1);
    push_node(L, t, i);
    return 2;
}

/* bench.pairs(v): pairs for a view (an object's members, an array's
 * elements in order); next for anything else. */
static int bench_pairs(lua_State *L)
{
    struct view *v = luaL_testudata(L, 1, TAPE_MT);
    if (!v) {
        lua_getglobal(L, "next");
        lua_pushvalue(L, 1);
        lua_pushnil(L);
        return 3;
    }
    ensure_built(L, v->t);
    lua_pushinteger(L, v->t->nodes[v->node].n ? v->node + 1 : 0);
    lua_pushinteger(L, 0);
    lua_pushcclosure(L, view_iter, 2);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

static int bench_is_view(lua_State *L)
{
    lua_pushboolean(L, luaL_testudata(L, 1, TAPE_MT) != NULL);
    return 1;
}

static int read_only(lua_State *L) { return luaL_error(L, READ_ONLY); }

/* ---- proxy_lookup: a path, resolved per read ------------------------------- */

#define MAX_SEGS 16

struct lookup {
    struct luna_object *obj;
    int nsegs;
    char *segs[MAX_SEGS];
};

static int lookup_gc(lua_State *L)
{
    struct lookup *lk = lua_touserdata(L, 1);
    for (int i = 0; i < lk->nsegs; i++)
        free(lk->segs[i]);
    lk->nsegs = 0;
    luna_object_unref(lk->obj);
    lk->obj = NULL;
    return 0;
}

static struct lookup *new_lookup(lua_State *L, struct luna_object *o)
{
    struct lookup *lk = lua_newuserdata(L, sizeof *lk);
    memset(lk, 0, sizeof *lk);
    luaL_getmetatable(L, LOOKUP_MT);
    lua_setmetatable(L, -2);
    lk->obj = luna_object_ref(o);
    return lk;
}

static int bench_lookup(lua_State *L)
{
    new_lookup(L, object_arg(L, 1));
    return 1;
}

static int lookup_index(lua_State *L)
{
    struct lookup *lk = lua_touserdata(L, 1);
    char seg[32];
    const char *key;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        snprintf(seg, sizeof seg, "%ld", (long)lua_tointeger(L, 2) - 1);
        key = seg;
    } else if (lua_type(L, 2) == LUA_TSTRING) {
        key = lua_tostring(L, 2);
    } else {
        lua_pushnil(L);
        return 1;
    }
    if (lk->nsegs + 1 > MAX_SEGS)
        return luaL_error(L, "path too deep");
    const char *segs[MAX_SEGS];
    for (int i = 0; i < lk->nsegs; i++)
        segs[i] = lk->segs[i];
    segs[lk->nsegs] = key;
    static char buf[65536];
    luna_json_value val;
    luna_error err;
    int rc = luna_json_lookupv(luna_object_json(lk->obj), lk->obj->json_len, segs,
                               (size_t)lk->nsegs + 1, &val, buf, sizeof buf, &err);
    if (rc == LUNA_ENOTFOUND) {
        lua_pushnil(L);
        return 1;
    }
    if (rc < 0)
        return luaL_error(L, "%s", err.msg);
    switch (val.type) {
    case LUNA_JSON_NULL: lua_pushlightuserdata(L, NULL); return 1;
    case LUNA_JSON_TRUE: lua_pushboolean(L, 1); return 1;
    case LUNA_JSON_FALSE: lua_pushboolean(L, 0); return 1;
    case LUNA_JSON_STRING: lua_pushlstring(L, buf, val.len); return 1;
    case LUNA_JSON_NUMBER:
        if (luna_lua_json_push(L, buf, val.len, &err) < 0)
            return luaL_error(L, "%s", err.msg);
        return 1;
    default: break;
    }
    struct lookup *child = new_lookup(L, lk->obj);
    for (int i = 0; i <= lk->nsegs; i++) {
        if (!(child->segs[i] = strdup(segs[i])))
            return luaL_error(L, "out of memory");
        child->nsegs = i + 1;
    }
    return 1;
}

/* ---- the patterns ----------------------------------------------------------- */

static const char patterns_lua[] =
    "local bench, core = ...\n"
    "local seconds = bench.seconds\n"
    "local function configmap(i)\n"
    "  return ([[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"app-config-%05d\",\"namespace\":\"prod\",]] ..\n"
    "    [[\"uid\":\"5d0e2c7a-%04x-4b6f-9f1e-3c2a1b0d9e8f\",\"resourceVersion\":\"%d\",\"creationTimestamp\":\"2024-05-01T10:00:00Z\",]] ..\n"
    "    [[\"labels\":{\"app.kubernetes.io/name\":\"shop\",\"app.kubernetes.io/component\":\"api\",\"app.kubernetes.io/part-of\":\"shop\",]] ..\n"
    "    [[\"luna.dev/mirror\":\"true\"},\"annotations\":{\"luna.dev/mirror-to\":\"staging,qa\",\"kubectl.kubernetes.io/last-applied-configuration\":]] ..\n"
    "    [[\"{\\\"apiVersion\\\":\\\"v1\\\",\\\"kind\\\":\\\"ConfigMap\\\",\\\"metadata\\\":{\\\"name\\\":\\\"app-config\\\",\\\"namespace\\\":\\\"prod\\\"}}\\n\"}},]] ..\n"
    "    [[\"data\":{\"LOG_LEVEL\":\"info\",\"DATABASE_URL\":\"postgres://shop@db.prod.svc:5432/shop\",\"CACHE_TTL\":\"300\",]] ..\n"
    "    [[\"FEATURE_FLAGS\":\"checkout-v2,search-v3,recommendations\",\"config.yaml\":\"server:\\n  port: 8080\\n  timeout: 30s\\n]] ..\n"
    "    [[limits:\\n  requests_per_second: 500\\n  burst: 1000\\n\",\"MAX_CONNECTIONS\":\"100\"}}]]):format(i, i % 65536, 1000 + i)\n"
    "end\n"
    "local function deployment(i)\n"
    "  return ([[{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"shop-api-%05d\",\"namespace\":\"prod\",]] ..\n"
    "    [[\"uid\":\"8a1f3b2c-%04x-4d5e-8f90-a1b2c3d4e5f6\",\"resourceVersion\":\"%d\",\"generation\":7,]] ..\n"
    "    [[\"creationTimestamp\":\"2024-05-01T10:00:00Z\",\"labels\":{\"app.kubernetes.io/name\":\"shop\",\"app.kubernetes.io/component\":\"api\"},]] ..\n"
    "    [[\"annotations\":{\"deployment.kubernetes.io/revision\":\"7\",\"luna.dev/secret-checksum\":\"db-creds\"}},]] ..\n"
    "    [[\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":{\"app.kubernetes.io/name\":\"shop\",\"app.kubernetes.io/component\":\"api\"}},]] ..\n"
    "    [[\"template\":{\"metadata\":{\"labels\":{\"app.kubernetes.io/name\":\"shop\",\"app.kubernetes.io/component\":\"api\"},]] ..\n"
    "    [[\"annotations\":{\"prometheus.io/scrape\":\"true\",\"prometheus.io/port\":\"8080\"}},\"spec\":{\"serviceAccountName\":\"shop-api\",]] ..\n"
    "    [[\"containers\":[{\"name\":\"api\",\"image\":\"registry.example.com/shop/api:1.42.0\",\"args\":[\"--port=8080\",\"--log-format=json\"],]] ..\n"
    "    [[\"ports\":[{\"name\":\"http\",\"containerPort\":8080,\"protocol\":\"TCP\"},{\"name\":\"metrics\",\"containerPort\":9090,\"protocol\":\"TCP\"}],]] ..\n"
    "    [[\"env\":[{\"name\":\"POD_NAME\",\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"metadata.name\"}}},]] ..\n"
    "    [[{\"name\":\"DATABASE_PASSWORD\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"db-creds\",\"key\":\"password\"}}},]] ..\n"
    "    [[{\"name\":\"GOMAXPROCS\",\"value\":\"2\"}],\"resources\":{\"requests\":{\"cpu\":\"250m\",\"memory\":\"256Mi\"},]] ..\n"
    "    [[\"limits\":{\"cpu\":\"1\",\"memory\":\"512Mi\"}},\"readinessProbe\":{\"httpGet\":{\"path\":\"/readyz\",\"port\":8080,\"scheme\":\"HTTP\"},]] ..\n"
    "    [[\"periodSeconds\":10,\"timeoutSeconds\":1,\"successThreshold\":1,\"failureThreshold\":3},]] ..\n"
    "    [[\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\"}],]] ..\n"
    "    [[\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\",\"securityContext\":{\"runAsNonRoot\":true}}},]] ..\n"
    "    [[\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":\"25%%\",\"maxSurge\":\"25%%\"}},]] ..\n"
    "    [[\"revisionHistoryLimit\":10,\"progressDeadlineSeconds\":600},\"status\":{\"observedGeneration\":7,\"replicas\":3,]] ..\n"
    "    [[\"updatedReplicas\":3,\"readyReplicas\":3,\"availableReplicas\":3,\"conditions\":[{\"type\":\"Available\",\"status\":\"True\",]] ..\n"
    "    [[\"lastUpdateTime\":\"2024-05-02T08:00:00Z\",\"lastTransitionTime\":\"2024-05-02T08:00:00Z\",\"reason\":\"MinimumReplicasAvailable\",]] ..\n"
    "    [[\"message\":\"Deployment has minimum availability.\"},{\"type\":\"Progressing\",\"status\":\"True\",]] ..\n"
    "    [[\"lastUpdateTime\":\"2024-05-03T09:00:00Z\",\"lastTransitionTime\":\"2024-05-01T10:00:00Z\",\"reason\":\"NewReplicaSetAvailable\",]] ..\n"
    "    [[\"message\":\"ReplicaSet \\\"shop-api-7d9f8c6b5\\\" has successfully progressed.\"}]}}]]):format(i, i % 65536, 5000 + i)\n"
    "end\n"
    "local KINDS = {\n"
    "  { name = 'ConfigMap', make = configmap, typical = function(o)\n"
    "      local m = o.metadata\n"
    "      return m.name, m.namespace, m.resourceVersion, m.labels['app.kubernetes.io/name'],\n"
    "        o.data.LOG_LEVEL, o.data.CACHE_TTL, o.data['config.yaml']\n"
    "    end },\n"
    "  { name = 'Deployment', make = deployment, typical = function(o)\n"
    "      local m = o.metadata\n"
    "      return m.name, m.namespace, m.resourceVersion, m.labels['app.kubernetes.io/name'],\n"
    "        o.spec.replicas, o.spec.template.spec.containers[1].image, o.status.readyReplicas\n"
    "    end },\n"
    "}\n"
    /* proxy_table: the decoded table behind one read-only proxy per table */
    "local Ro = {}\n"
    "local function ro(t) return setmetatable({ [Ro] = t }, Ro) end\n"
    "Ro.__index = function(self, k)\n"
    "  local v = self[Ro][k]\n"
    "  if type(v) == 'table' then v = ro(v); rawset(self, k, v) end\n"
    "  return v\n"
    "end\n"
    "Ro.__newindex = function() error('cached objects are read-only: use luna.copy(obj)', 2) end\n"
    "local function walk_table(v)\n"
    "  if type(v) ~= 'table' then return 1 end\n"
    "  local n = 0\n"
    "  for _, x in pairs(v) do n = n + walk_table(x) end\n"
    "  return n\n"
    "end\n"
    "local function walk_view(v)\n"
    "  if not bench.is_view(v) then return 1 end\n"
    "  local n = 0\n"
    "  for _, x in bench.pairs(v) do n = n + walk_view(x) end\n"
    "  return n\n"
    "end\n"
    "local function walk_ro(v)\n"
    "  if type(v) ~= 'table' or getmetatable(v) ~= Ro then return 1 end\n"
    "  local n = 0\n"
    "  for k in pairs(v[Ro]) do n = n + walk_ro(v[k]) end\n"
    "  return n\n"
    "end\n"
    /* a lookup view cannot enumerate: the keys come from a decoded copy */
    "local function walk_lookup(v, shape)\n"
    "  if type(shape) ~= 'table' then return 1 end\n"
    "  local n = 0\n"
    "  for k, x in pairs(shape) do n = n + walk_lookup(v[k], x) end\n"
    "  return n\n"
    "end\n"
    "local function measure(fn)\n"
    "  for _ = 1, 300 do fn() end\n"
    "  collectgarbage()\n"
    "  local iters, elapsed, t0 = 0, 0, os.clock()\n"
    "  repeat\n"
    "    for _ = 1, 20 do fn() end\n"
    "    iters = iters + 20\n"
    "    elapsed = os.clock() - t0\n"
    "  until elapsed >= seconds\n"
    "  return elapsed / iters * 1e9\n"
    "end\n"
    "local sink\n"
    "for _, kind in ipairs(KINDS) do\n"
    "  local bytes\n"
    "  for i = 1, 100 do\n"
    "    local json = kind.make(i)\n"
    "    local t = assert(core.json.decode(json))\n"
    "    bench.load(i, t.metadata.namespace, t.metadata.name, json)\n"
    "    bytes = bytes or #json\n"
    "  end\n"
    "  local shape = bench.copy(1)\n"
    "  local get = { copy = bench.copy, proxy = bench.view, proxy_lookup = bench.lookup,\n"
    "                proxy_table = function(i) return ro(bench.copy(i)) end }\n"
    "  local walk = { copy = walk_table, proxy = walk_view, proxy_table = walk_ro,\n"
    "                 proxy_lookup = function(v) return walk_lookup(v, shape) end }\n"
    "  local expect = { kind.typical(shape) }\n"
    "  for mode, g in pairs(get) do\n"
    "    local got = { kind.typical(g(1)) }\n"
    "    for i = 1, #expect do assert(got[i] == expect[i], mode .. ': read ' .. i) end\n"
    "    assert(walk[mode](g(1)) == walk_table(shape), mode .. ': walk')\n"
    "    assert(not pcall(function() g(1).metadata.name = 'x' end) or mode == 'copy', mode .. ': writable')\n"
    "  end\n"
    "  local function report(pattern, mode, ns)\n"
    "    print(string.format('bench lister_access kind=%s pattern=%s mode=%s ns_per_op=%.0f bytes=%d',\n"
    "      kind.name, pattern, mode, ns, bytes))\n"
    "  end\n"
    "  for _, pattern in ipairs({ 'typical', 'full', 'list100' }) do\n"
    "    for _, mode in ipairs({ 'copy', 'proxy', 'proxy_lookup', 'proxy_table' }) do\n"
    "      local g, fn = get[mode]\n"
    "      if pattern == 'typical' then\n"
    "        fn = function() sink = kind.typical(g(1)) end\n"
    "      elseif pattern == 'full' then\n"
    "        local w = walk[mode]\n"
    "        fn = function() sink = w(g(1)) end\n"
    "      else\n"
    "        fn = function()\n"
    "          local n = 0\n"
    "          for i = 1, 100 do if g(i).metadata.name then n = n + 1 end end\n"
    "          sink = n\n"
    "        end\n"
    "      end\n"
    "      report(pattern, mode, measure(fn))\n"
    "    end\n"
    "  end\n"
    "  report('get', 'parse_only', measure(function() bench.parse_only(1) end))\n"
    "end\n";

int main(int argc, char **argv)
{
    double seconds = 0.5;
    for (int i = 1; i < argc; i++) {
        if (sscanf(argv[i], "seconds=%lf", &seconds) != 1 || seconds <= 0) {
            fprintf(stderr, "usage: lister_access [seconds=S]\n");
            return 1;
        }
    }
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    luaL_newmetatable(L, TAPE_MT);
    lua_pushcfunction(L, view_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, read_only);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, view_len);
    lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, view_gc);
    lua_setfield(L, -2, "__gc");
    luaL_newmetatable(L, LOOKUP_MT);
    lua_pushcfunction(L, lookup_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, read_only);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, lookup_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 2);

    if (luaL_loadbuffer(L, patterns_lua, sizeof patterns_lua - 1, "=lister_access") != 0) {
        fprintf(stderr, "lister_access: %s\n", lua_tostring(L, -1));
        return 1;
    }
    static const luaL_Reg funcs[] = {
        { "load", bench_load }, { "copy", bench_copy }, { "view", bench_view },
        { "lookup", bench_lookup }, { "parse_only", bench_parse_only },
        { "pairs", bench_pairs }, { "is_view", bench_is_view }, { NULL, NULL },
    };
    lua_newtable(L);
    for (const luaL_Reg *r = funcs; r->name; r++) {
        lua_pushcfunction(L, r->func);
        lua_setfield(L, -2, r->name);
    }
    lua_pushnumber(L, seconds);
    lua_setfield(L, -2, "seconds");
    lua_pushcfunction(L, luaopen_luna_core);
    lua_call(L, 0, 1);
    if (lua_pcall(L, 2, 0, 0) != 0) {
        fprintf(stderr, "lister_access: %s\n", lua_tostring(L, -1));
        return 1;
    }
    lua_close(L);
    for (int i = 1; i <= MAX_OBJECTS; i++)
        luna_object_unref(objects[i]);
    luna_json_parser_free(parser);
    return 0;
}
