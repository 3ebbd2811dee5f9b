/* lua_workqueue.c — see lua_workqueue.h. */
#include "testing/lua_workqueue.h"

#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/clock.h"
#include "base/loop.h"
#include "testing/lua_loop.h"
#include "testing/lua_ratelimit.h"
#include "lua/lua_util.h"
#include "queue/workqueue.h"

#define WORKQUEUE_MT "luna.workqueue"
/* Registry table lightuserdata(struct lua_workqueue *) -> the object, with
 * weak values: how a C callback finds the object and its environment. */
#define OBJECTS_KEY "luna.workqueue.objects"

struct lua_workqueue {
    struct luna_workqueue *q;        /* owned; NULL once collected */
    struct luna_fake_clock fake;     /* the clock iff fake_clock */
    bool fake_clock;
    lua_State *L;                    /* the state inside a method, else NULL */
    const void *registry;            /* identifies the Lua universe */
};

static struct lua_workqueue *check_wq(lua_State *L)
{
    struct lua_workqueue *w = luaL_checkudata(L, 1, WORKQUEUE_MT);
    if (!w->q)
        luaL_error(L, "workqueue is closed");
    return w;
}

struct luna_workqueue *luna_lua_workqueue_check(lua_State *L, int idx)
{
    struct lua_workqueue *w = luaL_checkudata(L, idx, WORKQUEUE_MT);
    if (!w->q)
        luaL_error(L, "workqueue is closed");
    return w->q;
}

/* ---- callbacks ---------------------------------------------------------- */

/* The state to call back on: the caller's inside a method, the loop
 * runner's from a timer; NULL if that belongs to another Lua universe. */
static lua_State *callback_state(struct lua_workqueue *w)
{
    lua_State *L = w->L ? w->L : luna_lua_loop_current();
    if (!L || !lua_checkstack(L, 6))
        return NULL;
    lua_pushvalue(L, LUA_REGISTRYINDEX);
    const void *registry = lua_topointer(L, -1);
    lua_pop(L, 1);
    return registry == w->registry ? L : NULL;
}

/* Pushes the object's environment table; false (nothing pushed) if the
 * object is gone. */
static bool push_env(lua_State *L, struct lua_workqueue *w)
{
    lua_getfield(L, LUA_REGISTRYINDEX, OBJECTS_KEY);
    lua_pushlightuserdata(L, w);
    lua_rawget(L, -2);
    lua_remove(L, -2);
    if (!lua_isuserdata(L, -1)) {
        lua_pop(L, 1);
        return false;
    }
    lua_getfenv(L, -1);
    lua_remove(L, -2);
    return true;
}

/* Pushes env[field] if it is a function (clearing it if `take`); returns
 * whether it pushed. */
static bool push_callback(lua_State *L, struct lua_workqueue *w,
                          const char *field, bool take)
{
    if (!push_env(L, w))
        return false;
    lua_getfield(L, -1, field);
    if (take) {
        lua_pushnil(L);
        lua_setfield(L, -3, field);
    }
    lua_remove(L, -2);
    if (!lua_isfunction(L, -1)) {
        lua_pop(L, 1);
        return false;
    }
    return true;
}

static void ready_cb(void *ud)
{
    struct lua_workqueue *w = ud;
    lua_State *L = callback_state(w);
    if (L && push_callback(L, w, "ready", false))
        luna_lua_pcall(L, 0, 0, "workqueue on_ready");
}

static void drain_cb(void *ud, bool drained)
{
    struct lua_workqueue *w = ud;
    lua_State *L = callback_state(w);
    if (L && push_callback(L, w, "drain", true)) {
        lua_pushboolean(L, drained);
        luna_lua_pcall(L, 1, 0, "workqueue drain");
    }
}

/* ---- construction ------------------------------------------------------- */

static const char *const new_fields[] = { "name", "clock", "rate_limiter", "fifo", NULL };
/* Shorthand for the default limiter's numbers. */
static const char *const shorthand_fields[] = { "base_delay", "max_delay", "qps",
                                                "burst", NULL };

static bool listed(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(name, *list) == 0)
            return true;
    return false;
}

