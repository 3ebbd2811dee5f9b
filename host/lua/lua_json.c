/* lua_json.c — see lua_json.h: core.json's registration (decoding is
 * lua_json_decode.c, encoding lua_json_encode.c). */
#include "lua/lua_json.h"
#include "lua/lua_json_impl.h"

#include <lauxlib.h>
#include <string.h>

#include "lua/lua_util.h"

/* Registry keys: lua_json_impl.h. */
char luna_lua_json_key_array_mt, luna_lua_json_key_object_mt, luna_lua_json_key_int_ctor,
    luna_lua_json_key_cdata_kind, luna_lua_json_key_cache, luna_lua_json_key_strcache;

static void anchor_mt(lua_State *L, void *key, const char *name)
{
    lua_pushlightuserdata(L, key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushstring(L, name);
        lua_setfield(L, -2, "__name");
        lua_pushlightuserdata(L, key);
        lua_pushvalue(L, -2);
        lua_rawset(L, LUA_REGISTRYINDEX);
    }
}

/* Builds an int64_t (unsigned false) or uint64_t cdata from two exact
 * 32-bit halves: v = hi * 2^32 + lo. */
static const char int_ctor_src[] =
    "local ffi = require('ffi')\n"
    "local i64, u64 = ffi.typeof('int64_t'), ffi.typeof('uint64_t')\n"
    "return function(hi, lo, unsigned)\n"
    "  if unsigned then return u64(hi) * 4294967296ULL + lo end\n"
    "  return i64(hi) * 4294967296LL + lo\n"
    "end\n";

/* 1 for an int64_t cdata, 2 for uint64_t, 0 for any other cdata. */
static const char cdata_kind_src[] =
    "local ffi = require('ffi')\n"
    "local istype = ffi.istype\n"
    "local i64, u64 = ffi.typeof('int64_t'), ffi.typeof('uint64_t')\n"
    "return function(v)\n"
    "  if istype(i64, v) then return 1 end\n"
    "  if istype(u64, v) then return 2 end\n"
    "  return 0\n"
    "end\n";

void luna_lua_json_register(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        { "decoder", luna_lua_json_decoder },
        { "array", luna_lua_json_array },
        { "object", luna_lua_json_object },
        { "is_array", luna_lua_json_is_array },
        { "is_object", luna_lua_json_is_object },
        { NULL, NULL },
    };
    static const luaL_Reg decoder_methods[] = {
        { "feed", luna_lua_json_decoder_feed },
        { "finish", luna_lua_json_decoder_finish },
        { "reset", luna_lua_json_decoder_reset },
        { "offset", luna_lua_json_decoder_offset },
        { NULL, NULL },
    };
    luna_lua_json_anchor_chunk(L, &luna_lua_json_key_int_ctor, int_ctor_src, "=core.json.int64");
    luna_lua_json_anchor_chunk(L, &luna_lua_json_key_cdata_kind, cdata_kind_src, "=core.json.cdata_kind");

    if (luaL_newmetatable(L, DECODER_MT)) {
        lua_newtable(L);
        for (const luaL_Reg *r = decoder_methods; r->name; r++) {
            lua_pushcfunction(L, r->func);
            lua_setfield(L, -2, r->name);
        }
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, luna_lua_json_decoder_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, "luna.json.cache")) {
        lua_pushcfunction(L, luna_lua_json_decoder_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, WRITER_MT)) {
        lua_pushcfunction(L, luna_lua_json_writer_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);

    luna_lua_register_table(L, "json", funcs);
    lua_getfield(L, -1, "json");
    int t = lua_gettop(L);

    luna_lua_json_cached_decoder(L);
    lua_pushlightuserdata(L, &luna_lua_json_key_cache);
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_pushcclosure(L, luna_lua_json_decode, 1);
    lua_setfield(L, t, "decode");

    lua_pushboolean(L, 0); /* no idle writer yet: the first encode makes it */
    lua_pushcclosure(L, luna_lua_json_encode, 1);
    lua_setfield(L, t, "encode");

    lua_pushlightuserdata(L, NULL);
    lua_setfield(L, t, "null");
    anchor_mt(L, &luna_lua_json_key_array_mt, "core.json.array");
    lua_setfield(L, t, "array_mt");
    anchor_mt(L, &luna_lua_json_key_object_mt, "core.json.object");
    lua_setfield(L, t, "object_mt");
    lua_pop(L, 1);
}
