/* lua_http.c — see lua_http.h.
 *
 * Per Lua state (universe) a context userdata lives in the registry: it
 * holds the thread callbacks run on and the list of the state's requests,
 * and its __gc (at lua_close) cancels them.  Per request a malloc'd lua_req
 * holds the registry reference of its callback table; the handle userdata
 * points at it.  lua_req is freed when the request ends (after on_done) or
 * is canceled; if that happens while one of its Lua callbacks runs, freeing
 * waits until the callback returns.
 */
#include "testing/lua_http.h"

#include <lauxlib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#include "client/http.h"
#include "base/log.h"
#include "base/loop.h"
#include "lua/lua_util.h"
#include "base/ndjson.h"

#define CTX_KEY "luna.http.ctx"
#define THREAD_KEY "luna.http.thread"
#define HANDLE_MT "luna.http.request"
#define FRAMER_MT "luna.http.ndjson"

static luna_http_client *the_client;

struct lua_req;

struct http_ctx {
    lua_State *T;               /* callback thread, anchored at THREAD_KEY */
    struct lua_req *reqs;       /* in flight */
    size_t count;
};

struct lua_handle {
    struct lua_req *lr;         /* NULL once the request ended */
};

/* req != NULL if and only if the request is in flight; dead if and only if
 * it was released while a callback ran (freed when depth drops to 0). */
struct lua_req {
    luna_http_request *req;
    struct http_ctx *ctx;
    int cbs_ref;                /* registry ref: { on_headers=, on_chunk=, ... } */
    struct lua_handle *handle;  /* NULL once the handle was collected */
    int depth;                  /* Lua callbacks of this request running */
    bool dead;
    struct lua_req *prev, *next;
};

static void release(struct lua_req *lr, bool unref)
{
    struct http_ctx *ctx = lr->ctx;
    if (unref)
        luaL_unref(ctx->T, LUA_REGISTRYINDEX, lr->cbs_ref);
    lr->cbs_ref = LUA_NOREF;
    if (lr->handle)
        lr->handle->lr = NULL;
    lr->handle = NULL;
    lr->req = NULL;
    DL_DELETE(ctx->reqs, lr);
    ctx->count--;
    if (lr->depth > 0)
        lr->dead = true;
    else
        free(lr);
}

/* ---- calling Lua callbacks ---------------------------------------------- */

enum cb_kind { CB_HEADERS, CB_DATA, CB_DONE };

struct call {
    struct lua_req *lr;
    enum cb_kind kind;
    const char *field;
    const luna_http_response *resp;
    const luna_http_failure *fail;
    const char *data;
    size_t len;
    bool whole;
    const char *desc;           /* "METHOD URL" for the log */
    int rc;
};

static void push_headers(lua_State *L, const luna_http_response *resp)
{
    lua_createtable(L, 0, (int)resp->nheaders);
    for (size_t i = 0; i < resp->nheaders; i++) {
        const luna_http_header *h = &resp->headers[i];
        lua_getfield(L, -1, h->name);
        if (lua_isstring(L, -1)) {
            lua_pushstring(L, ", ");
            lua_pushstring(L, h->value);
            lua_concat(L, 3);
        } else {
            lua_pop(L, 1);
            lua_pushstring(L, h->value);
        }
        lua_setfield(L, -2, h->name);
    }
}

static const char *version_name(int v)
{
    switch (v) {
    case 10: return "1.0";
    case 11: return "1.1";
    case 20: return "2";
    case 30: return "3";
    }
    return NULL;
}

static void push_response(lua_State *L, const luna_http_response *resp, bool whole)
{
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, (lua_Integer)resp->status);
    lua_setfield(L, -2, "status");
    push_headers(L, resp);
    lua_setfield(L, -2, "headers");
    if (whole && resp->body) {
        lua_pushlstring(L, resp->body, resp->body_len);
        lua_setfield(L, -2, "body");
    }
    const char *v = version_name(resp->http_version);
    if (v) {
        lua_pushstring(L, v);
        lua_setfield(L, -2, "http_version");
    }
}

/* Pushes the error table alone (luna_lua_push_error pushes nil first). */
static void push_failure(lua_State *L, const char *reason, const char *message)
{
    luna_lua_push_error(L, reason, message, 0);
    lua_remove(L, -2);
}

