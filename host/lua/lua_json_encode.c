/* lua_json_encode.c — Lua values to JSON text (lua_json.h). */
#include "lua/lua_json_impl.h"

#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_writer.h"
#include "lua/lua_util.h"

/* ------------------------------------------------------------------------
 * Encoding
 */

struct enc {
    lua_State *L;
    luna_json_writer *w;
    luna_error *err;
    int max_depth;
    int depth;
    int array_mt, object_mt;   /* stack indices */
    struct {
        const void *table;     /* for cycle detection */
        int key;               /* stack index of the member's key, or 0 */
        lua_Integer index;     /* array: the member's Lua index */
    } path[HARD_MAX_DEPTH];
};

static bool is_identifier(const char *s, size_t len)
{
    if (len == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

static int enc_fail(struct enc *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Records the error with the path to the current value, e.g.
 * "cannot encode a function at $.spec.items[2]". */
static int enc_fail(struct enc *e, const char *fmt, ...)
{
    char msg[200], path[280];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = (size_t)snprintf(path, sizeof path, "$");
    for (int i = 0; i < e->depth && n < sizeof path; i++) {
        if (e->path[i].key) {
            size_t kl;
            const char *k = lua_tolstring(e->L, e->path[i].key, &kl);
            if (is_identifier(k, kl))
                n += (size_t)snprintf(path + n, sizeof path - n, ".%.*s",
                                      (int)(kl > 64 ? 64 : kl), k);
            else
                n += (size_t)snprintf(path + n, sizeof path - n, "[\"%.*s\"]",
                                      (int)(kl > 64 ? 64 : kl), k);
        } else if (e->path[i].index) {
            n += (size_t)snprintf(path + n, sizeof path - n, "[%ld]",
                                  (long)e->path[i].index);
        }
    }
    return luna_error_set(e->err, LUNA_EINVAL, "%s at %s", msg, path);
}

static int enc_value(struct enc *e, int idx);

/* Checks that the table at idx has exactly the keys 1..n. */
static int enc_check_sequence(struct enc *e, int idx, size_t n)
{
    lua_State *L = e->L;
    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TNUMBER) {
            const char *t = luaL_typename(L, -1);
            lua_pop(L, 1);
            return enc_fail(e, "array has a %s key (keys must be 1..n)", t);
        }
        lua_Number k = lua_tonumber(L, -1);
        if (!(k >= 1 && k <= (lua_Number)n && k == floor(k))) {
            lua_pop(L, 1);
            return enc_fail(e, "array has a hole or a key outside 1..%zu "
                               "(use core.json.null for null)", n);
        }
        count++;
    }
    if (count != n)
        return enc_fail(e, "array has a hole (use core.json.null for null)");
    return 0;
}

static int enc_array(struct enc *e, int idx)
{
    lua_State *L = e->L;
    size_t n = lua_objlen(L, idx);
    int rc = enc_check_sequence(e, idx, n);
    if (rc)
        return rc;
    if (luna_json_write_array_start(e->w))
        return enc_fail(e, "%s", e->w->err.msg);
    for (size_t i = 1; i <= n; i++) {
        e->path[e->depth - 1].index = (lua_Integer)i;
        lua_rawgeti(L, idx, (int)i);
        rc = enc_value(e, lua_gettop(L));
        lua_pop(L, 1);
        if (rc)
            return rc;
    }
    e->path[e->depth - 1].index = 0;
    if (luna_json_write_array_end(e->w))
        return enc_fail(e, "%s", e->w->err.msg);
    return 0;
}

static int enc_object(struct enc *e, int idx)
{
    lua_State *L = e->L;
    if (luna_json_write_object_start(e->w))
        return enc_fail(e, "%s", e->w->err.msg);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING) {
            const char *t = luaL_typename(L, -2);
            int rc = enc_fail(e, "object key must be a string, got a %s%s", t,
                              lua_type(L, -2) == LUA_TNUMBER
                                  ? " (a table is an array only with keys 1..n)" : "");
            lua_pop(L, 2);
            return rc;
        }
        size_t kl;
        const char *k = lua_tolstring(L, -2, &kl);
        e->path[e->depth - 1].key = lua_gettop(L) - 1;
        if (luna_json_write_key(e->w, k, kl)) {
            int rc = enc_fail(e, "object key is not valid UTF-8");
            lua_pop(L, 2);
            return rc;
        }
        int rc = enc_value(e, lua_gettop(L));
        lua_pop(L, 1);
        if (rc) {
            lua_pop(L, 1);
            return rc;
        }
    }
    e->path[e->depth - 1].key = 0;
    if (luna_json_write_object_end(e->w))
        return enc_fail(e, "%s", e->w->err.msg);
    return 0;
}

