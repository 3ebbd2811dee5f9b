/* lua_json_decode.c — JSON text to Lua values (lua_json.h).
 *
 * Decoding builds the Lua value directly from the parser's events, on the
 * Lua stack: the members of an open container are pushed as they come and
 * the table is created when the container ends, with its exact size (no
 * rehashing, the main cost of building tables one key at a time).  To bound
 * the stack, a container is turned into a table early ("materialized") when
 * it has PENDING_LIMIT members, or when a child opens and it is nested
 * PENDING_LEVELS deep or more; from then on members go straight into it.
 * So at most PENDING_LEVELS * (2 * PENDING_LIMIT + 1) + 2 * depth +
 * 2 * PENDING_LIMIT slots are in use, checked once per call.
 *
 * One concept over ~900 lines: one decoder and the string cache it
 * feeds from.
 */
#include "lua/lua_json_impl.h"

#include <lauxlib.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua/lua_util.h"

/* ------------------------------------------------------------------------
 * Decoding
 */

static int stack_budget(int max_depth)
{
    return PENDING_LEVELS * (2 * PENDING_LIMIT + 1) + 2 * max_depth +
           2 * PENDING_LIMIT + 16;
}

/* The slots a one-shot decode of len bytes can use: each slot holds a key,
 * a value or an open container, each from a token of at least one byte of
 * its own, so never more than len of them, plus the few a materialize or an
 * int64 constructor call pushes for a moment.  Asking lua_checkstack for
 * the full budget on every small document grew each fresh coroutine's
 * stack to ~3,200 slots (a 25 KB allocation and memset per reconcile, and
 * as much garbage for the collector). */
static int stack_need(int max_depth, size_t len)
{
    int budget = stack_budget(max_depth);
    return len + 16 < (size_t)budget ? (int)len + 16 : budget;
}

static void push_int64(lua_State *L, uint64_t v, bool is_unsigned)
{
    lua_pushlightuserdata(L, &luna_lua_json_key_int_ctor);
    lua_rawget(L, LUA_REGISTRYINDEX);
    uint64_t lo = v & UINT64_C(0xffffffff);
    double hi = is_unsigned ? (double)(v >> 32)
                            : (double)((int64_t)(v - lo) / INT64_C(4294967296));
    lua_pushnumber(L, hi);
    lua_pushnumber(L, (double)lo);
    lua_pushboolean(L, is_unsigned);
    lua_call(L, 3, 1);
}

/* Turns the frame's pending members into its table; extra is 1 when an
 * object key waits on top of them (it stays, just above the table). */
static void materialize(struct builder *b, struct frame *f, int extra)
{
    lua_State *L = b->L;
    int base = b->bottom + f->rel;
    int slots = f->array ? f->n : 2 * f->n;
    if (f->array)
        lua_createtable(L, 2 * f->n, 0);
    else
        lua_createtable(L, 0, 2 * f->n);
    lua_insert(L, base);
    if (f->array) {
        for (int i = 1; i <= f->n; i++) {
            lua_pushvalue(L, base + i);
            lua_rawseti(L, base, i);
        }
    } else {
        for (int i = 0; i < f->n; i++) {
            lua_pushvalue(L, base + 1 + 2 * i);
            lua_pushvalue(L, base + 2 + 2 * i);
            lua_rawset(L, base);
        }
    }
    if (extra) {
        lua_pushvalue(L, base + slots + 1);
        lua_replace(L, base + 1);
    }
    lua_settop(L, base + extra);
    f->created = true;
}

/* The value on top of the stack is complete: adds it to its container. */
static void add_value(struct builder *b)
{
    lua_State *L = b->L;
    if (b->nf == 0) {
        if (b->results)
            lua_rawseti(L, b->results, ++b->nresults);
        return; /* single document: it stays at b->bottom */
    }
    struct frame *f = &b->frames[b->nf - 1];
    if (f->created) {
        int base = b->bottom + f->rel;
        if (f->array)
            lua_rawseti(L, base, ++f->n);
        else
            lua_rawset(L, base);
    } else if (++f->n == PENDING_LIMIT) {
        materialize(b, f, 0);
    }
}