/* Runs under lua_cpcall, so building the arguments cannot escape. */
static int trampoline(lua_State *L)
{
    struct call *k = lua_touserdata(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, k->lr->cbs_ref);
    lua_getfield(L, -1, k->field);
    if (!lua_isfunction(L, -1))
        return 0;
    int nargs = 1;
    switch (k->kind) {
    case CB_HEADERS:
        lua_pushinteger(L, (lua_Integer)k->resp->status);
        push_headers(L, k->resp);
        nargs = 2;
        break;
    case CB_DATA:
        lua_pushlstring(L, k->data, k->len);
        break;
    case CB_DONE:
        if (k->fail) {
            lua_pushnil(L);
            push_failure(L, luna_http_reason_name(k->fail->reason), k->fail->err.msg);
        } else {
            push_response(L, k->resp, k->whole);
            lua_pushnil(L);
        }
        nargs = 2;
        break;
    }
    char what[256];
    snprintf(what, sizeof what, "core.http %s %s", k->field, k->desc);
    k->rc = luna_lua_pcall(L, nargs, 0, what);
    return 0;
}

/* Calls the Lua callback k->field of lr, if any.  Returns 0, or LUNA_ELUA
 * if it raised.  lr may be released meanwhile (then freed here). */
static int call_lua(struct call *k)
{
    struct lua_req *lr = k->lr;
    lua_State *T = lr->ctx->T;
    lr->depth++;
    int top = lua_gettop(T);
    if (lua_cpcall(T, trampoline, k) != 0) {
        luna_error("lua callback failed", "what", k->field, "request", k->desc, "error",
                   lua_isstring(T, -1) ? lua_tostring(T, -1) : "out of memory");
        k->rc = LUNA_ELUA;
    }
    lua_settop(T, top);
    lr->depth--;
    if (lr->dead && lr->depth == 0)
        free(lr);
    return k->rc;
}

static int on_headers(luna_http_request *req, const luna_http_response *resp, void *ud,
                      luna_error *err)
{
    struct call k = { .lr = ud, .kind = CB_HEADERS, .field = "on_headers", .resp = resp,
                      .desc = luna_http_request_describe(req) };
    if (call_lua(&k))
        return luna_error_set(err, LUNA_ELUA, "on_headers raised an error (see the log)");
    return 0;
}

static int on_chunk(luna_http_request *req, const char *data, size_t len, void *ud,
                    luna_error *err)
{
    struct call k = { .lr = ud, .kind = CB_DATA, .field = "on_chunk", .data = data, .len = len,
                      .desc = luna_http_request_describe(req) };
    if (call_lua(&k))
        return luna_error_set(err, LUNA_ELUA, "on_chunk raised an error (see the log)");
    return 0;
}

static int on_line(luna_http_request *req, const char *data, size_t len, void *ud,
                   luna_error *err)
{
    struct call k = { .lr = ud, .kind = CB_DATA, .field = "on_line", .data = data, .len = len,
                      .desc = luna_http_request_describe(req) };
    if (call_lua(&k))
        return luna_error_set(err, LUNA_ELUA, "on_line raised an error (see the log)");
    return 0;
}

static void on_done(luna_http_request *req, const luna_http_response *resp,
                    const luna_http_failure *fail, void *ud)
{
    struct lua_req *lr = ud;
    struct call k = { .lr = lr, .kind = CB_DONE, .field = "on_done", .resp = resp,
                      .fail = fail, .whole = resp->body != NULL,
                      .desc = luna_http_request_describe(req) };
    lr->req = NULL; /* ended: a cancel from on_done is a no-op */
    lr->depth++;    /* keep lr while releasing it below */
    call_lua(&k);
    lr->depth--;
    if (lr->dead) {
        if (lr->depth == 0)
            free(lr);
    } else {
        release(lr, true);
    }
}

/* ---- per-state context -------------------------------------------------- */

static int ctx_gc(lua_State *L)
{
    struct http_ctx *ctx = lua_touserdata(L, 1);
    while (ctx->reqs) {
        struct lua_req *lr = ctx->reqs;
        luna_http_request *req = lr->req;
        release(lr, false); /* the state is closing: no unref */
        if (req)
            luna_http_request_cancel(req);
    }
    return 0;
}

