/* lua_ratelimit.c — see lua_ratelimit.h. */
#include "testing/lua_ratelimit.h"

#include <lauxlib.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/clock.h"
#include "lua/lua_util.h"

#define RATELIMITER_MT "luna.ratelimiter"

/* ---- the description parser -------------------------------------------- */

static const char *const fields_default[] = { "kind", "base_delay", "max_delay",
                                              "qps", "burst", NULL };
static const char *const fields_exponential[] = { "kind", "base_delay",
                                                  "max_delay", NULL };
static const char *const fields_bucket[] = { "kind", "qps", "burst", NULL };
static const char *const fields_fast_slow[] = { "kind", "fast_delay", "slow_delay",
                                                "max_fast_attempts", NULL };
static const char *const fields_max_of[] = { "kind", NULL };

static const char *const *fields_of(enum luna_ratelimit_kind kind)
{
    switch (kind) {
    case LUNA_RATELIMIT_DEFAULT:     return fields_default;
    case LUNA_RATELIMIT_EXPONENTIAL: return fields_exponential;
    case LUNA_RATELIMIT_BUCKET:      return fields_bucket;
    case LUNA_RATELIMIT_FAST_SLOW:   return fields_fast_slow;
    case LUNA_RATELIMIT_MAX_OF:      return fields_max_of;
    }
    return fields_max_of;
}

static bool listed(const char *name, const char *const *list)
{
    for (; list && *list; list++)
        if (strcmp(name, *list) == 0)
            return true;
    return false;
}

/* Parses the table at idx (absolute) into nodes->node[slot].  May raise. */
static void parse_node(lua_State *L, int idx, struct luna_lua_ratelimit_nodes *nodes,
                       size_t slot, const char *const *extra)
{
    const char *kind_name = luna_lua_opt_string_field(L, idx, "kind", "default");
    int kind = luna_ratelimit_kind_parse(kind_name);
    if (kind < 0)
        luaL_error(L, "rate limiter: unknown kind '%s' (want default, exponential, "
                   "bucket, fast_slow or max_of)", kind_name);
    struct luna_ratelimit_config *cfg = &nodes->node[slot];
    luna_ratelimit_config_init(cfg, (enum luna_ratelimit_kind)kind);
    size_t n_children = kind == LUNA_RATELIMIT_MAX_OF ? lua_objlen(L, idx) : 0;

    const char *const *fields = fields_of(cfg->kind);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING) {
            const char *name = lua_tostring(L, -1);
            if (!listed(name, fields) && !listed(name, extra))
                luaL_error(L, "rate limiter %s: unknown field '%s'", kind_name, name);
        } else {
            lua_Number i = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : 0;
            if (!(i >= 1 && i <= (lua_Number)n_children) || i != floor(i))
                luaL_error(L, "rate limiter %s: unexpected %s key", kind_name,
                           luaL_typename(L, -1));
        }
    }

    if (cfg->kind == LUNA_RATELIMIT_DEFAULT || cfg->kind == LUNA_RATELIMIT_EXPONENTIAL) {
        cfg->base_delay = luna_lua_opt_number_field(L, idx, "base_delay", cfg->base_delay);
        cfg->max_delay = luna_lua_opt_number_field(L, idx, "max_delay", cfg->max_delay);
    }
    if (cfg->kind == LUNA_RATELIMIT_DEFAULT || cfg->kind == LUNA_RATELIMIT_BUCKET) {
        cfg->qps = luna_lua_opt_number_field(L, idx, "qps", cfg->qps);
        cfg->burst = luna_lua_opt_number_field(L, idx, "burst", cfg->burst);
    }
    switch (cfg->kind) {
    case LUNA_RATELIMIT_DEFAULT:
    case LUNA_RATELIMIT_EXPONENTIAL:
    case LUNA_RATELIMIT_BUCKET:
        break;
    case LUNA_RATELIMIT_FAST_SLOW:
        for (const char *const *f = fields_fast_slow + 1; *f; f++) {
            lua_getfield(L, idx, *f);
            if (lua_isnil(L, -1))
                luaL_error(L, "rate limiter fast_slow: field '%s' is required", *f);
            lua_pop(L, 1);
        }
        cfg->fast_delay = luna_lua_opt_number_field(L, idx, "fast_delay", cfg->fast_delay);
        cfg->slow_delay = luna_lua_opt_number_field(L, idx, "slow_delay", cfg->slow_delay);
        cfg->max_fast_attempts = luna_lua_opt_number_field(L, idx, "max_fast_attempts",
                                                           cfg->max_fast_attempts);
        break;
    case LUNA_RATELIMIT_MAX_OF:
        if (n_children == 0)
            luaL_error(L, "rate limiter max_of: needs at least one child limiter "
                       "in its array part");
        if (n_children > LUNA_LUA_RATELIMIT_MAX_NODES - nodes->n)
            luaL_error(L, "rate limiter: more than %d limiters in one description",
                       LUNA_LUA_RATELIMIT_MAX_NODES);
        size_t first = nodes->n;
        nodes->n += n_children;
        cfg->children = &nodes->node[first];
        cfg->n_children = n_children;
        for (size_t i = 0; i < n_children; i++) {
            lua_rawgeti(L, idx, (int)i + 1);
            if (!lua_istable(L, -1))
                luaL_error(L, "rate limiter max_of: child %d must be a table, got %s",
                           (int)i + 1, luaL_typename(L, -1));
            parse_node(L, lua_gettop(L), nodes, first + i, NULL);
            lua_pop(L, 1);
        }
        break;
    }
}

