/* lua_metrics.c — see lua_metrics.h. */
#include "testing/lua_metrics.h"

#include <lauxlib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "lua/lua_util.h"
#include "serve/metrics.h"
#include "base/textbuf.h"

#define REGISTRY_MT "luna.metrics"
#define FAMILY_MT "luna.metrics.family"
#define CHILD_MT "luna.metrics.child"

struct lua_registry {
    struct luna_metrics *reg;      /* owned */
    struct luna_textbuf buf;       /* render output, reused */
    bool rendering;                /* buf is being written */
};
struct lua_family { struct luna_metric_family *f; };       /* a reference */
struct lua_child { struct luna_metric_child *c; };         /* a reference */

/* The state of the binding call in progress: what function series are
 * called with and release their Lua function on.  Set by every entry point
 * that can render, read a value or destroy a series. */
static lua_State *current;

lua_State *luna_lua_metrics_enter(lua_State *L)
{
    lua_State *outer = current;
    current = L;
    return outer;
}

void luna_lua_metrics_leave(lua_State *outer) { current = outer; }

static const void *universe(lua_State *L)
{
    lua_pushvalue(L, LUA_REGISTRYINDEX);
    const void *p = lua_topointer(L, -1);
    lua_pop(L, 1);
    return p;
}

/* ---- function series ------------------------------------------------------ */

struct luna_lua_metrics_fn {
    int ref;                 /* the function, in the Lua registry */
    const void *universe;
};

struct luna_lua_metrics_fn *luna_lua_metrics_fn_new(lua_State *L, int idx)
{
    struct luna_lua_metrics_fn *fn = malloc(sizeof *fn);
    if (!fn)
        return NULL;
    lua_pushvalue(L, idx);
    fn->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    fn->universe = universe(L);
    return fn;
}

void luna_lua_metrics_fn_discard(lua_State *L, struct luna_lua_metrics_fn *fn)
{
    luaL_unref(L, LUA_REGISTRYINDEX, fn->ref);
    free(fn);
}

double luna_lua_metrics_fn_call(void *ud)
{
    struct luna_lua_metrics_fn *fn = ud;
    lua_State *L = current;
    if (!L || universe(L) != fn->universe || !lua_checkstack(L, 4))
        return NAN;
    lua_rawgeti(L, LUA_REGISTRYINDEX, fn->ref);
    if (luna_lua_pcall(L, 0, 1, "metrics function"))
        return NAN;
    double v = NAN;
    if (lua_type(L, -1) == LUA_TNUMBER)
        v = lua_tonumber(L, -1);
    else
        luna_warn("metrics function returned no number", "type", luaL_typename(L, -1));
    lua_pop(L, 1);
    return v;
}

void luna_lua_metrics_fn_release(void *ud)
{
    struct luna_lua_metrics_fn *fn = ud;
    if (current && universe(current) == fn->universe)
        luaL_unref(current, LUA_REGISTRYINDEX, fn->ref);
    free(fn);
}

/* ---- argument helpers ------------------------------------------------------- */

static struct lua_registry *check_registry(lua_State *L, int idx)
{
    struct lua_registry *r = luaL_checkudata(L, idx, REGISTRY_MT);
    if (!r->reg)
        luaL_error(L, "metrics registry is closed");
    return r;
}

struct luna_metrics *luna_lua_metrics_check(lua_State *L, int idx)
{
    return check_registry(L, idx)->reg;
}

static struct luna_metric_family *check_family(lua_State *L)
{
    return ((struct lua_family *)luaL_checkudata(L, 1, FAMILY_MT))->f;
}

static struct luna_metric_child *check_child(lua_State *L)
{
    return ((struct lua_child *)luaL_checkudata(L, 1, CHILD_MT))->c;
}

const char *luna_lua_metrics_check_string(lua_State *L, int idx, const char *what)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_error(L, "metrics: %s must be a string, got %s", what, luaL_typename(L, idx));
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    if (strlen(s) != len)
        luaL_error(L, "metrics: %s must not contain NUL bytes", what);
    return s;
}

lua_Number luna_lua_metrics_check_number(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TNUMBER)
        luaL_typerror(L, idx, "number");
    return lua_tonumber(L, idx);
}

