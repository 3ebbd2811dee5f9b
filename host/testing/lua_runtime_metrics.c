/* lua_runtime_metrics.c — see lua_runtime_metrics.h. */
#include "testing/lua_runtime_metrics.h"

#include <lauxlib.h>
#include <math.h>

#include "lua/lua_util.h"
#include "serve/runtime_metrics.h"
#include "testing/lua_metrics.h"

#define RUNTIME_MT "luna.metrics.runtime"
#define CONTROLLER_MT "luna.metrics.controller"

struct lua_runtime { struct luna_runtime_metrics *rm; };   /* owned */
struct lua_controller { struct luna_controller_metrics *cm; }; /* owned; NULL once removed */

static struct luna_runtime_metrics *check_runtime(lua_State *L)
{
    struct lua_runtime *u = luaL_checkudata(L, 1, RUNTIME_MT);
    if (!u->rm)
        luaL_error(L, "runtime metrics are closed");
    return u->rm;
}

static int luna_lua_runtime_metrics_new(lua_State *L)
{
    struct luna_metrics *reg = luna_lua_metrics_check(L, 1);
    lua_settop(L, 1);
    struct lua_runtime *u = luna_lua_metrics_push_object(L, sizeof *u, RUNTIME_MT, 1, 0);
    luna_error err;
    int rc = luna_runtime_metrics_new(reg, &u->rm, &err);
    if (rc)
        return luna_lua_metrics_fail(L, rc, &err);
    /* The registry anchors the set: it lives as long as the registry, so
     * its families are never unregistered from under a render. */
    lua_getfenv(L, 1);
    lua_pushvalue(L, -2);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    return 1;
}

static int luna_lua_runtime_metrics_gc(lua_State *L)
{
    struct lua_runtime *u = luaL_checkudata(L, 1, RUNTIME_MT);
    lua_State *outer = luna_lua_metrics_enter(L);
    luna_runtime_metrics_free(u->rm);
    luna_lua_metrics_leave(outer);
    u->rm = NULL;
    return 0;
}

static int luna_lua_runtime_metrics_controller(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    const char *name = luna_lua_metrics_check_string(L, 2, "controller name");
    lua_Number workers = luna_lua_metrics_check_number(L, 3);
    if (workers < 1 || workers > 1e6 || workers != floor(workers))
        return luaL_argerror(L, 3, "workers must be an integer >= 1");
    struct lua_controller *u = luna_lua_metrics_push_object(L, sizeof *u, CONTROLLER_MT, 1, 0);
    luna_error err;
    int rc = luna_runtime_metrics_controller_new(rm, name, (int)workers, &u->cm, &err);
    if (rc) {
        u->cm = NULL;
        return luna_lua_metrics_fail(L, rc, &err);
    }
    return 1;
}

static struct luna_controller_metrics *check_controller(lua_State *L)
{
    struct lua_controller *u = luaL_checkudata(L, 1, CONTROLLER_MT);
    if (!u->cm)
        luaL_error(L, "controller metrics are removed");
    return u->cm;
}

static int luna_lua_runtime_metrics_controller_remove(lua_State *L)
{
    struct lua_controller *u = luaL_checkudata(L, 1, CONTROLLER_MT);
    lua_State *outer = luna_lua_metrics_enter(L);
    luna_runtime_metrics_controller_free(u->cm);
    luna_lua_metrics_leave(outer);
    u->cm = NULL;
    return 0;
}

static int luna_lua_runtime_metrics_reconcile_start(lua_State *L)
{
    luna_runtime_metrics_reconcile_start(check_controller(L));
    return 0;
}

static int luna_lua_runtime_metrics_reconcile_done(lua_State *L)
{
    struct luna_controller_metrics *cm = check_controller(L);
    static const char *const results[] = { "success", "error", "requeue", "requeue_after",
                                           NULL };
    int result = luaL_checkoption(L, 2, NULL, results);
    lua_Number seconds = luna_lua_metrics_check_number(L, 3);
    luna_runtime_metrics_reconcile_done(cm, (enum luna_reconcile_result)result, seconds);
    return 0;
}

