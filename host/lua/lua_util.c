/* lua_util.c — see lua_util.h. */
#include "lua/lua_util.h"

#include <stdio.h>

#include "base/liblog.h"
#include "base/log.h"
#include "client/resource.h"

int luna_lua_traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1);
        else
            msg = lua_pushfstring(L, "(error object is a %s value)",
                                  luaL_typename(L, 1));
    }
    /* debug.traceback(msg, 2) */
    lua_getglobal(L, "debug");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "traceback");
        if (lua_isfunction(L, -1)) {
            lua_pushstring(L, msg);
            lua_pushinteger(L, 2);
            lua_call(L, 2, 1);
            return 1;
        }
    }
    lua_pushstring(L, msg);
    return 1;
}

int luna_lua_pcall(lua_State *L, int nargs, int nresults, const char *what)
{
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, luna_lua_traceback);
    lua_insert(L, base);
    int rc = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    if (rc != 0) {
        const char *err = lua_tostring(L, -1);
        luna_error("lua callback failed", "what", what, "error", err ? err : "?");
        lua_pop(L, 1);
        return LUNA_ELUA;
    }
    return 0;
}

static int error_tostring(lua_State *L)
{
    lua_getfield(L, 1, "reason");
    lua_getfield(L, 1, "message");
    lua_pushfstring(L, "%s: %s", luaL_optstring(L, -2, "Unknown"),
                    luaL_optstring(L, -1, ""));
    return 1;
}

enum { ERROR_REASON, ERROR_MESSAGE, ERROR_CODE, ERROR_WHERE };
const char *const luna_lua_error_fields[] = {
    [ERROR_REASON] = "reason", [ERROR_MESSAGE] = "message", [ERROR_CODE] = "code",
    [ERROR_WHERE] = "where", NULL,
};

/* [-0, +1] Pushes a new error. */
static void new_error(lua_State *L, const char *reason, const char *message, int code)
{
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, code);
    lua_setfield(L, -2, luna_lua_error_fields[ERROR_CODE]);
    lua_pushstring(L, reason);
    lua_setfield(L, -2, luna_lua_error_fields[ERROR_REASON]);
    lua_pushstring(L, message ? message : "");
    lua_setfield(L, -2, luna_lua_error_fields[ERROR_MESSAGE]);
    if (luaL_newmetatable(L, "luna.error")) {
        lua_pushcfunction(L, error_tostring);
        lua_setfield(L, -2, "__tostring");
    }
    lua_setmetatable(L, -2);
}

int luna_lua_push_error(lua_State *L, const char *reason, const char *message, int code)
{
    lua_pushnil(L);
    new_error(L, reason, message, code);
    return 2;
}

int luna_lua_error_new(lua_State *L)
{
    const char *reason = luaL_checkstring(L, 1);
    const char *message = luaL_optstring(L, 2, "");
    lua_Number code = luaL_optnumber(L, 3, 0);
    new_error(L, reason, message, 0);
    lua_pushnumber(L, code); /* as given: a Lua number */
    lua_setfield(L, -2, luna_lua_error_fields[ERROR_CODE]);
    return 1;
}

void luna_lua_register_table(lua_State *L, const char *name, const luaL_Reg *funcs)
{
    lua_newtable(L);
    for (; funcs->name; funcs++) {
        lua_pushcfunction(L, funcs->func);
        lua_setfield(L, -2, funcs->name);
    }
    lua_setfield(L, -2, name);
}

const char *luna_lua_opt_string_field(lua_State *L, int idx, const char *key,
                                      const char *def)
{
    lua_getfield(L, idx, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return def;
    }
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "field '%s' must be a string, got %s", key, luaL_typename(L, -1));
    const char *s = lua_tostring(L, -1);
    lua_pop(L, 1); /* still alive: the table references the string */
    return s;
}

lua_Number luna_lua_opt_number_field(lua_State *L, int idx, const char *key,
                                     lua_Number def)
{
    lua_getfield(L, idx, key);
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "field '%s' must be a number, got %s", key, luaL_typename(L, -1));
    lua_Number n = lua_isnil(L, -1) ? def : lua_tonumber(L, -1);
    lua_pop(L, 1);
    return n;
}

int luna_lua_opt_bool_field(lua_State *L, int idx, const char *key, int def)
{
    lua_getfield(L, idx, key);
    int b = lua_isnil(L, -1) ? def : lua_toboolean(L, -1);
    lua_pop(L, 1);
    return b;
}

void luna_lua_new_class(lua_State *L, const char *name, const luaL_Reg *methods,
                        lua_CFunction gc)
{
    luaL_newmetatable(L, name);
    lua_newtable(L);
    for (; methods->name; methods++) {
        lua_pushcfunction(L, methods->func);
        lua_setfield(L, -2, methods->name);
    }
    lua_setfield(L, -2, "__index");
    if (gc) {
        lua_pushcfunction(L, gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
}

void luna_lua_new_locked_class(lua_State *L, const char *name, const luaL_Reg *methods,
                               lua_CFunction gc, lua_CFunction tostring)
{
    if (!luaL_newmetatable(L, name)) {
        lua_pop(L, 1);
        return;
    }
    if (gc) {
        lua_pushcfunction(L, gc);
        lua_setfield(L, -2, "__gc");
    }
    if (tostring) {
        lua_pushcfunction(L, tostring);
        lua_setfield(L, -2, "__tostring");
    }
    lua_pushstring(L, name);
    lua_setfield(L, -2, "__metatable");
    lua_newtable(L);
    for (; methods->name; methods++) {
        lua_pushcfunction(L, methods->func);
        lua_setfield(L, -2, methods->name);
    }
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

void luna_lua_push_resource(lua_State *L, const struct luna_resource *res)
{
    lua_createtable(L, 0, 6);
    lua_pushstring(L, res->group);
    lua_setfield(L, -2, "group");
    lua_pushstring(L, res->version);
    lua_setfield(L, -2, "version");
    lua_pushstring(L, res->resource);
    lua_setfield(L, -2, "resource");
    lua_pushstring(L, res->kind);
    lua_setfield(L, -2, "kind");
    lua_pushboolean(L, res->namespaced);
    lua_setfield(L, -2, "namespaced");
    lua_pushboolean(L, res->has_status);
    lua_setfield(L, -2, "has_status");
}

int luna_lua_panic(lua_State *L)
{
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(not a string)";
    char text[1024];
    snprintf(text, sizeof text, "unprotected error in call to Lua API (%s)", msg);
    luna_liblog_fatal("luajit", text);
}