/* Label values from arguments first.. into values (NULL-ended). */
static void check_values(lua_State *L, int first, const char **values)
{
    int top = lua_gettop(L);
    int n = top >= first ? top - first + 1 : 0;
    if (n > LUNA_METRICS_MAX_LABELS)
        luaL_error(L, "metrics: %d label values (at most %d)", n, LUNA_METRICS_MAX_LABELS);
    for (int i = 0; i < n; i++) {
        if (lua_type(L, first + i) != LUA_TSTRING)
            luaL_error(L, "metrics: label value #%d must be a string, got %s", i + 1,
                       luaL_typename(L, first + i));
        values[i] = luna_lua_metrics_check_string(L, first + i, "a label value");
    }
    values[n] = NULL;
}

/* Raises for misuse (EINVAL), returns nil, err otherwise. */
int luna_lua_metrics_fail(lua_State *L, int rc, const luna_error *err)
{
    if (rc == LUNA_EINVAL)
        return luaL_error(L, "%s", err->msg);
    return luna_lua_push_error(L, luna_errcode_name(rc), err->msg, rc);
}

/* Pushes a new userdata of size with metatable mt sharing the environment
 * of the object at idx (or a new table { owner } if share is false). */
void *luna_lua_metrics_push_object(lua_State *L, size_t size, const char *mt, int idx, int share)
{
    idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
    void *p = lua_newuserdata(L, size);
    memset(p, 0, size);
    luaL_getmetatable(L, mt);
    lua_setmetatable(L, -2);
    if (share) {
        lua_getfenv(L, idx);
    } else {
        lua_createtable(L, 1, 0);
        lua_pushvalue(L, idx);
        lua_rawseti(L, -2, 1);
    }
    lua_setfenv(L, -2);
    return p;
}

/* The result of an unregister or remove: raises if it was refused during
 * a render (LUNA_EINVAL), else pushes whether something was removed. */
static int push_removed(lua_State *L, int rc, const char *what)
{
    if (rc == LUNA_EINVAL)
        return luaL_error(L, "metrics: cannot %s during a render", what);
    lua_pushboolean(L, rc == 0);
    return 1;
}

/* ---- registry --------------------------------------------------------------- */

static int luna_lua_metrics_new(lua_State *L)
{
    struct lua_registry *r = lua_newuserdata(L, sizeof *r);
    memset(r, 0, sizeof *r);
    luaL_getmetatable(L, REGISTRY_MT);
    lua_setmetatable(L, -2);
    lua_newtable(L); /* anchors runtime sets */
    lua_setfenv(L, -2);
    luna_error err;
    int rc = luna_metrics_new(&r->reg, &err);
    if (rc)
        return luna_lua_metrics_fail(L, rc, &err);
    return 1;
}

static int luna_lua_metrics_registry_gc(lua_State *L)
{
    struct lua_registry *r = luaL_checkudata(L, 1, REGISTRY_MT);
    lua_State *outer = luna_lua_metrics_enter(L);
    luna_metrics_free(r->reg);
    luna_lua_metrics_leave(outer);
    r->reg = NULL;
    luna_textbuf_free(&r->buf);
    return 0;
}

static void check_fields(lua_State *L, int idx, const char *const *allowed)
{
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "metrics: unexpected %s key in description", luaL_typename(L, -1));
        const char *k = lua_tostring(L, -1);
        const char *const *a = allowed;
        while (*a && strcmp(*a, k) != 0)
            a++;
        if (!*a)
            luaL_error(L, "metrics: unknown field '%s' in description", k);
    }
}

/* The array at t[field] (a table or nil): its length; raises otherwise. */
static int array_field(lua_State *L, int idx, const char *field, int max)
{
    lua_getfield(L, idx, field);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return -1;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "metrics: field '%s' must be a list, got %s", field,
                   luaL_typename(L, -1));
    int n = (int)lua_objlen(L, -1);
    if (n > max)
        luaL_error(L, "metrics: field '%s' has %d entries (at most %d)", field, n, max);
    return n; /* the table stays on the stack */
}

