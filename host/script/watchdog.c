/* watchdog.c — see watchdog.h. */
#include "script/watchdog.h"

#include <lauxlib.h>
#include <luajit.h>
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* The header in front of every block of a state with accounts: 8 bytes,
 * so the block LuaJIT gets is 8-aligned, as LuaJIT's own allocator aligns
 * (malloc's 16 + 8). */
union tag {
    uint32_t account;           /* who the block is charged to */
    uint64_t align;
};
#define TAG sizeof(union tag)

struct account {
    size_t used;                /* bytes of its blocks, headers included */
    size_t cap;                 /* account_set's; 0: cfg.account_memory */
    char *name;                 /* owned; NULL: "" */
};

/* The heap budget states share (watchdog.h, "Shared budget").  A state
 * not joined to one uses the budget inside its own watchdog. */
struct luna_watchdog_budget {
    size_t used;                /* bytes of every member's heap */
    size_t charged;             /* C bytes charged by every member */
    unsigned accounts;          /* every member's accounts but the hosts' */
    unsigned refs;              /* the creator's and one per member */
    size_t collected;           /* used after the last collection of every
                                 * member at a leave */
    struct luna_watchdog *members; /* joined watchdogs (borrowed), through
                                 * their next_member */
};

struct luna_watchdog {
    lua_Alloc orig;             /* the allocator underneath: the state's own
                                 * (untagged), or LuaJIT's, borrowed from
                                 * carrier (tagged) */
    void *orig_ud;
    lua_State *carrier;         /* tagged: an empty state whose allocator
                                 * (LuaJIT's own, mmap-based, outside malloc)
                                 * holds the blocks; closed last (owned) */
    bool tagged;                /* born with the state: every block has a tag */
    bool born;                  /* tagged: lua_newstate returned; the state's
                                 * last free (its first block) frees wd */
    void *first;                /* tagged: the state's first block (raw) */
    size_t used;                /* bytes the Lua heap holds */
    size_t charged;             /* C bytes held for the state's scripts
                                   (luna_watchdog_charge_memory) */
    /* what the caps count: &own, or the shared budget joined (one
     * reference held); used and charged are also added there */
    struct luna_watchdog_budget *budget;
    struct luna_watchdog_budget own;
    lua_State *L;               /* the state (its main thread) */
    struct luna_watchdog *next_member; /* in budget->members when joined */
    struct luna_watchdog_config cfg;
    struct luna_watchdog_guard *current;  /* innermost active guard */
    /* accounts[0] is the host's; [1, naccounts) made by account_new (owned) */
    struct account *accounts;
    unsigned naccounts, accounts_cap;
    /* free[n]: freed blocks of n bytes, linked through their first word
     * (owned here until handed out again or given back to orig; with tags,
     * raw malloc blocks of n + TAG bytes) */
    void *free[FREE_MAX + 1];
    size_t free_bytes;          /* bytes in free[] */
};

/* luna_watchdog_stop_all_at's deadline in nanoseconds of the monotonic
 * clock (0: none).  Written from signal handlers: it must be lock-free. */
static atomic_llong stop_all_ns;
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the shutdown deadline must be a lock-free atomic");

/* The innermost active guard of any state (the loop thread's): the alarm
 * follows it, whichever state it runs. */
static struct luna_watchdog_guard *active;

/* Registry key of the userdata whose __gc frees the watchdog at lua_close. */
static char sentinel_key;

static void *watchdog_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
static void *refuse(struct luna_watchdog_guard *g, enum luna_watchdog_memory_rule rule);
static void *tagged_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
static void hook(lua_State *L, lua_Debug *ar);
static void alarm_make(void);
static void alarm_stop_all(long long ns);

static struct luna_watchdog *watchdog_of(lua_State *L)
{
    void *ud = NULL;
    lua_Alloc f = lua_getallocf(L, &ud);
    return f == watchdog_alloc || f == tagged_alloc ? ud : NULL;
}

static double now(void) { return luna_clock_now(luna_clock_monotonic()); }

struct luna_watchdog_config luna_watchdog_config_default(void)
{
    return (struct luna_watchdog_config){
        .limits = { .instructions = LUNA_WATCHDOG_DEFAULT_INSTRUCTIONS,
                    .seconds = LUNA_WATCHDOG_DEFAULT_SECONDS },
        .memory = LUNA_WATCHDOG_DEFAULT_MEMORY,
        .account_memory = LUNA_WATCHDOG_DEFAULT_ACCOUNT_MEMORY(LUNA_WATCHDOG_DEFAULT_MEMORY),
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
    alarm_stop_all(ns);
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

/* Whether n more bytes on top of `base` heap bytes (of the budget) and the
 * budget's charged C memory would pass the cap. */
static bool over_cap(const struct luna_watchdog *wd, size_t base, size_t n)
{
    size_t cap = wd->cfg.memory;
    if (!cap)
        return false;
    size_t held = base + wd->budget->charged;
    return held < base /* overflow */ || n > cap || held > cap - n;
}

/* The allocator wrapper.  Refuses growth past the cap (the heap plus the
 * charged C memory) only while a guard is active; frees and shrinks always
 * go through. */
static void *watchdog_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct luna_watchdog *wd = ud;
    struct luna_watchdog_budget *b = wd->budget;
    if (!ptr)
        osize = 0;
    size_t rest = wd->used > osize ? wd->used - osize : 0;
    size_t brest = b->used > osize ? b->used - osize : 0;
    if (nsize == 0) {
        if (osize >= FREE_MIN && osize <= FREE_MAX && wd->free_bytes + osize <= FREE_BYTES) {
            *(void **)ptr = wd->free[osize];
            wd->free[osize] = ptr;
            wd->free_bytes += osize;
        } else {
            wd->orig(wd->orig_ud, ptr, osize, 0);
        }
        wd->used = rest;
        b->used = brest;
        return NULL;
    }
    struct luna_watchdog_guard *g = wd->current;
    if (g && nsize > osize && over_cap(wd, brest, nsize))
        return refuse(g, LUNA_WATCHDOG_MEMORY_HEAP);
    void *p;
    if (!ptr && nsize >= FREE_MIN && nsize <= FREE_MAX && wd->free[nsize]) {
        p = wd->free[nsize];
        wd->free[nsize] = *(void **)p;
        wd->free_bytes -= nsize;
    } else {
        p = wd->orig(wd->orig_ud, ptr, osize, nsize);
    }
    if (p) {
        wd->used = rest + nsize;
        b->used = brest + nsize;
    }
    return p;
}

/* Gives every kept free block back to the state's own allocator. */
static void free_lists_release(struct luna_watchdog *wd)
{
    for (size_t n = FREE_MIN; n <= FREE_MAX; n++) {
        while (wd->free[n]) {
            void *p = wd->free[n];
            wd->free[n] = *(void **)p;
            wd->orig(wd->orig_ud, p, wd->tagged ? n + TAG : n, 0);
        }
    }
    wd->free_bytes = 0;
}

static size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

/* The cap in force for account a (rule 2), 0: none. */
static size_t account_cap(const struct luna_watchdog *wd, unsigned a)
{
    size_t def = wd->cfg.account_memory, own = wd->accounts[a].cap;
    return own && (!def || own < def) ? own : def;
}

static void budget_leave(struct luna_watchdog *wd);

static void watchdog_free(struct luna_watchdog *wd)
{
    budget_leave(wd);
    for (unsigned i = 0; i < wd->naccounts; i++)
        free(wd->accounts[i].name);
    free(wd->accounts);
    lua_State *carrier = wd->carrier;
    free(wd);
    /* after every block of the state it carried was given back */
    if (carrier)
        lua_close(carrier);
}

/* Stops g for memory by rule; returns NULL for the allocator to return. */
static void script_where(lua_State *co, char *buf, size_t size);

static void *refuse(struct luna_watchdog_guard *g, enum luna_watchdog_memory_rule rule)
{
    if (g->stop == LUNA_WATCHDOG_RUNNING) {
        g->stop = LUNA_WATCHDOG_MEMORY;
        g->memory_rule = rule;
        /* The line that was running, now: once the coroutine has died of
         * the memory error, LuaJIT no longer knows the innermost Lua
         * frame's line when the VM itself was allocating (a table's
         * growth), only when a C function was (string.rep). */
        script_where(g->L, g->where, sizeof g->where);
        /* Only changes the hook count: safe at any point, as LuaJIT's own
         * profiler relies on. */
        arm(g);
    }
    return NULL;
}

/* The allocator of a state born with the watchdog: every block is
 * malloc'd with a tag in front naming its account (see watchdog.h).
 * Growth inside a guard is checked against the three rules; frees and
 * shrinks always go through and credit the block's owner. */
static void *tagged_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct luna_watchdog *wd = ud;
    struct luna_watchdog_budget *b = wd->budget;
    union tag *old = ptr ? (union tag *)ptr - 1 : NULL;
    unsigned owner = old ? old->account : 0;
    size_t oreal = old ? osize + TAG : 0;
    if (nsize == 0) {
        struct account *acc = &wd->accounts[owner];
        acc->used = acc->used > oreal ? acc->used - oreal : 0;
        wd->used = wd->used > oreal ? wd->used - oreal : 0;
        b->used = b->used > oreal ? b->used - oreal : 0;
        if ((void *)old == wd->first) {
            /* lua_close's last free (LuaJIT's global state): the state is
             * gone, and the watchdog with it once lua_newstate returned. */
            wd->orig(wd->orig_ud, old, oreal, 0);
            wd->first = NULL;
            if (wd->born) {
                free_lists_release(wd);
                watchdog_free(wd);
            }
        } else if (osize >= FREE_MIN && osize <= FREE_MAX &&
                   wd->free_bytes + osize <= FREE_BYTES) {
            *(void **)old = wd->free[osize];
            wd->free[osize] = old;
            wd->free_bytes += osize;
        } else {
            wd->orig(wd->orig_ud, old, oreal, 0);
        }
        return NULL;
    }
    struct luna_watchdog_guard *g = wd->current;
    /* A block that does not grow stays its owner's: LuaJIT's collector
     * runs its steps inside whichever guard allocates, and its shrinks
     * (tables, the string table, the temporary buffer) would otherwise
     * move a neighbour's blocks onto that guard's account. */
    unsigned a = g && !(old && nsize <= osize) ? g->lim.account : owner;
    if (a >= wd->naccounts)
        a = 0;
    size_t nreal = add_sat(nsize, TAG);
    if (g && nsize > osize) {
        size_t base = b->used > oreal ? b->used - oreal : 0;
        size_t mine = add_sat(wd->accounts[a].used - (owner == a ? oreal : 0), nreal);
        size_t cap = a ? account_cap(wd, a) : 0;
        size_t memory = wd->cfg.memory;
        if (over_cap(wd, base, nreal))
            return refuse(g, LUNA_WATCHDOG_MEMORY_HEAP);
        if (cap && mine > cap)
            return refuse(g, LUNA_WATCHDOG_MEMORY_ACCOUNT);
        /* the division only once the heap is in the reserve */
        if (a && b->accounts > 1 && add_sat(add_sat(base, nreal), b->charged) > memory - memory / 4 &&
            mine > memory / b->accounts)
            return refuse(g, LUNA_WATCHDOG_MEMORY_SHARE);
    }
    if (nreal == SIZE_MAX)
        return NULL;
    union tag *t;
    if (!old && nsize >= FREE_MIN && nsize <= FREE_MAX && wd->free[nsize]) {
        t = wd->free[nsize];
        wd->free[nsize] = *(void **)t;
        wd->free_bytes -= nsize;
    } else {
        t = wd->orig(wd->orig_ud, old, oreal, nreal);
        if (!t)
            return NULL;
    }
    if (!wd->first && !old)
        wd->first = t;
    else if (old == wd->first && old)
        wd->first = t;
    struct account *o = &wd->accounts[owner];
    o->used = o->used > oreal ? o->used - oreal : 0;
    wd->used = (wd->used > oreal ? wd->used - oreal : 0) + nreal;
    b->used = (b->used > oreal ? b->used - oreal : 0) + nreal;
    wd->accounts[a].used += nreal;
    t->account = a;
    return t + 1;
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
        watchdog_free(wd);
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

/* The fair share (rule 3) for the accounts of wd's budget now; 0: none. */
static size_t fair_share(const struct luna_watchdog *wd)
{
    unsigned n = wd->budget->accounts;
    return n > 1 ? wd->cfg.memory / n : 0;
}

/* Takes wd's heap, charges and accounts out of its budget, and lets go of
 * a shared one.  wd then counts in its own budget again. */
static void budget_leave(struct luna_watchdog *wd)
{
    struct luna_watchdog_budget *b = wd->budget;
    b->used = b->used > wd->used ? b->used - wd->used : 0;
    b->charged = b->charged > wd->charged ? b->charged - wd->charged : 0;
    unsigned mine = wd->naccounts - 1;
    b->accounts = b->accounts > mine ? b->accounts - mine : 0;
    if (b != &wd->own) {
        for (struct luna_watchdog **m = &b->members; *m; m = &(*m)->next_member)
            if (*m == wd) {
                *m = wd->next_member;
                break;
            }
        wd->next_member = NULL;
        luna_watchdog_budget_release(b);
        wd->budget = &wd->own;
        wd->own = (struct luna_watchdog_budget){ .used = wd->used, .charged = wd->charged,
                                                 .accounts = mine };
    }
}

struct luna_watchdog_budget *luna_watchdog_budget_new(void)
{
    struct luna_watchdog_budget *b = calloc(1, sizeof *b);
    if (b)
        b->refs = 1;
    return b;
}

void luna_watchdog_budget_ref(struct luna_watchdog_budget *b)
{
    b->refs++;
}

void luna_watchdog_budget_release(struct luna_watchdog_budget *b)
{
    if (b && --b->refs == 0)
        free(b);
}

size_t luna_watchdog_budget_used(const struct luna_watchdog_budget *b)
{
    return b ? b->used + b->charged : 0;
}

int luna_watchdog_join(lua_State *L, struct luna_watchdog_budget *b)
{
    struct luna_watchdog *wd = watchdog_of(L);
    if (!wd || !b)
        return -1;
    if (wd->budget == b)
        return 0;
    budget_leave(wd);
    wd->own = (struct luna_watchdog_budget){ 0 };
    b->refs++;
    b->used += wd->used;
    b->charged += wd->charged;
    b->accounts += wd->naccounts - 1;
    wd->next_member = b->members;
    b->members = wd;
    wd->budget = b;
    return 0;
}

static struct luna_watchdog *watchdog_new(const struct luna_watchdog_config *cfg)
{
    struct luna_watchdog *wd = calloc(1, sizeof *wd);
    if (!wd)
        return NULL;
    wd->accounts = calloc(4, sizeof *wd->accounts);
    if (!wd->accounts) {
        free(wd);
        return NULL;
    }
    wd->accounts_cap = 4;
    wd->naccounts = 1;
    wd->cfg = *cfg;
    wd->budget = &wd->own;
    return wd;
}

/* realloc and free as a lua_Alloc: the blocks' source when no carrier
 * state could be made. */
static void *sys_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
}

lua_State *luna_watchdog_newstate(const struct luna_watchdog_config *cfg, luna_error *err)
{
    struct luna_watchdog_config def = luna_watchdog_config_default();
    struct luna_watchdog *wd = watchdog_new(cfg ? cfg : &def);
    if (!wd) {
        luna_error_set(err, LUNA_ENOMEM, "cannot create a Lua state: out of memory");
        return NULL;
    }
    wd->tagged = true;
    /* The blocks come from LuaJIT's own allocator, as a plain state's do:
     * malloc would hold on to a closed generation's pages, and under the
     * sanitizers add redzones and a quarantine to every Lua object. */
    wd->carrier = luaL_newstate();
    if (wd->carrier) {
        wd->orig = lua_getallocf(wd->carrier, &wd->orig_ud);
    } else {
        wd->orig = sys_alloc;
        wd->orig_ud = NULL;
    }
    lua_State *L = lua_newstate(tagged_alloc, wd);
    if (!L) {
        /* out of memory, or a LuaJIT that refuses custom allocators: either
         * way every block it made is freed (its first one last) */
        free_lists_release(wd);
        watchdog_free(wd);
        luna_error_set(err, LUNA_ENOMEM,
                       "cannot create a Lua state with the watchdog's allocator (out of memory, "
                       "or a LuaJIT built without GC64 on x64)");
        return NULL;
    }
    wd->born = true;
    wd->L = L;
    if (!luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF)) {
        lua_close(L);
        luna_error_set(err, LUNA_ELUA, "cannot turn LuaJIT's compiler off");
        return NULL;
    }
    return L;
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
    alarm_make();
    /* luaL_openlibs (luaopen_jit) turns the compiler back on: off again,
     * whenever install runs */
    if (!luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF))
        return luna_error_set(err, LUNA_ELUA, "cannot turn LuaJIT's compiler off");
    struct luna_watchdog *wd = watchdog_of(L);
    if (wd) {
        wd->cfg = *cfg;
        return 0;
    }
    wd = watchdog_new(cfg);
    if (!wd)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
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
    wd->own.used = wd->used;
    wd->L = L;
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

