/* lua_selector.c — see lua_selector.h. */
#include "lua/lua_selector.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "lua/lua_util.h"
#include "base/selector.h"

#define SELECTOR_MT "luna.Selector"

static int luna_lua_selector_parse(lua_State *L)
{
    const char *text = luaL_checkstring(L, 1);
    const char *kind = luaL_optstring(L, 2, "labels");
    enum luna_selector_kind k;
    if (strcmp(kind, "labels") == 0)
        k = LUNA_SELECTOR_LABELS;
    else if (strcmp(kind, "fields") == 0)
        k = LUNA_SELECTOR_FIELDS;
    else
        return luaL_argerror(L, 2, "expected \"labels\" or \"fields\"");
    struct luna_selector **ud = lua_newuserdata(L, sizeof *ud);
    *ud = NULL;
    luaL_getmetatable(L, SELECTOR_MT);
    lua_setmetatable(L, -2);
    luna_error err;
    if (luna_selector_parse(text, k, ud, &err) < 0)
        return luna_lua_push_error(L, "BadRequest", err.msg, 400);
    return 1;
}

static struct luna_selector *check_selector(lua_State *L)
{
    struct luna_selector **ud = luaL_checkudata(L, 1, SELECTOR_MT);
    return *ud;
}

static const char *lookup_table(const char *key, void *ud)
{
    lua_State *L = ud;
    lua_getfield(L, 2, key);
    const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_pop(L, 1); /* the table keeps the string alive */
    return v;
}

static int selector_matches(lua_State *L)
{
    struct luna_selector *sel = check_selector(L);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushboolean(L, luna_selector_matches(sel, lookup_table, L));
    return 1;
}

static int selector_tostring(lua_State *L)
{
    struct luna_selector *sel = check_selector(L);
    size_t need = luna_selector_format(sel, NULL, 0);
    char *buf = lua_newuserdata(L, need + 1);
    luna_selector_format(sel, buf, need + 1);
    lua_pushlstring(L, buf, need);
    return 1;
}

static int selector_gc(lua_State *L)
{
    struct luna_selector **ud = luaL_checkudata(L, 1, SELECTOR_MT);
    luna_selector_free(*ud);
    *ud = NULL;
    return 0;
}

void luna_lua_selector_register(lua_State *L)
{
    luaL_newmetatable(L, SELECTOR_MT);
    lua_newtable(L);
    lua_pushcfunction(L, selector_matches);
    lua_setfield(L, -2, "matches");
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, selector_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushcfunction(L, selector_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    static const luaL_Reg funcs[] = { { "parse", luna_lua_selector_parse }, { NULL, NULL } };
    luna_lua_register_table(L, "selector", funcs);
}
