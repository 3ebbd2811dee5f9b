/* lua_health.c — see lua_health.h. */
#include "testing/lua_health.h"

#include <lauxlib.h>
#include <stdbool.h>
#include <string.h>

#include "base/clock.h"
#include "serve/health.h"
#include "base/loop.h"
#include "testing/lua_ratelimit.h"
#include "lua/lua_util.h"
#include "base/textbuf.h"

#define HEALTH_MT "luna.health"
#define MAX_EXCLUDE 64

struct lua_health {
    struct luna_health *h;         /* owned; NULL once collected */
    struct luna_fake_clock fake;   /* the clock iff fake_clock */
    bool fake_clock;
    struct luna_textbuf buf;       /* render output, reused */
};

static struct lua_health *check_health(lua_State *L)
{
    struct lua_health *u = luaL_checkudata(L, 1, HEALTH_MT);
    if (!u->h)
        luaL_error(L, "health state is closed");
    return u;
}

static const char *check_string(lua_State *L, int idx, const char *what)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_error(L, "health: %s must be a string, got %s", what, luaL_typename(L, idx));
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    if (strlen(s) != len)
        luaL_error(L, "health: %s must not contain NUL bytes", what);
    return s;
}

static int luna_lua_health_new(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_newtable(L);
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
        if (strcmp(k, "clock") && strcmp(k, "interval") && strcmp(k, "timeout"))
            luaL_error(L, "health.new: unknown field '%s'",
                       *k ? k : luaL_typename(L, -1));
    }
    bool fake = luna_lua_ratelimit_check_clock(L, 1);
    struct luna_health_options opts = {
        .interval = luna_lua_opt_number_field(L, 1, "interval", 1.0),
        .timeout = luna_lua_opt_number_field(L, 1, "timeout", 10.0),
    };
    struct lua_health *u = lua_newuserdata(L, sizeof *u);
    memset(u, 0, sizeof *u);
    u->fake_clock = fake;
    luna_fake_clock_init(&u->fake, 0);
    luaL_getmetatable(L, HEALTH_MT);
    lua_setmetatable(L, -2);
    opts.clock = fake ? &u->fake.clock : luna_clock_monotonic();
    opts.loop = fake ? NULL : luna_loop();
    luna_error err;
    int rc = luna_health_new(&opts, &u->h, &err);
    if (rc == LUNA_EINVAL)
        return luaL_error(L, "health.new: %s", err.msg);
    if (rc)
        return luna_lua_push_error(L, luna_errcode_name(rc), err.msg, rc);
    return 1;
}

static int luna_lua_health_gc(lua_State *L)
{
    struct lua_health *u = luaL_checkudata(L, 1, HEALTH_MT);
    luna_health_free(u->h);
    u->h = NULL;
    luna_textbuf_free(&u->buf);
    return 0;
}

static int luna_lua_health_set(lua_State *L)
{
    struct lua_health *u = check_health(L);
    const char *name = check_string(L, 2, "check name");
    luaL_checktype(L, 3, LUA_TBOOLEAN);
    const char *reason = lua_isnoneornil(L, 4) ? NULL : check_string(L, 4, "reason");
    luna_error err;
    int rc = luna_health_set(u->h, name, lua_toboolean(L, 3), reason, &err);
    if (rc == LUNA_EINVAL)
        return luaL_error(L, "%s", err.msg);
    if (rc)
        return luna_lua_push_error(L, luna_errcode_name(rc), err.msg, rc);
    lua_pushboolean(L, 1);
    return 1;
}

static int luna_lua_health_remove(lua_State *L)
{
    struct lua_health *u = check_health(L);
    lua_pushboolean(L, luna_health_remove(u->h, check_string(L, 2, "check name")) == 0);
    return 1;
}

static int luna_lua_health_check(lua_State *L)
{
    struct lua_health *u = check_health(L);
    bool ok;
    const char *reason;
    if (luna_health_check(u->h, check_string(L, 2, "check name"), &ok, &reason)) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushboolean(L, ok);
    lua_pushstring(L, reason);
    return 2;
}

