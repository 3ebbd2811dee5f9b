/* lua_object_stream.c — see lua_object_stream.h. */
#include "testing/lua_object_stream.h"

#include <lauxlib.h>
#include <string.h>

#include "testing/lua_store.h"
#include "lua/lua_util.h"
#include "base/shard.h"
#include "cache/object_stream.h"

#define STREAM_MT "luna.ObjectStream"

struct lua_stream {
    struct luna_object_stream *s;
    lua_State *L;  /* the caller of the feed in progress: events go to its stack top */
    struct luna_shard_selector *shard;  /* owned; NULL: no filter */
};

static void append_event(lua_State *L)
{
    /* stack: ..., events, event */
    lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
}

static int on_item(void *ud, enum luna_stream_event ev, struct luna_object *obj)
{
    struct lua_stream *ls = ud;
    lua_State *L = ls->L;
    static const char *const names[] = { "LISTED", "ADDED", "MODIFIED", "DELETED" };
    lua_createtable(L, 0, 2);
    lua_pushstring(L, names[ev]);
    lua_setfield(L, -2, "type");
    luna_lua_store_push_object(L, obj);
    luna_object_unref(obj);
    lua_setfield(L, -2, "object");
    append_event(L);
    return 0;
}

static int on_bookmark(void *ud, const char *rv, bool initial_events_end)
{
    struct lua_stream *ls = ud;
    lua_State *L = ls->L;
    lua_createtable(L, 0, 3);
    lua_pushliteral(L, "BOOKMARK");
    lua_setfield(L, -2, "type");
    lua_pushstring(L, rv);
    lua_setfield(L, -2, "resource_version");
    lua_pushboolean(L, initial_events_end);
    lua_setfield(L, -2, "initial_events_end");
    append_event(L);
    return 0;
}

static int on_error(void *ud, int code, const char *reason, const char *message)
{
    struct lua_stream *ls = ud;
    lua_State *L = ls->L;
    lua_createtable(L, 0, 4);
    lua_pushliteral(L, "ERROR");
    lua_setfield(L, -2, "type");
    lua_pushinteger(L, code);
    lua_setfield(L, -2, "code");
    lua_pushstring(L, reason);
    lua_setfield(L, -2, "reason");
    lua_pushstring(L, message);
    lua_setfield(L, -2, "message");
    append_event(L);
    return 0;
}

static int on_bad(void *ud, enum luna_stream_event ev, const char *ns, const char *name,
                  const char *reason)
{
    struct lua_stream *ls = ud;
    lua_State *L = ls->L;
    static const char *const names[] = { "LISTED", "ADDED", "MODIFIED", "DELETED" };
    lua_createtable(L, 0, 5);
    lua_pushliteral(L, "BAD");
    lua_setfield(L, -2, "type");
    lua_pushstring(L, names[ev]);
    lua_setfield(L, -2, "event");
    if (ns) {
        lua_pushstring(L, ns);
        lua_setfield(L, -2, "namespace");
    }
    if (name) {
        lua_pushstring(L, name);
        lua_setfield(L, -2, "name");
    }
    lua_pushstring(L, reason);
    lua_setfield(L, -2, "reason");
    append_event(L);
    return 0;
}

static bool on_filter(void *ud, enum luna_stream_event ev, const char *ns, const char *uid,
                      const char *rv)
{
    struct lua_stream *ls = ud;
    return luna_shard_matches(ls->shard, ns, uid);
}