static int luna_lua_runtime_metrics_reconcile_panic(lua_State *L)
{
    luna_runtime_metrics_reconcile_panic(check_controller(L));
    return 0;
}

static int luna_lua_runtime_metrics_kinds_not_served(lua_State *L)
{
    struct luna_controller_metrics *cm = check_controller(L);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_argcheck(L, n >= 0, 2, "must be >= 0");
    luna_runtime_metrics_kinds_not_served(cm, (size_t)n);
    return 0;
}

static int luna_lua_runtime_metrics_set_workers(lua_State *L)
{
    struct luna_controller_metrics *cm = check_controller(L);
    lua_Number workers = luna_lua_metrics_check_number(L, 2);
    if (workers < 1 || workers > 1e6 || workers != floor(workers))
        return luaL_argerror(L, 2, "workers must be an integer >= 1");
    luna_runtime_metrics_set_workers(cm, (int)workers);
    return 0;
}

static int luna_lua_runtime_metrics_script(lua_State *L)
{
    struct luna_controller_metrics *cm = check_controller(L);
    const char *sha = luna_lua_metrics_check_string(L, 2, "sha256");
    lua_State *outer = luna_lua_metrics_enter(L);
    luna_error err;
    int rc = luna_runtime_metrics_script(cm, sha, &err);
    luna_lua_metrics_leave(outer);
    if (rc)
        return luna_lua_metrics_fail(L, rc, &err);
    return 0;
}

static int luna_lua_runtime_metrics_rest_request(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    lua_Number code = luna_lua_metrics_check_number(L, 2);
    if (code != floor(code) || code < 0 || code > 999)
        return luaL_argerror(L, 2, "code must be an HTTP status (0 for no response)");
    luna_runtime_metrics_rest_request(rm, (int)code, luna_lua_metrics_check_string(L, 3, "method"),
                                      luna_lua_metrics_check_string(L, 4, "host"));
    return 0;
}

static int luna_lua_runtime_metrics_informer(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    const char *resource = luna_lua_metrics_check_string(L, 2, "resource");
    luaL_checktype(L, 3, LUA_TFUNCTION);
    struct luna_lua_metrics_fn *fn = luna_lua_metrics_fn_new(L, 3);
    if (!fn)
        return luna_lua_push_error(L, "ENOMEM", "metrics: out of memory",
                                   LUNA_ENOMEM);
    luna_error err;
    int rc = luna_runtime_metrics_informer_add(rm, resource, luna_lua_metrics_fn_call, fn,
                                               luna_lua_metrics_fn_release, &err);
    if (rc) {
        luna_lua_metrics_fn_discard(L, fn);
        return luna_lua_metrics_fail(L, rc, &err);
    }
    return 0;
}

static int luna_lua_runtime_metrics_informer_remove(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    const char *resource = luna_lua_metrics_check_string(L, 2, "resource");
    lua_State *outer = luna_lua_metrics_enter(L);
    luna_runtime_metrics_informer_remove(rm, resource);
    luna_lua_metrics_leave(outer);
    return 0;
}

static int luna_lua_runtime_metrics_relist(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    luna_runtime_metrics_informer_relist(rm, luna_lua_metrics_check_string(L, 2, "resource"));
    return 0;
}

static int luna_lua_runtime_metrics_undecodable(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    luna_runtime_metrics_informer_bad(rm, luna_lua_metrics_check_string(L, 2, "resource"));
    return 0;
}

static int luna_lua_runtime_metrics_watch_restart(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    luna_runtime_metrics_watch_restart(rm, luna_lua_metrics_check_string(L, 2, "resource"),
                                       luna_lua_metrics_check_string(L, 3, "reason"));
    return 0;
}

/* rt:version_check(resource, stale): stale a boolean. */
static int luna_lua_runtime_metrics_version_check(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    const char *resource = luna_lua_metrics_check_string(L, 2, "resource");
    luaL_checktype(L, 3, LUA_TBOOLEAN);
    luna_runtime_metrics_version_check(rm, resource, lua_toboolean(L, 3));
    return 0;
}

