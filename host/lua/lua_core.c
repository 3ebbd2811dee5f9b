/* lua_core.c — see lua_core.h. */
#include "lua/lua_core.h"

#include "lua/lua_crypto.h"
#include "lua/lua_json.h"

void luna_lua_core_push(lua_State *L)
{
    lua_newtable(L);
    lua_pushstring(L, LUNA_VERSION);
    lua_setfield(L, -2, "version");
    luna_lua_crypto_register(L);
    luna_lua_json_register(L);
}