static void open_frame(struct builder *b, bool array)
{
    lua_State *L = b->L;
    if (b->nf > PENDING_LEVELS) {
        struct frame *parent = &b->frames[b->nf - 1];
        if (!parent->created)
            materialize(b, parent, !parent->array);
    }
    struct frame *f = &b->frames[b->nf++];
    f->rel = lua_gettop(L) + 1 - b->bottom;
    f->n = 0;
    f->array = array;
    f->created = false;
}

/* Leaves the finished container's table on top. */
static void close_frame(struct builder *b)
{
    lua_State *L = b->L;
    struct frame *f = &b->frames[--b->nf];
    int base = b->bottom + f->rel;
    if (!f->created) {
        if (f->array) {
            lua_createtable(L, f->n, 0);
            for (int i = 0; i < f->n; i++) {
                lua_pushvalue(L, base + i);
                lua_rawseti(L, -2, i + 1);
            }
        } else {
            lua_createtable(L, 0, f->n);
            for (int i = 0; i < f->n; i++) {
                lua_pushvalue(L, base + 2 * i);
                lua_pushvalue(L, base + 2 * i + 1);
                lua_rawset(L, -3);
            }
        }
        if (f->n > 0) { /* else the table is already at base */
            lua_replace(L, base);
            lua_settop(L, base);
        }
    }
    if (f->array) {
        lua_pushvalue(L, b->mt);
        lua_setmetatable(L, base);
    }
}

static int build_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct builder *b = ud;
    lua_State *L = b->L;
    switch (ev->type) {
    case LUNA_JSON_KEY:
        lua_pushlstring(L, ev->str, ev->len);
        return 0;
    case LUNA_JSON_STRING:
        lua_pushlstring(L, ev->str, ev->len);
        break;
    case LUNA_JSON_NUMBER:
        switch (ev->kind) {
        case LUNA_JSON_INT:
            if (ev->i >= -(int64_t)EXACT_INT && ev->i <= (int64_t)EXACT_INT)
                lua_pushnumber(L, (lua_Number)ev->i);
            else
                push_int64(L, (uint64_t)ev->i, false);
            break;
        case LUNA_JSON_UINT:
            push_int64(L, ev->u, true);
            break;
        case LUNA_JSON_DOUBLE:
            lua_pushnumber(L, ev->d);
            break;
        case LUNA_JSON_BIGINT:
            if (b->bigint_double && isfinite(ev->d)) {
                lua_pushnumber(L, ev->d);
                break;
            }
            luna_error_set(err, LUNA_EINVAL, "integer %.*s%s does not fit in 64 bits",
                           (int)(ev->len > 40 ? 40 : ev->len), ev->str,
                           ev->len > 40 ? "..." : "");
            return LUNA_EINVAL;
        }
        break;
    case LUNA_JSON_TRUE:
        lua_pushboolean(L, 1);
        break;
    case LUNA_JSON_FALSE:
        lua_pushboolean(L, 0);
        break;
    case LUNA_JSON_NULL:
        lua_pushlightuserdata(L, NULL);
        break;
    case LUNA_JSON_OBJECT_START:
        open_frame(b, false);
        return 0;
    case LUNA_JSON_ARRAY_START:
        open_frame(b, true);
        return 0;
    case LUNA_JSON_OBJECT_END:
    case LUNA_JSON_ARRAY_END:
        close_frame(b);
        break;
    case LUNA_JSON_LIMIT:
        return LUNA_EINVAL; /* only with LUNA_JSON_SOFT_LIMITS, never set here */
    }
    add_value(b);
    return 0;
}

int luna_lua_json_decoder_gc(lua_State *L)
{
    struct decoder *d = lua_touserdata(L, 1);
    luna_json_parser_free(d->p);
    d->p = NULL;
    return 0;
}

/* Pushes a new decoder userdata with metatable tname. */
static struct decoder *new_decoder(lua_State *L, const char *tname,
                                   const luna_json_options *opts)
{
    struct decoder *d = lua_newuserdata(L, sizeof *d);
    memset(d, 0, sizeof *d);
    luaL_getmetatable(L, tname);
    lua_setmetatable(L, -2);
    d->opts = *opts;
    d->multiple = (opts->flags & LUNA_JSON_MULTIPLE) != 0;
    d->p = luna_json_parser_new(opts, build_event, &d->b);
    if (!d->p)
        luaL_error(L, "out of memory");
    return d;
}

