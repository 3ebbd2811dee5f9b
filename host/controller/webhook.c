/* controller/webhook.c — see controller/webhook.h. */
#include "controller/webhook.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/clock.h"
#include "controller/controller_impl.h"
#include "controller/loader.h"
#include "lua/lua_util.h"
#include "script/watchdog.h"

static const char *field_string(lua_State *L, int t, const char *k)
{
    lua_getfield(L, t, k);
    const char *s = lua_tostring(L, -1); /* the declaration keeps it alive */
    lua_pop(L, 1);
    return s ? s : "";
}

int luna_webhook_info(lua_State *L, int i, struct luna_webhook_info *info)
{
    if (luna_loader_push_webhook(L, i) < 0)
        return LUNA_ENOTFOUND;
    int t = lua_gettop(L);
    info->name = field_string(L, t, "name");
    info->type = field_string(L, t, "type");
    info->path = field_string(L, t, "path");
    info->failure_policy = field_string(L, t, "failure_policy");
    lua_getfield(L, t, "timeout_seconds");
    info->timeout_seconds = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 10;
    lua_settop(L, t - 1);
    return 0;
}

int luna_webhook_find(lua_State *L, const char *path, struct luna_webhook_info *info)
{
    int n = luna_loader_webhook_count(L);
    for (int i = 1; i <= n; i++)
        if (luna_webhook_info(L, i, info) == 0 && strcmp(info->path, path) == 0)
            return i;
    return 0;
}

static char *dup_field(lua_State *L, int t, const char *k, size_t *len)
{
    lua_getfield(L, t, k);
    size_t n = 0;
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    char *out = NULL;
    if (s && (out = malloc(n + 1))) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    if (len)
        *len = n;
    lua_pop(L, 1);
    return out;
}

/* Copies the answer table at t (made by webhook.lua's serve: plain fields,
 * no metamethods) into a; false when out of memory. */
static bool read_answer(lua_State *L, int t, struct luna_webhook_answer *a)
{
    lua_getfield(L, t, "allowed");
    a->allowed = lua_toboolean(L, -1);
    lua_getfield(L, t, "code");
    a->code = lua_isnumber(L, -1) ? (int)lua_tointeger(L, -1) : 0;
    lua_getfield(L, t, "ops");
    a->ops = lua_isnumber(L, -1) ? (size_t)lua_tointeger(L, -1) : 0;
    lua_pop(L, 3);
    a->message = dup_field(L, t, "message", NULL);
    a->reason = dup_field(L, t, "reason", NULL);
    a->patch = dup_field(L, t, "patch", NULL);
    lua_getfield(L, t, "warnings");
    if (lua_istable(L, -1)) {
        size_t n = lua_objlen(L, -1);
        a->warnings = n ? calloc(n, sizeof *a->warnings) : NULL;
        if (n && !a->warnings) {
            lua_pop(L, 1);
            return false;
        }
        for (size_t i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, (int)i);
            const char *w = lua_tostring(L, -1);
            if (w && (a->warnings[a->nwarnings] = strdup(w)))
                a->nwarnings++;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    return true;
}

enum luna_webhook_result luna_webhook_call(lua_State *L, int i, const char *body, size_t len,
                                           double seconds, struct luna_webhook_answer *out,
                                           char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    int top = lua_gettop(L);
    lua_pushcfunction(L, luna_lua_traceback);
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    lua_getfield(L, -1, "luna.webhook");
    lua_getfield(L, -1, "serve");
    lua_replace(L, -3);
    lua_pop(L, 1);
    if (!lua_isfunction(L, -1) || luna_loader_push_webhook(L, i) < 0) {
        snprintf(why, why_size, "webhook %d is not loaded", i);
        lua_settop(L, top);
        return LUNA_WEBHOOK_ERROR;
    }
    lua_getfield(L, -1, "name");
    const char *name = lua_tostring(L, -1);
    lua_pop(L, 1);
    lua_pushlstring(L, body, len);
    struct luna_watchdog_limits lim = { .seconds = seconds,
                                        .account = luna_loader_webhook_account(L, i) };
    struct luna_watchdog_guard g = { .what = "webhook", .owner = name, .limits = &lim };
    double t0 = luna_clock_now(luna_clock_monotonic());
    int rc = luna_watchdog_pcall(L, 2, 2, top + 1, &g);
    /* the dispatch slice counts it: after a long call the reconciles
     * give the loop a breather, as after a long reconcile */
    luna_controller_charge(luna_clock_now(luna_clock_monotonic()) - t0);
    if (rc != 0) {
        if (g.stop != LUNA_WATCHDOG_RUNNING) {
            luna_watchdog_describe(&g, why, why_size);
        } else {
            const char *msg = lua_tostring(L, -1);
            /* the first line: the traceback stays in the log */
            size_t n = msg ? strcspn(msg, "\n") : 0;
            snprintf(why, why_size, "%.*s", (int)n, msg ? msg : "(error)");
        }
        lua_settop(L, top);
        if (g.stop == LUNA_WATCHDOG_MEMORY)
            lua_gc(L, LUA_GCCOLLECT, 0);
        return g.stop != LUNA_WATCHDOG_RUNNING ? LUNA_WEBHOOK_STOPPED : LUNA_WEBHOOK_ERROR;
    }
    if (lua_isnil(L, -2) && lua_type(L, -1) == LUA_TSTRING) {
        /* serve's nil, message: the body does not decode */
        snprintf(why, why_size, "%s", lua_tostring(L, -1));
        lua_settop(L, top);
        return LUNA_WEBHOOK_MALFORMED;
    }
    bool ok = lua_istable(L, -2) && read_answer(L, lua_gettop(L) - 1, out);
    lua_settop(L, top);
    if (!ok) {
        luna_webhook_answer_free(out);
        snprintf(why, why_size, "out of memory");
        return LUNA_WEBHOOK_ERROR;
    }
    return LUNA_WEBHOOK_OK;
}
