/*
 * watchdog.h — resource limits for the Lua code of a controller state: an
 * instruction budget and a wall-clock budget for every stretch of script
 * code that runs without yielding, and a cap on the state's Lua heap.
 *
 * Uses: LuaJIT's count hook (lua_sethook, LUA_MASKCOUNT) and its allocator
 * hook (lua_getallocf/lua_setallocf), C11 atomics (the shutdown deadline).
 * Runs on the loop thread (luna_watchdog_stop_all_* from any thread or a
 * signal handler).
 *
 * The host runs script code only inside a guard: each lua_resume of a
 * reconcile, each protected call of a predicate, watches map or index
 * function, the controller file's chunk.  luna_watchdog_enter arms the
 * count hook; every `step` instructions the hook adds step to the guard's
 * count and reads the monotonic clock.  Past either limit the guard is
 * stopped: the hook raises "<what> exceeded its instruction budget (...)" /
 * "... time budget (...)" and re-arms itself to fire after every single
 * instruction, so a pcall in the script that catches the error cannot keep
 * the code running: the next instruction outside the pcall raises again,
 * and the coroutine (or protected call) ends with the error.
 *
 * LuaJIT never calls hooks from compiled traces: a compiled
 * `while true do end` would never be stopped.  A state with a watchdog
 * therefore runs with the JIT compiler off (luna_watchdog_install turns it
 * off for the whole state); the interpreter honours the hook at every
 * instruction.  Code in C functions (string.rep, string.find, table.sort,
 * JSON decoding) is not interrupted: the hook fires when the C function
 * returns, so a single slow C call can overrun the time budget once.
 *
 * Memory: the state's allocator is wrapped and counts the bytes of the Lua
 * heap (everything LuaJIT allocates, garbage not yet collected included).
 * While a guard is active, an allocation that would take the heap past the
 * limit is refused: LuaJIT raises "not enough memory" in the script, the
 * guard is stopped (reason memory), and the hook raises at the next
 * instruction as above.  Outside guards (host code pushing objects, building
 * tables) allocations are never refused, so the host never sees a memory
 * error it did not ask for.  Freed blocks of 16 to 256 bytes (at most 256
 * KiB in all, owned by the watchdog, not counted in the heap) are kept per
 * exact size and handed out again before the state's allocator is asked;
 * they go back to that allocator at lua_close.
 *
 * Ceilings: the state's settings (`luna run`'s flags) are ceilings, not
 * defaults a guard may override.  A guard's own limits can only lower
 * them: enter takes, per budget, the guard's value if it is positive and
 * below the state's, else the state's; a guard can never turn a budget off
 * (0 or anything not positive reads as "the state's").  Only the state's
 * settings say "unlimited" (0), i.e. only the operator, by flag.
 *
 * Shutdown: luna_watchdog_stop_all_at sets a process-wide deadline on the
 * monotonic clock after which every guard, active or entered later, is
 * stopped (reason shutdown) at its next hook, whatever its budgets.  It is
 * async-signal-safe (one lock-free atomic), so a SIGTERM handler can stop
 * a stretch of script code that holds the loop: the loop's own signal
 * watcher cannot run until that stretch ends.  For that the count hook is
 * set in every guard, also when no budget is set.
 *
 * Counted C memory: the one allocator for what a script makes the host hold.
 * C buffers the host keeps on behalf of the state's scripts count against
 * the same cap as the Lua heap, in one of two ways:
 *   - buffers that live only while the host works for a script (the JSON
 *     writer's) are allocated through the state's allocator (lua_getallocf),
 *     i.e. through the wrapper above: they are part of the counted heap and
 *     refused past the cap like any Lua object;
 *   - malloc'd memory that outlives the C call (a request body in flight
 *     while its reconcile waits) is charged with luna_watchdog_charge_memory
 *     and released when it is freed.  A charge that would take the heap plus
 *     everything charged past the cap is refused, inside a guard or not
 *     (inside one it also stops the guard, reason memory, exactly like a
 *     refused allocation), and the allocator refuses growth past the cap
 *     with the charged bytes counted.  So the Lua heap plus the C memory
 *     scripts hold stays under --lua-memory-limit.
 *
 * Memory accounts (per controller).  A state made by luna_watchdog_newstate
 * is born with the wrapper as its allocator, so every block of its heap
 * carries an 8-byte header naming the account it is charged to.  A block
 * made (or grown) while a guard runs is charged to the guard's account
 * (limits->account); outside guards new blocks are the host's (account 0)
 * and a resized block keeps its owner.  A free credits the block's owner,
 * whoever's code happened to trigger the collection.  So an account holds
 * what its code allocated and has not been freed: what it keeps (upvalues,
 * module tables, registry-anchored values) and its garbage not yet
 * collected.  A growing allocation inside a guard is refused (reason
 * memory, and luna_watchdog_describe says which rule) when it would take
 *   1. the heap past cfg.memory (the ceiling, whoever asks);
 *   2. its account past the account's cap (account_set's, at most
 *      cfg.account_memory; 0: cfg.account_memory);
 *   3. its account past the fair share (cfg.memory / number of accounts)
 *      while the heap would be past cfg.memory - the reserve (a quarter of
 *      cfg.memory): an account above its fair share cannot use the last
 *      quarter of the heap, which stays for those below theirs.
 * A heap near its cap holds mostly garbage LuaJIT's collector would only
 * reach later (it paces itself at twice the live heap, which a big live
 * heap puts past the cap): when the outermost guard of a state leaves with
 * the heap (the budget's) past 5/8 of cfg.memory and grown by 1/32 of it
 * since the last such collection, the watchdog runs a full collection of
 * every state of the budget not running a guard (each paces its own
 * collector, so an idle state can sit on garbage), so garbage does not
 * fail an account that holds little.
 *
 * Shared budget.  "The heap" in the rules above is the budget's: by
 * default a state's own, but states joined to one budget
 * (luna_watchdog_join: `luna run` makes one state per controller file and
 * joins those of one reload) share it.  Rules 1 and 3 then read the heap and the
 * charged C memory of every member together, and the fair share divides
 * cfg.memory by the accounts of every member; rule 2 stays the account's.
 * So --lua-memory-limit bounds the controller states of one reload
 * together, while each state's strings, module tables and registry are
 * its own: a string one controller interns is never another's.
 * A state made with luaL_newstate and
 * given a watchdog by luna_watchdog_install has blocks from before the
 * install without a header: it counts the heap and applies rule 1 only
 * (luna_watchdog_account_new returns 0 there).
 *
 * Invariants:
 *   - the count hook is set while a guard is active; once the outermost
 *     guard leaves (not stopped) it may stay set, and the first time it
 *     fires with no guard active it turns itself off without touching the
 *     running code (setting it once per guard instead of on at every enter
 *     and off at every leave spares LuaJIT two rebuilds of its dispatch
 *     table per guard); a stopped guard's leave turns it off at once;
 *   - a guard is stopped if and only if its stop reason is not
 *     LUNA_WATCHDOG_RUNNING, and once stopped it stays stopped;
 *   - guards nest: leave restores the enclosing guard's hook.
 *
 * Ownership: luna_watchdog_install allocates the watchdog and ties it to the
 * state: it is freed (and the original allocator put back) by the state's
 * own lua_close.  luna_watchdog_newstate returns a state the caller closes
 * with lua_close, which also frees the watchdog and its accounts (names
 * copied in).  A guard is caller-owned storage (usually on the stack),
 * borrowed between enter and leave; its `what`, `owner` and `key` strings
 * are borrowed for that time too.
 */