/* Reads max_depth / max_size / multiple from the options table at idx
 * (absent or nil: defaults).  Raises on wrong types. */
void luna_lua_json_read_options(lua_State *L, int idx, luna_json_options *o, bool stream)
{
    memset(o, 0, sizeof *o);
    o->max_depth = HARD_MAX_DEPTH;
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Number depth = luna_lua_opt_number_field(L, idx, "max_depth", HARD_MAX_DEPTH);
    if (!(depth >= 1 && depth <= HARD_MAX_DEPTH))
        luaL_error(L, "max_depth must be between 1 and %d", HARD_MAX_DEPTH);
    o->max_depth = (int)depth;
    lua_Number size = luna_lua_opt_number_field(L, idx, "max_size", 0);
    if (!(size >= 0 && size <= 9007199254740992.0))
        luaL_error(L, "max_size must be a byte count");
    o->max_size = (uint64_t)size;
    if (stream && luna_lua_opt_bool_field(L, idx, "multiple", 0))
        o->flags |= LUNA_JSON_MULTIPLE;
}

static int push_decode_error(lua_State *L, const luna_error *err)
{
    return luna_lua_push_error(L, "InvalidJSON", err->msg, err->code);
}

/* The decoder of the calling state for one-shot decodes, created on first
 * use and anchored in the registry. */
struct decoder *luna_lua_json_cached_decoder(lua_State *L)
{
    lua_pushlightuserdata(L, &luna_lua_json_key_cache);
    lua_rawget(L, LUA_REGISTRYINDEX);
    struct decoder *d = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (d)
        return d;
    luna_json_options opts = { .max_depth = HARD_MAX_DEPTH };
    lua_pushlightuserdata(L, &luna_lua_json_key_cache);
    d = new_decoder(L, "luna.json.cache", &opts);
    lua_rawset(L, LUA_REGISTRYINDEX);
    return d;
}

/* Decodes one document with d; pushes the value or returns an error code. */
static int decode_with(lua_State *L, struct decoder *d, const char *s, size_t len,
                       const luna_json_options *opts, bool bigint_double, luna_error *err)
{
    if (luna_json_parser_reset(d->p, opts))
        return luna_json_parser_finish(d->p, err);
    if (!lua_checkstack(L, stack_need(opts->max_depth, len) + 2))
        return luna_error_set(err, LUNA_ENOMEM, "Lua stack exhausted");
    int top = lua_gettop(L);
    lua_pushlightuserdata(L, &luna_lua_json_key_array_mt);
    lua_rawget(L, LUA_REGISTRYINDEX);
    d->b.L = L; /* not a compound literal: frames[] is large */
    d->b.mt = top + 1;
    d->b.bottom = top + 2;
    d->b.results = 0;
    d->b.nresults = 0;
    d->b.nf = 0;
    d->b.bigint_double = bigint_double;
    d->busy = true;
    int rc = luna_json_parser_feed(d->p, s, len, err);
    if (!rc)
        rc = luna_json_parser_finish(d->p, err);
    d->busy = false;
    if (rc) {
        lua_settop(L, top);
        return rc;
    }
    lua_remove(L, top + 1); /* the metatable: the value is left on top */
    return 0;
}

/* ------------------------------------------------------------------------
 * The cache's reader: cached objects are turned into tables on every lister
 * get, so this path is what a trivial reconcile spends most of its time on.
 * Their bytes were validated when the informer parsed them (UTF-8, escapes,
 * surrogate pairs, structure), so a direct recursive reader builds the same
 * tables as decode_with without the parser's callbacks, its event records
 * and its per-event bookkeeping.  It takes only what it fully understands:
 * on anything else (a fraction, an exponent, more than 15 digits, more
 * than FAST_MAX_DEPTH levels, a stack it would not fit, any malformed
 * byte) it gives up and the full parser decodes the document from the
 * start, with its exact semantics and error messages.  Tables are built as build_event builds them: members are
 * pushed, the table is created with its exact size when the container ends
 * (or at PENDING_LIMIT members, then filled directly).
 */