/* Returns this state's context, creating it on first use (may raise). */
static struct http_ctx *get_ctx(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, CTX_KEY);
    struct http_ctx *ctx = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (ctx)
        return ctx;
    lua_State *T = lua_newthread(L);
    lua_setfield(L, LUA_REGISTRYINDEX, THREAD_KEY);
    ctx = lua_newuserdata(L, sizeof *ctx);
    memset(ctx, 0, sizeof *ctx);
    ctx->T = T;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, ctx_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, CTX_KEY);
    return ctx;
}

static luna_http_client *get_client(lua_State *L)
{
    if (!the_client) {
        luna_error err = { 0, "" };
        the_client = luna_http_client_new(luna_loop(), &err);
        if (!the_client)
            luaL_error(L, "core.http: %s", err.msg);
    }
    return the_client;
}

/* ---- option parsing (may raise) ----------------------------------------- */

static const char *opt_lstring(lua_State *L, int idx, const char *key, size_t *len)
{
    lua_getfield(L, idx, key);
    const char *s = NULL;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "field '%s' must be a string, got %s", key, luaL_typename(L, -1));
        s = lua_tolstring(L, -1, len);
    }
    lua_pop(L, 1); /* the table keeps the string alive */
    return s;
}

static double opt_seconds(lua_State *L, int idx, const char *key)
{
    double v = luna_lua_opt_number_field(L, idx, key, 0);
    if (v < 0 || v != v)
        luaL_error(L, "field '%s' must be a non-negative number of seconds", key);
    return v;
}

static size_t opt_bytes(lua_State *L, int idx, const char *key)
{
    double v = luna_lua_opt_number_field(L, idx, key, 0);
    if (v < 0 || v != v || v > 1e15)
        luaL_error(L, "field '%s' must be a non-negative byte count", key);
    return (size_t)v;
}

static bool opt_function(lua_State *L, int idx, const char *key)
{
    lua_getfield(L, idx, key);
    int t = lua_type(L, -1);
    lua_pop(L, 1);
    if (t != LUA_TNIL && t != LUA_TFUNCTION)
        luaL_error(L, "field '%s' must be a function, got %s", key, lua_typename(L, t));
    return t == LUA_TFUNCTION;
}

/* Reads opts.headers into a userdata array left on the stack. */
static void read_headers(lua_State *L, int idx, luna_http_options *o)
{
    lua_getfield(L, idx, "headers");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushnil(L); /* keep the stack shape */
        return;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "field 'headers' must be a table, got %s", luaL_typename(L, -1));
    int t = lua_gettop(L);
    size_t n = 0;
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "headers must map names (strings) to values (strings)");
        n++;
    }
    luna_http_header *h = lua_newuserdata(L, (n ? n : 1) * sizeof *h);
    size_t i = 0;
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
        h[i].name = lua_tostring(L, -2);
        h[i].value = lua_tostring(L, -1);
        i++;
    }
    lua_remove(L, t); /* the options table keeps the strings alive */
    o->headers = h;
    o->nheaders = n;
}

static void read_tls(lua_State *L, int idx, luna_http_tls *tls)
{
    lua_getfield(L, idx, "tls");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "field 'tls' must be a table, got %s", luaL_typename(L, -1));
    int t = lua_gettop(L);
    tls->ca_file = opt_lstring(L, t, "ca_file", NULL);
    tls->ca_pem = opt_lstring(L, t, "ca_pem", &tls->ca_pem_len);
    tls->cert_file = opt_lstring(L, t, "cert_file", NULL);
    tls->cert_pem = opt_lstring(L, t, "cert_pem", &tls->cert_pem_len);
    tls->key_file = opt_lstring(L, t, "key_file", NULL);
    tls->key_pem = opt_lstring(L, t, "key_pem", &tls->key_pem_len);
    tls->insecure_skip_verify = luna_lua_opt_bool_field(L, t, "insecure", 0);
    lua_pop(L, 1); /* the options table keeps the tls table alive */
}

