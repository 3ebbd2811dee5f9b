/* api/cache.c — see api/cache.h. */
#include "api/cache.h"

#include <lauxlib.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/selector.h"
#include "client/resource.h"
#include "lua/lua_json.h"
#include "lua/lua_util.h"
#include "controller/controller.h"
#include "controller/index_fn.h"

/* ---- listers ----------------------------------------------------------- */

static struct luna_informer *informer_arg(lua_State *L, const char *fn)
{
    struct luna_controller *c = luna_controller_current(L, NULL);
    const char *webhook = luna_controller_in_webhook();
    if (!c && webhook)
        luaL_error(L, "%s in webhook %s: its file declares no controller, so it has no caches "
                      "(declare the webhook in a controller's `webhooks` and the kind in its "
                      "watch, owns or watches)", fn, webhook);
    if (!c)
        luaL_error(L, "%s can only be called inside reconcile, a watches map function or a "
                      "webhook", fn);
    const char *text = luaL_checkstring(L, 1);
    luna_error err;
    struct luna_informer *inf = luna_controller_lister_informer(c, text, &err);
    if (!inf && err.code)
        luaL_error(L, "%s", err.msg);
    if (!inf)
        luaL_error(L, "controller %s does not watch %s: add it to watch, owns or watches",
                   luna_controller_name(c), text);
    /* a webhook deciding on half a cache would answer wrongly without
     * knowing it: it fails instead, and answers by its failure_policy */
    if (webhook && !luna_informer_has_synced(inf))
        luaL_error(L, "%s in webhook %s: the cache of %s is not synced yet", fn, webhook, text);
    return inf;
}

static void push_object(lua_State *L, struct luna_object *obj)
{
    luna_error err;
    if (luna_index_fn_push_table(L, obj, &err) < 0)
        luaL_error(L, "cached object %s: %s", luna_object_key(obj), err.msg);
}

/* cache_get(kind, key) or cache_get(kind, namespace, name): the key
 * "namespace/name" is put together here, not by a Lua concatenation (a
 * string interned on every get).  A nil or "" namespace with a name is a
 * cluster-scoped object's key, the bare name, so `get(req.namespace,
 * req.name)` reads a Namespace or a Node as it reads a ConfigMap (a
 * cluster-scoped key has no namespace: req.namespace is nil). */
static int luna_api_cache_get(lua_State *L)
{
    struct luna_informer *inf = informer_arg(L, "luna.cache():get");
    size_t nslen, namelen;
    if (lua_isnil(L, 2) && lua_type(L, 3) == LUA_TSTRING) {
        lua_pushliteral(L, "");
        lua_replace(L, 2);
    }
    const char *ns = luaL_checklstring(L, 2, &nslen);
    const char *key = ns;
    char buf[512];
    if (nslen == 0 && lua_type(L, 3) == LUA_TSTRING) {
        key = lua_tostring(L, 3);
    } else if (!lua_isnoneornil(L, 3)) {
        const char *name = luaL_checklstring(L, 3, &namelen);
        if (nslen + 1 + namelen < sizeof buf) {
            memcpy(buf, ns, nslen);
            buf[nslen] = '/';
            memcpy(buf + nslen + 1, name, namelen + 1);
            key = buf;
        } else {
            lua_settop(L, 3);
            lua_pushliteral(L, "/");
            lua_insert(L, 3);
            lua_concat(L, 3);
            key = lua_tostring(L, -1);
        }
    }
    struct luna_object *obj = luna_indexer_get(luna_informer_indexer(inf), key);
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

static int luna_api_cache_list(lua_State *L)
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
        /* the parsed selector is C memory, several times the text, and
         * repeated values are found by a quadratic scan: the text is bounded */
        size_t n = strlen(labels);
        if (n > LUNA_CACHE_MAX_SELECTOR)
            return luaL_error(L, "luna.cache():list: a label selector of %d bytes (at most %d)",
                              n > INT_MAX ? INT_MAX : (int)n, LUNA_CACHE_MAX_SELECTOR);
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

static int luna_api_cache_by_index(lua_State *L)
{
    struct luna_informer *inf = informer_arg(L, "luna.cache():by_index");
    const char *index = luaL_checkstring(L, 2);
    const char *value = luaL_checkstring(L, 3);
    struct luna_controller *c = luna_controller_current(L, NULL);
    const char *name = luna_controller_index_name(c, inf, index);
    if (!name)
        return luaL_error(L, "controller %s has no index named '%s' on %s (declare it in "
                             "`indexes`; indexes are on the watched kind)",
                          luna_controller_name(c), index, lua_tostring(L, 1));
    struct list_ctx ctx = { L, NULL, 0 };
    lua_newtable(L);
    if (luna_indexer_each_indexed(luna_informer_indexer(inf), name, value, collect, &ctx) ==
        LUNA_ENOTFOUND)
        return luaL_error(L, "no index named '%s'", index);
    return 1;
}

void luna_api_cache_register(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        { "cache_get", luna_api_cache_get },
        { "cache_list", luna_api_cache_list },
        { "cache_by_index", luna_api_cache_by_index },
        { NULL, NULL },
    };
    for (const luaL_Reg *f = funcs; f->name; f++) {
        lua_pushcfunction(L, f->func);
        lua_setfield(L, -2, f->name);
    }
}