/* The reader's string cache: the Lua strings of the short strings cached
 * objects repeat on every get (member names such as "metadata", and values
 * such as "v1", a namespace, a label), so a get pushes them from here with
 * one raw array read instead of interning them again (LuaJIT hashes the
 * bytes and walks a chain of the whole state's strings, memcmp included,
 * for every one: the largest share of a small object's decode).
 *
 * Direct-mapped, STRCACHE_SLOTS slots, each for strings of at most
 * STRCACHE_MAX_LEN bytes: the slot of a string is a hash of its length and
 * of its first and last 8 bytes.  A slot holds a copy of its string's
 * bytes (compared before use, as those two words up to 16 bytes and byte
 * for byte beyond: a hit is always the same bytes) and the Lua
 * string itself sits at the same index of the anchor table (the
 * userdata's environment), so it lives as long as it is cached.  A miss
 * interns the string as before and replaces the slot's entry.  Lua
 * strings are immutable values: a script gets the very same value either
 * way, so nothing about the tables a get returns changes.  Bounded: at most
 * STRCACHE_SLOTS strings of at most STRCACHE_MAX_LEN bytes are kept alive
 * per state, plus the slots (about 40 KiB in all), in the state's heap. */
#define STRCACHE_SLOTS 512
#define STRCACHE_MAX_LEN 32

struct strcache_slot {
    uint64_t a, b;             /* strcache_words of the string */
    uint32_t len;              /* 0: empty (the empty string is not cached) */
    char bytes[STRCACHE_MAX_LEN];
};

struct strcache {
    struct strcache_slot slot[STRCACHE_SLOTS];
};

struct reader {
    lua_State *L;
    const char *p, *end;
    int mt;    /* stack index of array_mt */
    int depth;
    struct strcache *sc; /* NULL: no cache (pushes intern every string) */
    int anchors;         /* stack index of the cache's anchor table */
};

/* FAST_NO: the full parser decodes the document instead. */
enum { FAST_OK = 0, FAST_NO = -1 };

/* The reader recurses once per level: deeper documents (no Kubernetes
 * object comes close) go to the full parser, which does not recurse. */
#define FAST_MAX_DEPTH 100

static int read_value(struct reader *r);

static inline void skip_ws(struct reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
        r->p++;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* The rest of a string with escapes, from s (its first byte) and p (the
 * first backslash): built in a luaL_Buffer (a few stack slots at most). */
static int read_escaped(struct reader *r, const char *s, const char *p)
{
    luaL_Buffer b;
    luaL_buffinit(r->L, &b);
    luaL_addlstring(&b, s, (size_t)(p - s));
    while (p < r->end) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            luaL_pushresult(&b);
            r->p = p + 1;
            return FAST_OK;
        }
        if (c < 0x20)
            return FAST_NO;
        if (c != '\\') {
            const char *run = p;
            while (p < r->end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
                p++;
            luaL_addlstring(&b, run, (size_t)(p - run));
            continue;
        }
        if (r->end - p < 2)
            return FAST_NO;
        char e = p[1];
        p += 2;
        switch (e) {
        case '"': luaL_addchar(&b, '"'); break;
        case '\\': luaL_addchar(&b, '\\'); break;
        case '/': luaL_addchar(&b, '/'); break;
        case 'b': luaL_addchar(&b, '\b'); break;
        case 'f': luaL_addchar(&b, '\f'); break;
        case 'n': luaL_addchar(&b, '\n'); break;
        case 'r': luaL_addchar(&b, '\r'); break;
        case 't': luaL_addchar(&b, '\t'); break;
        case 'u': {
            unsigned cp, lo;
            if (r->end - p < 4 || hex4(p, &cp) < 0)
                return FAST_NO;
            p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return FAST_NO;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (r->end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) < 0 ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return FAST_NO;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            char u[4];
            size_t n;
            if (cp < 0x80) {
                u[0] = (char)cp;
                n = 1;
            } else if (cp < 0x800) {
                u[0] = (char)(0xC0 | (cp >> 6));
                u[1] = (char)(0x80 | (cp & 0x3F));
                n = 2;
            } else if (cp < 0x10000) {
                u[0] = (char)(0xE0 | (cp >> 12));
                u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                u[2] = (char)(0x80 | (cp & 0x3F));
                n = 3;
            } else {
                u[0] = (char)(0xF0 | (cp >> 18));
                u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
                u[3] = (char)(0x80 | (cp & 0x3F));
                n = 4;
            }
            luaL_addlstring(&b, u, n);
            break;
        }
        default:
            return FAST_NO;
        }
    }
    return FAST_NO;
}