static int luna_lua_health_beat(lua_State *L)
{
    luna_health_beat(check_health(L)->h);
    return 0;
}

static int luna_lua_health_advance(lua_State *L)
{
    struct lua_health *u = check_health(L);
    if (lua_type(L, 2) != LUA_TNUMBER)
        luaL_typerror(L, 2, "number");
    if (!u->fake_clock)
        return luaL_error(L, "health advance: this state runs on the real clock "
                          "(create it with clock = \"fake\")");
    luna_error err;
    if (luna_fake_clock_advance(&u->fake, lua_tonumber(L, 2), &err))
        return luaL_argerror(L, 2, err.msg);
    return 0;
}

static int luna_lua_health_age(lua_State *L)
{
    lua_pushnumber(L, luna_health_heartbeat_age(check_health(L)->h));
    return 1;
}

static int luna_lua_health_live(lua_State *L)
{
    lua_pushboolean(L, luna_health_live(check_health(L)->h));
    return 1;
}

static int luna_lua_health_ready(lua_State *L)
{
    lua_pushboolean(L, luna_health_ready(check_health(L)->h));
    return 1;
}

static int luna_lua_health_count(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)luna_health_check_count(check_health(L)->h));
    return 1;
}

static int luna_lua_health_render(lua_State *L)
{
    struct lua_health *u = check_health(L);
    static const char *const endpoints[] = { "healthz", "readyz", NULL };
    int endpoint = luaL_checkoption(L, 2, NULL, endpoints);
    bool verbose = false;
    const char *exclude[MAX_EXCLUDE + 1] = { NULL };
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        lua_settop(L, 3);
        luaL_checkstack(L, MAX_EXCLUDE + 8, "health render: too many options");
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            lua_pop(L, 1);
            const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
            if (strcmp(k, "verbose") && strcmp(k, "exclude"))
                luaL_error(L, "health render: unknown option '%s'",
                           *k ? k : luaL_typename(L, -1));
        }
        verbose = luna_lua_opt_bool_field(L, 3, "verbose", 0);
        lua_getfield(L, 3, "exclude");
        if (!lua_isnil(L, -1)) {
            luaL_checktype(L, -1, LUA_TTABLE);
            int t = lua_gettop(L);
            int n = (int)lua_objlen(L, t);
            if (n > MAX_EXCLUDE)
                luaL_error(L, "health render: at most %d excluded checks", MAX_EXCLUDE);
            for (int i = 0; i < n; i++) {
                lua_rawgeti(L, t, i + 1);
                exclude[i] = check_string(L, -1, "an excluded check name");
            }
            exclude[n] = NULL;
        }
    }
    luna_textbuf_reset(&u->buf);
    int status = luna_health_render(u->h, endpoint ? LUNA_HEALTH_READYZ : LUNA_HEALTH_HEALTHZ,
                                    verbose, exclude, &u->buf);
    if (status < 0)
        return luna_lua_push_error(L, luna_errcode_name(status), "health: out of memory",
                                   status);
    lua_pushlstring(L, u->buf.data ? u->buf.data : "", u->buf.len);
    lua_pushinteger(L, status);
    return 2;
}

void luna_lua_health_register(lua_State *L)
{
    static const luaL_Reg methods[] = {
        { "set", luna_lua_health_set },
        { "remove", luna_lua_health_remove },
        { "check", luna_lua_health_check },
        { "beat", luna_lua_health_beat },
        { "advance", luna_lua_health_advance },
        { "age", luna_lua_health_age },
        { "live", luna_lua_health_live },
        { "ready", luna_lua_health_ready },
        { "count", luna_lua_health_count },
        { "render", luna_lua_health_render },
        { NULL, NULL },
    };
    luna_lua_new_locked_class(L, HEALTH_MT, methods, luna_lua_health_gc, NULL);
    static const luaL_Reg funcs[] = {
        { "new", luna_lua_health_new },
        { NULL, NULL },
    };
    luna_lua_register_table(L, "health", funcs);
}
