/* lua_backoff.c — see lua_backoff.h. */
#include "testing/lua_backoff.h"

#include <lauxlib.h>

#include "base/backoff.h"
#include "lua/lua_util.h"

#define BACKOFF_MT "luna.Backoff"

static int luna_lua_backoff_new(lua_State *L)
{
    struct luna_backoff defaults;
    luna_backoff_init_default(&defaults);
    if (lua_isnoneornil(L, 1))
        lua_newtable(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    double base = luna_lua_opt_number_field(L, 1, "base", defaults.base);
    double max = luna_lua_opt_number_field(L, 1, "max", defaults.max);
    double factor = luna_lua_opt_number_field(L, 1, "factor", defaults.factor);
    double jitter = luna_lua_opt_number_field(L, 1, "jitter", defaults.jitter);
    double reset = luna_lua_opt_number_field(L, 1, "reset_after", defaults.reset_after);
    lua_Number seed = luna_lua_opt_number_field(L, 1, "seed", (lua_Number)(defaults.rng >> 11));
    if (base <= 0 || max < base || factor < 1 || jitter < 0 || reset < 0)
        return luaL_error(L, "backoff needs 0 < base <= max, factor >= 1, jitter >= 0");
    struct luna_backoff *b = lua_newuserdata(L, sizeof *b);
    luna_backoff_init(b, base, max, factor, jitter, reset, (uint64_t)seed);
    luaL_getmetatable(L, BACKOFF_MT);
    lua_setmetatable(L, -2);
    return 1;
}

static int backoff_next(lua_State *L)
{
    struct luna_backoff *b = luaL_checkudata(L, 1, BACKOFF_MT);
    lua_pushnumber(L, luna_backoff_next(b, luaL_checknumber(L, 2)));
    return 1;
}

static int backoff_reset(lua_State *L)
{
    luna_backoff_reset(luaL_checkudata(L, 1, BACKOFF_MT));
    return 0;
}

void luna_lua_backoff_register(lua_State *L)
{
    luaL_newmetatable(L, BACKOFF_MT);
    lua_newtable(L);
    lua_pushcfunction(L, backoff_next);
    lua_setfield(L, -2, "next");
    lua_pushcfunction(L, backoff_reset);
    lua_setfield(L, -2, "reset");
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    static const luaL_Reg funcs[] = { { "new", luna_lua_backoff_new }, { NULL, NULL } };
    luna_lua_register_table(L, "backoff", funcs);
}
