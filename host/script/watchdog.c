/* watchdog.c — see watchdog.h. */
#include "script/watchdog.h"

#include <lauxlib.h>
#include <luajit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"

/* Instructions between two hook calls: the precision of the instruction
 * budget, and how often the clock is read.  At ~300 M interpreted
 * instructions per second that is every few microseconds. */
#define HOOK_STEP 1000

/* Small blocks the Lua heap freed are kept for its next allocations of the
 * same size: a short reconcile allocates and frees a dozen tables and
 * strings, and LuaJIT's own allocator spends several times what a list
 * push and pop cost on each.  Exact sizes only (FREE_MIN to FREE_MAX
 * bytes), so a block is only ever handed out for the size LuaJIT asked of
 * the allocator that made it; at most FREE_BYTES bytes are kept, and they
 * are not part of the heap the cap counts (the Lua heap freed them). */
#define FREE_MIN 16
#define FREE_MAX 256
#define FREE_BYTES ((size_t)256 << 10)

struct luna_watchdog {
    lua_Alloc orig;             /* the state's own allocator */
    void *orig_ud;
    size_t used;                /* bytes the Lua heap holds */
    size_t charged;             /* C bytes held for the state's scripts
                                   (luna_watchdog_charge_memory) */
    struct luna_watchdog_config cfg;
    struct luna_watchdog_guard *current;  /* innermost active guard */
    /* free[n]: freed blocks of n bytes, linked through their first word
     * (owned here until handed out again or given back to orig) */
    void *free[FREE_MAX + 1];
    size_t free_bytes;          /* bytes in free[] */
};

/* luna_watchdog_stop_all_at's deadline in nanoseconds of the monotonic
 * clock (0: none).  Written from signal handlers: it must be lock-free. */
static atomic_llong stop_all_ns;
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the shutdown deadline must be a lock-free atomic");

/* Registry key of the userdata whose __gc frees the watchdog at lua_close. */
static char sentinel_key;

static void *watchdog_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
static void hook(lua_State *L, lua_Debug *ar);

static struct luna_watchdog *watchdog_of(lua_State *L)
{
    void *ud = NULL;
    return lua_getallocf(L, &ud) == watchdog_alloc ? ud : NULL;
}

static double now(void) { return luna_clock_now(luna_clock_monotonic()); }

struct luna_watchdog_config luna_watchdog_config_default(void)
{
    return (struct luna_watchdog_config){
        .limits = { LUNA_WATCHDOG_DEFAULT_INSTRUCTIONS, LUNA_WATCHDOG_DEFAULT_SECONDS },
        .memory = LUNA_WATCHDOG_DEFAULT_MEMORY,
    };
}

/* Sets the hook the guard needs: every instruction once stopped (so the
 * error is raised again right after a pcall caught it), every step while
 * counting.  A guard without budgets counts too: the shutdown deadline
 * must reach it. */
static void arm(struct luna_watchdog_guard *g)
{
    lua_sethook(g->L, hook, LUA_MASKCOUNT, g->stop != LUNA_WATCHDOG_RUNNING ? 1 : g->step);
}

struct luna_watchdog_limits luna_watchdog_limits_under(const struct luna_watchdog_limits *state,
                                                       const struct luna_watchdog_limits *own)
{
    struct luna_watchdog_limits lim = *state;
    if (!own)
        return lim;
    /* `x > 0` is false for NaN too: only a real, positive value lowers */
    if (own->instructions > 0 && (lim.instructions <= 0 || own->instructions < lim.instructions))
        lim.instructions = own->instructions;
    if (own->seconds > 0 && (lim.seconds <= 0 || own->seconds < lim.seconds))
        lim.seconds = own->seconds;
    return lim;
}

void luna_watchdog_stop_all_at(double deadline)
{
    if (!(deadline > 0))
        return;
    long long ns = deadline >= 9e9 ? (long long)9e18 : (long long)(deadline * 1e9);
    if (ns < 1)
        ns = 1;
    long long cur = atomic_load(&stop_all_ns);
    while ((cur == 0 || ns < cur) && !atomic_compare_exchange_weak(&stop_all_ns, &cur, ns)) {
    }
}

double luna_watchdog_stop_all_deadline(void)
{
    return (double)atomic_load(&stop_all_ns) / 1e9;
}

void luna_watchdog_stop_all_clear(void) { atomic_store(&stop_all_ns, 0); }

/* Checks the guard's clock budget and the shutdown deadline: the stop
 * reason, or LUNA_WATCHDOG_RUNNING.  Reads the clock only when one is set. */
