/* controller/index_fn.c — see controller/index_fn.h. */
#include "controller/index_fn.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "lua/lua_json.h"
#include "lua/lua_util.h"
#include "script/watchdog.h"

int luna_index_fn_push_table(lua_State *L, const struct luna_object *obj, luna_error *err)
{
    return luna_lua_json_push(L, luna_object_json(obj), obj->json_len, err);
}

/* ---- index functions ------------------------------------------------- */

/* A Lua function used as an index function.  It runs on *Lp, the state
 * its owner points at the coroutine allowed to call Lua at that moment. */
struct lua_index_fn {
    lua_State **Lp;
    int fn_ref;
    luna_index_fn_push push;
    const struct luna_watchdog_limits *limits; /* NULL: the state's defaults */
};

/* An object's values are the index's controller's memory: charged to its
 * account in the Lua memory cap (watchdog.h) while the index keeps them. */
static int charge_values(void *ud, long long delta)
{
    struct lua_index_fn *fn = ud;
    lua_State *L = *fn->Lp;
    unsigned account = fn->limits ? fn->limits->account : 0;
    if (!L)
        return delta > 0 ? -1 : 0;
    if (delta > 0)
        return luna_watchdog_charge_account(L, account, (size_t)delta);
    luna_watchdog_release_account(L, account, (size_t)-delta);
    return 0;
}

static void lua_index_fn_free(void *ud)
{
    struct lua_index_fn *fn = ud;
    if (*fn->Lp)
        luaL_unref(*fn->Lp, LUA_REGISTRYINDEX, fn->fn_ref);
    free(fn);
}

/* Adds the string on top of L (a NUL byte or an oversized value is an
 * error: the value would be cut or grow the index without bound). */
static int add_value(lua_State *L, struct luna_index_values *out, luna_error *err)
{
    size_t len;
    const char *v = lua_tolstring(L, -1, &len);
    if (len > LUNA_INDEX_MAX_VALUE_LEN)
        return luna_error_set(err, LUNA_ETOOBIG, "index value of %zu bytes (at most %d)", len,
                              LUNA_INDEX_MAX_VALUE_LEN);
    if (memchr(v, '\0', len))
        return luna_error_set(err, LUNA_EINVAL, "index value holds a NUL byte");
    int rc = luna_index_values_add(out, v);
    if (rc < 0)
        return luna_error_set(err, rc, rc == LUNA_ETOOBIG ? "index function returned more than "
                                                           "%d values" : "out of memory",
                              LUNA_INDEX_MAX_VALUES);
    return 0;
}

static int lua_index_fn(const struct luna_object *obj, struct luna_index_values *out,
                        void *ud, luna_error *err)
{
    struct lua_index_fn *fn = ud;
    lua_State *L = *fn->Lp;
    int top = lua_gettop(L);
    int rc = 0;
    lua_pushcfunction(L, luna_lua_traceback);
    lua_rawgeti(L, LUA_REGISTRYINDEX, fn->fn_ref);
    if (fn->push(L, obj, err) < 0) {
        lua_settop(L, top);
        return err->code;
    }
    /* script code: in a watchdog guard with the state's default budgets
     * (a no-op in a state without a watchdog) */
    struct luna_watchdog_guard g = { .what = "index function", .limits = fn->limits };
    if (luna_watchdog_pcall(L, 1, 1, top + 1, &g) != 0) {
        if (g.stop != LUNA_WATCHDOG_RUNNING) {
            char reason[256];
            luna_watchdog_describe(&g, reason, sizeof reason);
            rc = luna_error_set(err, LUNA_ELUA, "%s", reason);
        } else {
            rc = luna_error_set(err, LUNA_ELUA, "%s", lua_tostring(L, -1));
        }
    } else if (lua_type(L, -1) == LUA_TSTRING) {
        rc = add_value(L, out, err);
    } else if (lua_istable(L, -1)) {
        size_t n = lua_objlen(L, -1);
        if (n > LUNA_INDEX_MAX_VALUES)
            rc = luna_error_set(err, LUNA_ETOOBIG, "index function returned %zu values (at most %d)",
                                n, LUNA_INDEX_MAX_VALUES);
        for (size_t i = 1; i <= n && rc == 0; i++) {
            lua_rawgeti(L, -1, (int)i);
            if (lua_type(L, -1) == LUA_TSTRING)
                rc = add_value(L, out, err);
            else
                rc = luna_error_set(err, LUNA_EINVAL, "index values must be strings");
            lua_pop(L, 1);
        }
    } else if (!lua_isnil(L, -1)) {
        rc = luna_error_set(err, LUNA_EINVAL,
                            "index function must return a string, a list of strings or nil");
    }
    lua_settop(L, top);
    if (g.stop == LUNA_WATCHDOG_MEMORY)
        luna_watchdog_collect(L);
    return rc;
}

int luna_index_fn_add(lua_State *L, struct luna_indexer *idx, const char *name, int fn_idx,
                      lua_State **Lp, luna_index_fn_push push,
                      const struct luna_watchdog_limits *limits)
{
    luaL_checktype(L, fn_idx, LUA_TFUNCTION);
    if (luna_indexer_has_index(idx, name))
        return luaL_error(L, "index '%s' already exists", name);
    struct lua_index_fn *fn = malloc(sizeof *fn);
    if (!fn)
        return luaL_error(L, "out of memory");
    lua_pushvalue(L, fn_idx);
    fn->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    fn->Lp = Lp;
    fn->push = push;
    fn->limits = limits;
    luna_error err;
    /* add_index frees fn itself on failure */
    if (luna_indexer_add_index(idx, name, lua_index_fn, fn, lua_index_fn_free, false,
                               charge_values, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    return 0;
}
