/* lua_informer.c — see lua_informer.h. */
#include "testing/lua_informer.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "base/shard.h"
#include "client/discovery.h"
#include "client/http.h"
#include "cache/informer_factory.h"
#include "client/kube_client.h"
#include "client/kubeconfig.h"
#include "base/loop.h"
#include "testing/lua_store.h"
#include "lua/lua_util.h"
#include "testing/lua_kube_stack.h"
#include "client/resource.h"

#define ENV_MT "luna.informer.Env"
#define HANDLE_MT "luna.informer.Informer"
#define SHARD_MT "luna.informer.ShardAnchor"

static int shard_anchor_gc(lua_State *L)
{
    struct luna_shard_selector **a = luaL_checkudata(L, 1, SHARD_MT);
    luna_shard_free(*a);
    *a = NULL;
    return 0;
}

struct lua_env {
    struct luna_lua_kube_stack stack;
    struct luna_discovery *disc;
    struct luna_informer_factory *factory;
    lua_State *T;      /* anchored thread for callbacks */
    int thread_ref;
    int handles;       /* live handles (each keeps the env alive via a ref) */
};

struct lua_handle {
    struct lua_env *env;
    int env_ref;
    struct luna_shared_informer *si;
    int handler_id;
    int on_add, on_update, on_delete;  /* registry refs or LUA_NOREF */
};

static struct lua_env *check_env(lua_State *L, int idx)
{
    struct lua_env *e = luaL_checkudata(L, idx, ENV_MT);
    if (!e->factory)
        luaL_error(L, "informer env is closed");
    return e;
}

static struct lua_handle *check_handle(lua_State *L, int idx)
{
    struct lua_handle *h = luaL_checkudata(L, idx, HANDLE_MT);
    if (!h->si)
        luaL_error(L, "informer was released");
    return h;
}

static void env_close(struct lua_env *e, lua_State *L)
{
    luna_informer_factory_free(e->factory);
    e->factory = NULL;
    luna_discovery_free(e->disc);
    e->disc = NULL;
    luna_lua_kube_stack_close(&e->stack);
    if (e->thread_ref != LUA_NOREF) {
        luaL_unref(L, LUA_REGISTRYINDEX, e->thread_ref);
        e->thread_ref = LUA_NOREF;
    }
}

static int luna_lua_informer_env(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    struct luna_kubeconfig_options ko = { 0 };
    ko.path = luna_lua_opt_string_field(L, 1, "kubeconfig", NULL);
    ko.context = luna_lua_opt_string_field(L, 1, "context", NULL);
    if (!ko.path)
        return luaL_error(L, "core.informer.env needs a kubeconfig path");
    struct lua_env *e = lua_newuserdata(L, sizeof *e);
    memset(e, 0, sizeof *e);
    e->thread_ref = LUA_NOREF;
    luaL_getmetatable(L, ENV_MT);
    lua_setmetatable(L, -2);
    luna_error err = { 0 };
    if (luna_lua_kube_stack_open(&e->stack, &ko, &err) < 0 ||
        luna_discovery_new(e->stack.kc, &e->disc, &err) < 0 ||
        luna_informer_factory_new(e->stack.kc, e->disc, &e->factory, &err) < 0) {
        env_close(e, L);
        return luna_lua_push_error(L, "InvalidConfig", err.msg, 0);
    }
    e->T = lua_newthread(L);
    e->thread_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 1;
}

static int env_gc(lua_State *L)
{
    struct lua_env *e = luaL_checkudata(L, 1, ENV_MT);
    env_close(e, L);
    return 0;
}

static int env_count(lua_State *L)
{
    struct lua_env *e = check_env(L, 1);
    lua_pushinteger(L, (lua_Integer)luna_informer_factory_count(e->factory));
    return 1;
}

/* ---- handlers -------------------------------------------------------- */

static void call_handler(struct lua_handle *h, int ref, const char *what,
                         struct luna_object *a, struct luna_object *b, int flag)
{
    if (ref == LUA_NOREF || !h->env->T)
        return;
    lua_State *T = h->env->T;
    lua_rawgeti(T, LUA_REGISTRYINDEX, ref);
    luna_lua_store_push_object(T, a);
    int nargs = 1;
    if (b) {
        luna_lua_store_push_object(T, b);
        nargs++;
    }
    if (flag >= 0) {
        lua_pushboolean(T, flag);
        nargs++;
    }
    luna_lua_pcall(T, nargs, 0, what);
}

static void on_add(void *ud, struct luna_object *obj, bool initial)
{
    struct lua_handle *h = ud;
    call_handler(h, h->on_add, "informer on_add", obj, NULL, initial);
}