static int define(lua_State *L, enum luna_metric_type type)
{
    struct lua_registry *r = check_registry(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    luaL_checkstack(L, LUNA_METRICS_MAX_LABELS + 12, "metrics: description too large");
    static const char *const fields[] = { "name", "help", "labels", "buckets", NULL };
    check_fields(L, 2, fields);
    const char *labels[LUNA_METRICS_MAX_LABELS + 1];
    double buckets[LUNA_METRICS_MAX_BUCKETS + 1];
    struct luna_metric_desc d = { .type = type };
    lua_getfield(L, 2, "name");
    d.name = luna_lua_metrics_check_string(L, -1, "field 'name'");
    lua_getfield(L, 2, "help");
    d.help = lua_isnil(L, -1) ? "" : luna_lua_metrics_check_string(L, -1, "field 'help'");
    int n = array_field(L, 2, "labels", LUNA_METRICS_MAX_LABELS);
    if (n >= 0) {
        int t = lua_gettop(L);
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, t, i + 1);
            labels[i] = luna_lua_metrics_check_string(L, -1, "a label name");
        }
        labels[n] = NULL;
        d.labels = labels;
    }
    n = array_field(L, 2, "buckets", LUNA_METRICS_MAX_BUCKETS + 1);
    if (n >= 0) {
        if (type != LUNA_METRIC_HISTOGRAM)
            luaL_error(L, "metrics %s: buckets are for histograms", d.name);
        int t = lua_gettop(L);
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, t, i + 1);
            if (lua_type(L, -1) != LUA_TNUMBER)
                luaL_error(L, "metrics %s: bucket %d must be a number, got %s", d.name,
                           i + 1, luaL_typename(L, -1));
            buckets[i] = lua_tonumber(L, -1);
            lua_pop(L, 1);
        }
        if (n == 0)
            luaL_error(L, "metrics %s: buckets must not be empty", d.name);
        d.buckets = buckets;
        d.nbuckets = (size_t)n;
    }
    struct lua_family *u = luna_lua_metrics_push_object(L, sizeof *u, FAMILY_MT, 1, 0);
    luna_error err;
    int rc = luna_metrics_register(r->reg, &d, &u->f, &err);
    if (rc) {
        u->f = NULL;
        return luna_lua_metrics_fail(L, rc, &err);
    }
    luna_metric_family_ref(u->f);
    return 1;
}

static int luna_lua_metrics_counter(lua_State *L) { return define(L, LUNA_METRIC_COUNTER); }
static int luna_lua_metrics_gauge(lua_State *L) { return define(L, LUNA_METRIC_GAUGE); }
static int luna_lua_metrics_histogram(lua_State *L)
{
    return define(L, LUNA_METRIC_HISTOGRAM);
}

static int luna_lua_metrics_find(lua_State *L)
{
    struct lua_registry *r = check_registry(L, 1);
    const char *name = luna_lua_metrics_check_string(L, 2, "name");
    struct luna_metric_family *f = luna_metrics_find(r->reg, name);
    if (!f) {
        lua_pushnil(L);
        return 1;
    }
    struct lua_family *u = luna_lua_metrics_push_object(L, sizeof *u, FAMILY_MT, 1, 0);
    u->f = f;
    luna_metric_family_ref(f);
    return 1;
}

static int luna_lua_metrics_unregister(lua_State *L)
{
    struct lua_registry *r = check_registry(L, 1);
    struct luna_metric_family *f = luna_metrics_find(r->reg, luna_lua_metrics_check_string(L, 2, "name"));
    lua_State *outer = luna_lua_metrics_enter(L);
    int rc = f ? luna_metric_family_unregister(f) : LUNA_ENOTFOUND;
    luna_lua_metrics_leave(outer);
    return push_removed(L, rc, "unregister");
}

static int luna_lua_metrics_remove_matching(lua_State *L)
{
    struct lua_registry *r = check_registry(L, 1);
    const char *label = luna_lua_metrics_check_string(L, 2, "label");
    const char *value = luna_lua_metrics_check_string(L, 3, "value");
    lua_State *outer = luna_lua_metrics_enter(L);
    int n = luna_metrics_remove_matching(r->reg, label, value);
    luna_lua_metrics_leave(outer);
    if (n < 0)
        return luaL_error(L, "metrics: cannot remove series during a render");
    lua_pushinteger(L, n);
    return 1;
}