#ifndef LUNA_WATCHDOG_H
#define LUNA_WATCHDOG_H

#include <lua.h>
#include <stddef.h>

#include "base/error.h"

/* Defaults of `luna run` (flags --reconcile-instruction-limit,
 * --reconcile-time-limit, --lua-memory-limit). */
#define LUNA_WATCHDOG_DEFAULT_INSTRUCTIONS 100e6
#define LUNA_WATCHDOG_DEFAULT_SECONDS 2.0
#define LUNA_WATCHDOG_DEFAULT_MEMORY ((size_t)128 << 20)
/* --controller-memory-limit's default: half the heap cap, so one account at
 * its cap leaves the other half to the rest. */
#define LUNA_WATCHDOG_DEFAULT_ACCOUNT_MEMORY(memory) ((memory) / 2)

/* Budgets.  In the state's settings 0 means unlimited; in a guard's own
 * limits 0 (or anything not positive) means the state's. */
struct luna_watchdog_limits {
    double instructions;   /* Lua VM instructions without yielding */
    double seconds;        /* wall-clock seconds without yielding */
    unsigned account;      /* memory account the guard's allocations are
                            * charged to (luna_watchdog_account_new); 0: the
                            * host's, no cap but the heap's */
};

/* State-wide settings. */
struct luna_watchdog_config {
    struct luna_watchdog_limits limits;  /* default budgets for every guard */
    size_t memory;                       /* Lua heap cap in bytes; 0: none */
    size_t account_memory;               /* each account's cap; 0: none */
};