/* The bytes of w (8 bytes of the document, loaded with memcpy) that are
 * '"', '\\' or a control character (the bytes a string scan stops at):
 * the high bit of each such byte is set.  Bytes after the first such byte
 * may be flagged wrongly (a borrow), never the ones before it. */
static inline uint64_t stop_bytes8(uint64_t w)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), high = UINT64_C(0x8080808080808080);
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    return (((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w)) & high;
}

/* The first and the last 8 bytes of the len bytes at s (1 <= len <=
 * STRCACHE_MAX_LEN; a string shorter than 8 is all in *a, zero-padded, and
 * *b is 0), read from the document without a byte loop when it has 8 bytes
 * from s on.  Up to 16 bytes, they are the whole string. */
static inline void strcache_words(const struct reader *r, const char *s, size_t len,
                                  uint64_t *a, uint64_t *b)
{
    *a = 0;
    *b = 0;
    if (len >= 8) {
        memcpy(a, s, 8);
        memcpy(b, s + len - 8, 8);
    } else if (r->end - s >= 8) {
        memcpy(a, s, 8);
        *a &= (UINT64_C(1) << (8 * len)) - 1; /* the string's bytes only */
    } else {
        for (size_t i = 0; i < len; i++)
            *a |= (uint64_t)(unsigned char)s[i] << (8 * i);
    }
}

/* Pushes the string s[0..len): from the string cache when it is there,
 * else interned (and cached, when short). */
static void push_short(struct reader *r, const char *s, size_t len)
{
    lua_State *L = r->L;
    if (!r->sc || len == 0 || len > STRCACHE_MAX_LEN) {
        lua_pushlstring(L, s, len);
        return;
    }
    uint64_t a, b;
    strcache_words(r, s, len, &a, &b);
    uint64_t h = (a * UINT64_C(0x9E3779B97F4A7C15)) ^ (b * UINT64_C(0xC2B2AE3D27D4EB4F)) ^
                 (uint64_t)len;
    h ^= h >> 29;
    h *= UINT64_C(0xBF58476D1CE4E5B9);
    unsigned i = (unsigned)(h >> 40) & (STRCACHE_SLOTS - 1);
    struct strcache_slot *slot = &r->sc->slot[i];
    if (slot->len == len && slot->a == a && slot->b == b &&
        (len <= 16 || memcmp(slot->bytes, s, len) == 0)) {
        lua_rawgeti(L, r->anchors, (int)i + 1);
        return;
    }
    lua_pushlstring(L, s, len);
    lua_pushvalue(L, -1);
    lua_rawseti(L, r->anchors, (int)i + 1);
    slot->a = a;
    slot->b = b;
    slot->len = (uint32_t)len;
    memcpy(slot->bytes, s, len);
}

/* Pushes the string cache of L's state and its anchor table (created on
 * first use, anchored in the registry) and returns the cache.  May raise
 * only when Lua runs out of memory. */