static int luna_lua_object_stream_new(lua_State *L)
{
    if (lua_isnoneornil(L, 1))
        lua_newtable(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *mode = luna_lua_opt_string_field(L, 1, "mode", "list");
    struct luna_object_stream_options o = { 0 };
    if (strcmp(mode, "list") == 0)
        o.mode = LUNA_STREAM_LIST;
    else if (strcmp(mode, "watch") == 0)
        o.mode = LUNA_STREAM_WATCH;
    else
        return luaL_error(L, "mode must be \"list\" or \"watch\"");
    o.keep_managed_fields = luna_lua_opt_bool_field(L, 1, "keep_managed_fields", 0);
    o.metadata_only = luna_lua_opt_bool_field(L, 1, "metadata_only", 0);
    o.api_version = luna_lua_opt_string_field(L, 1, "api_version", NULL);
    o.kind = luna_lua_opt_string_field(L, 1, "kind", NULL);
    o.max_item_bytes = (uint64_t)luna_lua_opt_number_field(L, 1, "max_item_bytes", 0);
    const char *shard_text = luna_lua_opt_string_field(L, 1, "shard", NULL);
    struct lua_stream *ls = lua_newuserdata(L, sizeof *ls);
    ls->s = NULL;
    ls->L = L;
    ls->shard = NULL;
    luaL_getmetatable(L, STREAM_MT);
    lua_setmetatable(L, -2);
    luna_error err;
    if (luna_shard_parse(shard_text, &ls->shard, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    struct luna_object_stream_handler h = { .on_item = on_item, .on_bookmark = on_bookmark,
                                            .on_error = on_error,
                                            .on_filter = ls->shard ? on_filter : NULL,
                                            .on_bad = on_bad, .ud = ls };
    ls->s = luna_object_stream_new(&o, &h, &err);
    if (!ls->s)
        return luaL_error(L, "%s", err.msg);
    return 1;
}

static struct lua_stream *check(lua_State *L)
{
    struct lua_stream *ls = luaL_checkudata(L, 1, STREAM_MT);
    if (!ls->s)
        luaL_error(L, "object stream is closed");
    ls->L = L;
    return ls;
}

static int stream_feed(lua_State *L)
{
    struct lua_stream *ls = check(L);
    size_t len;
    const char *data = luaL_checklstring(L, 2, &len);
    lua_newtable(L);
    int events = lua_gettop(L);
    luna_error err = { 0 };
    if (luna_object_stream_feed(ls->s, data, len, &err) < 0) {
        luna_lua_push_error(L, "InvalidStream", err.msg, 0);
        lua_pushvalue(L, events); /* what was decoded before the error */
        return 3;
    }
    return 1;
}

static int stream_finish(lua_State *L)
{
    struct lua_stream *ls = check(L);
    luna_error err = { 0 };
    if (luna_object_stream_finish(ls->s, &err) < 0)
        return luna_lua_push_error(L, "InvalidStream", err.msg, 0);
    lua_pushboolean(L, 1);
    return 1;
}

static int stream_reset(lua_State *L)
{
    luna_object_stream_reset(check(L)->s);
    return 0;
}

static int stream_list_rv(lua_State *L)
{
    lua_pushstring(L, luna_object_stream_list_rv(check(L)->s));
    return 1;
}

static int stream_continue(lua_State *L)
{
    lua_pushstring(L, luna_object_stream_continue(check(L)->s));
    return 1;
}

static int stream_remaining(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)luna_object_stream_remaining(check(L)->s));
    return 1;
}

static int stream_items(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)luna_object_stream_items(check(L)->s));
    return 1;
}

static int stream_filtered(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)luna_object_stream_filtered(check(L)->s));
    return 1;
}

static int stream_bad(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)luna_object_stream_bad(check(L)->s));
    return 1;
}

static int stream_shard_info(lua_State *L)
{
    const char *s = luna_object_stream_shard_info(check(L)->s);
    if (s)
        lua_pushstring(L, s);
    else
        lua_pushnil(L);
    return 1;
}

static int stream_gc(lua_State *L)
{
    struct lua_stream *ls = luaL_checkudata(L, 1, STREAM_MT);
    luna_object_stream_free(ls->s);
    ls->s = NULL;
    luna_shard_free(ls->shard);
    ls->shard = NULL;
    return 0;
}

void luna_lua_object_stream_register(lua_State *L)
{
    static const luaL_Reg methods[] = {
        { "feed", stream_feed }, { "finish", stream_finish }, { "reset", stream_reset },
        { "list_resource_version", stream_list_rv }, { "continue_token", stream_continue },
        { "remaining", stream_remaining }, { "items", stream_items },
        { "filtered", stream_filtered }, { "bad", stream_bad }, { "shard_info", stream_shard_info }, { NULL, NULL },
    };
    luaL_newmetatable(L, STREAM_MT);
    lua_newtable(L);
    for (const luaL_Reg *m = methods; m->name; m++) {
        lua_pushcfunction(L, m->func);
        lua_setfield(L, -2, m->name);
    }
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, stream_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    static const luaL_Reg funcs[] = { { "new", luna_lua_object_stream_new }, { NULL, NULL } };
    luna_lua_register_table(L, "object_stream", funcs);
}
