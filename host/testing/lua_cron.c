/* lua_cron.c — see lua_cron.h. */
#include "testing/lua_cron.h"

#include <lauxlib.h>

#include "base/cron.h"

static int luna_lua_cron_next(lua_State *L)
{
    const char *text = luaL_checkstring(L, 1);
    double after = luaL_checknumber(L, 2);
    struct luna_cron c;
    luna_error err = { 0 };
    if (luna_cron_parse(text, &c, &err) < 0) {
        lua_pushnil(L);
        lua_pushstring(L, err.msg);
        return 2;
    }
    double next = luna_cron_next(&c, after);
    if (next < 0)
        lua_pushnil(L);
    else
        lua_pushnumber(L, next);
    return 1;
}

void luna_lua_cron_register(lua_State *L)
{
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, luna_lua_cron_next);
    lua_setfield(L, -2, "next");
    lua_setfield(L, -2, "cron");
}
