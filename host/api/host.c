/* api/host.c — see api/host.h. */
#include "api/host.h"

/* The registry key of the state's host (its address). */
static char key_host;

void luna_api_host_set(lua_State *L, struct luna_api_host *host)
{
    lua_pushlightuserdata(L, &key_host);
    lua_pushlightuserdata(L, host);
    lua_rawset(L, LUA_REGISTRYINDEX);
}

struct luna_api_host *luna_api_host(lua_State *L)
{
    lua_pushlightuserdata(L, &key_host);
    lua_rawget(L, LUA_REGISTRYINDEX);
    struct luna_api_host *host = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return host;
}