/* ---- the deadline alarm ------------------------------------------------
 *
 * The hook runs every HOOK_STEP instructions, and reads the clock there.
 * An instruction can call C that runs long on a big input (a plain find in
 * a 25 MB string, a decode of 12 MB, string.rep): a thousand of them
 * outran a 2 s budget by 15 s, with /healthz and every controller held.
 * So a POSIX timer, aimed at the loop thread (SIGEV_THREAD_ID), fires at
 * the innermost active guard's deadline; its handler sets the count hook
 * to every instruction (lua_sethook is what LuaJIT's own profiler calls
 * from its signal handler), and the hook stops the guard as soon as the
 * running C call returns.  It is armed lazily: enter arms it only when it
 * is not armed; when it fires before the active guard's deadline (the
 * guard it was armed for left long ago) it re-arms itself for that one;
 * with no guard active it stays disarmed until the next enter.  So a
 * stretch costs no system call, and the loop sees about one signal per
 * budget period while scripts run. */
static timer_t alarm_timer;
static bool alarm_made;          /* the timer and its handler exist (loop thread only) */
static pid_t alarm_tid;          /* the thread the timer signals; 0: none */
static _Thread_local bool on_alarm_thread; /* this is that thread */
static atomic_bool alarm_armed;  /* a firing is pending */
static atomic_llong alarm_at_ns;  /* when it is pending for */
static atomic_llong alarm_deadline_ns; /* the active guard's deadline; 0: none */
static lua_State *_Atomic alarm_L;     /* the state the active guard runs */

