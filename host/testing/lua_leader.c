/* lua_leader.c — see lua_leader.h. */
#include "testing/lua_leader.h"

#include <lauxlib.h>
#include <string.h>

#include "base/clock.h"
#include "client/http.h"
#include "client/kube_client.h"
#include "client/kubeconfig.h"
#include "cluster/leader.h"
#include "base/loop.h"
#include "lua/lua_util.h"
#include "testing/lua_kube_stack.h"

#define LEADER_MT "luna.leader"

enum { RELEASE_NONE, RELEASE_PENDING, RELEASE_DONE, RELEASE_FAILED };

struct lua_leader {
    struct luna_lua_kube_stack stack;
    struct luna_leader *le;          /* NULL once closed */
    struct luna_fake_clock fake;     /* the clock iff fake_clock */
    bool fake_clock;
    lua_State *T;                    /* anchored thread for callbacks */
    int thread_ref;
    int on_started, on_stopped, on_new;
    int release;
};

static struct lua_leader *check_leader(lua_State *L)
{
    struct lua_leader *u = luaL_checkudata(L, 1, LEADER_MT);
    if (!u->le)
        luaL_error(L, "leader elector is closed");
    return u;
}

static void close_leader(lua_State *L, struct lua_leader *u)
{
    luna_leader_free(u->le);
    u->le = NULL;
    luna_lua_kube_stack_close(&u->stack);
    int *refs[] = { &u->thread_ref, &u->on_started, &u->on_stopped, &u->on_new };
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        luaL_unref(L, LUA_REGISTRYINDEX, *refs[i]);
        *refs[i] = LUA_NOREF;
    }
    u->T = NULL;
}

static void call(struct lua_leader *u, int ref, const char *what, const char *arg)
{
    if (ref == LUA_NOREF || !u->T)
        return;
    lua_rawgeti(u->T, LUA_REGISTRYINDEX, ref);
    if (arg)
        lua_pushstring(u->T, arg);
    luna_lua_pcall(u->T, arg ? 1 : 0, 0, what);
}

static void on_started(void *ud)
{
    struct lua_leader *u = ud;
    call(u, u->on_started, "leader on_started_leading", NULL);
}

static void on_stopped(void *ud)
{
    struct lua_leader *u = ud;
    call(u, u->on_stopped, "leader on_stopped_leading", NULL);
}

static void on_new(void *ud, const char *identity)
{
    struct lua_leader *u = ud;
    call(u, u->on_new, "leader on_new_leader", identity);
}

static int opt_function(lua_State *L, int idx, const char *key)
{
    lua_getfield(L, idx, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return LUA_NOREF;
    }
    if (!lua_isfunction(L, -1))
        luaL_error(L, "field '%s' must be a function, got %s", key, luaL_typename(L, -1));
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

static const char *required_string(lua_State *L, int idx, const char *key)
{
    const char *s = luna_lua_opt_string_field(L, idx, key, NULL);
    if (!s)
        luaL_error(L, "core.leader.new: field '%s' is required", key);
    return s;
}

static int luna_lua_leader_new(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    static const char *const known[] = {
        "kubeconfig", "context", "name", "namespace", "identity", "lease_duration",
        "renew_deadline", "retry_period", "jitter", "clock", "on_started_leading",
        "on_stopped_leading", "on_new_leader", NULL,
    };
    for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        bool ok = false;
        for (size_t i = 0; k && known[i]; i++)
            ok = ok || strcmp(k, known[i]) == 0;
        if (!ok)
            return luaL_error(L, "core.leader.new: unknown field '%s'",
                              k ? k : luaL_typename(L, -2));
    }
    struct luna_kubeconfig_options ko = { 0 };
    ko.path = required_string(L, 1, "kubeconfig");
    ko.context = luna_lua_opt_string_field(L, 1, "context", NULL);
    const char *clock = luna_lua_opt_string_field(L, 1, "clock", "real");
    if (strcmp(clock, "real") != 0 && strcmp(clock, "fake") != 0)
        return luaL_error(L, "field 'clock' must be \"real\" or \"fake\", got \"%s\"", clock);
    double jitter = 0;
    lua_getfield(L, 1, "jitter");
    if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1))
        jitter = -1;
    else if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TNUMBER)
        return luaL_error(L, "field 'jitter' must be a number or false");
    else if (lua_type(L, -1) == LUA_TNUMBER && (jitter = lua_tonumber(L, -1)) <= 0)
        return luaL_error(L, "field 'jitter' must be positive (false: none)");
    lua_pop(L, 1);
    struct luna_leader_options lo = {
        .name = required_string(L, 1, "name"),
        .namespace_ = required_string(L, 1, "namespace"),
        .identity = required_string(L, 1, "identity"),
        .lease_duration = luna_lua_opt_number_field(L, 1, "lease_duration", 0),
        .renew_deadline = luna_lua_opt_number_field(L, 1, "renew_deadline", 0),
        .retry_period = luna_lua_opt_number_field(L, 1, "retry_period", 0),
        .jitter = jitter,
        .on_started_leading = on_started,
        .on_stopped_leading = on_stopped,
        .on_new_leader = on_new,
    };
    struct lua_leader *u = lua_newuserdata(L, sizeof *u);
    memset(u, 0, sizeof *u);
    u->thread_ref = u->on_started = u->on_stopped = u->on_new = LUA_NOREF;
    luaL_getmetatable(L, LEADER_MT);
    lua_setmetatable(L, -2);
    int ud = lua_gettop(L);
    u->on_started = opt_function(L, 1, "on_started_leading");
    u->on_stopped = opt_function(L, 1, "on_stopped_leading");
    u->on_new = opt_function(L, 1, "on_new_leader");
    u->fake_clock = strcmp(clock, "fake") == 0;
    luna_fake_clock_init(&u->fake, 0);
    lo.clock = u->fake_clock ? &u->fake.clock : luna_clock_monotonic();
    lo.loop = u->fake_clock ? NULL : luna_loop();
    lo.ud = u;
    luna_error err = { 0 };
    int rc = luna_leader_new(NULL, &lo, &u->le, &err);
    luna_leader_free(u->le); /* validated; made again below with a client */
    u->le = NULL;
    if (rc < 0) {
        close_leader(L, u);
        return luaL_error(L, "core.leader.new: %s", err.msg);
    }
    if (luna_lua_kube_stack_open(&u->stack, &ko, &err) < 0 ||
        luna_leader_new(u->stack.kc, &lo, &u->le, &err) < 0) {
        close_leader(L, u);
        return luna_lua_push_error(L, "InvalidConfig", err.msg, err.code);
    }
    u->T = lua_newthread(L);
    u->thread_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, ud);
    return 1;
}

