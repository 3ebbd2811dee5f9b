/* lua_runtime.c — see lua_runtime.h. */
#include "runtime/lua_runtime.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/controller.h"
#include "base/log.h"
#include "lua/lua_json.h"
#include "lua/lua_util.h"
#include "client/resource.h"
#include "base/selector.h"

static struct luna_kube_client *the_kc;
static struct luna_discovery *the_disc;

static struct luna_reconcile *need_reconcile(lua_State *L, const char *fn, bool own_thread)
{
    struct luna_reconcile *r = luna_reconcile_of(L);
    if (!r) {
        luaL_error(L, "%s can only be called inside reconcile%s", fn,
                   own_thread ? " (on its own coroutine, not one it created)" : "");
        return NULL;
    }
    return r;
}

static int current(lua_State *L)
{
    struct luna_reconcile *r = luna_reconcile_of(L);
    if (!r) {
        struct luna_controller *c = luna_controller_in_handler();
        if (!c) {
            lua_pushnil(L);
            return 1;
        }
        lua_createtable(L, 0, 1);
        lua_pushstring(L, luna_controller_name(c));
        lua_setfield(L, -2, "controller");
        return 1;
    }
    lua_createtable(L, 0, 3);
    lua_pushstring(L, luna_controller_name(luna_reconcile_controller(r)));
    lua_setfield(L, -2, "controller");
    lua_pushstring(L, luna_reconcile_key(r));
    lua_setfield(L, -2, "key");
    lua_pushstring(L, luna_reconcile_id(r));
    lua_setfield(L, -2, "reconcile_id");
    return 1;
}

/* ---- cache ------------------------------------------------------------- */

static struct luna_informer *informer_arg(lua_State *L, const char *fn)
{
    struct luna_reconcile *r = luna_reconcile_of(L);
    struct luna_controller *c = r ? luna_reconcile_controller(r) : luna_controller_in_handler();
    if (!c)
        luaL_error(L, "%s can only be called inside reconcile or a watches map function", fn);
    const char *text = luaL_checkstring(L, 1);
    char group[256], version[64], kind[128];
    luna_error err;
    if (luna_parse_kind(text, group, sizeof group, version, sizeof version, kind, sizeof kind,
                        &err) < 0)
        luaL_error(L, "%s", err.msg);
    struct luna_informer *inf = luna_controller_informer_for(c, group, version, kind);
    if (!inf)
        luaL_error(L, "controller %s does not watch %s: add it to watch, owns or watches",
                   luna_controller_name(c), text);
    return inf;
}

static void push_object(lua_State *L, struct luna_object *obj)
{
    luna_error err;
    if (luna_lua_json_push(L, luna_object_json(obj), obj->json_len, &err) < 0)
        luaL_error(L, "cached object %s: %s", luna_object_key(obj), err.msg);
}

static int cache_get(lua_State *L)
{
    struct luna_informer *inf = informer_arg(L, "luna.cache():get");
    struct luna_object *obj = luna_indexer_get(luna_informer_indexer(inf), luaL_checkstring(L, 2));
    if (!obj) {
        lua_pushnil(L);
        return 1;
    }
    push_object(L, obj);
    return 1;
}

struct list_ctx {
    lua_State *L;
    struct luna_selector *sel;
    int n;
};

static const char *label_lookup(const char *key, void *ud)
{
    return luna_object_label(ud, key);
}

static int collect(struct luna_object *obj, void *ud)
{
    struct list_ctx *ctx = ud;
    if (ctx->sel && !luna_selector_matches(ctx->sel, label_lookup, obj))
        return 0;
    push_object(ctx->L, obj);
    lua_rawseti(ctx->L, -2, ++ctx->n);
    return 0;
}

static int selector_gc(lua_State *L)
{
    struct luna_selector **sel = lua_touserdata(L, 1);
    luna_selector_free(*sel);
    *sel = NULL;
    return 0;
}

