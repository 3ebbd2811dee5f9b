/* lua_store.c — see lua_store.h. */
#include "testing/lua_store.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "cache/delta_fifo.h"
#include "cache/indexer.h"
#include "lua/lua_util.h"
#include "controller/index_fn.h"

#define OBJECT_MT "luna.store.Object"
#define INDEXER_MT "luna.store.Indexer"
#define FIFO_MT "luna.store.DeltaFIFO"

/* ---- Object ---------------------------------------------------------- */

void luna_lua_store_push_object(lua_State *L, struct luna_object *obj)
{
    struct luna_object **ud = lua_newuserdata(L, sizeof *ud);
    *ud = luna_object_ref(obj);
    luaL_getmetatable(L, OBJECT_MT);
    lua_setmetatable(L, -2);
}

/* The object of the Object at idx (borrowed; may raise). */
static struct luna_object *luna_lua_store_check_object(lua_State *L, int idx)
{
    struct luna_object **ud = luaL_checkudata(L, idx, OBJECT_MT);
    return *ud;
}

static int object_gc(lua_State *L)
{
    struct luna_object **ud = luaL_checkudata(L, 1, OBJECT_MT);
    luna_object_unref(*ud);
    *ud = NULL;
    return 0;
}

/* core.store.object{...}: copies the strings out of the table before
 * building, so nothing allocated is held across a raising call. */
static int luna_lua_store_object(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    struct luna_object_fields f = { 0 };
    f.namespace_ = luna_lua_opt_string_field(L, 1, "namespace", NULL);
    f.name = luna_lua_opt_string_field(L, 1, "name", NULL);
    f.uid = luna_lua_opt_string_field(L, 1, "uid", NULL);
    f.resource_version = luna_lua_opt_string_field(L, 1, "resource_version", NULL);
    f.json = luna_lua_opt_string_field(L, 1, "json", "{}");
    f.json_len = strlen(f.json);
    lua_getfield(L, 1, "labels");
    int labels = lua_gettop(L);
    size_t n = 0;
    if (lua_istable(L, labels)) {
        for (lua_pushnil(L); lua_next(L, labels); lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                return luaL_error(L, "labels must map strings to strings");
            n++;
        }
    }
    /* The pairs array lives in a Lua userdata so a raise cannot leak it. */
    const char **pairs = lua_newuserdata(L, (n ? n : 1) * 2 * sizeof *pairs);
    size_t i = 0;
    if (n) {
        for (lua_pushnil(L); lua_next(L, labels); lua_pop(L, 1)) {
            pairs[2 * i] = lua_tostring(L, -2);
            pairs[2 * i + 1] = lua_tostring(L, -1);
            i++;
        }
    }
    f.labels = pairs;
    f.nlabels = n;
    struct luna_object *obj;
    luna_error err;
    if (luna_object_new(&f, &obj, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    luna_lua_store_push_object(L, obj);
    luna_object_unref(obj);
    return 1;
}

static int object_key(lua_State *L)
{
    lua_pushstring(L, luna_object_key(luna_lua_store_check_object(L, 1)));
    return 1;
}

static int object_name(lua_State *L)
{
    lua_pushstring(L, luna_object_name(luna_lua_store_check_object(L, 1)));
    return 1;
}

static int object_namespace(lua_State *L)
{
    struct luna_object *o = luna_lua_store_check_object(L, 1);
    lua_pushlstring(L, luna_object_key(o), o->ns_len);
    return 1;
}

static int object_uid(lua_State *L)
{
    lua_pushstring(L, luna_object_uid(luna_lua_store_check_object(L, 1)));
    return 1;
}

static int object_rv(lua_State *L)
{
    lua_pushstring(L, luna_object_resource_version(luna_lua_store_check_object(L, 1)));
    return 1;
}

static int object_label(lua_State *L)
{
    const char *v = luna_object_label(luna_lua_store_check_object(L, 1), luaL_checkstring(L, 2));
    if (v)
        lua_pushstring(L, v);
    else
        lua_pushnil(L);
    return 1;
}

static int object_labels(lua_State *L)
{
    struct luna_object *o = luna_lua_store_check_object(L, 1);
    lua_createtable(L, 0, o->nlabels);
    size_t cursor = 0;
    const char *k, *v;
    while (luna_object_next_label(o, &cursor, &k, &v) == 0) {
        lua_pushstring(L, v);
        lua_setfield(L, -2, k);
    }
    return 1;
}

static int object_json(lua_State *L)
{
    struct luna_object *o = luna_lua_store_check_object(L, 1);
    lua_pushlstring(L, luna_object_json(o), o->json_len);
    return 1;
}

static int object_size(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)luna_object_size(luna_lua_store_check_object(L, 1)));
    return 1;
}