/* Parses new{}'s options (may raise); returns the limiter description. */
static const struct luna_ratelimit_config *
check_options(lua_State *L, struct luna_lua_ratelimit_nodes *nodes)
{
    bool shorthand = false;
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "workqueue.new: unexpected %s key", luaL_typename(L, -1));
        const char *name = lua_tostring(L, -1);
        if (listed(name, shorthand_fields))
            shorthand = true;
        else if (!listed(name, new_fields))
            luaL_error(L, "workqueue.new: unknown field '%s'", name);
    }
    lua_getfield(L, 1, "rate_limiter");
    if (!lua_isnil(L, -1)) {
        if (!lua_istable(L, -1))
            luaL_error(L, "workqueue.new: field 'rate_limiter' must be a table, got %s",
                       luaL_typename(L, -1));
        if (shorthand)
            luaL_error(L, "workqueue.new: give either rate_limiter or "
                       "base_delay/max_delay/qps/burst, not both");
        const struct luna_ratelimit_config *cfg =
            luna_lua_ratelimit_check_config(L, lua_gettop(L), nodes, NULL);
        lua_pop(L, 1);
        return cfg;
    }
    lua_pop(L, 1);
    struct luna_ratelimit_config *cfg = &nodes->node[0];
    nodes->n = 1;
    luna_ratelimit_config_init(cfg, LUNA_RATELIMIT_DEFAULT);
    cfg->base_delay = luna_lua_opt_number_field(L, 1, "base_delay", cfg->base_delay);
    cfg->max_delay = luna_lua_opt_number_field(L, 1, "max_delay", cfg->max_delay);
    cfg->qps = luna_lua_opt_number_field(L, 1, "qps", cfg->qps);
    cfg->burst = luna_lua_opt_number_field(L, 1, "burst", cfg->burst);
    return cfg;
}

static int luna_lua_workqueue_new(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_newtable(L);
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    struct luna_lua_ratelimit_nodes nodes;
    const struct luna_ratelimit_config *cfg = check_options(L, &nodes);
    bool fake = luna_lua_ratelimit_check_clock(L, 1);
    const char *name = luna_lua_opt_string_field(L, 1, "name", "");
    lua_getfield(L, 1, "fifo");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
        luaL_error(L, "workqueue.new: field 'fifo' must be a boolean, got %s",
                   luaL_typename(L, -1));
    bool fifo = lua_toboolean(L, -1);
    lua_pop(L, 1);

    struct lua_workqueue *w = lua_newuserdata(L, sizeof *w);
    memset(w, 0, sizeof *w);
    w->fake_clock = fake;
    luna_fake_clock_init(&w->fake, 0);
    luaL_getmetatable(L, WORKQUEUE_MT);
    lua_setmetatable(L, -2);
    lua_newtable(L);
    lua_setfenv(L, -2);
    lua_pushvalue(L, LUA_REGISTRYINDEX);
    w->registry = lua_topointer(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, OBJECTS_KEY);
    lua_pushlightuserdata(L, w);
    lua_pushvalue(L, -3);
    lua_rawset(L, -3);
    lua_pop(L, 1);

    /* No Lua call between here and the end: nothing can raise while the
     * limiter is not yet owned by the queue. */
    const struct luna_clock *clock = fake ? &w->fake.clock : luna_clock_monotonic();
    luna_error err = { 0 };
    struct luna_ratelimit *limiter = NULL;
    int rc = luna_ratelimit_new(cfg, clock, &limiter, &err);
    if (rc == 0) {
        struct luna_workqueue_options opts = {
            .name = name,
            .fifo = fifo,
            .clock = clock,
            .loop = fake ? NULL : luna_loop(),
            .limiter = limiter,
        };
        rc = luna_workqueue_new(&opts, &w->q, &err);
    }
    if (rc == LUNA_EINVAL)
        return luaL_error(L, "workqueue.new: %s", err.msg);
    if (rc)
        return luna_lua_push_error(L, luna_errcode_name(rc), err.msg, rc);
    return 1;
}

/* ---- methods ------------------------------------------------------------ */

/* A number argument (not a numeric string).  May raise. */
static lua_Number check_number(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TNUMBER)
        luaL_typerror(L, idx, "number");
    return lua_tonumber(L, idx);
}

/* An optional priority argument: an integer in int's range; nil = 0.  May
 * raise. */
static int opt_priority(lua_State *L, int idx)
{
    if (lua_isnoneornil(L, idx))
        return LUNA_WORKQUEUE_PRIORITY_DEFAULT;
    lua_Number n = check_number(L, idx);
    if (!(n >= INT_MIN && n <= INT_MAX) || n != (lua_Number)(int)n)
        luaL_argerror(L, idx, "priority must be an integer");
    return (int)n;
}

/* Pushes the result of an add: true, false (dropped: shutting down), or
 * nil, err. */
static int push_add_result(lua_State *L, int rc)
{
    if (rc == 0 || rc == LUNA_ECANCELED) {
        lua_pushboolean(L, rc == 0);
        return 1;
    }
    return luna_lua_push_error(L, luna_errcode_name(rc), "workqueue: out of memory",
                               rc);
}