static void on_update(void *ud, struct luna_object *old, struct luna_object *obj)
{
    struct lua_handle *h = ud;
    call_handler(h, h->on_update, "informer on_update", old, obj, -1);
}

static void on_delete(void *ud, struct luna_object *obj, bool unknown)
{
    struct lua_handle *h = ud;
    call_handler(h, h->on_delete, "informer on_delete", obj, NULL, unknown);
}

static int opt_ref(lua_State *L, int idx, const char *key)
{
    lua_getfield(L, idx, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return LUA_NOREF;
    }
    if (!lua_isfunction(L, -1))
        return luaL_error(L, "field '%s' must be a function", key);
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

/* labels = "a=b" or { a = "b" } → selector text left on the Lua stack. */
static const char *labels_field(lua_State *L, int idx)
{
    lua_getfield(L, idx, "labels");
    if (lua_isnil(L, -1) || lua_type(L, -1) == LUA_TSTRING)
        return lua_tostring(L, -1);
    if (!lua_istable(L, -1))
        luaL_error(L, "field 'labels' must be a selector string or a table");
    int t = lua_gettop(L);
    size_t total = 1;
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "labels must map strings to strings");
        total += lua_objlen(L, -2) + lua_objlen(L, -1) + 2;
    }
    char *buf = lua_newuserdata(L, total);
    size_t len = 0;
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
        size_t kl, vl;
        const char *k = lua_tolstring(L, -2, &kl), *v = lua_tolstring(L, -1, &vl);
        if (len)
            buf[len++] = ',';
        memcpy(buf + len, k, kl);
        len += kl;
        buf[len++] = '=';
        memcpy(buf + len, v, vl);
        len += vl;
    }
    lua_pushlstring(L, buf, len);
    return lua_tostring(L, -1);
}

/* opts.watch_list: "auto", "on", "off" (nil: the factory's default). */
static enum luna_watch_list_mode watch_list_field(lua_State *L, int idx)
{
    const char *text = luna_lua_opt_string_field(L, idx, "watch_list", NULL);
    enum luna_watch_list_mode m = LUNA_WATCH_LIST_DEFAULT;
    if (text && luna_watch_list_mode_parse(text, &m) < 0)
        luaL_error(L, "watch_list must be \"auto\", \"on\" or \"off\", not \"%s\"", text);
    return m;
}