static const char *const CALLBACKS[] = { "on_headers", "on_chunk", "on_line", "on_done" };

static int luna_lua_http_request(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luna_http_options o;
    memset(&o, 0, sizeof o);
    o.url = luna_lua_opt_string_field(L, 1, "url", NULL);
    if (!o.url)
        return luaL_error(L, "core.http.request: field 'url' is required");
    o.method = luna_lua_opt_string_field(L, 1, "method", "GET");
    o.body = opt_lstring(L, 1, "body", &o.body_len);
    o.bearer_token = opt_lstring(L, 1, "bearer_token", NULL);
    o.timeout = opt_seconds(L, 1, "timeout");
    o.connect_timeout = opt_seconds(L, 1, "connect_timeout");
    o.idle_timeout = opt_seconds(L, 1, "idle_timeout");
    o.max_response_bytes = opt_bytes(L, 1, "max_body");
    o.max_line_bytes = opt_bytes(L, 1, "max_line");
    o.max_request_bytes = opt_bytes(L, 1, "max_request_body");
    read_tls(L, 1, &o.tls);
    bool has[4];
    for (int i = 0; i < 4; i++)
        has[i] = opt_function(L, 1, CALLBACKS[i]);
    if (has[1] && has[2])
        return luaL_error(L, "core.http.request: on_chunk and on_line are exclusive");
    read_headers(L, 1, &o); /* stack: opts, headers array (or nil) */

    struct http_ctx *ctx = get_ctx(L);
    luna_http_client *client = get_client(L);
    lua_createtable(L, 0, 4);
    for (int i = 0; i < 4; i++) {
        if (has[i]) {
            lua_getfield(L, 1, CALLBACKS[i]);
            lua_setfield(L, -2, CALLBACKS[i]);
        }
    }
    int cbs_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    struct lua_handle *handle = lua_newuserdata(L, sizeof *handle);
    handle->lr = NULL;
    luaL_getmetatable(L, HANDLE_MT);
    lua_setmetatable(L, -2);

    /* Nothing below raises until the request is started or given up. */
    struct lua_req *lr = calloc(1, sizeof *lr);
    if (!lr) {
        luaL_unref(L, LUA_REGISTRYINDEX, cbs_ref);
        return luna_lua_push_error(L, "OutOfMemory", "out of memory starting a request", 0);
    }
    lr->ctx = ctx;
    lr->cbs_ref = cbs_ref;
    o.ud = lr;
    o.on_headers = has[0] ? on_headers : NULL;
    o.on_chunk = has[1] ? on_chunk : NULL;
    o.on_line = has[2] ? on_line : NULL;
    o.on_done = on_done;
    luna_error err = { 0, "" };
    enum luna_http_reason reason = LUNA_HTTP_INVALID;
    luna_http_request *req = luna_http_request_start(client, &o, &reason, &err);
    if (!req) {
        free(lr);
        luaL_unref(L, LUA_REGISTRYINDEX, cbs_ref);
        return luna_lua_push_error(L, luna_http_reason_name(reason), err.msg, 0);
    }
    lr->req = req;
    lr->handle = handle;
    handle->lr = lr;
    DL_APPEND(ctx->reqs, lr);
    ctx->count++;
    return 1;
}

static int luna_lua_http_cancel(lua_State *L)
{
    struct lua_handle *h = luaL_checkudata(L, 1, HANDLE_MT);
    struct lua_req *lr = h->lr;
    if (!lr || !lr->req) {
        lua_pushboolean(L, 0);
        return 1;
    }
    luna_http_request *req = lr->req;
    release(lr, true);
    luna_http_request_cancel(req);
    lua_pushboolean(L, 1);
    return 1;
}

static int handle_gc(lua_State *L)
{
    struct lua_handle *h = lua_touserdata(L, 1);
    if (h->lr)
        h->lr->handle = NULL; /* the request runs on without its handle */
    h->lr = NULL;
    return 0;
}

static int luna_lua_http_active(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, CTX_KEY);
    struct http_ctx *ctx = lua_touserdata(L, -1);
    lua_pushinteger(L, ctx ? (lua_Integer)ctx->count : 0);
    return 1;
}

/* ---- the NDJSON framer -------------------------------------------------- */