static int luna_lua_workqueue_add(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    const char *key = luna_lua_ratelimit_check_key(L, 2);
    int priority = opt_priority(L, 3);
    lua_State *outer = w->L;
    w->L = L;
    int rc = luna_workqueue_add_priority(w->q, key, priority);
    w->L = outer;
    return push_add_result(L, rc);
}

static int luna_lua_workqueue_add_after(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    const char *key = luna_lua_ratelimit_check_key(L, 2);
    lua_Number seconds = check_number(L, 3);
    if (!isfinite(seconds))
        return luaL_argerror(L, 3, "delay must be a finite number of seconds");
    int priority = opt_priority(L, 4);
    lua_State *outer = w->L;
    w->L = L;
    int rc = luna_workqueue_add_after_priority(w->q, key, seconds, priority);
    w->L = outer;
    return push_add_result(L, rc);
}

static int luna_lua_workqueue_add_rate_limited(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    const char *key = luna_lua_ratelimit_check_key(L, 2);
    int priority = opt_priority(L, 3);
    lua_State *outer = w->L;
    w->L = L;
    int rc = luna_workqueue_add_rate_limited_priority(w->q, key, priority);
    w->L = outer;
    return push_add_result(L, rc);
}

/* get() returns the key; get_with_priority() the key and its priority. */
static int get(lua_State *L, bool with_priority)
{
    struct lua_workqueue *w = check_wq(L);
    const char *key;
    int priority;
    switch (luna_workqueue_get_priority(w->q, &key, &priority)) {
    case LUNA_WORKQUEUE_ITEM:
        lua_pushstring(L, key);
        if (!with_priority)
            return 1;
        lua_pushinteger(L, priority);
        return 2;
    case LUNA_WORKQUEUE_EMPTY:
        lua_pushnil(L);
        lua_pushliteral(L, "empty");
        return 2;
    case LUNA_WORKQUEUE_SHUTDOWN:
        break;
    }
    lua_pushnil(L);
    lua_pushliteral(L, "shutdown");
    return 2;
}

static int luna_lua_workqueue_get(lua_State *L) { return get(L, false); }
static int luna_lua_workqueue_get_with_priority(lua_State *L) { return get(L, true); }

static int luna_lua_workqueue_set_fifo(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    luaL_checktype(L, 2, LUA_TBOOLEAN);
    int rc = luna_workqueue_set_fifo(w->q, lua_toboolean(L, 2));
    if (rc)
        return luna_lua_push_error(L, luna_errcode_name(rc), "workqueue: out of memory", rc);
    lua_pushboolean(L, 1);
    return 1;
}

static int luna_lua_workqueue_depth_at(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    lua_pushnumber(L, (double)luna_workqueue_depth_at(w->q, opt_priority(L, 2)));
    return 1;
}

static int luna_lua_workqueue_done(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    const char *key = luna_lua_ratelimit_check_key(L, 2);
    lua_State *outer = w->L;
    w->L = L;
    int rc = luna_workqueue_done(w->q, key);
    w->L = outer;
    if (rc)
        return luaL_error(L, "workqueue done: key \"%s\" is not being processed", key);
    return 0;
}

static int luna_lua_workqueue_forget(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    luna_workqueue_forget(w->q, luna_lua_ratelimit_check_key(L, 2));
    return 0;
}

static int luna_lua_workqueue_num_requeues(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    lua_pushnumber(L, luna_workqueue_num_requeues(w->q, luna_lua_ratelimit_check_key(L, 2)));
    return 1;
}

static int luna_lua_workqueue_len(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    lua_pushnumber(L, (lua_Number)luna_workqueue_len(w->q));
    return 1;
}

static int luna_lua_workqueue_shutdown(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    lua_State *outer = w->L;
    w->L = L;
    luna_workqueue_shutdown(w->q);
    w->L = outer;
    return 0;
}

static int luna_lua_workqueue_shutdown_with_drain(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    bool has_fn = !lua_isnoneornil(L, 2);
    if (has_fn)
        luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_getfenv(L, 1);
    lua_getfield(L, -1, "drain");
    if (!lua_isnil(L, -1))
        return luaL_error(L, "workqueue shutdown_with_drain: a drain is already pending");
    lua_pop(L, 1);
    if (has_fn) {
        lua_pushvalue(L, 2);
        lua_setfield(L, -2, "drain");
    }
    lua_pop(L, 1);
    lua_State *outer = w->L;
    w->L = L;
    luna_workqueue_shutdown_with_drain(w->q, has_fn ? drain_cb : NULL, w);
    w->L = outer;
    return 0;
}

static int luna_lua_workqueue_is_shutting_down(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    lua_pushboolean(L, luna_workqueue_is_shutting_down(w->q));
    return 1;
}

