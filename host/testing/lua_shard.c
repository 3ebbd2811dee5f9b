/* lua_shard.c — see lua_shard.h. */
#include "testing/lua_shard.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/shard.h"
#include "lua/lua_util.h"

static void push_u64(lua_State *L, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%016llx", (unsigned long long)v);
    lua_pushstring(L, buf);
}

/* The exclusive end of a range: last + 1, or 2^64. */
static void push_end(lua_State *L, uint64_t last)
{
    if (last == UINT64_MAX)
        lua_pushliteral(L, "0x10000000000000000");
    else
        push_u64(L, last + 1);
}

static int shard_hash(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    push_u64(L, luna_shard_hash(s, len));
    return 1;
}

static int shard_parse(lua_State *L)
{
    struct luna_shard_selector *s;
    luna_error err = { 0 };
    if (luna_shard_parse(luaL_optstring(L, 1, NULL), &s, &err) < 0) {
        lua_pushnil(L);
        lua_pushstring(L, err.msg);
        return 2;
    }
    if (!s) {
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_createtable(L, 0, 2);
    lua_createtable(L, (int)s->n, 0);
    for (size_t i = 0; i < s->n; i++) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, s->ranges[i].field == LUNA_SHARD_UID ? "uid" : "namespace");
        lua_setfield(L, -2, "field");
        push_u64(L, s->ranges[i].start);
        lua_setfield(L, -2, "start");
        push_end(L, s->ranges[i].last);
        lua_setfield(L, -2, "end");
        lua_rawseti(L, -2, (int)i + 1);
    }
    lua_setfield(L, -2, "ranges");
    char *t = luna_shard_text(s);
    luna_shard_free(s);
    if (!t)
        return luaL_error(L, "out of memory");
    lua_pushstring(L, t);
    free(t);
    lua_setfield(L, -2, "text");
    return 1;
}

static int shard_matches(lua_State *L)
{
    struct luna_shard_selector *s;
    luna_error err = { 0 };
    if (luna_shard_parse(luaL_checkstring(L, 1), &s, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    bool m = luna_shard_matches(s, luaL_optstring(L, 2, NULL), luaL_optstring(L, 3, NULL));
    luna_shard_free(s);
    lua_pushboolean(L, m);
    return 1;
}

static enum luna_shard_field check_field(lua_State *L, int idx)
{
    const char *f = luaL_optstring(L, idx, "uid");
    if (strcmp(f, "uid") == 0)
        return LUNA_SHARD_UID;
    if (strcmp(f, "namespace") == 0)
        return LUNA_SHARD_NAMESPACE;
    luaL_error(L, "field must be \"uid\" or \"namespace\"");
    return LUNA_SHARD_UID;
}

static int shard_split(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *self = luaL_checkstring(L, 2);
    enum luna_shard_field f = check_field(L, 3);
    size_t n = lua_objlen(L, 1);
    const char **members = lua_newuserdata(L, (n ? n : 1) * sizeof *members);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, 1, (int)i + 1);
        members[i] = lua_tostring(L, -1); /* anchored by the members table */
        lua_pop(L, 1);
        if (!members[i])
            return luaL_error(L, "member %d is not a string", (int)i + 1);
    }
    struct luna_shard_selector *s;
    luna_error err = { 0 };
    if (luna_shard_split(members, n, self, f, &s, &err) < 0) {
        lua_pushnil(L);
        lua_pushstring(L, err.msg);
        return 2;
    }
    char *t = luna_shard_text(s);
    luna_shard_free(s);
    if (!t)
        return luaL_error(L, "out of memory");
    lua_pushstring(L, t);
    free(t);
    return 1;
}

static int shard_split_range(lua_State *L)
{
    lua_Integer i = luaL_checkinteger(L, 1), n = luaL_checkinteger(L, 2);
    if (n < 1 || i < 0 || i >= n)
        return luaL_error(L, "split_range needs 0 <= i < n");
    struct luna_shard_range r = luna_shard_split_range((size_t)i, (size_t)n, LUNA_SHARD_UID);
    push_u64(L, r.start);
    push_end(L, r.last);
    return 2;
}

void luna_lua_shard_register(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        { "hash", shard_hash }, { "parse", shard_parse }, { "matches", shard_matches },
        { "split", shard_split }, { "split_range", shard_split_range }, { NULL, NULL },
    };
    luna_lua_register_table(L, "shard", funcs);
}