/* rt:reload(result, unix_seconds): result "success", "failure",
 * "unresolved", or a boolean (true: success, false: failure). */
static int luna_lua_runtime_metrics_reload(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    enum luna_reload_result result;
    if (lua_type(L, 2) == LUA_TBOOLEAN) {
        result = lua_toboolean(L, 2) ? LUNA_RELOAD_SUCCESS : LUNA_RELOAD_FAILURE;
    } else {
        static const char *const names[] = { "success", "failure", "unresolved", NULL };
        result = (enum luna_reload_result)luaL_checkoption(L, 2, NULL, names);
    }
    luna_runtime_metrics_reload(rm, result, luna_lua_metrics_check_number(L, 3));
    return 0;
}

static int luna_lua_runtime_metrics_leader(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    const char *lease = luna_lua_metrics_check_string(L, 2, "lease");
    luaL_checktype(L, 3, LUA_TBOOLEAN);
    luna_runtime_metrics_leader(rm, lease, lua_toboolean(L, 3));
    return 0;
}

/* The calling thread is anchored in the set's environment (as a key) for
 * as long as the set lives, so a series reading its heap never outlives
 * it. */
static int luna_lua_runtime_metrics_lua_state(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    const char *name = luna_lua_metrics_check_string(L, 2, "state name");
    lua_settop(L, 2);
    lua_getfenv(L, 1);
    lua_pushthread(L);
    lua_pushboolean(L, 1);
    lua_rawset(L, 3);
    luna_error err;
    int rc = luna_runtime_metrics_lua_state_add(rm, name, L, &err);
    if (rc)
        return luna_lua_metrics_fail(L, rc, &err);
    return 0;
}

static int luna_lua_runtime_metrics_lua_state_remove(lua_State *L)
{
    struct luna_runtime_metrics *rm = check_runtime(L);
    luna_runtime_metrics_lua_state_remove(rm, luna_lua_metrics_check_string(L, 2, "state name"));
    return 0;
}

void luna_lua_runtime_metrics_register(lua_State *L)
{
    static const luaL_Reg runtime_methods[] = {
        { "controller", luna_lua_runtime_metrics_controller },
        { "rest_request", luna_lua_runtime_metrics_rest_request },
        { "informer", luna_lua_runtime_metrics_informer },
        { "informer_remove", luna_lua_runtime_metrics_informer_remove },
        { "relist", luna_lua_runtime_metrics_relist },
        { "undecodable", luna_lua_runtime_metrics_undecodable },
        { "watch_restart", luna_lua_runtime_metrics_watch_restart },
        { "version_check", luna_lua_runtime_metrics_version_check },
        { "reload", luna_lua_runtime_metrics_reload },
        { "leader", luna_lua_runtime_metrics_leader },
        { "lua_state", luna_lua_runtime_metrics_lua_state },
        { "lua_state_remove", luna_lua_runtime_metrics_lua_state_remove },
        { NULL, NULL },
    };
    static const luaL_Reg controller_methods[] = {
        { "reconcile_start", luna_lua_runtime_metrics_reconcile_start },
        { "reconcile_done", luna_lua_runtime_metrics_reconcile_done },
        { "panic", luna_lua_runtime_metrics_reconcile_panic },
        { "set_workers", luna_lua_runtime_metrics_set_workers },
        { "kinds_not_served", luna_lua_runtime_metrics_kinds_not_served },
        { "script", luna_lua_runtime_metrics_script },
        { "remove", luna_lua_runtime_metrics_controller_remove },
        { NULL, NULL },
    };
    luna_lua_new_locked_class(L, RUNTIME_MT, runtime_methods, luna_lua_runtime_metrics_gc, NULL);
    luna_lua_new_locked_class(L, CONTROLLER_MT, controller_methods,
                              luna_lua_runtime_metrics_controller_remove, NULL);
    lua_pushcfunction(L, luna_lua_runtime_metrics_new);
    lua_setfield(L, -2, "runtime");
}