static int luna_lua_metrics_render(lua_State *L)
{
    struct lua_registry *r = check_registry(L, 1);
    if (r->rendering)
        return luaL_error(L, "metrics: render called from a metric function");
    luna_textbuf_reset(&r->buf);
    luna_error err;
    lua_State *outer = luna_lua_metrics_enter(L);
    r->rendering = true;
    int rc = luna_metrics_render(r->reg, &r->buf, &err);
    r->rendering = false;
    luna_lua_metrics_leave(outer);
    if (rc)
        return luna_lua_metrics_fail(L, rc, &err);
    lua_pushlstring(L, r->buf.data ? r->buf.data : "", r->buf.len);
    return 1;
}

static int luna_lua_metrics_count(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)luna_metrics_family_count(check_registry(L, 1)->reg));
    return 1;
}

static int luna_lua_metrics_registry_tostring(lua_State *L)
{
    struct lua_registry *r = luaL_checkudata(L, 1, REGISTRY_MT);
    if (r->reg)
        lua_pushfstring(L, "luna.metrics(%d families)",
                        (int)luna_metrics_family_count(r->reg));
    else
        lua_pushliteral(L, "luna.metrics(closed)");
    return 1;
}

/* ---- families ----------------------------------------------------------------- */

static int luna_lua_metrics_family_gc(lua_State *L)
{
    struct lua_family *u = luaL_checkudata(L, 1, FAMILY_MT);
    luna_metric_family_unref(u->f);
    u->f = NULL;
    return 0;
}

static struct luna_metric_family *check_live_family(lua_State *L)
{
    struct luna_metric_family *f = check_family(L);
    if (!f)
        luaL_error(L, "metrics: family object is closed");
    return f;
}

static int luna_lua_metrics_labels(lua_State *L)
{
    struct luna_metric_family *f = check_live_family(L);
    const char *values[LUNA_METRICS_MAX_LABELS + 1];
    check_values(L, 2, values);
    struct lua_child *u = luna_lua_metrics_push_object(L, sizeof *u, CHILD_MT, 1, 1);
    luna_error err;
    struct luna_metric_child *c;
    int rc = luna_metric_child(f, values, &c, &err);
    if (rc)
        return luna_lua_metrics_fail(L, rc, &err);
    luna_metric_child_ref(c);
    u->c = c;
    return 1;
}