static int enc_table(struct enc *e, int idx)
{
    lua_State *L = e->L;
    if (e->depth >= e->max_depth)
        return enc_fail(e, "nesting deeper than %d", e->max_depth);
    const void *self = lua_topointer(L, idx);
    for (int i = 0; i < e->depth; i++)
        if (e->path[i].table == self)
            return enc_fail(e, "cycle: a table contains itself");
    if (!lua_checkstack(L, 8))
        return enc_fail(e, "Lua stack exhausted");
    int kind = 0; /* 0 unmarked, 1 array, 2 object */
    if (lua_getmetatable(L, idx)) {
        if (lua_rawequal(L, -1, e->array_mt))
            kind = 1;
        else if (lua_rawequal(L, -1, e->object_mt))
            kind = 2;
        lua_pop(L, 1);
    }
    if (kind == 0) {
        lua_rawgeti(L, idx, 1);
        kind = lua_isnil(L, -1) ? 2 : 1;
        lua_pop(L, 1);
    }
    e->path[e->depth].table = self;
    e->path[e->depth].key = 0;
    e->path[e->depth].index = 0;
    e->depth++;
    int rc = kind == 1 ? enc_array(e, idx) : enc_object(e, idx);
    if (!rc)
        e->depth--;
    return rc;
}

static int enc_cdata(struct enc *e, int idx)
{
    lua_State *L = e->L;
    lua_pushlightuserdata(L, &luna_lua_json_key_cdata_kind);
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_pushvalue(L, idx);
    lua_call(L, 1, 1);
    int kind = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    const void *payload = lua_topointer(L, idx);
    int rc;
    if (kind == 1) {
        int64_t v;
        memcpy(&v, payload, sizeof v);
        rc = luna_json_write_int(e->w, v);
    } else if (kind == 2) {
        uint64_t v;
        memcpy(&v, payload, sizeof v);
        rc = luna_json_write_uint(e->w, v);
    } else {
        return enc_fail(e, "cannot encode a cdata value other than int64_t/uint64_t");
    }
    return rc ? enc_fail(e, "%s", e->w->err.msg) : 0;
}

static int enc_value(struct enc *e, int idx)
{
    lua_State *L = e->L;
    luna_json_writer *w = e->w;
    int rc;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        rc = luna_json_write_null(w);
        break;
    case LUA_TBOOLEAN:
        rc = luna_json_write_bool(w, lua_toboolean(L, idx));
        break;
    case LUA_TNUMBER:
        rc = luna_json_write_double(w, lua_tonumber(L, idx));
        break;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        rc = luna_json_write_string(w, s, len);
        break;
    }
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) != NULL)
            return enc_fail(e, "cannot encode a light userdata other than core.json.null");
        rc = luna_json_write_null(w);
        break;
    case LUA_TTABLE:
        return enc_table(e, idx);
    case LUA_TCDATA_:
        return enc_cdata(e, idx);
    default:
        return enc_fail(e, "cannot encode a %s", luaL_typename(L, idx));
    }
    if (rc)
        return enc_fail(e, "%s", w->err.msg);
    return 0;
}

/* idx is an absolute stack index.  The encoder state lives on the C stack
 * (no malloc'd memory is held across the Lua calls that may raise). */
static int encode_into(lua_State *L, int idx, luna_json_writer *w, int max_depth,
                       luna_error *err)
{
    struct enc e;
    if (!lua_checkstack(L, 4))
        return luna_error_set(err, LUNA_ENOMEM, "Lua stack exhausted");
    int top = lua_gettop(L);
    lua_pushlightuserdata(L, &luna_lua_json_key_array_mt);
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_pushlightuserdata(L, &luna_lua_json_key_object_mt);
    lua_rawget(L, LUA_REGISTRYINDEX);
    e.L = L;
    e.w = w;
    e.err = err;
    e.max_depth = max_depth;
    e.depth = 0;
    e.array_mt = top + 1;
    e.object_mt = top + 2;
    int rc = enc_value(&e, idx);
    lua_settop(L, top);
    return rc;
}

#define WRITER_KEEP (1 << 20) /* a bigger buffer is released after use */

struct writer_box {
    luna_json_writer w;
};

static void *state_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    lua_State *L = ud;
    void *aud;
    lua_Alloc f = lua_getallocf(L, &aud);
    return f(aud, ptr, osize, nsize);
}

