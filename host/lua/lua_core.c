/* lua_core.c — see lua_core.h. */
#include "lua/lua_core.h"

#include <lauxlib.h>
#include <math.h>
#include <string.h>

#include "base/clock.h"
#include "base/cron.h"

#include "lua/lua_crypto.h"
#include "lua/lua_json.h"
#include "lua/lua_util.h"

/* core.now() -> seconds since the epoch, from the wall clock, with a
 * fraction (base/clock.h: the fake clock's under `luna test`). */
static int luna_lua_core_now(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)luna_wall_clock_now());
    return 1;
}

/* core.cron_next(text, after) -> the first minute of the schedule strictly
 * after `after` (Unix seconds), or nil when there is none (past year
 * 9999); false, why when text is no schedule or after no time, so
 * luna.cron.next raises at its caller's line.  The checks and messages of
 * a controller's `every` (controller/spec.c). */
static int luna_lua_core_cron_next(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING) {
        lua_pushboolean(L, 0);
        lua_pushfstring(L, "the schedule must be a string, got %s", luaL_typename(L, 1));
        return 2;
    }
    size_t len;
    const char *text = lua_tolstring(L, 1, &len);
    double after = lua_type(L, 2) == LUA_TNUMBER ? lua_tonumber(L, 2) : NAN;
    if (!(after >= 0 && after <= LUNA_CRON_MAX_TIME)) {
        lua_pushboolean(L, 0);
        lua_pushliteral(L, "after must be a number of seconds since the epoch from 0 to "
                           "253402300799 (the end of year 9999)");
        return 2;
    }
    struct luna_cron c;
    luna_error err = { 0 };
    const char *why = NULL;
    if (len > LUNA_CRON_MAX_TEXT || memchr(text, '\0', len))
        why = lua_pushfstring(L, "a schedule of at most %d bytes", LUNA_CRON_MAX_TEXT);
    else if (luna_cron_parse(text, &c, &err) < 0)
        why = err.msg;
    else if (luna_cron_next(&c, 0) < 0)
        why = "the schedule never runs";
    if (why) {
        lua_pushboolean(L, 0);
        lua_pushstring(L, why);
        return 2;
    }
    double next = luna_cron_next(&c, after);
    if (next < 0)
        lua_pushnil(L);
    else
        lua_pushnumber(L, next);
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
    lua_pushcfunction(L, luna_lua_core_cron_next);
    lua_setfield(L, -2, "cron_next");
    luna_lua_crypto_register(L);
    luna_lua_json_register(L);
}