static struct strcache *push_strcache(lua_State *L)
{
    lua_pushlightuserdata(L, &luna_lua_json_key_strcache);
    lua_rawget(L, LUA_REGISTRYINDEX);
    struct strcache *sc = lua_touserdata(L, -1);
    if (sc) {
        lua_getfenv(L, -1);
        return sc;
    }
    lua_pop(L, 1);
    lua_pushlightuserdata(L, &luna_lua_json_key_strcache);
    sc = lua_newuserdata(L, sizeof *sc);
    memset(sc, 0, sizeof *sc);
    lua_createtable(L, STRCACHE_SLOTS, 0); /* an array part for every slot */
    lua_setfenv(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
    lua_pushlightuserdata(L, &luna_lua_json_key_strcache);
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_getfenv(L, -1);
    return sc;
}

/* At the opening quote: pushes the string. */
static int read_string(struct reader *r)
{
    const char *s = ++r->p, *p = s;
    /* eight bytes at a time up to the first byte that needs a look */
    while (r->end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t stop = stop_bytes8(w);
        if (stop) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            /* the lowest flagged byte is the first in the document */
            p += __builtin_ctzll(stop) >> 3;
#endif
            break;
        }
        p += 8;
    }
    while (p < r->end) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            push_short(r, s, (size_t)(p - s));
            r->p = p + 1;
            return FAST_OK;
        }
        if (c == '\\')
            return read_escaped(r, s, p);
        if (c < 0x20)
            return FAST_NO;
        p++;
    }
    return FAST_NO;
}

/* An integer of at most 15 digits (exact as a double; "-0" is -0.0 as the
 * full parser makes it); anything else is left to the full parser. */
static int read_number(struct reader *r)
{
    const char *p = r->p;
    bool neg = *p == '-';
    if (neg)
        p++;
    const char *digits = p;
    uint64_t v = 0;
    while (p < r->end && *p >= '0' && *p <= '9' && p - digits < 16)
        v = v * 10 + (uint64_t)(*p++ - '0');
    size_t n = (size_t)(p - digits);
    if (n == 0 || n > 15 || (n > 1 && *digits == '0'))
        return FAST_NO;
    if (p < r->end && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9')))
        return FAST_NO;
    double d = (double)v;
    lua_pushnumber(r->L, neg ? -d : d);
    r->p = p;
    return FAST_OK;
}

static int read_literal(struct reader *r, const char *word, size_t n)
{
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
        return FAST_NO;
    r->p += n;
    return FAST_OK;
}

/* At '{' or '[': pushes the table. */
static int read_container(struct reader *r, bool array)
{
    lua_State *L = r->L;
    if (++r->depth > FAST_MAX_DEPTH || !lua_checkstack(L, 2 * PENDING_LIMIT + 24))
        return FAST_NO;
    char close = array ? ']' : '}';
    int base = lua_gettop(L) + 1;
    int n = 0;
    bool created = false;
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
    } else {
        for (;;) {
            if (!array) {
                skip_ws(r);
                if (r->p >= r->end || *r->p != '"' || read_string(r) != FAST_OK)
                    return FAST_NO;
                skip_ws(r);
                if (r->p >= r->end || *r->p != ':')
                    return FAST_NO;
                r->p++;
            }
            skip_ws(r);
            if (read_value(r) != FAST_OK)
                return FAST_NO;
            n++;
            if (created) {
                if (array)
                    lua_rawseti(L, base, n);
                else
                    lua_rawset(L, base);
            } else if (n == PENDING_LIMIT) {
                /* as materialize() does */
                lua_createtable(L, array ? 2 * n : 0, array ? 0 : 2 * n);
                lua_insert(L, base);
                if (array) {
                    for (int i = 1; i <= n; i++) {
                        lua_pushvalue(L, base + i);
                        lua_rawseti(L, base, i);
                    }
                } else {
                    for (int i = 0; i < n; i++) {
                        lua_pushvalue(L, base + 1 + 2 * i);
                        lua_pushvalue(L, base + 2 + 2 * i);
                        lua_rawset(L, base);
                    }
                }
                lua_settop(L, base);
                created = true;
            }
            skip_ws(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p < r->end && *r->p == close) {
                r->p++;
                break;
            }
            return FAST_NO;
        }
    }
    if (!created) {
        /* as close_frame() does */
        if (array) {
            lua_createtable(L, n, 0);
            for (int i = 0; i < n; i++) {
                lua_pushvalue(L, base + i);
                lua_rawseti(L, -2, i + 1);
            }
        } else {
            lua_createtable(L, 0, n);
            for (int i = 0; i < n; i++) {
                lua_pushvalue(L, base + 2 * i);
                lua_pushvalue(L, base + 2 * i + 1);
                lua_rawset(L, -3);
            }
        }
        if (n > 0) {
            lua_replace(L, base);
            lua_settop(L, base);
        }
    }
    if (array) {
        lua_pushvalue(L, r->mt);
        lua_setmetatable(L, base);
    }
    r->depth--;
    return FAST_OK;
}