static int env_informer(lua_State *L)
{
    struct lua_env *e = check_env(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    const char *kind_text = luna_lua_opt_string_field(L, 2, "kind", NULL);
    if (!kind_text)
        return luaL_error(L, "informer needs a kind (\"v1/ConfigMap\")");
    char group[256], version[64], kind[128];
    luna_error err = { 0 };
    if (luna_resource_parse_kind(kind_text, group, sizeof group, version, sizeof version, kind,
                        sizeof kind, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    struct luna_shard_selector *shard = NULL;
    if (luna_shard_parse(luna_lua_opt_string_field(L, 2, "shard", NULL), &shard, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    /* Owned by a userdata so a raising option reader below cannot leak it. */
    struct luna_shard_selector **anchor = lua_newuserdata(L, sizeof *anchor);
    *anchor = shard;
    luaL_getmetatable(L, SHARD_MT);
    lua_setmetatable(L, -2);
    struct luna_informer_spec spec = {
        .shard = shard,
        .group = group,
        .version = version,
        .kind = kind,
        .namespace_ = luna_lua_opt_string_field(L, 2, "namespace", NULL),
        .label_selector = labels_field(L, 2),
        .field_selector = luna_lua_opt_string_field(L, 2, "fields", NULL),
        .keep_managed_fields = luna_lua_opt_bool_field(L, 2, "keep_managed_fields", 0),
        .metadata_only = luna_lua_opt_bool_field(L, 2, "metadata_only", 0),
        .watch_list = watch_list_field(L, 2),
        .page_size = (size_t)luna_lua_opt_number_field(L, 2, "page_size", 0),
        .idle_timeout = luna_lua_opt_number_field(L, 2, "idle_timeout", 0),
        .min_watch_timeout = luna_lua_opt_number_field(L, 2, "min_watch_timeout", 0),
        .max_watch_timeout = luna_lua_opt_number_field(L, 2, "max_watch_timeout", 0),
        .backoff_base = luna_lua_opt_number_field(L, 2, "backoff_base", 0),
        .backoff_max = luna_lua_opt_number_field(L, 2, "backoff_max", 0),
    };
    struct lua_handle *h = lua_newuserdata(L, sizeof *h);
    memset(h, 0, sizeof *h);
    h->on_add = h->on_update = h->on_delete = LUA_NOREF;
    h->env_ref = LUA_NOREF;
    luaL_getmetatable(L, HANDLE_MT);
    lua_setmetatable(L, -2);
    h->on_add = opt_ref(L, 2, "on_add");
    h->on_update = opt_ref(L, 2, "on_update");
    h->on_delete = opt_ref(L, 2, "on_delete");
    h->si = luna_informer_factory_acquire(e->factory, &spec, &err);
    if (!h->si)
        return luaL_error(L, "%s", err.msg);
    h->env = e;
    lua_pushvalue(L, 1);
    h->env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    e->handles++;
    struct luna_informer_handler hh = { on_add, on_update, on_delete, h, NULL,
                                        luna_lua_opt_number_field(L, 2, "resync", 0) };
    h->handler_id = luna_informer_add_handler(luna_shared_informer_informer(h->si), &hh);
    return 1;
}

static void handle_release(lua_State *L, struct lua_handle *h)
{
    if (h->si) {
        /* After env_close (only at state close) the informers are gone. */
        if (h->env->factory) {
            luna_informer_remove_handler(luna_shared_informer_informer(h->si), h->handler_id);
            luna_informer_factory_release(h->env->factory, h->si);
        }
        h->si = NULL;
        h->env->handles--;
    }
    luaL_unref(L, LUA_REGISTRYINDEX, h->on_add);
    luaL_unref(L, LUA_REGISTRYINDEX, h->on_update);
    luaL_unref(L, LUA_REGISTRYINDEX, h->on_delete);
    h->on_add = h->on_update = h->on_delete = LUA_NOREF;
    luaL_unref(L, LUA_REGISTRYINDEX, h->env_ref);
    h->env_ref = LUA_NOREF;
}

static int handle_release_m(lua_State *L)
{
    struct lua_handle *h = luaL_checkudata(L, 1, HANDLE_MT);
    handle_release(L, h);
    return 0;
}

static struct luna_informer *informer_of(lua_State *L)
{
    return luna_shared_informer_informer(check_handle(L, 1)->si);
}

static int handle_has_synced(lua_State *L)
{
    lua_pushboolean(L, luna_informer_has_synced(informer_of(L)));
    return 1;
}

static int handle_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)luna_indexer_len(luna_informer_indexer(informer_of(L))));
    return 1;
}

static int handle_get(lua_State *L)
{
    struct luna_object *o = luna_indexer_get(luna_informer_indexer(informer_of(L)),
                                             luaL_checkstring(L, 2));
    if (o)
        luna_lua_store_push_object(L, o);
    else
        lua_pushnil(L);
    return 1;
}

static int push_into_list(struct luna_object *obj, void *ud)
{
    lua_State *L = ud;
    luna_lua_store_push_object(L, obj);
    lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
    return 0;
}

static int handle_list(lua_State *L)
{
    struct luna_indexer *idx = luna_informer_indexer(informer_of(L));
    const char *ns = luaL_optstring(L, 2, NULL);
    lua_newtable(L);
    if (!ns)
        luna_indexer_each(idx, push_into_list, L);
    else
        luna_indexer_each_indexed(idx, LUNA_INDEX_NAMESPACE, ns, push_into_list, L);
    return 1;
}

static int push_key(struct luna_object *obj, void *ud)
{
    lua_State *L = ud;
    lua_pushstring(L, luna_object_key(obj));
    lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
    return 0;
}

static int handle_keys(lua_State *L)
{
    struct luna_indexer *idx = luna_informer_indexer(informer_of(L));
    lua_newtable(L);
    luna_indexer_each(idx, push_key, L);
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_pushvalue(L, -3);
    lua_call(L, 1, 0);
    lua_pop(L, 1);
    return 1;
}

static int handle_by_index(lua_State *L)
{
    struct luna_indexer *idx = luna_informer_indexer(informer_of(L));
    const char *name = luaL_checkstring(L, 2);
    const char *value = luaL_checkstring(L, 3);
    lua_newtable(L);
    if (luna_indexer_each_indexed(idx, name, value, push_into_list, L) == LUNA_ENOTFOUND)
        return luaL_error(L, "no index named '%s'", name);
    return 1;
}

static int handle_add_index(lua_State *L)
{
    struct lua_handle *h = check_handle(L, 1);
    struct luna_indexer *idx = luna_informer_indexer(luna_shared_informer_informer(h->si));
    return luna_lua_store_add_index(L, idx, luaL_checkstring(L, 2), 3, &h->env->T);
}

static int handle_set_shard(lua_State *L)
{
    struct lua_handle *h = check_handle(L, 1);
    struct luna_shard_selector *shard = NULL;
    luna_error err = { 0 };
    if (luna_shard_parse(luaL_optstring(L, 2, NULL), &shard, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    int rc = luna_informer_factory_set_shard(h->env->factory, h->si, shard, &err);
    luna_shard_free(shard);
    if (rc < 0)
        return luna_lua_push_error(L, "InvalidShard", err.msg, 0);
    lua_pushboolean(L, 1);
    return 1;
}

static int handle_key(lua_State *L)
{
    lua_pushstring(L, luna_shared_informer_key(check_handle(L, 1)->si));
    return 1;
}

static int handle_rv(lua_State *L)
{
    struct luna_reflector *r = luna_shared_informer_reflector(check_handle(L, 1)->si);
    lua_pushstring(L, r ? luna_reflector_resource_version(r) : "");
    return 1;
}

static int handle_last_error(lua_State *L)
{
    struct luna_reflector *r = luna_shared_informer_reflector(check_handle(L, 1)->si);
    lua_pushstring(L, r ? luna_reflector_last_error(r) : "");
    return 1;
}

static int handle_resource(lua_State *L)
{
    const struct luna_resource *res = luna_shared_informer_resource(check_handle(L, 1)->si);
    if (!res)
        lua_pushnil(L);
    else
        luna_lua_push_resource(L, res);
    return 1;
}

static int handle_stats(lua_State *L)
{
    struct lua_handle *h = check_handle(L, 1);
    struct luna_reflector *r = luna_shared_informer_reflector(h->si);
    struct luna_reflector_stats st = { 0 };
    if (r)
        st = luna_reflector_stats(r);
    lua_createtable(L, 0, 20);
#define FIELD(name) (lua_pushnumber(L, (lua_Number)st.name), lua_setfield(L, -2, #name))
    FIELD(lists);
    FIELD(watch_lists);
    FIELD(watch_list_items);
    FIELD(watch_list_fallbacks);
    FIELD(list_pages);
    FIELD(watches);
    FIELD(watch_events);
    FIELD(bookmarks);
    FIELD(gone);
    FIELD(failures);
    FIELD(decode_errors);
    FIELD(watch_gone);
    FIELD(watch_errors);
    FIELD(watch_timeouts);
    FIELD(watch_closed);
    FIELD(watch_decode);
    FIELD(shard_dropped);
    FIELD(rv_checks);
    FIELD(rv_current);
    FIELD(rv_stale);
    FIELD(bad_objects);
#undef FIELD
    lua_pushstring(L, r ? luna_reflector_last_bad(r) : "");
    lua_setfield(L, -2, "last_bad");
    lua_pushstring(L, luna_reflector_shard_mode_name(r ? luna_reflector_shard_mode(r)
                                                       : LUNA_SHARD_MODE_NONE));
    lua_setfield(L, -2, "shard_mode");
    lua_pushinteger(L, luna_shared_informer_refs(h->si));
    lua_setfield(L, -2, "refs");
    return 1;
}

static int env_close_m(lua_State *L)
{
    struct lua_env *e = luaL_checkudata(L, 1, ENV_MT);
    if (e->handles > 0)
        return luaL_error(L, "release the env's %d informers first", e->handles);
    env_close(e, L);
    return 0;
}

void luna_lua_informer_register(lua_State *L)
{
    static const luaL_Reg env_methods[] = {
        { "informer", env_informer }, { "count", env_count }, { "close", env_close_m },
        { NULL, NULL },
    };
    static const luaL_Reg handle_methods[] = {
        { "has_synced", handle_has_synced }, { "len", handle_len }, { "get", handle_get },
        { "list", handle_list }, { "keys", handle_keys }, { "by_index", handle_by_index },
        { "add_index", handle_add_index }, { "resource_version", handle_rv },
        { "resource", handle_resource }, { "stats", handle_stats },
        { "last_error", handle_last_error }, { "release", handle_release_m },
        { "set_shard", handle_set_shard }, { "key", handle_key },
        { NULL, NULL },
    };
    static const luaL_Reg no_methods[] = { { NULL, NULL } };
    luna_lua_new_class(L, SHARD_MT, no_methods, shard_anchor_gc);
    luna_lua_new_class(L, ENV_MT, env_methods, env_gc);
    luna_lua_new_class(L, HANDLE_MT, handle_methods, handle_release_m);
    static const luaL_Reg funcs[] = { { "env", luna_lua_informer_env }, { NULL, NULL } };
    luna_lua_register_table(L, "informer", funcs);
}