static int object_refs(lua_State *L)
{
    lua_pushinteger(L, luna_lua_store_check_object(L, 1)->refs);
    return 1;
}

static int object_eq(lua_State *L)
{
    lua_pushboolean(L, luna_lua_store_check_object(L, 1) == luna_lua_store_check_object(L, 2));
    return 1;
}

/* ---- Indexer --------------------------------------------------------- */

struct lua_indexer {
    struct luna_indexer *idx;
    lua_State *L;       /* the coroutine of the current put/delete/add_index */
};

static struct lua_indexer *check_indexer(lua_State *L, int idx)
{
    struct lua_indexer *li = luaL_checkudata(L, idx, INDEXER_MT);
    if (!li->idx)
        luaL_error(L, "indexer is closed");
    return li;
}

static int luna_lua_store_indexer(lua_State *L)
{
    struct lua_indexer *li = lua_newuserdata(L, sizeof *li);
    memset(li, 0, sizeof *li);
    luaL_getmetatable(L, INDEXER_MT);
    lua_setmetatable(L, -2);
    li->idx = luna_indexer_new();
    if (!li->idx)
        return luaL_error(L, "out of memory");
    li->L = L;
    return 1;
}

static int indexer_gc(lua_State *L)
{
    struct lua_indexer *li = luaL_checkudata(L, 1, INDEXER_MT);
    li->L = L;
    luna_indexer_free(li->idx);
    li->idx = NULL;
    return 0;
}

static int indexer_put(lua_State *L)
{
    struct lua_indexer *li = check_indexer(L, 1);
    li->L = L; /* index functions run on the calling coroutine */
    struct luna_object *obj = luna_lua_store_check_object(L, 2);
    struct luna_object *old;
    if (luna_indexer_put(li->idx, obj, &old) < 0)
        return luaL_error(L, "out of memory");
    if (!old) {
        lua_pushnil(L);
        return 1;
    }
    luna_lua_store_push_object(L, old);
    luna_object_unref(old);
    return 1;
}

static int indexer_delete(lua_State *L)
{
    struct lua_indexer *li = check_indexer(L, 1);
    li->L = L;
    struct luna_object *old;
    luna_indexer_delete(li->idx, luaL_checkstring(L, 2), &old);
    if (!old) {
        lua_pushnil(L);
        return 1;
    }
    luna_lua_store_push_object(L, old);
    luna_object_unref(old);
    return 1;
}

static int indexer_get(lua_State *L)
{
    struct lua_indexer *li = check_indexer(L, 1);
    struct luna_object *obj = luna_indexer_get(li->idx, luaL_checkstring(L, 2));
    if (obj)
        luna_lua_store_push_object(L, obj);
    else
        lua_pushnil(L);
    return 1;
}

static int indexer_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)luna_indexer_len(check_indexer(L, 1)->idx));
    return 1;
}

static int collect_object(struct luna_object *obj, void *ud)
{
    lua_State *L = ud;
    luna_lua_store_push_object(L, obj);
    lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
    return 0;
}

static int collect_key(struct luna_object *obj, void *ud)
{
    lua_State *L = ud;
    lua_pushstring(L, luna_object_key(obj));
    lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
    return 0;
}

/* Sorts the array on top of the stack with table.sort(t, cmp or nil). */
static void sort_top(lua_State *L, lua_CFunction cmp)
{
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_remove(L, -2);
    lua_pushvalue(L, -2);
    if (cmp)
        lua_pushcfunction(L, cmp);
    else
        lua_pushnil(L);
    lua_call(L, 2, 0);
}

static int compare_objects(lua_State *L)
{
    lua_pushboolean(L, strcmp(luna_object_key(luna_lua_store_check_object(L, 1)),
                              luna_object_key(luna_lua_store_check_object(L, 2))) < 0);
    return 1;
}