enum luna_watchdog_stop {
    LUNA_WATCHDOG_RUNNING = 0,
    LUNA_WATCHDOG_INSTRUCTIONS,
    LUNA_WATCHDOG_TIME,
    LUNA_WATCHDOG_MEMORY,
    LUNA_WATCHDOG_SHUTDOWN,     /* luna_watchdog_stop_all_at's deadline passed */
};

/* Which memory rule stopped a guard (see "Memory accounts" above). */
enum luna_watchdog_memory_rule {
    LUNA_WATCHDOG_MEMORY_HEAP = 0,   /* 1: the heap cap */
    LUNA_WATCHDOG_MEMORY_ACCOUNT,    /* 2: the account's cap */
    LUNA_WATCHDOG_MEMORY_SHARE,      /* 3: past its fair share in the reserve */
};

struct luna_watchdog;

struct luna_watchdog_guard {
    /* set by the caller before enter */
    const char *what;      /* "reconcile", "predicate", ... (borrowed) */
    const char *owner;     /* controller name, or NULL (borrowed) */
    const char *key;       /* reconcile key, or NULL (borrowed) */
    unsigned long serial;  /* the reconcile's id (logged as hex), 0: none */
    const struct luna_watchdog_limits *limits; /* NULL: the state's; else lowers them */
    /* private */
    struct luna_watchdog *wd;
    struct luna_watchdog_guard *prev;   /* the enclosing guard of this state */
    struct luna_watchdog_guard *outer;  /* the enclosing guard of any state */
    lua_State *L;
    struct luna_watchdog_limits lim;
    double deadline, executed;
    int step;
    enum luna_watchdog_stop stop;
    enum luna_watchdog_memory_rule memory_rule; /* when stop is MEMORY */
    /* luna_watchdog_resume of a stopped guard whose coroutine ended with an
     * error: "file:line: " of the script code that was running (the
     * innermost frame with a line: a C function such as string.rep is
     * reported at its caller's line), or "" */
    char where[192];
};

/* A shared heap budget ("Shared budget" above): refs 1, the caller's.
 * NULL when out of memory. */
struct luna_watchdog_budget;
struct luna_watchdog_budget *luna_watchdog_budget_new(void);
/* Takes one more reference; release drops one, the last one frees it. */
void luna_watchdog_budget_ref(struct luna_watchdog_budget *b);
void luna_watchdog_budget_release(struct luna_watchdog_budget *b);
/* The bytes every member holds: their heaps plus their charged C memory. */
size_t luna_watchdog_budget_used(const struct luna_watchdog_budget *b);
/* What the heap cap is checked against for L: its budget's heaps and
 * charged C memory (L's own when it joined none); 0 without a watchdog. */
size_t luna_watchdog_heap_used(lua_State *L);
/* L's heap, charges and accounts count in b from now on (b gains a
 * reference, given back when L is closed).  Call right after making the
 * state, before scripts run.  -1 when L has no watchdog or b is NULL. */
int luna_watchdog_join(lua_State *L, struct luna_watchdog_budget *b);

/* The configuration `luna run` starts from: the defaults above. */
struct luna_watchdog_config luna_watchdog_config_default(void);

