/* api/client.c — see api/client.h. */
#include "api/client.h"

#include "api/host.h"

#include <lauxlib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "client/resource.h"
#include "client/warning.h"
#include "lua/lua_util.h"
#include "controller/controller.h"
#include "controller/reconcile.h"
#include "script/watchdog.h"

/* A request shadow mode must turn into a dry run: a write whose path does
 * not ask for one already. */
static bool needs_dry_run(const struct luna_api_host *host, const struct luna_reconcile *r,
                          const char *method, const char *path)
{
    bool on = host->shadow ||
              luna_controller_shadow(luna_reconcile_controller((struct luna_reconcile *)r));
    if (!on || strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return false;
    /* dryRun=All as a whole parameter of the query, not a path segment */
    for (const char *q = strchr(path, '?'); q; q = strchr(q + 1, '&'))
        if (strncmp(q + 1, "dryRun=All", 10) == 0 && (q[11] == '&' || q[11] == '\0'))
            return false;
    return true;
}

/* The path with dryRun=All added (malloc'd; NULL when out of memory). */
static char *dry_run_path(const char *path)
{
    size_t n = strlen(path) + sizeof "&dryRun=All";
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s%cdryRun=All", path, strchr(path, '?') ? '&' : '?');
    return p;
}

/* The reconcile running on L, which must be able to wait there: raises
 * (before anything starts) outside a reconcile, on a coroutine the script
 * made, or where a yield cannot cross a C function (a table.sort
 * comparator, a gsub or xpcall handler, a metamethod the host or a
 * library function calls). */
static struct luna_reconcile *need_reconcile(lua_State *L, const char *fn)
{
    struct luna_reconcile *r = luna_reconcile_of(L);
    if (!r)
        luaL_error(L, "%s can only be called inside reconcile (on its own coroutine, not one "
                      "it created)", fn);
    if (!lua_isyieldable(L))
        luaL_error(L, "%s cannot wait here: it is called from inside a library function (a "
                      "table.sort comparator, a string.gsub function, an xpcall message handler, "
                      "a __tostring or another callback); call it from reconcile's own code", fn);
    return r;
}

/* ---- resolve ----------------------------------------------------------- */

static void cancel_resolve(void *ud) { luna_discovery_cancel(ud); }

static void on_resolved(void *ud, const struct luna_resource *res, const luna_error *err)
{
    struct luna_reconcile *r = ud;
    lua_State *co = luna_reconcile_thread(r);
    if (res) {
        luna_lua_push_resource(co, res);
        luna_reconcile_resume(r, 1);
    } else {
        /* A kind the server does not serve is not a missing object: no
         * HTTP status (client-go's NoKindMatchError is not an API status
         * either), so luna.is_not_found(err) is false for it. */
        luna_lua_push_error(co, err && err->code == LUNA_ENOMATCH ? "NoKindMatch" : "DiscoveryFailed",
                            err ? err->msg : "discovery failed", 0);
        luna_reconcile_resume(r, 2);
    }
}

static int luna_api_client_resolve(lua_State *L)
{
    const char *text = luaL_checkstring(L, 1);
    /* The context first: outside a reconcile (at load time) there may be
     * no discovery client yet. */
    struct luna_reconcile *r = need_reconcile(L, "luna API calls");
    char group[256], version[64], kind[128];
    luna_error err = { 0 };
    if (luna_resource_parse_kind(text, group, sizeof group, version, sizeof version, kind,
                                 sizeof kind, &err) < 0)
        return luaL_error(L, "%s", err.msg);
    struct luna_api_host *host = luna_api_host(L);
    if (!host || !host->disc)
        return luna_lua_push_error(L, "DiscoveryFailed", "not connected to the API server yet", 0);
    const struct luna_resource *hit = luna_discovery_lookup(host->disc, group, version, kind);
    if (hit) {
        luna_lua_push_resource(L, hit);
        return 1;
    }
    struct luna_discovery_wait *w = luna_discovery_resolve(host->disc, group, version, kind,
                                                           on_resolved, r, &err);
    if (!w) {
        /* Either answered at once (impossible after the miss above) or failed to start. */
        return luna_lua_push_error(L, "DiscoveryFailed", err.msg, 0);
    }
    luna_reconcile_wait(r, cancel_resolve, w);
    return lua_yield(L, 0);
}

/* ---- request ------------------------------------------------------------ */

/* One request in flight for a reconcile; freed when it completes or is
 * cancelled.  What it holds in C for the script — the request body (one
 * copy, in the kube request) and the response body as it arrives — is
 * charged to the controller state's memory cap while it is held
 * (luna_watchdog_charge_memory): many reconciles waiting on a slow server
 * with large bodies cannot take the host past --lua-memory-limit, they get
 * an error at the cap.  The response is collected here rather than by the
 * HTTP client so that it is charged as it grows. */
struct pending_request {
    struct luna_reconcile *r;
    struct luna_kube_request *req;
    struct luna_api_host *host;    /* borrowed: its observer hears of the end */
    uint64_t call_seq;             /* the observer's token for the call, or 0 */
    size_t charged;                /* bytes charged: body + resp_cap */
    char *resp;                    /* the response body so far (malloc'd) */
    size_t resp_len, resp_cap;
};

/* Releases the charge and frees p. The reconcile (and so its state) is
 * alive: p is freed on done or by the reconcile's own cancel. */
static void pending_free(struct pending_request *p)
{
    luna_watchdog_release_memory(luna_reconcile_thread(p->r), p->charged);
    free(p->resp);
    free(p);
}

static void cancel_request(void *ud)
{
    struct pending_request *p = ud;
    luna_kube_request_cancel(p->req);
    pending_free(p);
}

/* "the Lua memory limit (128 MiB)", or in bytes. */
static void describe_cap(lua_State *L, char *buf, size_t size)
{
    size_t cap = luna_watchdog_get_config(L).memory;
    if (cap % ((size_t)1 << 20) == 0)
        snprintf(buf, size, "the Lua memory limit (%zu MiB)", cap >> 20);
    else
        snprintf(buf, size, "the Lua memory limit (%zu bytes)", cap);
}

static int on_response_chunk(void *ud, const char *data, size_t len, luna_error *err)
{
    struct pending_request *p = ud;
    lua_State *L = luna_reconcile_thread(p->r);
    size_t need = p->resp_len + len + 1; /* +1: the NUL lua_pushlstring does not need, */
    if (need <= p->resp_cap)             /* kept so the body is a C string too */
        goto copy;
    size_t cap = p->resp_cap ? p->resp_cap : 4096;
    while (cap < need)
        cap *= 2;
    if (luna_watchdog_charge_memory(L, cap - p->resp_cap) < 0) {
        char what[64];
        describe_cap(L, what, sizeof what);
        return luna_error_set(err, LUNA_ETOOBIG,
                              "response body of more than %zu bytes does not fit %s: the "
                              "controllers' Lua heap and the C memory they hold use %zu bytes",
                              p->resp_len + len, what,
                              luna_watchdog_heap_used(L));
    }
    char *b = realloc(p->resp, cap);
    if (!b) {
        luna_watchdog_release_memory(L, cap - p->resp_cap);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory buffering the response");
    }
    p->charged += cap - p->resp_cap;
    p->resp = b;
    p->resp_cap = cap;
copy:
    memcpy(p->resp + p->resp_len, data, len);
    p->resp_len += len;
    p->resp[p->resp_len] = '\0';
    return 0;
}

#define LUNA_API_WARNINGS_MAX 64

static void add_warning(void *ud, const char *text, size_t len)
{
    lua_State *co = ud;
    if (lua_objlen(co, -1) >= LUNA_API_WARNINGS_MAX)
        return;
    lua_pushlstring(co, text, len);
    lua_rawseti(co, -2, (int)lua_objlen(co, -2) + 1);
}

/* Pushes the list of the response's 299 warnings (client/warning.h), in
 * the order they came, if it has any; returns whether it pushed.  At most
 * LUNA_API_WARNINGS_MAX are kept: a server cannot grow a reconcile's heap
 * with them. */
static bool push_warnings(lua_State *co, const luna_http_response *resp)
{
    bool any = false;
    for (size_t i = 0; i < resp->nheaders; i++) {
        if (strcmp(resp->headers[i].name, "warning") != 0)
            continue;
        if (!any) {
            lua_newtable(co);
            any = true;
        }
        luna_warning_parse(resp->headers[i].value, add_warning, co);
    }
    if (any && lua_objlen(co, -1) == 0) {
        lua_pop(co, 1);
        any = false;
    }
    return any;
}

static void on_request_done(void *ud, const luna_http_response *resp,
                            const luna_http_failure *fail)
{
    struct pending_request *p = ud;
    struct luna_reconcile *r = p->r;
    lua_State *co = luna_reconcile_thread(r);
    if (p->call_seq && p->host->observer.done)
        p->host->observer.done(p->host->observer.ud, p->call_seq,
                               fail ? 0 : (int)resp->status);
    /* The body leaves C memory as it becomes a Lua string: the charge goes
     * first, so the string (counted in the heap) and the charge never both
     * hold it for the cap. */
    luna_watchdog_release_memory(co, p->charged);
    p->charged = 0;
    int nres = 2;
    if (fail) {
        luna_lua_push_error(co, luna_http_reason_name(fail->reason), fail->err.msg, 0);
    } else {
        lua_pushinteger(co, resp->status);
        lua_pushlstring(co, p->resp ? p->resp : "", p->resp_len);
        if (push_warnings(co, resp)) {
            luna_controller_count_api_warnings(luna_reconcile_controller(r),
                                               (unsigned)lua_objlen(co, -1));
            nres = 3;
        }
    }
    pending_free(p);
    luna_reconcile_resume(r, nres);
}

/* Whether the path part (before '?') has a "." or ".." segment. */
static bool has_dot_segment(const char *path)
{
    const char *end = strchr(path, '?');
    if (!end)
        end = path + strlen(path);
    for (const char *seg = path; seg < end;) {
        const char *slash = memchr(seg, '/', (size_t)(end - seg));
        const char *stop = slash ? slash : end;
        size_t n = (size_t)(stop - seg);
        if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return true;
        seg = stop + 1;
    }
    return false;
}

static int luna_api_client_request(lua_State *L)
{
    const char *method = luaL_checkstring(L, 1);
    const char *path = luaL_checkstring(L, 2);
    size_t body_len = 0;
    const char *body = luaL_optlstring(L, 3, NULL, &body_len);
    const char *content_type = luaL_optstring(L, 4, NULL);
    struct luna_reconcile *r = need_reconcile(L, "luna API calls");
    struct luna_api_host *host = luna_api_host(L);
    if (!host)
        return luaL_error(L, "luna API calls need the runtime's API");
    struct pending_request *p = calloc(1, sizeof *p);
    if (!p)
        return luaL_error(L, "out of memory");
    p->r = r;
    p->host = host;
    /* A fragment is never sent: curl drops "#..." with whatever follows it,
     * the dryRun=All appended below included, and the request would reach
     * another path than the one asked for (".../name/../other#"). */
    if (strchr(path, '#')) {
        free(p);
        return luna_lua_push_error(L, "InvalidRequest",
                                   "a request path cannot contain '#' (a URL fragment is not sent)",
                                   0);
    }
    /* curl squashes dot segments ("/configmaps/.." is the namespace):
     * a name "." or ".." would address another resource than the one
     * named.  Kubernetes allows neither as a path segment. */
    if (has_dot_segment(path)) {
        free(p);
        return luna_lua_push_error(L, "InvalidRequest",
                                   "a request path cannot contain a '.' or '..' segment", 0);
    }
    /* Shadow mode: no write reaches storage, whatever the script sends.
     * kube-apiserver takes a DELETE's options from its body when it has
     * one and then ignores the query's dryRun: such a body must say it. */
    if (body && body_len > 0 && strcmp(method, "DELETE") == 0 &&
        needs_dry_run(host, r, method, path) && !strstr(body, "\"dryRun\":[\"All\"]")) {
        free(p);
        return luna_lua_push_error(L, "InvalidRequest",
                                   "shadow mode: a DELETE body must carry \"dryRun\":[\"All\"]", 0);
    }
    bool write = strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
    const char *why = NULL;
    if (write && host->write_allow && !host->write_allow(host->write_ud, &why)) {
        free(p);
        luna_warn("shard write refused", "controller",
                  luna_controller_name(luna_reconcile_controller(r)), "key",
                  luna_reconcile_key(r), "method", method, "reason", why);
        return luna_lua_push_error(L, "ShardNotHeld", why ? why : "shard not held", 0);
    }
    char *dry = NULL;
    if (needs_dry_run(host, r, method, path) && !(dry = dry_run_path(path))) {
        free(p);
        return luaL_error(L, "out of memory");
    }
    /* The body's and the path's copies in C are held until the answer:
     * charged for that long.  A refused charge stops this reconcile for memory (the
     * watchdog raises at its next instruction), as a refused Lua
     * allocation would. */
    size_t held = body_len + strlen(dry ? dry : path); /* the kube request's copies */
    if (luna_watchdog_charge_memory(L, held) < 0) {
        char what[64], msg[160];
        describe_cap(L, what, sizeof what);
        snprintf(msg, sizeof msg, "request of %zu bytes does not fit %s", held, what);
        free(dry);
        free(p);
        return luaL_error(L, "%s", msg); /* (lua_pushfstring has no %zu) */
    }
    p->charged = held;
    struct luna_kube_request_options o = {
        .method = method,
        .path = dry ? dry : path,
        .body = body,
        .body_len = body_len,
        .content_type = content_type,
        .timeout = write && host->write_allow ? host->write_timeout : 60,
        .max_response_bytes = LUNA_HTTP_DEFAULT_MAX_RESPONSE,
        .on_chunk = on_response_chunk,
        .on_done = on_request_done,
        .ud = p,
    };
    luna_error err = { 0 };
    p->req = host->kc ? luna_kube_request_start(host->kc, &o, &err) : NULL;
    if (!host->kc)
        luna_error_set(&err, LUNA_EINVAL, "not connected to the API server yet");
    free(dry);
    if (!p->req) {
        pending_free(p);
        return luna_lua_push_error(L, "InvalidRequest", err.msg, 0);
    }
    p->call_seq = host->observer.start ? host->observer.start(host->observer.ud,
                                                  luna_controller_name(luna_reconcile_controller(r)),
                                                  luna_reconcile_key(r), method, path,
                                                  content_type, body, body_len)
                                 : 0;
    luna_reconcile_wait(r, cancel_request, p);
    return lua_yield(L, 0);
}

/* shadow_report(verb, changed [, what]): a shadowed write of the running
 * reconcile's controller, counted in luna_shadow_writes_total (and, for a
 * shadow candidate, its key recorded with what: "verb kind ns/name"). */
static int luna_api_client_shadow_report(lua_State *L)
{
    const char *verb = luaL_checkstring(L, 1);
    bool changed = lua_toboolean(L, 2);
    const char *what = luaL_optstring(L, 3, NULL);
    struct luna_reconcile *r = luna_reconcile_of(L);
    if (r)
        luna_controller_note_shadow(luna_reconcile_controller(r), luna_reconcile_key(r), verb,
                                    what, changed);
    return 0;
}

void luna_api_client_register(lua_State *L, struct luna_api_host *host)
{
    lua_pushboolean(L, host->shadow);
    lua_setfield(L, -2, "shadow");
    lua_pushcfunction(L, luna_api_client_shadow_report);
    lua_setfield(L, -2, "shadow_report");
    lua_pushcfunction(L, luna_api_client_resolve);
    lua_setfield(L, -2, "resolve");
    lua_pushcfunction(L, luna_api_client_request);
    lua_setfield(L, -2, "request");
}