static int indexer_keys(lua_State *L)
{
    struct lua_indexer *li = check_indexer(L, 1);
    lua_createtable(L, (int)luna_indexer_len(li->idx), 0);
    luna_indexer_each(li->idx, collect_key, L);
    sort_top(L, NULL);
    return 1;
}

static int indexer_by_index(lua_State *L)
{
    struct lua_indexer *li = check_indexer(L, 1);
    const char *name = luaL_checkstring(L, 2);
    const char *value = luaL_checkstring(L, 3);
    lua_newtable(L);
    if (luna_indexer_each_indexed(li->idx, name, value, collect_object, L) == LUNA_ENOTFOUND)
        return luaL_error(L, "no index named '%s'", name);
    sort_top(L, compare_objects);
    return 1;
}

static int collect_value(const char *value, size_t count, void *ud)
{
    lua_State *L = ud;
    lua_pushinteger(L, (lua_Integer)count);
    lua_setfield(L, -2, value);
    return 0;
}

static int indexer_index_values(lua_State *L)
{
    struct lua_indexer *li = check_indexer(L, 1);
    const char *name = luaL_checkstring(L, 2);
    lua_newtable(L);
    if (luna_indexer_each_value(li->idx, name, collect_value, L) == LUNA_ENOTFOUND)
        return luaL_error(L, "no index named '%s'", name);
    return 1;
}

static int push_object_arg(lua_State *L, const struct luna_object *obj, luna_error *err)
{
    luna_lua_store_push_object(L, (struct luna_object *)obj);
    return 0;
}

int luna_lua_store_add_index(lua_State *L, struct luna_indexer *idx, const char *name,
                             int fn_idx, lua_State **Lp)
{
    return luna_index_fn_add(L, idx, name, fn_idx, Lp, push_object_arg, NULL);
}

static int indexer_add_index(lua_State *L)
{
    struct lua_indexer *li = check_indexer(L, 1);
    li->L = L;
    return luna_lua_store_add_index(L, li->idx, luaL_checkstring(L, 2), 3, &li->L);
}

/* ---- DeltaFIFO ------------------------------------------------------- */

struct lua_fifo {
    struct luna_delta_fifo *f;
    int indexer_ref;  /* keeps the known-objects indexer alive */
};

static struct lua_fifo *check_fifo(lua_State *L, int idx)
{
    struct lua_fifo *lf = luaL_checkudata(L, idx, FIFO_MT);
    if (!lf->f)
        luaL_error(L, "delta fifo is closed");
    return lf;
}

static int luna_lua_store_delta_fifo(lua_State *L)
{
    struct luna_indexer *known = NULL;
    if (!lua_isnoneornil(L, 1))
        known = check_indexer(L, 1)->idx;
    struct lua_fifo *lf = lua_newuserdata(L, sizeof *lf);
    lf->f = NULL;
    lf->indexer_ref = LUA_NOREF;
    luaL_getmetatable(L, FIFO_MT);
    lua_setmetatable(L, -2);
    lf->f = luna_delta_fifo_new(known);
    if (!lf->f)
        return luaL_error(L, "out of memory");
    if (known) {
        lua_pushvalue(L, 1);
        lf->indexer_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    return 1;
}

static int fifo_gc(lua_State *L)
{
    struct lua_fifo *lf = luaL_checkudata(L, 1, FIFO_MT);
    luna_delta_fifo_free(lf->f);
    lf->f = NULL;
    luaL_unref(L, LUA_REGISTRYINDEX, lf->indexer_ref);
    lf->indexer_ref = LUA_NOREF;
    return 0;
}

static int fifo_push(lua_State *L, int (*push)(struct luna_delta_fifo *, struct luna_object *))
{
    struct lua_fifo *lf = check_fifo(L, 1);
    if (push(lf->f, luna_lua_store_check_object(L, 2)) < 0)
        return luaL_error(L, "out of memory");
    return 0;
}

static int fifo_add(lua_State *L) { return fifo_push(L, luna_delta_fifo_add); }
static int fifo_update(lua_State *L) { return fifo_push(L, luna_delta_fifo_update); }
static int fifo_delete(lua_State *L) { return fifo_push(L, luna_delta_fifo_delete); }

static int fifo_replace(lua_State *L)
{
    struct lua_fifo *lf = check_fifo(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    size_t n = lua_objlen(L, 2);
    struct luna_object **objs = lua_newuserdata(L, (n ? n : 1) * sizeof *objs);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, 2, (int)i + 1);
        objs[i] = luna_lua_store_check_object(L, -1);
        lua_pop(L, 1); /* still referenced by the argument table */
    }
    if (luna_delta_fifo_replace(lf->f, objs, n) < 0)
        return luaL_error(L, "out of memory");
    return 0;
}