const struct luna_ratelimit_config *
luna_lua_ratelimit_check_config(lua_State *L, int idx,
                                struct luna_lua_ratelimit_nodes *nodes,
                                const char *const *extra)
{
    if (idx < 0)
        idx = lua_gettop(L) + idx + 1;
    luaL_checkstack(L, 8, "rate limiter description");
    nodes->n = 1;
    parse_node(L, idx, nodes, 0, extra);
    return &nodes->node[0];
}

const char *luna_lua_ratelimit_check_key(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_argerror(L, idx, lua_pushfstring(L, "key must be a string, got %s",
                                              luaL_typename(L, idx)));
    size_t len;
    const char *key = lua_tolstring(L, idx, &len);
    if (strlen(key) != len)
        luaL_argerror(L, idx, "key must not contain NUL bytes");
    return key;
}

/* ---- the limiter object ------------------------------------------------ */

struct lua_ratelimiter {
    struct luna_ratelimit *rl;      /* owned; NULL once collected */
    struct luna_fake_clock fake;      /* the clock iff fake_clock */
    bool fake_clock;
};

static struct lua_ratelimiter *check_limiter(lua_State *L)
{
    struct lua_ratelimiter *u = luaL_checkudata(L, 1, RATELIMITER_MT);
    if (!u->rl)
        luaL_error(L, "rate limiter is closed");
    return u;
}

bool luna_lua_ratelimit_check_clock(lua_State *L, int idx)
{
    const char *clock = luna_lua_opt_string_field(L, idx, "clock", "real");
    if (strcmp(clock, "fake") == 0)
        return true;
    if (strcmp(clock, "real") != 0)
        luaL_error(L, "field 'clock' must be \"real\" or \"fake\", got \"%s\"", clock);
    return false;
}

static int luna_lua_ratelimit_new(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    static const char *const extra[] = { "clock", NULL };
    struct luna_lua_ratelimit_nodes nodes;
    const struct luna_ratelimit_config *cfg =
        luna_lua_ratelimit_check_config(L, 1, &nodes, extra);
    bool fake = luna_lua_ratelimit_check_clock(L, 1);

    struct lua_ratelimiter *u = lua_newuserdata(L, sizeof *u);
    u->rl = NULL;
    u->fake_clock = fake;
    luna_fake_clock_init(&u->fake, 0);
    luaL_getmetatable(L, RATELIMITER_MT);
    lua_setmetatable(L, -2);
    luna_error err = { 0 };
    int rc = luna_ratelimit_new(cfg, fake ? &u->fake.clock : luna_clock_monotonic(),
                                  &u->rl, &err);
    if (rc == LUNA_EINVAL)
        return luaL_error(L, "%s", err.msg);
    if (rc)
        return luna_lua_push_error(L, luna_errcode_name(rc), err.msg, rc);
    return 1;
}

static int luna_lua_ratelimit_when(lua_State *L)
{
    struct lua_ratelimiter *u = check_limiter(L);
    lua_pushnumber(L, luna_ratelimit_when(u->rl, luna_lua_ratelimit_check_key(L, 2)));
    return 1;
}

static int luna_lua_ratelimit_forget(lua_State *L)
{
    struct lua_ratelimiter *u = check_limiter(L);
    luna_ratelimit_forget(u->rl, luna_lua_ratelimit_check_key(L, 2));
    return 0;
}

static int luna_lua_ratelimit_num_requeues(lua_State *L)
{
    struct lua_ratelimiter *u = check_limiter(L);
    lua_pushnumber(L, luna_ratelimit_num_requeues(u->rl, luna_lua_ratelimit_check_key(L, 2)));
    return 1;
}

static int luna_lua_ratelimit_advance(lua_State *L)
{
    struct lua_ratelimiter *u = check_limiter(L);
    if (lua_type(L, 2) != LUA_TNUMBER)
        luaL_typerror(L, 2, "number");
    lua_Number seconds = lua_tonumber(L, 2);
    if (!u->fake_clock)
        return luaL_error(L, "advance: this rate limiter runs on the real clock "
                          "(create it with clock = \"fake\")");
    luna_error err;
    if (luna_fake_clock_advance(&u->fake, seconds, &err))
        return luaL_argerror(L, 2, err.msg);
    return 0;
}

static int luna_lua_ratelimit_now(lua_State *L)
{
    struct lua_ratelimiter *u = check_limiter(L);
    lua_pushnumber(L, u->fake_clock ? u->fake.now : luna_clock_now(luna_clock_monotonic()));
    return 1;
}

static int luna_lua_ratelimit_gc(lua_State *L)
{
    struct lua_ratelimiter *u = luaL_checkudata(L, 1, RATELIMITER_MT);
    luna_ratelimit_free(u->rl);
    u->rl = NULL;
    return 0;
}

static int luna_lua_ratelimit_tostring(lua_State *L)
{
    struct lua_ratelimiter *u = luaL_checkudata(L, 1, RATELIMITER_MT);
    lua_pushfstring(L, "luna.ratelimiter (%p)", (void *)u);
    return 1;
}

void luna_lua_ratelimit_register(lua_State *L)
{
    static const luaL_Reg methods[] = {
        { "when", luna_lua_ratelimit_when },
        { "forget", luna_lua_ratelimit_forget },
        { "num_requeues", luna_lua_ratelimit_num_requeues },
        { "advance", luna_lua_ratelimit_advance },
        { "now", luna_lua_ratelimit_now },
        { NULL, NULL },
    };
    luna_lua_new_locked_class(L, RATELIMITER_MT, methods, luna_lua_ratelimit_gc,
                              luna_lua_ratelimit_tostring);
    static const luaL_Reg funcs[] = {
        { "new", luna_lua_ratelimit_new },
        { NULL, NULL },
    };
    luna_lua_register_table(L, "ratelimit", funcs);
}