static long long to_ns(double t) { return t >= 9e9 ? (long long)9e18 : (long long)(t * 1e9); }

static void alarm_set(long long ns)
{
    atomic_store(&alarm_at_ns, ns);
    struct itimerspec its = { .it_value = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 } };
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1;
    timer_settime(alarm_timer, TIMER_ABSTIME, &its, NULL);
}

static void alarm_handler(int sig)
{
    (void)sig;
    int saved = errno;
    atomic_store(&alarm_armed, false);
    lua_State *L = atomic_load(&alarm_L);
    long long dl = atomic_load(&alarm_deadline_ns);
    long long all = atomic_load(&stop_all_ns);
    if (all && (!dl || all < dl))
        dl = all;
    if (L && dl) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long t = (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
        if (t >= dl) {
            lua_sethook(L, hook, LUA_MASKCOUNT, 1);
        } else {
            atomic_store(&alarm_armed, true);
            alarm_set(dl);
        }
    }
    errno = saved;
}

/* The shutdown deadline is ns: the alarm fires then too (or at the active
 * guard's deadline, if sooner), so script code holding the loop is stopped
 * at the end of the grace period even inside long C calls.  Async-signal
 * safe: a SIGTERM handler calls it. */
static void alarm_stop_all(long long ns)
{
    if (!alarm_tid)
        return;
    long long dl = atomic_load(&alarm_deadline_ns);
    atomic_store(&alarm_armed, true);
    alarm_set(dl && dl < ns ? dl : ns);
}

