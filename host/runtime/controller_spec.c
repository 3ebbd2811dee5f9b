/* controller_spec.c — see controller_spec.h. */
#include "runtime/controller_spec.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/resource.h"
#include "lua/lua_util.h"

static char *dup_or_raise(lua_State *L, const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d)
        luaL_error(L, "out of memory");
    return d;
}

/* Reads one source description (a table from luna.controller) at desc. */
static void read_source(lua_State *L, int desc, enum luna_source_role role,
                        struct luna_controller_spec *spec, luna_error *err)
{
    struct luna_source_spec *src = &spec->sources[spec->nsources];
    memset(src, 0, sizeof *src);
    src->role = role;
    src->map_ref = LUA_NOREF;
    spec->nsources++;
    lua_getfield(L, desc, "kind");
    const char *kind_text = lua_tostring(L, -1);
    if (luna_parse_kind(kind_text ? kind_text : "", src->group, sizeof src->group, src->version,
                        sizeof src->version, src->kind, sizeof src->kind, err) < 0)
        luaL_error(L, "%s", err->msg);
    lua_pop(L, 1);
    const char *ns = luna_lua_opt_string_field(L, desc, "namespace", NULL);
    if (ns)
        src->namespace_ = dup_or_raise(L, ns);
    /* labels / fields: { k = v } tables from luna.controller */
    char buf[2048];
    const char *names[2] = { "labels", "fields" };
    char **out[2] = { &src->labels, &src->fields };
    for (int i = 0; i < 2; i++) {
        buf[0] = '\0';
        lua_getfield(L, desc, names[i]);
        if (lua_type(L, -1) == LUA_TSTRING) {
            if (lua_objlen(L, -1) >= sizeof buf)
                luaL_error(L, "%s selector too long", names[i]);
            snprintf(buf, sizeof buf, "%s", lua_tostring(L, -1));
        } else if (lua_istable(L, -1)) {
            size_t len = 0;
            for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
                int n = snprintf(buf + len, sizeof buf - len, "%s%s=%s", len ? "," : "",
                                 lua_tostring(L, -2), lua_tostring(L, -1));
                if (n < 0 || (size_t)n >= sizeof buf - len)
                    luaL_error(L, "%s selector too long", names[i]);
                len += (size_t)n;
            }
        }
        lua_pop(L, 1);
        *out[i] = dup_or_raise(L, buf);
    }
    if (role == LUNA_SOURCE_WATCHES) {
        lua_getfield(L, desc, "map");
        src->map_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
}

static void read_rate_limit(lua_State *L, int ctl, struct luna_ratelimit_config *cfg)
{
    luna_ratelimit_config_init(cfg, LUNA_RATELIMIT_DEFAULT);
    lua_getfield(L, ctl, "rate_limit");
    int t = lua_gettop(L);
    if (lua_istable(L, t)) {
        cfg->base_delay = luna_lua_opt_number_field(L, t, "base_delay", cfg->base_delay);
        cfg->max_delay = luna_lua_opt_number_field(L, t, "max_delay", cfg->max_delay);
        cfg->qps = luna_lua_opt_number_field(L, t, "qps", cfg->qps);
        cfg->burst = luna_lua_opt_number_field(L, t, "burst", cfg->burst);
    }
    lua_pop(L, 1);
}

static size_t count_list(lua_State *L, int ctl, const char *field)
{
    lua_getfield(L, ctl, field);
    size_t n = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
    lua_pop(L, 1);
    return n;
}

/* Runs in a protected call: the controller table at 1, the spec at 2, the
 * error at 3. */