static int read_value(struct reader *r)
{
    if (r->p >= r->end)
        return FAST_NO;
    switch (*r->p) {
    case '"': return read_string(r);
    case '{': return read_container(r, false);
    case '[': return read_container(r, true);
    case 't':
        if (read_literal(r, "true", 4))
            return FAST_NO;
        lua_pushboolean(r->L, 1);
        return FAST_OK;
    case 'f':
        if (read_literal(r, "false", 5))
            return FAST_NO;
        lua_pushboolean(r->L, 0);
        return FAST_OK;
    case 'n':
        if (read_literal(r, "null", 4))
            return FAST_NO;
        lua_pushlightuserdata(r->L, NULL);
        return FAST_OK;
    default:
        if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9'))
            return read_number(r);
        return FAST_NO;
    }
}

int luna_lua_json_read_cached(lua_State *L, const char *json, size_t len)
{
    if (!lua_checkstack(L, 6))
        return FAST_NO;
    int top = lua_gettop(L);
    lua_pushlightuserdata(L, &luna_lua_json_key_array_mt);
    lua_rawget(L, LUA_REGISTRYINDEX);
    struct strcache *sc = push_strcache(L); /* top + 2: userdata, top + 3: anchors */
    struct reader r = { .L = L, .p = json, .end = json + len, .mt = top + 1, .depth = 0,
                        .sc = sc, .anchors = top + 3 };
    skip_ws(&r);
    if (read_value(&r) == FAST_OK) {
        skip_ws(&r);
        if (r.p == r.end) {
            lua_replace(L, top + 1);
            lua_settop(L, top + 1);
            return FAST_OK;
        }
    }
    lua_settop(L, top);
    return FAST_NO;
}

int luna_lua_json_push(lua_State *L, const char *json, size_t len, luna_error *err)
{
    if (luna_lua_json_read_cached(L, json, len) == 0)
        return 0;
    luna_json_options opts = { .max_depth = HARD_MAX_DEPTH };
    return decode_with(L, luna_lua_json_cached_decoder(L), json, len, &opts, true, err);
}

/* core.json.decode(s [, opts]) -> value | nil, err */
/* Inputs up to this size use the state's shared decoder (see below). */
#define DECODE_KEEP (1 << 20)

int luna_lua_json_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    luna_json_options opts;
    luna_lua_json_read_options(L, 2, &opts, false);
    bool bigint_double = false;
    if (lua_istable(L, 2)) {
        const char *how = luna_lua_opt_string_field(L, 2, "bigint", "error");
        if (strcmp(how, "double") != 0 && strcmp(how, "error") != 0)
            return luaL_error(L, "bigint must be \"error\" or \"double\"");
        bigint_double = strcmp(how, "double") == 0;
    }
    struct decoder *d = lua_touserdata(L, lua_upvalueindex(1));
    luna_error err = { 0 };
    if (len <= DECODE_KEEP) {
        if (decode_with(L, d, s, len, &opts, bigint_double, &err))
            return push_decode_error(L, &err);
        return 1;
    }
    /* A large input gets a decoder of its own, on the stack: yajl's buffers
     * grow to its longest string, and the shared decoder would keep them
     * (after a raise, until its next use); this one's are freed as soon as
     * the value is built, or with the garbage if anything raises. */
    lua_settop(L, 2);
    d = new_decoder(L, "luna.json.cache", &opts);
    int rc = decode_with(L, d, s, len, &opts, bigint_double, &err);
    luna_json_parser_free(d->p);
    d->p = NULL;
    if (rc)
        return push_decode_error(L, &err);
    return 1;
}

/* --- core.json.decoder ------------------------------------------------- */

/* core.json.decoder([opts]) -> decoder */
int luna_lua_json_decoder(lua_State *L)
{
    luna_json_options opts;
    luna_lua_json_read_options(L, 1, &opts, true);
    new_decoder(L, DECODER_MT, &opts);
    lua_newtable(L); /* the builder's slots between calls: [1..n], n */
    lua_setfenv(L, -2);
    return 1;
}

