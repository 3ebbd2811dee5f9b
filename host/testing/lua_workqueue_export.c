/* lua_workqueue_export.c — see lua_workqueue_export.h. */
#include "testing/lua_workqueue_export.h"

#include <lauxlib.h>

#include "lua/lua_util.h"
#include "serve/webhook_server.h"
#include "serve/workqueue_export.h"
#include "testing/lua_metrics.h"
#include "testing/lua_workqueue.h"

#define EXPORT_MT "luna.metrics.workqueue"

struct lua_export { struct luna_workqueue_export *x; };    /* the queue's; NULL once detached */

static int luna_lua_workqueue_export_attach(lua_State *L)
{
    struct luna_metrics *reg = luna_lua_metrics_check(L, 1);
    struct luna_workqueue *q = luna_lua_workqueue_check(L, 2);
    lua_settop(L, 2);
    struct lua_export *u = lua_newuserdata(L, sizeof *u);
    u->x = NULL;
    luaL_getmetatable(L, EXPORT_MT);
    lua_setmetatable(L, -2);
    lua_createtable(L, 2, 0); /* anchors the queue (and so the export) */
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, 1);
    lua_pushvalue(L, 2);
    lua_rawseti(L, -2, 2);
    lua_setfenv(L, -2);
    luna_error err;
    int rc = luna_workqueue_export_attach(reg, q, &u->x, &err);
    if (rc)
        return luna_lua_metrics_fail(L, rc, &err);
    return 1;
}

static int luna_lua_workqueue_export_detach(lua_State *L)
{
    struct lua_export *u = luaL_checkudata(L, 1, EXPORT_MT);
    lua_State *outer = luna_lua_metrics_enter(L);
    luna_workqueue_export_detach(u->x);
    luna_lua_metrics_leave(outer);
    u->x = NULL;
    lua_createtable(L, 0, 0);
    lua_setfenv(L, 1);
    return 0;
}

/* core.metrics.webhook(reg, path): the webhook server's families with
 * one request's series (serve/webhook_server.h), for the names table. */
static int luna_lua_metrics_webhook(lua_State *L)
{
    struct luna_metrics *reg = luna_lua_metrics_check(L, 1);
    const char *path = luaL_checkstring(L, 2);
    luna_error err;
    int rc = luna_webhook_server_register_metrics(reg, path, &err);
    if (rc)
        return luna_lua_metrics_fail(L, rc, &err);
    return 0;
}

void luna_lua_workqueue_export_register(lua_State *L)
{
    lua_pushcfunction(L, luna_lua_metrics_webhook);
    lua_setfield(L, -2, "webhook");
    static const luaL_Reg export_methods[] = {
        { "detach", luna_lua_workqueue_export_detach },
        { NULL, NULL },
    };
    luna_lua_new_locked_class(L, EXPORT_MT, export_methods, NULL, NULL);
    lua_pushcfunction(L, luna_lua_workqueue_export_attach);
    lua_setfield(L, -2, "export_workqueue");
}