static enum luna_watchdog_stop past_deadline(const struct luna_watchdog_guard *g)
{
    long long all = atomic_load_explicit(&stop_all_ns, memory_order_relaxed);
    if (g->deadline <= 0 && all == 0)
        return LUNA_WATCHDOG_RUNNING;
    double t = now();
    if (g->deadline > 0 && t >= g->deadline)
        return LUNA_WATCHDOG_TIME;
    if (all != 0 && t >= (double)all / 1e9)
        return LUNA_WATCHDOG_SHUTDOWN;
    return LUNA_WATCHDOG_RUNNING;
}

/* Whether n more bytes on top of `base` heap bytes and the charged C
 * memory would pass the cap. */
static bool over_cap(const struct luna_watchdog *wd, size_t base, size_t n)
{
    size_t cap = wd->cfg.memory;
    if (!cap)
        return false;
    size_t held = base + wd->charged;
    return held < base /* overflow */ || n > cap || held > cap - n;
}

/* Stops the running guard g for memory (once), so the hook raises its error
 * at the next instruction. */
static void stop_for_memory(struct luna_watchdog_guard *g)
{
    if (g->stop == LUNA_WATCHDOG_RUNNING) {
        g->stop = LUNA_WATCHDOG_MEMORY;
        /* Only changes the hook count: safe at any point, as LuaJIT's
         * own profiler relies on. */
        arm(g);
    }
}

/* The allocator wrapper.  Refuses growth past the cap (the heap plus the
 * charged C memory) only while a guard is active; frees and shrinks always
 * go through. */
static void *watchdog_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct luna_watchdog *wd = ud;
    if (!ptr)
        osize = 0;
    size_t rest = wd->used > osize ? wd->used - osize : 0;
    if (nsize == 0) {
        if (osize >= FREE_MIN && osize <= FREE_MAX && wd->free_bytes + osize <= FREE_BYTES) {
            *(void **)ptr = wd->free[osize];
            wd->free[osize] = ptr;
            wd->free_bytes += osize;
        } else {
            wd->orig(wd->orig_ud, ptr, osize, 0);
        }
        wd->used = rest;
        return NULL;
    }
    struct luna_watchdog_guard *g = wd->current;
    if (g && nsize > osize && over_cap(wd, rest, nsize)) {
        stop_for_memory(g);
        return NULL;
    }
    void *p;
    if (!ptr && nsize >= FREE_MIN && nsize <= FREE_MAX && wd->free[nsize]) {
        p = wd->free[nsize];
        wd->free[nsize] = *(void **)p;
        wd->free_bytes -= nsize;
    } else {
        p = wd->orig(wd->orig_ud, ptr, osize, nsize);
    }
    if (p)
        wd->used = rest + nsize;
    return p;
}

/* Gives every kept free block back to the state's own allocator. */
static void free_lists_release(struct luna_watchdog *wd)
{
    for (size_t n = FREE_MIN; n <= FREE_MAX; n++) {
        while (wd->free[n]) {
            void *p = wd->free[n];
            wd->free[n] = *(void **)p;
            wd->orig(wd->orig_ud, p, n, 0);
        }
    }
    wd->free_bytes = 0;
}

/* Runs at lua_close (the registry keeps the sentinel alive until then):
 * puts the original allocator back, which frees everything that is left,
 * and frees the watchdog. */
static int sentinel_gc(lua_State *L)
{
    struct luna_watchdog **box = lua_touserdata(L, 1);
    if (box && *box) {
        struct luna_watchdog *wd = *box;
        *box = NULL;
        lua_sethook(L, NULL, 0, 0);
        free_lists_release(wd);
        lua_setallocf(L, wd->orig, wd->orig_ud);
        free(wd);
    }
    return 0;
}

static void hook(lua_State *L, lua_Debug *ar)
{
    struct luna_watchdog *wd = watchdog_of(L);
    struct luna_watchdog_guard *g = wd ? wd->current : NULL;
    if (!g) {
        lua_sethook(L, NULL, 0, 0);
        return;
    }
    if (g->stop == LUNA_WATCHDOG_RUNNING) {
        g->executed += g->step;
        if (g->lim.instructions > 0 && g->executed >= g->lim.instructions)
            g->stop = LUNA_WATCHDOG_INSTRUCTIONS;
        else if ((g->stop = past_deadline(g)) == LUNA_WATCHDOG_RUNNING)
            return;
        arm(g);
    }
    char msg[256];
    luna_watchdog_describe(g, msg, sizeof msg);
    luaL_where(L, 0);
    lua_pushstring(L, msg);
    lua_concat(L, 2);
    lua_error(L);
}

