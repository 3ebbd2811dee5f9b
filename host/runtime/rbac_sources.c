/* rbac_sources.c — see rbac_sources.h. */
#include "runtime/rbac_sources.h"

#include <lauxlib.h>

#include "api/api.h"
#include "api/host.h"
#include "base/error.h"
#include "controller/loader.h"
#include "controller/spec.h"

static const char *role_name(enum luna_source_role r)
{
    switch (r) {
    case LUNA_SOURCE_WATCH: return "watch";
    case LUNA_SOURCE_OWNS: return "owns";
    case LUNA_SOURCE_WATCHES: return "watches";
    }
    return "watch";
}

/* Copies the sources of controller i of C (the controllers' state) into a
 * new table on top of L. */
static void push_controller(lua_State *L, lua_State *C, int i, const struct luna_controller_spec *s)
{
    const char *file = NULL, *sha = NULL;
    luna_loader_source(C, i, &file, &sha);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, s->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, file ? file : "");
    lua_setfield(L, -2, "file");
    lua_createtable(L, (int)s->nsources, 0);
    for (size_t k = 0; k < s->nsources; k++) {
        const struct luna_source_spec *src = &s->sources[k];
        lua_createtable(L, 0, 7);
        lua_pushstring(L, role_name(src->role));
        lua_setfield(L, -2, "role");
        lua_pushstring(L, src->kind_text);
        lua_setfield(L, -2, "kind");
        lua_pushstring(L, src->group);
        lua_setfield(L, -2, "group");
        lua_pushstring(L, src->version);
        lua_setfield(L, -2, "version");
        lua_pushstring(L, src->kind);
        lua_setfield(L, -2, "kind_name");
        if (src->namespace_) {
            lua_pushstring(L, src->namespace_);
            lua_setfield(L, -2, "namespace");
        }
        lua_pushboolean(L, src->metadata_only);
        lua_setfield(L, -2, "metadata_only");
        lua_rawseti(L, -2, (int)k + 1);
    }
    lua_setfield(L, -2, "sources");
}

/* Loads every file of dir (a role or manifest for part of it would
 * mislead) into a second Lua state, so the scripts run in the sandbox
 * `luna run` gives them and never in the tool's own (unsandboxed) state:
 * the new state (the caller closes it) and its controller count, or NULL
 * with nil and the message pushed on L. */
static lua_State *load_apart(lua_State *L, const char *lib, const char *dir, int *n)
{
    luna_error err = { 0 };
    lua_State *C = luna_loader_new(lib, &err);
    if (C) {
        /* No client and no discovery: the runtime's state looks the same
         * before it has connected, and loading must not need either. */
        struct luna_api_host host = { 0 };
        luna_api_install(C, &host);
        if ((*n = luna_loader_load_dir(C, dir, true, &err)) >= 0)
            return C;
        lua_close(C);
    }
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return NULL;
}

/* core.controller_sources(lib, dir): the controllers of dir, loaded apart
 * (load_apart); only plain strings and booleans cross over. */
static int luna_lua_rbac_controller_sources(lua_State *L)
{
    int n = 0;
    lua_State *C = load_apart(L, luaL_checkstring(L, 1), luaL_checkstring(L, 2), &n);
    if (!C)
        return 2;
    lua_createtable(L, n, 0);
    lua_getfield(C, LUA_REGISTRYINDEX, "luna.controllers");
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(C, -1, i);
        const struct luna_controller_spec *s = luna_controller_spec_get(C, -1);
        if (s) {
            push_controller(L, C, i, s);
            lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
        }
        lua_pop(C, 1);
    }
    lua_close(C);
    return 1;
}

/* Copies the plain data at the top of C (strings, numbers, booleans and
 * tables of them; functions are left out) onto L. */
static void copy_plain(lua_State *L, lua_State *C, int depth)
{
    switch (lua_type(C, -1)) {
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(C, -1, &n);
        lua_pushlstring(L, s, n);
        return;
    }
    case LUA_TNUMBER: lua_pushnumber(L, lua_tonumber(C, -1)); return;
    case LUA_TBOOLEAN: lua_pushboolean(L, lua_toboolean(C, -1)); return;
    case LUA_TTABLE: break;
    default: lua_pushnil(L); return;
    }
    lua_newtable(L);
    if (depth > 16) /* declarations are a few levels deep */
        return;
    lua_pushnil(C);
    while (lua_next(C, -2)) {
        int kt = lua_type(C, -2), vt = lua_type(C, -1);
        if ((kt == LUA_TSTRING || kt == LUA_TNUMBER) && vt != LUA_TFUNCTION) {
            lua_pushvalue(C, -2);
            copy_plain(L, C, depth + 1); /* the key */
            lua_pop(C, 1);
            copy_plain(L, C, depth + 1); /* the value */
            lua_rawset(L, -3);
        }
        lua_pop(C, 1);
    }
}

/* core.webhook_sources(lib, dir) → { declaration, ... } | nil, message:
 * the webhooks DIR declares (lua/luna/webhook.lua's checked declarations
 * with their defaults, functions left out, plus `file`), loaded as
 * controller_sources loads them. */
static int luna_lua_webhook_sources(lua_State *L)
{
    int loaded = 0;
    lua_State *C = load_apart(L, luaL_checkstring(L, 1), luaL_checkstring(L, 2), &loaded);
    if (!C)
        return 2;
    int n = luna_loader_webhook_count(C);
    lua_createtable(L, n, 0);
    for (int i = 1; i <= n; i++) {
        if (luna_loader_push_webhook(C, i) < 0)
            continue;
        copy_plain(L, C, 0);
        lua_pop(C, 1);
        lua_rawseti(L, -2, i);
    }
    lua_close(C);
    return 1;
}

void luna_lua_rbac_sources_register(lua_State *L)
{
    lua_pushcfunction(L, luna_lua_webhook_sources);
    lua_setfield(L, -2, "webhook_sources");
    lua_pushcfunction(L, luna_lua_rbac_controller_sources);
    lua_setfield(L, -2, "controller_sources");
}
