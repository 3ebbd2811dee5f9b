/* api/events.c — see api/events.h. */
#include "api/events.h"

#include <lauxlib.h>
#include <string.h>

#include "api/host.h"
#include "lua/lua_util.h"

#define STORE_MT "luna.event_store"

struct store {
    char controller[LUNA_EVENT_NAME_MAX + 1];
};

/* The store's memory (may raise: no memory set, out of memory). */
static struct luna_event_memory *memory_of(lua_State *L)
{
    struct store *s = luaL_checkudata(L, 1, STORE_MT);
    struct luna_api_host *host = luna_api_host(L);
    if (!host || !host->events)
        luaL_error(L, "event store: the runtime's event memory is gone");
    struct luna_event_memory *m = luna_event_memories_get(host->events, s->controller);
    if (!m)
        luaL_error(L, "event store: out of memory");
    return m;
}

static int store_get(lua_State *L)
{
    struct luna_event_memory *m = memory_of(L);
    size_t len;
    const char *key = luaL_checklstring(L, 2, &len);
    struct luna_event_entry e;
    if (!luna_event_memory_get(m, key, len, &e)) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushnumber(L, e.count);
    lua_pushnumber(L, e.last_us);
    lua_pushstring(L, e.name);
    lua_pushstring(L, e.namespace_);
    return 4;
}

static void copy_field(lua_State *L, int idx, char *dst, size_t size, const char *what)
{
    size_t len;
    const char *v = luaL_checklstring(L, idx, &len);
    if (len >= size)
        luaL_error(L, "event store: %s is longer than %d bytes", what, (int)size - 1);
    memcpy(dst, v, len + 1);
}

static int store_put(lua_State *L)
{
    struct luna_event_memory *m = memory_of(L);
    size_t len;
    const char *key = luaL_checklstring(L, 2, &len);
    struct luna_event_entry e;
    memset(&e, 0, sizeof e);
    e.count = luaL_checknumber(L, 3);
    e.last_us = luaL_checknumber(L, 4);
    copy_field(L, 5, e.name, sizeof e.name, "an Event name");
    copy_field(L, 6, e.namespace_, sizeof e.namespace_, "a namespace");
    luna_error err;
    if (luna_event_memory_put(m, key, len, &e, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    return 0;
}

static int store_forget(lua_State *L)
{
    struct luna_event_memory *m = memory_of(L);
    size_t len;
    const char *key = luaL_checklstring(L, 2, &len);
    lua_pushboolean(L, luna_event_memory_forget(m, key, len));
    return 1;
}

static int store_size(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)luna_event_memory_size(memory_of(L)));
    return 1;
}

static int store_last_name_ns(lua_State *L)
{
    const char *hex = luna_event_memory_last_ns(memory_of(L));
    if (hex)
        lua_pushstring(L, hex);
    else
        lua_pushnil(L);
    return 1;
}

static int store_set_last_name_ns(lua_State *L)
{
    struct luna_event_memory *m = memory_of(L);
    luna_error err;
    if (luna_event_memory_set_last_ns(m, luaL_checkstring(L, 2), &err) < 0)
        return luaL_error(L, "%s", err.msg);
    return 0;
}

static int luna_api_events_event_store(lua_State *L)
{
    size_t len;
    const char *controller = luaL_checklstring(L, 1, &len);
    struct luna_api_host *host = luna_api_host(L);
    if (!host || !host->events) {
        lua_pushnil(L);
        return 1;
    }
    if (len == 0 || len > LUNA_EVENT_NAME_MAX)
        return luaL_argerror(L, 1, "a controller name");
    struct store *s = lua_newuserdata(L, sizeof *s);
    memcpy(s->controller, controller, len + 1);
    luaL_getmetatable(L, STORE_MT);
    lua_setmetatable(L, -2);
    return 1;
}

void luna_api_events_register(lua_State *L)
{
    static const luaL_Reg methods[] = {
        { "get", store_get }, { "put", store_put }, { "forget", store_forget },
        { "size", store_size }, { "last_name_ns", store_last_name_ns },
        { "set_last_name_ns", store_set_last_name_ns }, { NULL, NULL },
    };
    luna_lua_new_locked_class(L, STORE_MT, methods, NULL, NULL);
    lua_pushcfunction(L, luna_api_events_event_store);
    lua_setfield(L, -2, "event_store");
}