static int luna_lua_workqueue_advance(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    lua_Number seconds = check_number(L, 2);
    if (!w->fake_clock)
        return luaL_error(L, "workqueue advance: this queue runs on the real clock "
                          "(create it with clock = \"fake\")");
    luna_error err;
    if (luna_fake_clock_advance(&w->fake, seconds, &err))
        return luaL_argerror(L, 2, err.msg);
    lua_State *outer = w->L;
    w->L = L;
    luna_workqueue_tick(w->q);
    w->L = outer;
    return 0;
}

static int luna_lua_workqueue_now(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    lua_pushnumber(L, w->fake_clock ? w->fake.now : luna_clock_now(luna_clock_monotonic()));
    return 1;
}

static int luna_lua_workqueue_on_ready(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    lua_settop(L, 2);
    bool has_fn = !lua_isnoneornil(L, 2);
    if (has_fn)
        luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_getfenv(L, 1);
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "ready");
    lua_pop(L, 1);
    luna_workqueue_set_ready_cb(w->q, has_fn ? ready_cb : NULL, w);
    return 0;
}

static void set_number(lua_State *L, const char *name, double value)
{
    lua_pushnumber(L, value);
    lua_setfield(L, -2, name);
}

static int luna_lua_workqueue_metrics(lua_State *L)
{
    struct lua_workqueue *w = check_wq(L);
    struct luna_workqueue_metrics m;
    luna_workqueue_metrics(w->q, &m);
    lua_createtable(L, 0, 12);
    set_number(L, "depth", (double)m.depth);
    set_number(L, "queued", (double)m.queued);
    set_number(L, "processing", (double)m.processing);
    set_number(L, "waiting", (double)m.waiting);
    set_number(L, "adds_total", (double)m.adds_total);
    set_number(L, "retries_total", (double)m.retries_total);
    set_number(L, "queue_duration_sum", m.queue_duration_sum);
    set_number(L, "queue_duration_count", (double)m.queue_duration_count);
    set_number(L, "work_duration_sum", m.work_duration_sum);
    set_number(L, "work_duration_count", (double)m.work_duration_count);
    set_number(L, "unfinished_work_seconds", m.unfinished_work_seconds);
    set_number(L, "longest_running_processor_seconds", m.longest_running_processor_seconds);
    return 1;
}

static int luna_lua_workqueue_gc(lua_State *L)
{
    struct lua_workqueue *w = luaL_checkudata(L, 1, WORKQUEUE_MT);
    luna_workqueue_free(w->q);
    w->q = NULL;
    return 0;
}

static int luna_lua_workqueue_tostring(lua_State *L)
{
    struct lua_workqueue *w = luaL_checkudata(L, 1, WORKQUEUE_MT);
    lua_pushfstring(L, "luna.workqueue(%s)", w->q ? luna_workqueue_name(w->q) : "closed");
    return 1;
}

void luna_lua_workqueue_register(lua_State *L)
{
    static const luaL_Reg methods[] = {
        { "add", luna_lua_workqueue_add },
        { "add_after", luna_lua_workqueue_add_after },
        { "add_rate_limited", luna_lua_workqueue_add_rate_limited },
        { "get", luna_lua_workqueue_get },
        { "get_with_priority", luna_lua_workqueue_get_with_priority },
        { "depth_at", luna_lua_workqueue_depth_at },
        { "set_fifo", luna_lua_workqueue_set_fifo },
        { "done", luna_lua_workqueue_done },
        { "forget", luna_lua_workqueue_forget },
        { "num_requeues", luna_lua_workqueue_num_requeues },
        { "len", luna_lua_workqueue_len },
        { "shutdown", luna_lua_workqueue_shutdown },
        { "shutdown_with_drain", luna_lua_workqueue_shutdown_with_drain },
        { "is_shutting_down", luna_lua_workqueue_is_shutting_down },
        { "advance", luna_lua_workqueue_advance },
        { "now", luna_lua_workqueue_now },
        { "on_ready", luna_lua_workqueue_on_ready },
        { "metrics", luna_lua_workqueue_metrics },
        { NULL, NULL },
    };
    luna_lua_new_locked_class(L, WORKQUEUE_MT, methods, luna_lua_workqueue_gc,
                              luna_lua_workqueue_tostring);
    lua_getfield(L, LUA_REGISTRYINDEX, OBJECTS_KEY);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "v");
        lua_setfield(L, -2, "__mode");
        lua_setmetatable(L, -2);
        lua_setfield(L, LUA_REGISTRYINDEX, OBJECTS_KEY);
    } else {
        lua_pop(L, 1);
    }
    static const luaL_Reg funcs[] = {
        { "new", luna_lua_workqueue_new },
        { NULL, NULL },
    };
    luna_lua_register_table(L, "workqueue", funcs);
}