static size_t heap_bytes(lua_State *L)
{
    return (size_t)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB, 0);
}

int luna_watchdog_install(lua_State *L, const struct luna_watchdog_config *cfg, luna_error *err)
{
    struct luna_watchdog_config def = luna_watchdog_config_default();
    if (!cfg)
        cfg = &def;
    struct luna_watchdog *wd = watchdog_of(L);
    if (wd) {
        wd->cfg = *cfg;
        return 0;
    }
    if (!luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF))
        return luna_error_set(err, LUNA_ELUA, "cannot turn LuaJIT's compiler off");
    wd = calloc(1, sizeof *wd);
    if (!wd)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    wd->cfg = *cfg;
    wd->orig = lua_getallocf(L, &wd->orig_ud);
    lua_pushlightuserdata(L, &sentinel_key);
    struct luna_watchdog **box = lua_newuserdata(L, sizeof *box);
    *box = wd;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, sentinel_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
    wd->used = heap_bytes(L);
    lua_setallocf(L, watchdog_alloc, wd);
    return 0;
}

void luna_watchdog_configure(lua_State *L, const struct luna_watchdog_config *cfg)
{
    struct luna_watchdog *wd = watchdog_of(L);
    if (wd && cfg)
        wd->cfg = *cfg;
}

struct luna_watchdog_config luna_watchdog_get_config(lua_State *L)
{
    struct luna_watchdog *wd = watchdog_of(L);
    return wd ? wd->cfg : luna_watchdog_config_default();
}

void luna_watchdog_enter(lua_State *L, struct luna_watchdog_guard *g)
{
    g->wd = watchdog_of(L);
    g->prev = NULL;
    g->L = L;
    g->executed = 0;
    g->deadline = 0;
    g->step = 0;
    g->stop = LUNA_WATCHDOG_RUNNING;
    struct luna_watchdog *wd = g->wd;
    if (!wd)
        return;
    /* the state's settings are ceilings: a guard's own limits only lower them */
    g->lim = luna_watchdog_limits_under(&wd->cfg.limits, g->limits);
    if (g->lim.seconds > 0)
        g->deadline = now() + g->lim.seconds;
    g->step = HOOK_STEP;
    if (g->lim.instructions > 0 && g->lim.instructions < HOOK_STEP)
        g->step = (int)g->lim.instructions > 0 ? (int)g->lim.instructions : 1;
    g->prev = wd->current;
    wd->current = g;
    arm(g);
}

enum luna_watchdog_stop luna_watchdog_leave(struct luna_watchdog_guard *g)
{
    struct luna_watchdog *wd = g->wd;
    if (!wd)
        return LUNA_WATCHDOG_RUNNING;
    wd->current = g->prev;
    if (g->prev)
        arm(g->prev);
    else if (g->stop != LUNA_WATCHDOG_RUNNING)
        lua_sethook(g->L, NULL, 0, 0);
    /* else the count hook stays set: turning it off here and on again at
     * the next enter rebuilt LuaJIT's dispatch table twice per reconcile
     * (a sixth of a short one's host cost); with no guard active, it turns
     * itself off the next time it fires. */
    return g->stop;
}

int luna_watchdog_resume(lua_State *co, int nargs, struct luna_watchdog_guard *g)
{
    luna_watchdog_enter(co, g);
    int rc = lua_resume(co, nargs);
    luna_watchdog_leave(g);
    return rc;
}

int luna_watchdog_pcall(lua_State *L, int nargs, int nresults, int errfunc,
                        struct luna_watchdog_guard *g)
{
    luna_watchdog_enter(L, g);
    int rc = lua_pcall(L, nargs, nresults, errfunc);
    luna_watchdog_leave(g);
    return rc;
}

const struct luna_watchdog_guard *luna_watchdog_current(lua_State *L)
{
    struct luna_watchdog *wd = watchdog_of(L);
    return wd ? wd->current : NULL;
}

const char *luna_watchdog_stop_name(enum luna_watchdog_stop stop)
{
    switch (stop) {
    case LUNA_WATCHDOG_INSTRUCTIONS: return "instructions";
    case LUNA_WATCHDOG_TIME: return "time";
    case LUNA_WATCHDOG_MEMORY: return "memory";
    case LUNA_WATCHDOG_SHUTDOWN: return "shutdown";
    case LUNA_WATCHDOG_RUNNING: break;
    }
    return "running";
}