static int luna_lua_metrics_func(lua_State *L)
{
    struct luna_metric_family *f = check_live_family(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    const char *values[LUNA_METRICS_MAX_LABELS + 1];
    check_values(L, 3, values);
    struct lua_child *u = luna_lua_metrics_push_object(L, sizeof *u, CHILD_MT, 1, 1);
    struct luna_lua_metrics_fn *fn = luna_lua_metrics_fn_new(L, 2);
    if (!fn)
        return luna_lua_push_error(L, "ENOMEM", "metrics: out of memory", LUNA_ENOMEM);
    luna_error err;
    struct luna_metric_child *c;
    int rc = luna_metric_func(f, values, luna_lua_metrics_fn_call, fn,
                              luna_lua_metrics_fn_release, &c, &err);
    if (rc) {
        luna_lua_metrics_fn_discard(L, fn);
        return luna_lua_metrics_fail(L, rc, &err);
    }
    luna_metric_child_ref(c);
    u->c = c;
    return 1;
}

static int luna_lua_metrics_family_remove(lua_State *L)
{
    struct luna_metric_family *f = check_live_family(L);
    const char *values[LUNA_METRICS_MAX_LABELS + 1];
    check_values(L, 2, values);
    if (luna_metric_family_label_count(f) != (size_t)(lua_gettop(L) - 1))
        return luaL_error(L, "metrics %s: %d label values for %d labels",
                          luna_metric_family_name(f), lua_gettop(L) - 1,
                          (int)luna_metric_family_label_count(f));
    lua_State *outer = luna_lua_metrics_enter(L);
    int rc = luna_metric_remove(f, values);
    luna_lua_metrics_leave(outer);
    return push_removed(L, rc, "remove series");
}

static int luna_lua_metrics_family_remove_matching(lua_State *L)
{
    struct luna_metric_family *f = check_live_family(L);
    const char *label = luna_lua_metrics_check_string(L, 2, "label");
    const char *value = luna_lua_metrics_check_string(L, 3, "value");
    lua_State *outer = luna_lua_metrics_enter(L);
    int n = luna_metric_family_remove_matching(f, label, value);
    luna_lua_metrics_leave(outer);
    if (n < 0)
        return luaL_error(L, "metrics: cannot remove series during a render");
    lua_pushinteger(L, n);
    return 1;
}

static int luna_lua_metrics_family_clear(lua_State *L)
{
    struct luna_metric_family *f = check_live_family(L);
    lua_State *outer = luna_lua_metrics_enter(L);
    int rc = luna_metric_family_clear(f);
    luna_lua_metrics_leave(outer);
    if (rc)
        return luaL_error(L, "metrics: cannot remove series during a render");
    return 0;
}

static int luna_lua_metrics_family_unregister(lua_State *L)
{
    struct luna_metric_family *f = check_live_family(L);
    lua_State *outer = luna_lua_metrics_enter(L);
    int rc = luna_metric_family_unregister(f);
    luna_lua_metrics_leave(outer);
    return push_removed(L, rc, "unregister");
}

static int luna_lua_metrics_family_registered(lua_State *L)
{
    lua_pushboolean(L, luna_metric_family_registered(check_live_family(L)));
    return 1;
}

static int luna_lua_metrics_family_count(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)luna_metric_family_child_count(check_live_family(L)));
    return 1;
}

static int luna_lua_metrics_family_name(lua_State *L)
{
    lua_pushstring(L, luna_metric_family_name(check_live_family(L)));
    return 1;
}

static int luna_lua_metrics_family_help(lua_State *L)
{
    lua_pushstring(L, luna_metric_family_help(check_live_family(L)));
    return 1;
}

static int luna_lua_metrics_family_type(lua_State *L)
{
    lua_pushstring(L, luna_metric_type_name(luna_metric_family_type(check_live_family(L))));
    return 1;
}

static int luna_lua_metrics_family_label_names(lua_State *L)
{
    struct luna_metric_family *f = check_live_family(L);
    size_t n = luna_metric_family_label_count(f);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, luna_metric_family_label(f, i));
        lua_rawseti(L, -2, (int)i + 1);
    }
    return 1;
}

static int luna_lua_metrics_family_buckets(lua_State *L)
{
    struct luna_metric_family *f = check_live_family(L);
    size_t n = luna_metric_family_bucket_count(f);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushnumber(L, luna_metric_family_bucket(f, i));
        lua_rawseti(L, -2, (int)i + 1);
    }
    return 1;
}

static int luna_lua_metrics_family_tostring(lua_State *L)
{
    struct lua_family *u = luaL_checkudata(L, 1, FAMILY_MT);
    if (!u->f) {
        lua_pushliteral(L, "luna.metrics.family(closed)");
        return 1;
    }
    lua_pushfstring(L, "luna.metrics.family(%s %s)", luna_metric_family_name(u->f),
                    luna_metric_type_name(luna_metric_family_type(u->f)));
    return 1;
}

/* ---- children ------------------------------------------------------------------ */

static int luna_lua_metrics_child_gc(lua_State *L)
{
    struct lua_child *u = luaL_checkudata(L, 1, CHILD_MT);
    lua_State *outer = luna_lua_metrics_enter(L);
    luna_metric_child_unref(u->c);
    luna_lua_metrics_leave(outer);
    u->c = NULL;
    return 0;
}

static struct luna_metric_child *check_live_child(lua_State *L)
{
    struct luna_metric_child *c = check_child(L);
    if (!c)
        luaL_error(L, "metrics: series object is closed");
    return c;
}

static const char *child_desc(struct luna_metric_child *c)
{
    struct luna_metric_family *f = luna_metric_child_family(c);
    return luna_metric_family_name(f);
}

