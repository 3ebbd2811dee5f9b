/* api/api.c — see api/api.h. */
#include "api/api.h"

#include <lauxlib.h>

#include "controller/controller.h"
#include "api/cache.h"
#include "api/host.h"
#include "api/client.h"
#include "api/events.h"
#include "api/log.h"
#include "api/schedule.h"

static int luna_api_current(lua_State *L)
{
    struct luna_reconcile *r;
    struct luna_controller *c = luna_controller_current(L, &r);
    if (!c) {
        lua_pushnil(L);
        return 1;
    }
    if (!r) {
        lua_createtable(L, 0, 1);
        lua_pushstring(L, luna_controller_name(c));
        lua_setfield(L, -2, "controller");
        return 1;
    }
    lua_createtable(L, 0, 3);
    lua_pushstring(L, luna_controller_name(c));
    lua_setfield(L, -2, "controller");
    lua_pushstring(L, luna_reconcile_key(r));
    lua_setfield(L, -2, "key");
    lua_pushstring(L, luna_reconcile_id(r));
    lua_setfield(L, -2, "reconcile_id");
    return 1;
}

void luna_api_install(lua_State *L, struct luna_api_host *host)
{
    luna_api_host_set(L, host);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "luna.core");
    lua_call(L, 1, 1);
    lua_newtable(L);
    lua_pushcfunction(L, luna_api_current);
    lua_setfield(L, -2, "current");
    luna_api_cache_register(L);
    luna_api_client_register(L, host);
    luna_api_log_register(L);
    luna_api_events_register(L);
    luna_api_schedule_register(L);
    lua_setfield(L, -2, "runtime");
    lua_pop(L, 1);
}