/* Makes the timer, once, aimed at the calling (loop) thread.  Without it
 * (a failure) the hook's own clock reads still stop a guard, later. */
static void alarm_make(void)
{
    if (alarm_made)
        return;
    alarm_made = true;
    struct sigaction sa = { 0 };
    sa.sa_handler = alarm_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    int sig = SIGRTMIN + 4;
    alarm_tid = (pid_t)syscall(SYS_gettid);
    struct sigevent sev = { 0 };
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = sig;
    sev._sigev_un._tid = alarm_tid;
    if (sigaction(sig, &sa, NULL) != 0 || timer_create(CLOCK_MONOTONIC, &sev, &alarm_timer) != 0)
        alarm_tid = 0;
    else
        on_alarm_thread = true;
}

/* The active guard is now g (NULL: none): the alarm aims at its deadline. */
static void alarm_follow(struct luna_watchdog_guard *g)
{
    long long dl = g && g->deadline > 0 ? to_ns(g->deadline) : 0;
    /* the handler may run between any two of these: deadline first, so it
     * never pairs a state with a deadline that is not its guard's */
    atomic_store(&alarm_deadline_ns, 0);
    atomic_store(&alarm_L, g ? g->L : NULL);
    atomic_store(&alarm_deadline_ns, dl);
    /* a pending firing later than this deadline (a guard with a larger
     * budget armed it) is brought forward: a system call only then */
    if (dl && on_alarm_thread &&
        (!atomic_exchange(&alarm_armed, true) || dl < atomic_load(&alarm_at_ns)))
        alarm_set(dl);
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
    g->memory_rule = LUNA_WATCHDOG_MEMORY_HEAP;
    struct luna_watchdog *wd = g->wd;
    if (!wd)
        return;
    /* the state's settings are ceilings: a guard's own limits only lower
     * them; the account is the guard's own */
    g->lim = luna_watchdog_limits_under(&wd->cfg.limits, g->limits);
    g->lim.account = g->limits ? g->limits->account : 0;
    if (g->lim.account >= wd->naccounts)
        g->lim.account = 0;
    if (g->lim.seconds > 0)
        g->deadline = now() + g->lim.seconds;
    g->step = HOOK_STEP;
    if (g->lim.instructions > 0 && g->lim.instructions < HOOK_STEP)
        g->step = (int)g->lim.instructions > 0 ? (int)g->lim.instructions : 1;
    g->prev = wd->current;
    wd->current = g;
    g->outer = active;
    active = g;
    arm(g);
    alarm_follow(g);
}