/* Raises unless c is a value (not function) series of one of the types. */
static void check_kind(lua_State *L, struct luna_metric_child *c, const char *op,
                       bool counter, bool gauge, bool histogram)
{
    enum luna_metric_type t = luna_metric_family_type(luna_metric_child_family(c));
    bool ok = (t == LUNA_METRIC_COUNTER && counter) || (t == LUNA_METRIC_GAUGE && gauge) ||
              (t == LUNA_METRIC_HISTOGRAM && histogram);
    if (!ok)
        luaL_error(L, "metrics %s: %s on a %s", child_desc(c), op, luna_metric_type_name(t));
    if (luna_metric_child_is_func(c))
        luaL_error(L, "metrics %s: %s on a function series", child_desc(c), op);
}

static int luna_lua_metrics_inc(lua_State *L)
{
    struct luna_metric_child *c = check_live_child(L);
    check_kind(L, c, "inc", true, true, false);
    luna_metric_inc(c);
    return 0;
}

static int luna_lua_metrics_add(lua_State *L)
{
    struct luna_metric_child *c = check_live_child(L);
    lua_Number v = luna_lua_metrics_check_number(L, 2);
    check_kind(L, c, "add", true, true, false);
    if (luna_metric_add(c, v))
        return luaL_error(L, "metrics %s: counters only go up (add %f)", child_desc(c), v);
    return 0;
}

static int luna_lua_metrics_dec(lua_State *L)
{
    struct luna_metric_child *c = check_live_child(L);
    check_kind(L, c, "dec", false, true, false);
    luna_metric_add(c, -1);
    return 0;
}

static int luna_lua_metrics_set(lua_State *L)
{
    struct luna_metric_child *c = check_live_child(L);
    lua_Number v = luna_lua_metrics_check_number(L, 2);
    check_kind(L, c, "set", false, true, false);
    luna_metric_set(c, v);
    return 0;
}

static int luna_lua_metrics_observe(lua_State *L)
{
    struct luna_metric_child *c = check_live_child(L);
    lua_Number v = luna_lua_metrics_check_number(L, 2);
    check_kind(L, c, "observe", false, false, true);
    luna_metric_observe(c, v);
    return 0;
}

static int luna_lua_metrics_value(lua_State *L)
{
    struct luna_metric_child *c = check_live_child(L);
    if (luna_metric_family_type(luna_metric_child_family(c)) == LUNA_METRIC_HISTOGRAM)
        return luaL_error(L, "metrics %s: value of a histogram (use histogram())",
                          child_desc(c));
    lua_State *outer = luna_lua_metrics_enter(L);
    double v = luna_metric_value(c);
    luna_lua_metrics_leave(outer);
    lua_pushnumber(L, v);
    return 1;
}

static int luna_lua_metrics_histogram_read(lua_State *L)
{
    struct luna_metric_child *c = check_live_child(L);
    struct luna_metric_family *f = luna_metric_child_family(c);
    if (luna_metric_family_type(f) != LUNA_METRIC_HISTOGRAM)
        return luaL_error(L, "metrics %s: histogram() of a %s", child_desc(c),
                          luna_metric_type_name(luna_metric_family_type(f)));
    uint64_t buckets[LUNA_METRICS_MAX_BUCKETS + 1], count;
    double sum;
    luna_metric_histogram_read(c, &count, &sum, buckets);
    size_t n = luna_metric_family_bucket_count(f) + 1;
    lua_createtable(L, 0, 3);
    lua_pushnumber(L, (lua_Number)count);
    lua_setfield(L, -2, "count");
    lua_pushnumber(L, sum);
    lua_setfield(L, -2, "sum");
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushnumber(L, (lua_Number)buckets[i]);
        lua_rawseti(L, -2, (int)i + 1);
    }
    lua_setfield(L, -2, "buckets");
    return 1;
}

static int luna_lua_metrics_child_remove(lua_State *L)
{
    struct luna_metric_child *c = check_live_child(L);
    lua_State *outer = luna_lua_metrics_enter(L);
    int rc = luna_metric_child_remove(c);
    luna_lua_metrics_leave(outer);
    return push_removed(L, rc, "remove series");
}