struct lua_framer {
    luna_ndjson f;
    lua_State *L;       /* during feed: the calling state, on_line at fn_idx */
    int fn_idx;
};

static int framer_line(const char *line, size_t len, void *ud, luna_error *err)
{
    struct lua_framer *fr = ud;
    lua_State *L = fr->L;
    lua_pushvalue(L, fr->fn_idx);
    lua_pushlstring(L, line, len);
    if (lua_pcall(L, 1, 0, 0) != 0)
        return luna_error_set(err, LUNA_ELUA, "on_line raised an error"); /* error on top */
    return 0;
}

static const char *framer_reason(int code)
{
    switch (code) {
    case LUNA_ETOOBIG: return "TooBig";
    case LUNA_EPROTO: return "Truncated";
    case LUNA_ENOMEM: return "OutOfMemory";
    }
    return "Failed";
}

static int luna_lua_http_ndjson(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, 1, "on_line");
    if (!lua_isfunction(L, -1))
        return luaL_error(L, "core.http.ndjson: field 'on_line' must be a function");
    size_t max_line = opt_bytes(L, 1, "max_line");
    struct lua_framer *fr = lua_newuserdata(L, sizeof *fr);
    luna_ndjson_init(&fr->f, max_line ? max_line : LUNA_HTTP_DEFAULT_MAX_LINE, framer_line, fr);
    fr->L = NULL;
    fr->fn_idx = 0;
    luaL_getmetatable(L, FRAMER_MT);
    lua_setmetatable(L, -2);
    lua_createtable(L, 1, 0);
    lua_pushvalue(L, -3);
    lua_rawseti(L, -2, 1);
    lua_setfenv(L, -2);
    return 1;
}

static int luna_lua_http_ndjson_feed(lua_State *L)
{
    struct lua_framer *fr = luaL_checkudata(L, 1, FRAMER_MT);
    size_t len;
    const char *data = luaL_checklstring(L, 2, &len);
    if (fr->L)
        return luaL_error(L, "framer:feed called from its own on_line");
    lua_settop(L, 2);
    lua_getfenv(L, 1);
    lua_rawgeti(L, -1, 1);
    fr->L = L;
    fr->fn_idx = lua_gettop(L);
    luna_error err = { 0, "" };
    int rc = luna_ndjson_feed(&fr->f, data, len, &err);
    fr->L = NULL;
    if (rc == LUNA_ELUA && fr->f.failed == LUNA_ELUA && lua_gettop(L) > fr->fn_idx)
        return lua_error(L); /* the callback's error, on top */
    if (rc)
        return luna_lua_push_error(L, framer_reason(rc), err.msg, 0);
    lua_pushboolean(L, 1);
    return 1;
}

static int luna_lua_http_ndjson_finish(lua_State *L)
{
    struct lua_framer *fr = luaL_checkudata(L, 1, FRAMER_MT);
    luna_error err = { 0, "" };
    int rc = luna_ndjson_finish(&fr->f, &err);
    if (rc)
        return luna_lua_push_error(L, framer_reason(rc), err.msg, 0);
    lua_pushboolean(L, 1);
    return 1;
}

static int framer_gc(lua_State *L)
{
    struct lua_framer *fr = lua_touserdata(L, 1);
    luna_ndjson_destroy(&fr->f);
    return 0;
}

/* ---- registration ------------------------------------------------------- */

void luna_lua_http_register(lua_State *L)
{
    static const luaL_Reg handle_methods[] = {
        { "cancel", luna_lua_http_cancel },
        { NULL, NULL },
    };
    static const luaL_Reg framer_methods[] = {
        { "feed", luna_lua_http_ndjson_feed },
        { "finish", luna_lua_http_ndjson_finish },
        { NULL, NULL },
    };
    static const luaL_Reg funcs[] = {
        { "request", luna_lua_http_request },
        { "active", luna_lua_http_active },
        { "ndjson", luna_lua_http_ndjson },
        { NULL, NULL },
    };
    luna_lua_new_class(L, HANDLE_MT, handle_methods, handle_gc);
    luna_lua_new_class(L, FRAMER_MT, framer_methods, framer_gc);
    luna_lua_register_table(L, "http", funcs);
}