enum luna_watchdog_stop luna_watchdog_leave(struct luna_watchdog_guard *g)
{
    struct luna_watchdog *wd = g->wd;
    if (!wd)
        return LUNA_WATCHDOG_RUNNING;
    wd->current = g->prev;
    active = g->outer;
    alarm_follow(active);
    if (g->prev)
        arm(g->prev);
    else if (g->stop != LUNA_WATCHDOG_RUNNING)
        lua_sethook(g->L, NULL, 0, 0);
    /* else the count hook stays set: turning it off here and on again at
     * the next enter rebuilt LuaJIT's dispatch table twice per reconcile
     * (a sixth of a short one's host cost); with no guard active, it turns
     * itself off the next time it fires. */
    size_t memory = wd->cfg.memory;
    struct luna_watchdog_budget *b = wd->budget;
    if (!g->prev && memory && b->used > memory - memory / 8 * 3 &&
        b->used - (b->used < b->collected ? b->used : b->collected) > memory / 32) {
        /* Garbage near the cap: collect it now, outside any guard, rather
         * than let it fail whoever allocates next (watchdog.h).  In every
         * member: each state paces its own collector at twice its own live
         * heap, so idle states can sit on garbage the others need.  A
         * member running a guard (below this one on the C stack) is left
         * alone. */
        luna_watchdog_collect(g->L);
    }
    return g->stop;
}