static int cache_list(lua_State *L)
{
    struct luna_informer *inf = informer_arg(L, "luna.cache():list");
    const char *ns = luaL_optstring(L, 2, NULL);
    const char *labels = luaL_optstring(L, 3, NULL);
    /* The selector lives in a userdata with __gc, so a raise cannot leak it. */
    struct luna_selector **sel = lua_newuserdata(L, sizeof *sel);
    *sel = NULL;
    lua_newtable(L);
    lua_pushcfunction(L, selector_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    if (labels && *labels) {
        luna_error err;
        if (luna_selector_parse(labels, LUNA_SELECTOR_LABELS, sel, &err) < 0)
            return luaL_error(L, "%s", err.msg);
    }
    struct list_ctx ctx = { L, *sel, 0 };
    lua_newtable(L);
    struct luna_indexer *idx = luna_informer_indexer(inf);
    if (ns && *ns)
        luna_indexer_each_indexed(idx, LUNA_INDEX_NAMESPACE, ns, collect, &ctx);
    else
        luna_indexer_each(idx, collect, &ctx);
    return 1;
}

static int cache_by_index(lua_State *L)
{
    struct luna_informer *inf = informer_arg(L, "luna.cache():by_index");
    const char *index = luaL_checkstring(L, 2);
    const char *value = luaL_checkstring(L, 3);
    struct list_ctx ctx = { L, NULL, 0 };
    lua_newtable(L);
    if (luna_indexer_each_indexed(luna_informer_indexer(inf), index, value, collect, &ctx) ==
        LUNA_ENOTFOUND)
        return luaL_error(L, "no index named '%s'", index);
    return 1;
}

/* ---- waiting calls ----------------------------------------------------- */

static void cancel_resolve(void *ud) { luna_discovery_cancel(ud); }

static void on_resolved(void *ud, const struct luna_resource *res, const luna_error *err)
{
    struct luna_reconcile *r = ud;
    lua_State *co = luna_reconcile_thread(r);
    if (res) {
        luna_lua_push_resource(co, res);
        luna_reconcile_resume(r, 1);
    } else {
        /* A kind the server does not serve is not a missing object: no
         * HTTP status (client-go's NoKindMatchError is not an API status
         * either), so luna.is_not_found(err) is false for it. */
        luna_lua_push_error(co, 0,
                            err && err->code == LUNA_ENOMATCH ? "NoKindMatch" : "DiscoveryFailed",
                            err ? err->msg : "discovery failed");
        luna_reconcile_resume(r, 2);
    }
}

static int resolve(lua_State *L)
{
    const char *text = luaL_checkstring(L, 1);
    /* The context first: outside a reconcile (at load time) there may be
     * no discovery client yet. */
    struct luna_reconcile *r = need_reconcile(L, "luna API calls", true);
    char group[256], version[64], kind[128];
    luna_error err = { 0 };
    if (luna_parse_kind(text, group, sizeof group, version, sizeof version, kind, sizeof kind,
                        &err) < 0)
        return luaL_error(L, "%s", err.msg);
    const struct luna_resource *hit = luna_discovery_lookup(the_disc, group, version, kind);
    if (hit) {
        luna_lua_push_resource(L, hit);
        return 1;
    }
    struct luna_discovery_wait *w = luna_discovery_resolve(the_disc, group, version, kind,
                                                           on_resolved, r, &err);
    if (!w) {
        /* Either answered at once (impossible after the miss above) or failed to start. */
        return luna_lua_push_error(L, 0, "DiscoveryFailed", err.msg);
    }
    luna_reconcile_wait(r, cancel_resolve, w);
    return lua_yield(L, 0);
}

struct pending_request {
    struct luna_reconcile *r;
    struct luna_kube_request *req;
    char *body;
    size_t len;
    long status;
    int failed;
};

static void cancel_request(void *ud)
{
    struct pending_request *p = ud;
    luna_kube_request_cancel(p->req);
    free(p->body);
    free(p);
}

static void on_request_done(void *ud, const luna_http_response *resp,
                            const luna_http_failure *fail)
{
    struct pending_request *p = ud;
    struct luna_reconcile *r = p->r;
    lua_State *co = luna_reconcile_thread(r);
    int n;
    if (fail) {
        luna_lua_push_error(co, 0, luna_http_reason_name(fail->reason), fail->err.msg);
        n = 2;
    } else {
        lua_pushinteger(co, resp->status);
        lua_pushlstring(co, resp->body ? resp->body : "", resp->body ? resp->body_len : 0);
        n = 2;
    }
    free(p->body);
    free(p);
    luna_reconcile_resume(r, n);
}

static int request(lua_State *L)
{
    const char *method = luaL_checkstring(L, 1);
    const char *path = luaL_checkstring(L, 2);
    size_t body_len = 0;
    const char *body = luaL_optlstring(L, 3, NULL, &body_len);
    const char *content_type = luaL_optstring(L, 4, NULL);
    struct luna_reconcile *r = need_reconcile(L, "luna API calls", true);
    struct pending_request *p = calloc(1, sizeof *p);
    if (!p)
        return luaL_error(L, "out of memory");
    p->r = r;
    struct luna_kube_request_options o = {
        .method = method,
        .path = path,
        .body = body,
        .body_len = body_len,
        .content_type = content_type,
        .timeout = 60,
        .on_done = on_request_done,
        .ud = p,
    };
    luna_error err = { 0 };
    p->req = luna_kube_request_start(the_kc, &o, &err);
    if (!p->req) {
        free(p);
        return luna_lua_push_error(L, 0, "InvalidRequest", err.msg);
    }
    luna_reconcile_wait(r, cancel_request, p);
    return lua_yield(L, 0);
}

/* ---- logging ------------------------------------------------------------- */

#define MAX_FIELDS 24

static int log_fn(lua_State *L)
{
    int level = luna_log_level_parse(luaL_checkstring(L, 1));
    if (level < 0)
        return luaL_argerror(L, 1, "debug, info, warn or error");
    const char *msg = luaL_checkstring(L, 2);
    if (!luna_log_enabled((enum luna_log_level)level))
        return 0;
    const char *pairs[2 * MAX_FIELDS];
    int n = 0;
    struct luna_reconcile *r = luna_reconcile_of(L);
    if (r) {
        pairs[2 * n] = "controller";
        pairs[2 * n++ + 1] = luna_controller_name(luna_reconcile_controller(r));
        pairs[2 * n] = "key";
        pairs[2 * n++ + 1] = luna_reconcile_key(r);
        pairs[2 * n] = "reconcile_id";
        pairs[2 * n++ + 1] = luna_reconcile_id(r);
        const char *key = luna_reconcile_key(r);
        const char *slash = strchr(key, '/');
        if (slash) {
            lua_pushlstring(L, key, (size_t)(slash - key)); /* kept on the stack */
            pairs[2 * n] = "namespace";
            pairs[2 * n++ + 1] = lua_tostring(L, -1);
        }
        pairs[2 * n] = "name";
        pairs[2 * n++ + 1] = slash ? slash + 1 : key;
    }
    int attached = n;
    if (lua_istable(L, 3)) {
        lua_newtable(L); /* the values as strings, kept alive until logged */
        int strs = lua_gettop(L);
        for (lua_pushnil(L); lua_next(L, 3) && n < MAX_FIELDS; lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                continue;
            lua_pushvalue(L, -2);
            lua_getglobal(L, "tostring");
            lua_pushvalue(L, -3);
            lua_call(L, 1, 1);
            lua_rawset(L, strs);
            lua_pushvalue(L, -2);
            lua_rawget(L, strs);
            /* A field the script sets itself replaces the attached one. */
            const char *k = lua_tostring(L, -3), *v = lua_tostring(L, -1);
            int j;
            for (j = 0; j < attached; j++)
                if (strcmp(pairs[2 * j], k) == 0)
                    break;
            if (j < attached) {
                pairs[2 * j + 1] = v;
            } else {
                pairs[2 * n] = k;
                pairs[2 * n++ + 1] = v;
            }
            lua_pop(L, 1);
        }
    }
    luna_log_pairs((enum luna_log_level)level, msg, pairs, n);
    return 0;
}

void luna_lua_runtime_install(lua_State *L, struct luna_kube_client *kc,
                              struct luna_discovery *disc)
{
    the_kc = kc;
    the_disc = disc;
    static const luaL_Reg funcs[] = {
        { "current", current }, { "cache_get", cache_get }, { "cache_list", cache_list },
        { "cache_by_index", cache_by_index }, { "resolve", resolve }, { "request", request },
        { "log", log_fn }, { NULL, NULL },
    };
    lua_getglobal(L, "require");
    lua_pushliteral(L, "luna.core");
    lua_call(L, 1, 1);
    luna_lua_register_table(L, "runtime", funcs);
    lua_pop(L, 1);
}
