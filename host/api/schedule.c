/* api/schedule.c — see api/schedule.h. */
#include "api/schedule.h"

#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "controller/controller.h"
#include "queue/workqueue.h"

/* Kubernetes bounds: a namespace is a DNS label, a name at most a DNS
 * subdomain; a key is "namespace/name" or "name". */
#define NAMESPACE_MAX 63
#define NAME_MAX_LEN 253
#define KEY_MAX (NAMESPACE_MAX + 1 + NAME_MAX_LEN)

/* [-0, +2] false, the formatted reason. */
static int refuse(lua_State *L, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lua_pushboolean(L, 0);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    return 2;
}

/* NULL if key is a key of the shape the runtime makes, else why not (a
 * static string, or one pushed on L). */
static const char *key_problem(lua_State *L, const char *key, size_t len)
{
    if (len > KEY_MAX)
        return lua_pushfstring(L, "key longer than %d bytes", KEY_MAX);
    if (strcmp(key, "@every") == 0)
        return "key \"@every\" is the periodic key: use every";
    const char *slash = NULL;
    bool ok = len > 0 && key[0] != '@';
    for (size_t i = 0; ok && i < len; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (ch <= 0x20 || ch >= 0x7f)
            ok = false; /* NUL, controls, spaces, non-ASCII */
        else if (ch == '/' && slash)
            ok = false; /* two slashes */
        else if (ch == '/')
            slash = key + i;
    }
    if (ok && slash)
        ok = slash > key && (size_t)(slash - key) <= NAMESPACE_MAX && slash[1] != '\0' &&
             len - (size_t)(slash - key) - 1 <= NAME_MAX_LEN;
    else if (ok)
        ok = len <= NAME_MAX_LEN;
    if (ok)
        return NULL;
    lua_pushliteral(L, "key must be \"namespace/name\" or \"name\", got ");
    lua_getglobal(L, "string");
    lua_getfield(L, -1, "format");
    lua_remove(L, -2);
    lua_pushliteral(L, "%q");
    lua_pushlstring(L, key, len);
    lua_call(L, 2, 1);
    lua_concat(L, 2);
    return lua_tostring(L, -1);
}

/* The delay `at` (index 2) asks for, or NaN with the reason pushed. */
static double delay_of(lua_State *L, const char **why)
{
    int t = lua_type(L, 2);
    if (t == LUA_TNUMBER) {
        double at = lua_tonumber(L, 2);
        if (!isfinite(at) || at < 0) {
            *why = "at must be a finite number of seconds since the epoch (or { after = "
                   "seconds })";
            return NAN;
        }
        double d = at - luna_wall_clock_now();
        if (d > LUNA_SCHEDULE_MAX_DELAY) {
            *why = lua_pushfstring(L, "at is more than a year (%d s) from now",
                                   (int)LUNA_SCHEDULE_MAX_DELAY);
            return NAN;
        }
        return d;
    }
    if (t != LUA_TTABLE) {
        *why = lua_pushfstring(L, "at must be seconds since the epoch or { after = seconds }, "
                                  "got %s", lua_typename(L, t));
        return NAN;
    }
    /* raw reads: a table with metamethods gets no say in the timer */
    for (lua_pushnil(L); lua_next(L, 2); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "after") != 0) {
            lua_getglobal(L, "tostring");
            lua_pushvalue(L, -3);
            lua_call(L, 1, 1);
            *why = lua_pushfstring(L, "unknown field '%s' (want { after = seconds })",
                                   lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
            return NAN;
        }
    }
    lua_pushliteral(L, "after");
    lua_rawget(L, 2);
    double d = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : NAN;
    lua_pop(L, 1);
    if (!(d >= 0 && d <= LUNA_SCHEDULE_MAX_DELAY)) {
        *why = lua_pushfstring(L, "after must be a number of seconds from 0 to %d",
                               (int)LUNA_SCHEDULE_MAX_DELAY);
        return NAN;
    }
    return d;
}

static int luna_api_schedule(lua_State *L)
{
    struct luna_reconcile *r;
    struct luna_controller *c = luna_controller_current(L, &r);
    if (!c || !r)
        return refuse(L, "only inside a reconcile (it schedules a key of the reconciling "
                         "controller)");
    if (lua_type(L, 1) != LUA_TSTRING)
        return refuse(L, "key must be a string, got %s", luaL_typename(L, 1));
    size_t len;
    const char *key = lua_tolstring(L, 1, &len);
    const char *why = key_problem(L, key, len);
    if (why)
        return refuse(L, "%s", why);
    double delay = delay_of(L, &why);
    if (isnan(delay))
        return refuse(L, "%s", why);
    struct luna_workqueue *q = luna_controller_queue(c);
    if (!q)
        return refuse(L, "the controller has no queue");
    if (luna_workqueue_waiting(q) >= LUNA_SCHEDULE_MAX_WAITING && !luna_workqueue_is_waiting(q, key))
        return refuse(L, "the controller has %d keys waiting (schedules, requeue_after, "
                         "retries), the most it may: schedule fewer keys, or a key that "
                         "stands for many", LUNA_SCHEDULE_MAX_WAITING);
    int rc = luna_workqueue_add_after_priority(q, key, delay, LUNA_WORKQUEUE_PRIORITY_DEFAULT);
    if (rc == LUNA_ENOMEM)
        return luaL_error(L, "out of memory");
    lua_pushboolean(L, 1); /* LUNA_ECANCELED: stopping, dropped as every add */
    return 1;
}

void luna_api_schedule_register(lua_State *L)
{
    lua_pushcfunction(L, luna_api_schedule);
    lua_setfield(L, -2, "schedule");
}
