/*
 * lua_json_impl.h — what core.json's three files share, private to them:
 * lua_json.c (the registration, the registry keys), lua_json_decode.c
 * (JSON text to Lua values) and lua_json_encode.c (Lua values to JSON
 * text).  The contract is lua_json.h's.
 */
#ifndef LUNA_LUA_JSON_IMPL_H
#define LUNA_LUA_JSON_IMPL_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/json.h"
#include "lua/lua_json.h"

/* The Lua stack of a C function holds at most LUAI_MAXCSTACK (8000) slots:
 * the depth bound keeps decode and encode well inside it. */
#define HARD_MAX_DEPTH 1000
#define PENDING_LEVELS 8
#define PENDING_LIMIT 64
#define LUA_TCDATA_ 10 /* LuaJIT's type tag for cdata */
#define EXACT_INT 9007199254740992.0 /* 2^53 */
#define DECODER_MT "luna.json.decoder"
/* The writer of core.json.encode.  Its buffers come from the calling
 * state's own allocator (lua_getallocf, looked up at each call, so a writer
 * freed while the state closes uses whatever allocator is current then): in
 * luna run that is the watchdog's wrapper, so the text being built counts
 * against the Lua memory cap as it grows, and a document that would pass
 * the cap fails at the write that would pass it (the guard is stopped for
 * memory), not after the host built it in C (1,800 references to one 1 MiB
 * string once made a 1.8 GB buffer the cap never saw).
 *
 * The writer lives in a userdata ("box") that the GC owns.  Between calls
 * the idle box is the function's upvalue, reused so that most encodes do
 * not allocate.  During a call the upvalue is emptied and the box is only
 * on the call's stack: if anything raises meanwhile (lua_pushlstring of the
 * result, the cdata check, the watchdog's hook), the box is garbage and its
 * __gc frees the buffer at the next collection (reconcile.c collects at
 * once after a memory stop), and the next call starts a new box.  No raise
 * leaves a buffer behind. */
#define WRITER_MT "luna.json.writer"

struct frame {
    int rel;      /* first slot, relative to builder.bottom */
    int n;        /* members so far */
    bool array;
    bool created; /* the table exists (at the first slot) */
};

/* Everything a decode needs, allocated once: the cached one per Lua state
 * and each core.json.decoder() live in userdata, so a raise (out of
 * memory) inside the parser's callbacks leaks nothing. */
struct builder {
    lua_State *L;
    int mt;       /* stack index of array_mt */
    int bottom;   /* stack index of the first builder slot */
    int results;  /* stack index of the results table (multiple), or 0 */
    int nresults;
    int nf;       /* open containers */
    bool bigint_double; /* integers past 64 bits: the nearest double */
    struct frame frames[HARD_MAX_DEPTH];
};

/* Everything a decode needs (lua_json_decode.c). */
struct decoder {
    luna_json_parser *p;
    luna_json_options opts;
    bool busy;     /* inside feed/finish: still set after a raise */
    bool finished; /* finish() returned (decoder objects) */
    bool multiple;
    struct builder b;
};

/* ---- lua_json_decode.c ---- */
struct decoder *luna_lua_json_cached_decoder(lua_State *L);
int luna_lua_json_decoder_gc(lua_State *L);
int luna_lua_json_decode(lua_State *L);
int luna_lua_json_decoder(lua_State *L);
int luna_lua_json_decoder_feed(lua_State *L);
int luna_lua_json_decoder_finish(lua_State *L);
int luna_lua_json_decoder_offset(lua_State *L);
int luna_lua_json_decoder_reset(lua_State *L);
void luna_lua_json_read_options(lua_State *L, int idx, luna_json_options *o, bool stream);

/* ---- lua_json_encode.c ---- */
void luna_lua_json_anchor_chunk(lua_State *L, void *key, const char *src, const char *name);
int luna_lua_json_encode(lua_State *L);
int luna_lua_json_writer_gc(lua_State *L);

/* Registry keys (their addresses), defined in lua_json.c: the array and
 * object marks' metatables, the int64 constructor, the cdata kind test,
 * the cached decoder and the string cache. */
extern char luna_lua_json_key_array_mt, luna_lua_json_key_object_mt, luna_lua_json_key_int_ctor,
    luna_lua_json_key_cdata_kind, luna_lua_json_key_cache, luna_lua_json_key_strcache;

/* core.json.array/object/is_array/is_object (lua_json_encode.c). */
int luna_lua_json_array(lua_State *L);
int luna_lua_json_object(lua_State *L);
int luna_lua_json_is_array(lua_State *L);
int luna_lua_json_is_object(lua_State *L);

#endif