/* Runs one feed (finishing false) or the finish of decoder d at index 1.
 * The builder's slots saved in the userdata's environment are pushed back
 * first and saved again afterwards. */
static int decoder_step(lua_State *L, const char *s, size_t len, bool finishing)
{
    struct decoder *d = luaL_checkudata(L, 1, DECODER_MT);
    luna_error err = { 0 };
    if (d->busy)
        return luna_lua_push_error(L, "InvalidJSON",
                                   "decoder unusable: an earlier call raised an error", LUNA_EINVAL);
    if (d->finished)
        return luna_lua_push_error(L, "InvalidJSON", "decoder already finished: call reset()",
                                   LUNA_EINVAL);
    if (!lua_checkstack(L, stack_budget(d->opts.max_depth) + 8))
        return luna_lua_push_error(L, "InvalidJSON", "Lua stack exhausted", LUNA_ENOMEM);
    lua_settop(L, 2);
    lua_getfenv(L, 1);                     /* 3: saved slots */
    lua_pushlightuserdata(L, &luna_lua_json_key_array_mt);
    lua_rawget(L, LUA_REGISTRYINDEX);      /* 4: array_mt */
    if (d->multiple)
        lua_newtable(L);                   /* 5: results */
    else
        lua_pushnil(L);
    lua_getfield(L, 3, "n");
    int saved = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    int bottom = 6;
    for (int i = 1; i <= saved; i++)
        lua_rawgeti(L, 3, i);
    struct builder *b = &d->b;
    b->L = L;
    b->mt = 4;
    b->bottom = bottom;
    b->results = d->multiple ? 5 : 0;
    b->nresults = 0;
    d->busy = true;
    int rc = finishing ? luna_json_parser_finish(d->p, &err)
                       : luna_json_parser_feed(d->p, s, len, &err);
    d->busy = false;
    if (finishing)
        d->finished = true;
    int top = lua_gettop(L);
    if (rc) {
        lua_settop(L, 3);
        for (int i = 1; i <= saved; i++) {
            lua_pushnil(L);
            lua_rawseti(L, 3, i);
        }
        lua_pushinteger(L, 0);
        lua_setfield(L, 3, "n");
        return push_decode_error(L, &err);
    }
    if (finishing) {
        if (d->multiple) {
            lua_settop(L, 5);
            return 1;
        }
        return 1; /* the single value, on top at `bottom` */
    }
    int now = top - bottom + 1;
    for (int i = now; i >= 1; i--)
        lua_rawseti(L, 3, i); /* pops from the top */
    for (int i = now + 1; i <= saved; i++) {
        lua_pushnil(L);
        lua_rawseti(L, 3, i);
    }
    lua_pushinteger(L, now);
    lua_setfield(L, 3, "n");
    if (d->multiple) {
        lua_pushvalue(L, 5);
        return 1;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* d:feed(chunk) -> true (multiple: the values this chunk completed) | nil, err */
int luna_lua_json_decoder_feed(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    return decoder_step(L, s, len, false);
}

/* d:finish() -> value (multiple: the values completed at the end) | nil, err */
int luna_lua_json_decoder_finish(lua_State *L)
{
    lua_settop(L, 1);
    lua_pushnil(L);
    return decoder_step(L, NULL, 0, true);
}

/* d:reset(): start over (after finish or a failure). */
int luna_lua_json_decoder_reset(lua_State *L)
{
    struct decoder *d = luaL_checkudata(L, 1, DECODER_MT);
    if (luna_json_parser_reset(d->p, NULL))
        return luaL_error(L, "out of memory");
    d->busy = false;
    d->finished = false;
    lua_newtable(L);
    lua_setfenv(L, 1);
    return 0;
}

/* d:offset() -> bytes fed so far */
int luna_lua_json_decoder_offset(lua_State *L)
{
    struct decoder *d = luaL_checkudata(L, 1, DECODER_MT);
    lua_pushnumber(L, (lua_Number)luna_json_parser_offset(d->p));
    return 1;
}