/* A full collection of one state, again while a round frees a MiB or
 * more (at most 8 rounds).  LuaJIT keeps the buffer string.rep and `..`
 * build in and halves it once per full collection, so a state that built
 * an 8 MiB string still holds 4 MiB of buffer after one; with a state per
 * controller every state keeps its own, and a batch of them kept the heap
 * past its reserve.  Without a big buffer the second round frees little
 * and ends it. */
static void collect_state(lua_State *S)
{
    for (int round = 0; round < 8; round++) {
        int before = lua_gc(S, LUA_GCCOUNT, 0); /* KiB */
        lua_gc(S, LUA_GCCOLLECT, 0);
        if (before - lua_gc(S, LUA_GCCOUNT, 0) < 1024)
            break;
    }
}

void luna_watchdog_collect(lua_State *L)
{
    struct luna_watchdog *wd = watchdog_of(L);
    collect_state(L);
    if (!wd)
        return;
    struct luna_watchdog_budget *b = wd->budget;
    for (struct luna_watchdog *m = b == &wd->own ? NULL : b->members; m; m = m->next_member)
        if (m != wd && !m->current)
            collect_state(m->L);
    b->collected = b->used;
}

/* "file:line: " of the innermost frame of co that has a line, into buf
 * ("" when none has).  lua_getinfo "Sl" allocates nothing. */