static int read_spec(lua_State *L)
{
    struct luna_controller_spec *spec = lua_touserdata(L, 2);
    luna_error *err = lua_touserdata(L, 3);
    lua_settop(L, 1);

    lua_getfield(L, 1, "name");
    spec->name = dup_or_raise(L, lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_pop(L, 1);
    lua_getfield(L, 1, "workers");
    spec->workers = lua_tointeger(L, -1) > 0 ? (int)lua_tointeger(L, -1) : 1;
    lua_pop(L, 1);
    lua_getfield(L, 1, "limits");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "instructions");
        if (lua_isnumber(L, -1))
            spec->limits.instructions = lua_tonumber(L, -1);
        lua_getfield(L, -2, "seconds");
        if (lua_isnumber(L, -1))
            spec->limits.seconds = lua_tonumber(L, -1);
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    lua_getfield(L, 1, "reconcile");
    spec->reconcile_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_getfield(L, 1, "predicates");
    if (lua_istable(L, -1) && lua_objlen(L, -1) > 0)
        spec->predicates_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    else
        lua_pop(L, 1);
    lua_getfield(L, 1, "keep_managed_fields");
    spec->keep_managed_fields = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 1, "resync");
    spec->resync = lua_tonumber(L, -1);
    lua_pop(L, 1);
    read_rate_limit(L, 1, &spec->rate_limit);

    size_t nsrc = 1 + count_list(L, 1, "owns") + count_list(L, 1, "watches");
    spec->sources = calloc(nsrc, sizeof *spec->sources);
    if (!spec->sources)
        return luaL_error(L, "out of memory");
    lua_getfield(L, 1, "watch");
    read_source(L, lua_gettop(L), LUNA_SOURCE_WATCH, spec, err);
    lua_pop(L, 1);
    const char *lists[2] = { "owns", "watches" };
    enum luna_source_role roles[2] = { LUNA_SOURCE_OWNS, LUNA_SOURCE_WATCHES };
    for (int l = 0; l < 2; l++) {
        lua_getfield(L, 1, lists[l]);
        int t = lua_gettop(L);
        int n = lua_istable(L, t) ? (int)lua_objlen(L, t) : 0;
        for (int i = 1; i <= n && spec->nsources < nsrc; i++) {
            lua_rawgeti(L, t, i);
            read_source(L, lua_gettop(L), roles[l], spec, err);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }

    lua_getfield(L, 1, "indexes");
    int t = lua_gettop(L);
    if (lua_istable(L, t)) {
        size_t n = 0;
        for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1))
            n++;
        spec->indexes = calloc(n ? n : 1, sizeof *spec->indexes);
        if (!spec->indexes)
            return luaL_error(L, "out of memory");
        for (lua_pushnil(L); lua_next(L, t) && spec->nindexes < n; lua_pop(L, 1)) {
            struct luna_index_spec *ix = &spec->indexes[spec->nindexes];
            ix->fn_ref = LUA_NOREF;
            ix->name = dup_or_raise(L, lua_tostring(L, -2));
            spec->nindexes++;
            lua_pushvalue(L, -1);
            ix->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        }
    }
    lua_pop(L, 1);
    return 0;
}

int luna_controller_spec_read(lua_State *L, int idx, struct luna_controller_spec *spec,
                              luna_error *err)
{
    idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
    memset(spec, 0, sizeof *spec);
    spec->reconcile_ref = spec->predicates_ref = LUA_NOREF;
    spec->limits = luna_watchdog_get_config(L).limits;
    lua_pushcfunction(L, read_spec);
    lua_pushvalue(L, idx);
    lua_pushlightuserdata(L, spec);
    lua_pushlightuserdata(L, err);
    /* the reads may run script code (metamethods): bound it */
    struct luna_watchdog_guard g = { .what = "controller setup" };
    if (luna_watchdog_pcall(L, 3, 0, 0, &g) != 0) {
        int rc = luna_error_set(err, LUNA_ELUA, "%s",
                                lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1)
                                                               : "error reading the controller");
        lua_pop(L, 1);
        if (spec->name)
            luna_error_wrap(err, "controller %s", spec->name);
        luna_controller_spec_free(L, spec);
        return rc;
    }
    return 0;
}

void luna_controller_spec_free(lua_State *L, struct luna_controller_spec *spec)
{
    for (size_t i = 0; i < spec->nsources; i++) {
        struct luna_source_spec *s = &spec->sources[i];
        free(s->namespace_);
        free(s->labels);
        free(s->fields);
        luaL_unref(L, LUA_REGISTRYINDEX, s->map_ref);
    }
    free(spec->sources);
    for (size_t i = 0; i < spec->nindexes; i++) {
        free(spec->indexes[i].name);
        luaL_unref(L, LUA_REGISTRYINDEX, spec->indexes[i].fn_ref);
    }
    free(spec->indexes);
    luaL_unref(L, LUA_REGISTRYINDEX, spec->reconcile_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, spec->predicates_ref);
    free(spec->name);
    memset(spec, 0, sizeof *spec);
    spec->reconcile_ref = spec->predicates_ref = LUA_NOREF;
}