/* A new state whose allocator is the watchdog's from its first block
 * (malloc underneath), so the heap can be charged to accounts; JIT off, cfg
 * applied (NULL: defaults).  NULL (err set) when out of memory or when this
 * LuaJIT refuses a custom allocator (x64 without GC64): then use
 * luaL_newstate and luna_watchdog_install. */
lua_State *luna_watchdog_newstate(const struct luna_watchdog_config *cfg, luna_error *err);
/* Wraps L's allocator, turns the JIT compiler off and applies cfg (NULL:
 * defaults).  Call once, right after creating the state.  On a state from
 * luna_watchdog_newstate: applies cfg and turns the compiler off again,
 * which luaL_openlibs (luaopen_jit) turned back on: call it after opening
 * the libraries. */
int luna_watchdog_install(lua_State *L, const struct luna_watchdog_config *cfg, luna_error *err);
/* Changes the settings of an installed watchdog (no-op otherwise). */
void luna_watchdog_configure(lua_State *L, const struct luna_watchdog_config *cfg);
/* The installed settings, or the defaults if none is installed. */
struct luna_watchdog_config luna_watchdog_get_config(lua_State *L);

/* The budgets a guard with `own` limits (NULL: none) runs with under the
 * ceilings `state` (the state's settings): per budget, own's value if it is
 * positive and, where the state's is not 0, below it; else the state's. */
struct luna_watchdog_limits luna_watchdog_limits_under(const struct luna_watchdog_limits *state,
                                                       const struct luna_watchdog_limits *own);

/* Process-wide stop: every guard of every state, active or entered later,
 * is stopped (LUNA_WATCHDOG_SHUTDOWN) at its next hook once the monotonic
 * clock (luna_clock_monotonic) reads `deadline` or later.  An earlier
 * deadline replaces a later one, never the reverse.  Async-signal-safe: for
 * signal handlers.  Any thread. */
void luna_watchdog_stop_all_at(double deadline);
/* The deadline set (0: none).  Async-signal-safe; any thread. */
double luna_watchdog_stop_all_deadline(void);
/* Forgets the deadline (a new run of the runtime, tests).  Not from a
 * signal handler. */
void luna_watchdog_stop_all_clear(void);

/* Starts watching the Lua code L runs until leave.  A no-op guard when L
 * has no watchdog installed.  Never raises. */
void luna_watchdog_enter(lua_State *L, struct luna_watchdog_guard *g);
/* Stops watching; returns why the guard was stopped, or
 * LUNA_WATCHDOG_RUNNING if it was not.  Never raises. */
enum luna_watchdog_stop luna_watchdog_leave(struct luna_watchdog_guard *g);

/* lua_resume / lua_pcall inside a guard (enter, call, leave).  When the
 * guard was stopped and the coroutine died with an error, resume also
 * records where the script was in g->where (read from the dead
 * coroutine's frames after the allocator and the hook are done: a
 * refused allocation raises LuaJIT's bare "not enough memory", which has
 * no position, and the hook that would add one may never run). */
int luna_watchdog_resume(lua_State *co, int nargs, struct luna_watchdog_guard *g);
int luna_watchdog_pcall(lua_State *L, int nargs, int nresults, int errfunc,
                        struct luna_watchdog_guard *g);

/* The innermost active guard of L's state, or NULL (borrowed). */
const struct luna_watchdog_guard *luna_watchdog_current(lua_State *L);

/* Writes the stopped guard's reason, e.g. "reconcile exceeded its
 * instruction budget (1000000 instructions without yielding)". */
void luna_watchdog_describe(const struct luna_watchdog_guard *g, char *buf, size_t size);
/* "instructions", "time", "memory", "shutdown" (or "running"). */
const char *luna_watchdog_stop_name(enum luna_watchdog_stop stop);

/* For a C function working on behalf of script code (a pattern match, a
 * sort): counts `steps` units of work as that many instructions of the
 * innermost guard and checks its clock.  When the guard is (or so becomes)
 * stopped, raises the guard's error in L (a longjmp: the caller holds no
 * malloc'd memory).  A no-op without a guard.  Cheap enough to call every
 * few thousand steps. */