void luna_watchdog_describe(const struct luna_watchdog_guard *g, char *buf, size_t size)
{
    const char *what = g->what ? g->what : "Lua code";
    size_t memory = g->wd ? g->wd->cfg.memory : 0;
    switch (g->stop) {
    case LUNA_WATCHDOG_INSTRUCTIONS:
        snprintf(buf, size, "%s exceeded its instruction budget (%.0f instructions without yielding)",
                 what, g->lim.instructions);
        break;
    case LUNA_WATCHDOG_TIME:
        snprintf(buf, size, "%s exceeded its time budget (%g s without yielding)", what,
                 g->lim.seconds);
        break;
    case LUNA_WATCHDOG_MEMORY:
        if (memory % (1u << 20) == 0)
            snprintf(buf, size, "%s exceeded the Lua memory limit (%zu MiB)", what, memory >> 20);
        else
            snprintf(buf, size, "%s exceeded the Lua memory limit (%zu bytes)", what, memory);
        break;
    case LUNA_WATCHDOG_SHUTDOWN:
        snprintf(buf, size, "%s stopped: luna is shutting down (the grace period is over, or a "
                            "second signal came)", what);
        break;
    case LUNA_WATCHDOG_RUNNING:
        snprintf(buf, size, "%s is running", what);
        break;
    }
}

size_t luna_watchdog_memory(lua_State *L)
{
    struct luna_watchdog *wd = watchdog_of(L);
    return wd ? wd->used : 0;
}

int luna_watchdog_charge_memory(lua_State *L, size_t n)
{
    struct luna_watchdog *wd = watchdog_of(L);
    if (!wd || n == 0)
        return 0;
    if (over_cap(wd, wd->used, n)) {
        if (wd->current)
            stop_for_memory(wd->current);
        return -1;
    }
    wd->charged += n;
    return 0;
}

void luna_watchdog_release_memory(lua_State *L, size_t n)
{
    struct luna_watchdog *wd = watchdog_of(L);
    if (wd)
        wd->charged = wd->charged > n ? wd->charged - n : 0;
}

size_t luna_watchdog_charged_memory(lua_State *L)
{
    struct luna_watchdog *wd = watchdog_of(L);
    return wd ? wd->charged : 0;
}

void luna_watchdog_charge(lua_State *L, double steps)
{
    struct luna_watchdog *wd = watchdog_of(L);
    struct luna_watchdog_guard *g = wd ? wd->current : NULL;
    if (!g)
        return;
    if (g->stop == LUNA_WATCHDOG_RUNNING) {
        g->executed += steps;
        if (g->lim.instructions > 0 && g->executed >= g->lim.instructions)
            g->stop = LUNA_WATCHDOG_INSTRUCTIONS;
        else if ((g->stop = past_deadline(g)) == LUNA_WATCHDOG_RUNNING)
            return;
        arm(g);
    }
    char msg[256];
    luna_watchdog_describe(g, msg, sizeof msg);
    luaL_where(L, 2); /* the script line that called the C function */
    lua_pushstring(L, msg);
    lua_concat(L, 2);
    lua_error(L);
}

/* This thread's stack: lowest and highest address (0: unknown). */
static _Thread_local uintptr_t stack_low, stack_high;
static _Thread_local int stack_known;

size_t luna_watchdog_cstack_left(void)
{
    if (!stack_known) {
        stack_known = 1;
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            void *addr = NULL;
            size_t size = 0;
            if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
                stack_low = (uintptr_t)addr;
                stack_high = stack_low + size;
            }
            pthread_attr_destroy(&attr);
        }
    }
    char probe;
    uintptr_t here = (uintptr_t)&probe;
    if (!stack_low || here <= stack_low || here >= stack_high)
        return SIZE_MAX;
    size_t left = (size_t)(here - stack_low);
    size_t used = (size_t)(stack_high - here);
    /* scripts get at most LUNA_WATCHDOG_CSTACK_MAX_USED of it in all */
    if (used > LUNA_WATCHDOG_CSTACK_MAX_USED)
        return 0;
    return left;
}

int luna_watchdog_check_cstack(lua_State *L)
{
    if (luna_watchdog_cstack_left() < LUNA_WATCHDOG_CSTACK_MARGIN)
        return luaL_error(L, "C stack overflow: too many nested calls through library functions "
                             "(string.gsub, table.sort, coroutine.resume or wrap, xpcall "
                             "handlers, print, require, ...)");
    return 0;
}