static int fifo_resync(lua_State *L)
{
    if (luna_delta_fifo_resync(check_fifo(L, 1)->f, (uint64_t)luaL_optinteger(L, 2, 1)) < 0)
        return luaL_error(L, "out of memory");
    return 0;
}

static int push_deltas(const char *key, const struct luna_delta *deltas, size_t n, void *ud)
{
    lua_State *L = ud;
    lua_pushstring(L, key);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, luna_delta_type_name(deltas[i].type));
        lua_setfield(L, -2, "type");
        lua_pushboolean(L, deltas[i].final_state_unknown);
        lua_setfield(L, -2, "final_state_unknown");
        lua_pushinteger(L, (lua_Integer)deltas[i].round);
        lua_setfield(L, -2, "round");
        if (deltas[i].obj) {
            luna_lua_store_push_object(L, deltas[i].obj);
            lua_setfield(L, -2, "object");
        }
        lua_rawseti(L, -2, (int)i + 1);
    }
    return 0;
}

static int fifo_pop(lua_State *L)
{
    struct lua_fifo *lf = check_fifo(L, 1);
    if (luna_delta_fifo_pop(lf->f, push_deltas, L) == LUNA_ENOTFOUND) {
        lua_pushnil(L);
        return 1;
    }
    return 2;
}

static int fifo_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)luna_delta_fifo_len(check_fifo(L, 1)->f));
    return 1;
}

static int fifo_has_synced(lua_State *L)
{
    lua_pushboolean(L, luna_delta_fifo_has_synced(check_fifo(L, 1)->f));
    return 1;
}

static int fifo_pending(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)luna_delta_fifo_pending(check_fifo(L, 1)->f,
                                                            luaL_checkstring(L, 2)));
    return 1;
}

void luna_lua_store_register(lua_State *L)
{
    static const luaL_Reg object_methods[] = {
        { "key", object_key }, { "name", object_name }, { "namespace", object_namespace },
        { "uid", object_uid }, { "resource_version", object_rv }, { "label", object_label },
        { "labels", object_labels }, { "json", object_json }, { "size", object_size },
        { "refs", object_refs }, { NULL, NULL },
    };
    static const luaL_Reg indexer_methods[] = {
        { "put", indexer_put }, { "delete", indexer_delete }, { "get", indexer_get },
        { "len", indexer_len }, { "keys", indexer_keys }, { "by_index", indexer_by_index },
        { "add_index", indexer_add_index }, { "index_values", indexer_index_values },
        { NULL, NULL },
    };
    static const luaL_Reg fifo_methods[] = {
        { "add", fifo_add }, { "update", fifo_update }, { "delete", fifo_delete },
        { "replace", fifo_replace }, { "resync", fifo_resync }, { "pop", fifo_pop },
        { "len", fifo_len }, { "has_synced", fifo_has_synced }, { "pending", fifo_pending },
        { NULL, NULL },
    };
    luna_lua_new_class(L, OBJECT_MT, object_methods, object_gc);
    luaL_getmetatable(L, OBJECT_MT);
    lua_pushcfunction(L, object_eq);
    lua_setfield(L, -2, "__eq");
    lua_pop(L, 1);
    luna_lua_new_class(L, INDEXER_MT, indexer_methods, indexer_gc);
    luna_lua_new_class(L, FIFO_MT, fifo_methods, fifo_gc);

    static const luaL_Reg funcs[] = {
        { "object", luna_lua_store_object },
        { "indexer", luna_lua_store_indexer },
        { "delta_fifo", luna_lua_store_delta_fifo },
        { NULL, NULL },
    };
    luna_lua_register_table(L, "store", funcs);
}