static void script_where(lua_State *co, char *buf, size_t size)
{
    lua_Debug ar;
    buf[0] = '\0';
    for (int level = 0; level < 64 && lua_getstack(co, level, &ar); level++) {
        if (lua_getinfo(co, "Sl", &ar) && ar.currentline > 0) {
            snprintf(buf, size, "%s:%d: ", ar.short_src, ar.currentline);
            return;
        }
    }
}

int luna_watchdog_resume(lua_State *co, int nargs, struct luna_watchdog_guard *g)
{
    g->where[0] = '\0';
    luna_watchdog_enter(co, g);
    int rc = lua_resume(co, nargs);
    luna_watchdog_leave(g);
    if (g->stop != LUNA_WATCHDOG_RUNNING && rc != 0 && rc != LUA_YIELD && !g->where[0])
        script_where(co, g->where, sizeof g->where);
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

/* "128 MiB", "42.7 MiB", "1000 bytes". */
static void format_bytes(char *buf, size_t size, size_t n)
{
    if (n % ((size_t)1 << 20) == 0)
        snprintf(buf, size, "%zu MiB", n >> 20);
    else if (n >= (size_t)1 << 20)
        snprintf(buf, size, "%.1f MiB", (double)n / 1048576.0);
    else
        snprintf(buf, size, "%zu bytes", n);
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
    case LUNA_WATCHDOG_MEMORY: {
        char heap[32], cap[32];
        unsigned a = g->lim.account;
        const struct account *acc =
            g->wd && a > 0 && a < g->wd->naccounts ? &g->wd->accounts[a] : NULL;
        const char *name = acc && acc->name ? acc->name : "";
        format_bytes(heap, sizeof heap, memory);
        if (g->memory_rule == LUNA_WATCHDOG_MEMORY_ACCOUNT && acc) {
            format_bytes(cap, sizeof cap, account_cap(g->wd, a));
            snprintf(buf, size, "%s exceeded the Lua memory limit of %s (%s)", what,
                     *name ? name : "its account", cap);
        } else if (g->memory_rule == LUNA_WATCHDOG_MEMORY_SHARE && acc) {
            char reserve[32];
            format_bytes(cap, sizeof cap, fair_share(g->wd));
            format_bytes(reserve, sizeof reserve, memory - memory / 4);
            snprintf(buf, size,
                     "%s exceeded the fair share of %s (%s) of the Lua heap while the heap is "
                     "past %s of %s (the rest is kept for those within their share)",
                     what, *name ? name : "its account", cap, reserve, heap);
        } else {
            snprintf(buf, size, "%s exceeded the Lua memory limit (%s)", what, heap);
        }
        break;
    }
    case LUNA_WATCHDOG_SHUTDOWN:
        snprintf(buf, size, "%s stopped: luna is shutting down (the grace period is over, or a "
                            "second signal came)", what);
        break;
    case LUNA_WATCHDOG_RUNNING:
        snprintf(buf, size, "%s is running", what);
        break;
    }
}

