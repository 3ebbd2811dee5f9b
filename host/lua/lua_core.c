/* lua_core.c — see lua_core.h. */
#include "lua/lua_core.h"

#include <time.h>

#include "lua/lua_crypto.h"
#include "lua/lua_json.h"
#include "lua/lua_util.h"

/* core.now() -> seconds since the epoch, from the wall clock, with a
 * fraction (time(NULL)'s whole seconds should clock_gettime fail). */
static int luna_lua_core_now(lua_State *L)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        lua_pushnumber(L, (lua_Number)time(NULL));
    else
        lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec / 1e9);
    return 1;
}

void luna_lua_core_push(lua_State *L)
{
    lua_newtable(L);
    lua_pushstring(L, LUNA_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushcfunction(L, luna_lua_error_new);
    lua_setfield(L, -2, "error");
    lua_pushcfunction(L, luna_lua_core_now);
    lua_setfield(L, -2, "now");
    luna_lua_crypto_register(L);
    luna_lua_json_register(L);
}