int luna_lua_json_writer_gc(lua_State *L)
{
    struct writer_box *b = lua_touserdata(L, 1);
    luna_json_writer_set_alloc(&b->w, state_alloc, L);
    luna_json_writer_free(&b->w);
    return 0;
}

/* Takes the idle box out of the upvalue (or makes one) and leaves it on
 * top of the stack, owned by this call alone. */
static struct writer_box *take_writer(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    struct writer_box *b = lua_touserdata(L, -1);
    if (b) {
        lua_pushboolean(L, 0);
        lua_replace(L, lua_upvalueindex(1));
    } else {
        lua_pop(L, 1);
        b = lua_newuserdata(L, sizeof *b);
        luna_json_writer_init(&b->w);
        luaL_getmetatable(L, WRITER_MT);
        lua_setmetatable(L, -2);
    }
    luna_json_writer_set_alloc(&b->w, state_alloc, L);
    return b;
}

/* Puts the box at idx back as the idle one, its buffer emptied (and freed
 * when it grew past WRITER_KEEP). */
static void return_writer(lua_State *L, struct writer_box *b, int idx)
{
    if (b->w.cap > WRITER_KEEP)
        luna_json_writer_free(&b->w);
    luna_json_writer_reset(&b->w);
    lua_pushvalue(L, idx);
    lua_replace(L, lua_upvalueindex(1));
}

/* core.json.encode(v [, opts]) -> string | nil, err */
int luna_lua_json_encode(lua_State *L)
{
    luna_json_options opts;
    luna_lua_json_read_options(L, 2, &opts, false);
    lua_settop(L, 1);
    struct writer_box *b = take_writer(L); /* at index 2 */
    luna_json_writer *w = &b->w;
    luna_json_writer_reset(w);
    luna_error err = { 0 };
    int rc = encode_into(L, 1, w, opts.max_depth, &err);
    if (!rc)
        rc = luna_json_writer_finish(w, &err);
    if (rc) {
        return_writer(L, b, 2);
        return luna_lua_push_error(L, rc == LUNA_ENOMEM ? "OutOfMemory" : "InvalidValue",
                                   err.msg, rc);
    }
    size_t len;
    const char *s = luna_json_writer_data(w, &len);
    lua_pushlstring(L, s, len); /* may raise: the box on the stack frees the buffer */
    return_writer(L, b, 2);
    return 1;
}

/* ------------------------------------------------------------------------
 * Markers
 */

static int mark(lua_State *L, void *key, void *other, const char *what)
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_newtable(L);
    } else {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_settop(L, 1);
    }
    lua_pushlightuserdata(L, key);
    lua_rawget(L, LUA_REGISTRYINDEX);          /* 2: the marker */
    if (lua_getmetatable(L, 1)) {              /* 3: the table's metatable */
        lua_pushlightuserdata(L, other);
        lua_rawget(L, LUA_REGISTRYINDEX);      /* 4: the other marker */
        if (!lua_rawequal(L, 3, 2) && !lua_rawequal(L, 3, 4))
            return luaL_error(L, "core.json.%s: the table already has a metatable", what);
        lua_settop(L, 2);
    }
    lua_setmetatable(L, 1);
    return 1;
}

/* core.json.array([t]) -> t marked as an array */
int luna_lua_json_array(lua_State *L) { return mark(L, &luna_lua_json_key_array_mt, &luna_lua_json_key_object_mt, "array"); }
/* core.json.object([t]) -> t marked as an object */
int luna_lua_json_object(lua_State *L) { return mark(L, &luna_lua_json_key_object_mt, &luna_lua_json_key_array_mt, "object"); }

static int is_marked(lua_State *L, void *key)
{
    luaL_checkany(L, 1);
    if (lua_type(L, 1) != LUA_TTABLE || !lua_getmetatable(L, 1)) {
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_pushlightuserdata(L, key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_pushboolean(L, lua_rawequal(L, -1, -2));
    return 1;
}

/* core.json.is_array(v), core.json.is_object(v) -> boolean (marked ones) */
int luna_lua_json_is_array(lua_State *L) { return is_marked(L, &luna_lua_json_key_array_mt); }
int luna_lua_json_is_object(lua_State *L) { return is_marked(L, &luna_lua_json_key_object_mt); }

/* ------------------------------------------------------------------------
 * Registration
 */

void luna_lua_json_anchor_chunk(lua_State *L, void *key, const char *src, const char *name)
{
    lua_pushlightuserdata(L, key);
    if (luaL_loadbuffer(L, src, strlen(src), name) != 0)
        lua_error(L);
    lua_call(L, 0, 1);
    lua_rawset(L, LUA_REGISTRYINDEX);
}