static int luna_lua_leader_start(lua_State *L)
{
    luna_leader_start(check_leader(L)->le);
    return 0;
}

static int luna_lua_leader_tick(lua_State *L)
{
    luna_leader_tick(check_leader(L)->le);
    return 0;
}

static int luna_lua_leader_advance(lua_State *L)
{
    struct lua_leader *u = check_leader(L);
    double secs = luaL_checknumber(L, 2);
    if (!u->fake_clock)
        return luaL_error(L, "advance needs clock = \"fake\"");
    luna_error err = { 0 };
    if (luna_fake_clock_advance(&u->fake, secs, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    luna_leader_tick(u->le);
    return 0;
}

static int luna_lua_leader_now(lua_State *L)
{
    struct lua_leader *u = check_leader(L);
    lua_pushnumber(L, u->fake_clock ? u->fake.now : luna_clock_now(luna_clock_monotonic()));
    return 1;
}

static int luna_lua_leader_is_leader(lua_State *L)
{
    lua_pushboolean(L, luna_leader_is_leader(check_leader(L)->le));
    return 1;
}

static int luna_lua_leader_holder(lua_State *L)
{
    lua_pushstring(L, luna_leader_holder(check_leader(L)->le));
    return 1;
}

static int luna_lua_leader_busy(lua_State *L)
{
    lua_pushboolean(L, luna_leader_busy(check_leader(L)->le));
    return 1;
}

static int luna_lua_leader_healthy(lua_State *L)
{
    const char *reason = "";
    lua_pushboolean(L, luna_leader_healthy(check_leader(L)->le, &reason));
    lua_pushstring(L, reason);
    return 2;
}

static int luna_lua_leader_stats(lua_State *L)
{
    struct luna_leader_stats st = luna_leader_stats(check_leader(L)->le);
    lua_createtable(L, 0, 5);
#define FIELD(name) (lua_pushnumber(L, (lua_Number)st.name), lua_setfield(L, -2, #name))
    FIELD(attempts);
    FIELD(failures);
    FIELD(conflicts);
    FIELD(acquisitions);
    FIELD(renewals);
#undef FIELD
    return 1;
}

static void on_released(void *ud, bool released)
{
    struct lua_leader *u = ud;
    u->release = released ? RELEASE_DONE : RELEASE_FAILED;
}

static int luna_lua_leader_release(lua_State *L)
{
    struct lua_leader *u = check_leader(L);
    u->release = RELEASE_PENDING;
    luna_leader_release(u->le, on_released, u);
    return 0;
}

static int luna_lua_leader_released(lua_State *L)
{
    struct lua_leader *u = check_leader(L);
    if (u->release == RELEASE_NONE || u->release == RELEASE_PENDING)
        lua_pushnil(L);
    else
        lua_pushboolean(L, u->release == RELEASE_DONE);
    return 1;
}

static int luna_lua_leader_close(lua_State *L)
{
    struct lua_leader *u = luaL_checkudata(L, 1, LEADER_MT);
    close_leader(L, u);
    return 0;
}

void luna_lua_leader_register(lua_State *L)
{
    static const luaL_Reg methods[] = {
        { "start", luna_lua_leader_start },
        { "tick", luna_lua_leader_tick },
        { "advance", luna_lua_leader_advance },
        { "now", luna_lua_leader_now },
        { "is_leader", luna_lua_leader_is_leader },
        { "holder", luna_lua_leader_holder },
        { "busy", luna_lua_leader_busy },
        { "healthy", luna_lua_leader_healthy },
        { "stats", luna_lua_leader_stats },
        { "release", luna_lua_leader_release },
        { "released", luna_lua_leader_released },
        { "close", luna_lua_leader_close },
        { NULL, NULL },
    };
    if (luaL_newmetatable(L, LEADER_MT)) {
        lua_newtable(L);
        luaL_register(L, NULL, methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, luna_lua_leader_close);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    static const luaL_Reg funcs[] = {
        { "new", luna_lua_leader_new },
        { NULL, NULL },
    };
    luna_lua_register_table(L, "leader", funcs);
}