static int luna_lua_metrics_child_listed(lua_State *L)
{
    lua_pushboolean(L, luna_metric_child_listed(check_live_child(L)));
    return 1;
}

static int luna_lua_metrics_child_labels(lua_State *L)
{
    struct luna_metric_child *c = check_live_child(L);
    size_t n = luna_metric_family_label_count(luna_metric_child_family(c));
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, luna_metric_child_label(c, i));
        lua_rawseti(L, -2, (int)i + 1);
    }
    return 1;
}

static int luna_lua_metrics_child_tostring(lua_State *L)
{
    struct lua_child *u = luaL_checkudata(L, 1, CHILD_MT);
    if (!u->c) {
        lua_pushliteral(L, "luna.metrics.child(closed)");
        return 1;
    }
    lua_pushfstring(L, "luna.metrics.child(%s)", child_desc(u->c));
    return 1;
}



/* ---- registration ---------------------------------------------------------------- */

static int luna_lua_metrics_format_value(lua_State *L)
{
    char buf[32];
    size_t n = luna_metrics_format_value(luna_lua_metrics_check_number(L, 1), buf);
    lua_pushlstring(L, buf, n);
    return 1;
}

void luna_lua_metrics_register(lua_State *L)
{
    static const luaL_Reg registry_methods[] = {
        { "counter", luna_lua_metrics_counter },
        { "gauge", luna_lua_metrics_gauge },
        { "histogram", luna_lua_metrics_histogram },
        { "find", luna_lua_metrics_find },
        { "unregister", luna_lua_metrics_unregister },
        { "remove_matching", luna_lua_metrics_remove_matching },
        { "render", luna_lua_metrics_render },
        { "count", luna_lua_metrics_count },
        { NULL, NULL },
    };
    static const luaL_Reg family_methods[] = {
        { "labels", luna_lua_metrics_labels },
        { "func", luna_lua_metrics_func },
        { "remove", luna_lua_metrics_family_remove },
        { "remove_matching", luna_lua_metrics_family_remove_matching },
        { "clear", luna_lua_metrics_family_clear },
        { "unregister", luna_lua_metrics_family_unregister },
        { "registered", luna_lua_metrics_family_registered },
        { "count", luna_lua_metrics_family_count },
        { "name", luna_lua_metrics_family_name },
        { "help", luna_lua_metrics_family_help },
        { "type", luna_lua_metrics_family_type },
        { "label_names", luna_lua_metrics_family_label_names },
        { "buckets", luna_lua_metrics_family_buckets },
        { NULL, NULL },
    };
    static const luaL_Reg child_methods[] = {
        { "inc", luna_lua_metrics_inc },
        { "add", luna_lua_metrics_add },
        { "dec", luna_lua_metrics_dec },
        { "set", luna_lua_metrics_set },
        { "observe", luna_lua_metrics_observe },
        { "value", luna_lua_metrics_value },
        { "histogram", luna_lua_metrics_histogram_read },
        { "remove", luna_lua_metrics_child_remove },
        { "listed", luna_lua_metrics_child_listed },
        { "labels", luna_lua_metrics_child_labels },
        { NULL, NULL },
    };
    luna_lua_new_locked_class(L, REGISTRY_MT, registry_methods, luna_lua_metrics_registry_gc,
                              luna_lua_metrics_registry_tostring);
    luna_lua_new_locked_class(L, FAMILY_MT, family_methods, luna_lua_metrics_family_gc,
                              luna_lua_metrics_family_tostring);
    luna_lua_new_locked_class(L, CHILD_MT, child_methods, luna_lua_metrics_child_gc,
                              luna_lua_metrics_child_tostring);

    static const luaL_Reg funcs[] = {
        { "new", luna_lua_metrics_new },
        { "format_value", luna_lua_metrics_format_value },
        { NULL, NULL },
    };
    luna_lua_register_table(L, "metrics", funcs);
    lua_getfield(L, -1, "metrics");
    lua_pushliteral(L, LUNA_METRICS_CONTENT_TYPE);
    lua_setfield(L, -2, "content_type");
    lua_pop(L, 1);
}