size_t luna_watchdog_heap_used(lua_State *L)
{
    struct luna_watchdog *wd = watchdog_of(L);
    return wd ? luna_watchdog_budget_used(wd->budget) : 0;
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
    if (over_cap(wd, wd->budget->used, n)) {
        if (wd->current)
            refuse(wd->current, LUNA_WATCHDOG_MEMORY_HEAP);
        return -1;
    }
    wd->charged += n;
    wd->budget->charged += n;
    return 0;
}

void luna_watchdog_release_memory(lua_State *L, size_t n)
{
    struct luna_watchdog *wd = watchdog_of(L);
    if (!wd)
        return;
    size_t back = wd->charged < n ? wd->charged : n;
    wd->charged -= back;
    wd->budget->charged = wd->budget->charged > back ? wd->budget->charged - back : 0;
}

int luna_watchdog_charge_account(lua_State *L, unsigned account, size_t n)
{
    struct luna_watchdog *wd = watchdog_of(L);
    if (!wd || n == 0)
        return 0;
    if (account >= wd->naccounts)
        account = 0;
    size_t cap = account ? account_cap(wd, account) : 0;
    struct account *acc = &wd->accounts[account];
    if (over_cap(wd, wd->budget->used, n) || (cap && (n > cap || acc->used > cap - n)))
        return -1;
    wd->charged += n;
    wd->budget->charged += n;
    acc->used += n;
    return 0;
}

void luna_watchdog_release_account(lua_State *L, unsigned account, size_t n)
{
    struct luna_watchdog *wd = watchdog_of(L);
    if (!wd)
        return;
    if (account >= wd->naccounts)
        account = 0;
    struct account *acc = &wd->accounts[account];
    size_t back = wd->charged < n ? wd->charged : n;
    wd->charged -= back;
    wd->budget->charged = wd->budget->charged > back ? wd->budget->charged - back : 0;
    acc->used = acc->used > n ? acc->used - n : 0;
}

size_t luna_watchdog_charged_memory(lua_State *L)
{
    struct luna_watchdog *wd = watchdog_of(L);
    return wd ? wd->charged : 0;
}

unsigned luna_watchdog_account_new(lua_State *L, const char *name)
{
    struct luna_watchdog *wd = watchdog_of(L);
    if (!wd || !wd->tagged || wd->naccounts == UINT32_MAX)
        return 0;
    if (wd->naccounts == wd->accounts_cap) {
        struct account *more = realloc(wd->accounts, 2 * wd->accounts_cap * sizeof *more);
        if (!more)
            return 0;
        wd->accounts = more;
        wd->accounts_cap *= 2;
    }
    char *copy = strdup(name ? name : "");
    if (!copy)
        return 0;
    unsigned id = wd->naccounts++;
    wd->accounts[id] = (struct account){ .name = copy };
    wd->budget->accounts++;
    return id;
}

void luna_watchdog_account_set(lua_State *L, unsigned id, const char *name, size_t cap)
{
    struct luna_watchdog *wd = watchdog_of(L);
    if (!wd || id == 0 || id >= wd->naccounts)
        return;
    struct account *acc = &wd->accounts[id];
    if (name) {
        char *copy = strdup(name);
        if (copy) {
            free(acc->name);
            acc->name = copy;
        }
    }
    acc->cap = cap;
}

size_t luna_watchdog_account_memory(lua_State *L, unsigned id)
{
    struct luna_watchdog *wd = watchdog_of(L);
    return wd && id < wd->naccounts ? wd->accounts[id].used : 0;
}

size_t luna_watchdog_account_cap(lua_State *L, unsigned id)
{
    struct luna_watchdog *wd = watchdog_of(L);
    return wd && id > 0 && id < wd->naccounts ? account_cap(wd, id) : 0;
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