void luna_watchdog_charge(lua_State *L, double steps);

/* The C-stack guard.  Every library function that calls back into Lua
 * (string.gsub, table.sort, coroutine.resume and wrap, xpcall handlers,
 * print, require, string.format, the host's own callbacks) checks, before
 * it calls, that this thread has at least LUNA_WATCHDOG_CSTACK_MARGIN
 * bytes of C stack left and has used at most LUNA_WATCHDOG_CSTACK_MAX_USED
 * (far more than any sane chain needs, far less than the stack: an error
 * unwinds quickly); otherwise it raises "C stack overflow" as a normal Lua
 * error.  A chain of such calls (a gsub callback that calls
 * gsub, coroutine.wrap in coroutine.wrap) therefore ends with an error
 * instead of a segfault, whatever the chain.  The stack's bounds come from
 * pthread_getattr_np, once per thread. */
#define LUNA_WATCHDOG_CSTACK_MARGIN ((size_t)1 << 20)
#define LUNA_WATCHDOG_CSTACK_MAX_USED ((size_t)1 << 20)
/* Raises in L if the C stack is nearly used up.  Also a lua_CFunction
 * (returns 0 results). */
int luna_watchdog_check_cstack(lua_State *L);
/* Bytes of C stack left below the caller's frame (SIZE_MAX if unknown; 0
 * once more than LUNA_WATCHDOG_CSTACK_MAX_USED is in use). */
size_t luna_watchdog_cstack_left(void);

/* A full collection of L's state and of every other state of its budget
 * not running a guard (the memory a refused allocation wanted may be any
 * member's garbage).  Not from inside a guard of L. */
void luna_watchdog_collect(lua_State *L);

/* Bytes in the Lua heap as the watchdog counts them (0 without one): every
 * allocation made through the state's allocator, the JSON writer's buffers
 * included; with accounts, block headers included. */
size_t luna_watchdog_memory(lua_State *L);

/* Charges n bytes of malloc'd C memory held on behalf of L's scripts (see
 * "Counted C memory" above).  Returns 0 (charged; the caller releases the
 * same n when it frees the memory), or -1 when the heap plus the charged
 * bytes would pass the cap: nothing is charged, and the innermost active
 * guard, if any, is stopped (reason memory; its error is raised at the
 * next instruction).  Never raises.  Always 0 without a watchdog or cap. */
int luna_watchdog_charge_memory(lua_State *L, size_t n);
/* Gives back n bytes charged before.  A no-op once the state is closing
 * (its watchdog is gone), so an owner freed late needs no special case. */
void luna_watchdog_release_memory(lua_State *L, size_t n);
/* The same for memory that outlives the guard that asked for it and
 * belongs to one controller (an index's values): charged to account
 * (0: the host's) as well, and refused (-1, no guard stopped) past the
 * cap or past the account's cap.  release gives back what charge took. */
int luna_watchdog_charge_account(lua_State *L, unsigned account, size_t n);
void luna_watchdog_release_account(lua_State *L, unsigned account, size_t n);
/* The bytes charged now (0 without a watchdog). */
size_t luna_watchdog_charged_memory(lua_State *L);

/* A new memory account named name (copied; "" if NULL; memory errors say
 * "... the Lua memory limit of <name>", e.g. "controller hog"), with the default
 * cap.  Returns its id (>= 1), or 0 (the host's: no account) when L has no
 * accounts (no watchdog, or one installed on an existing state) or memory
 * is short. */
unsigned luna_watchdog_account_new(lua_State *L, const char *name);
/* Renames account id (name copied; NULL keeps it) and sets its cap in
 * bytes: 0 or more than cfg.account_memory means cfg.account_memory.
 * No-op for 0 or an unknown id. */
void luna_watchdog_account_set(lua_State *L, unsigned id, const char *name, size_t cap);
/* Bytes charged to account id (0: the host's), headers included; 0 for an
 * unknown id. */
size_t luna_watchdog_account_memory(lua_State *L, unsigned id);
/* Account id's cap in force (rule 2), 0 if none. */
size_t luna_watchdog_account_cap(lua_State *L, unsigned id);

#endif
