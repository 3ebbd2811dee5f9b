/* reconcile.c — see reconcile.h. */
#include "controller/reconcile.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/heap.h"
#include "base/log.h"
#include "cache/event_latency.h"
#include "queue/workqueue.h"
#include "controller/controller_impl.h"
#include "script/sandbox.h"
#include "serve/runtime_metrics.h"
#include "script/watchdog.h"

enum { REQ_NAMESPACE, REQ_NAME, REQ_KEY, REQ_ATTEMPT, REQ_PERIODIC };
const char *const luna_reconcile_request_fields[] = {
    [REQ_NAMESPACE] = "namespace", [REQ_NAME] = "name", [REQ_KEY] = "key",
    [REQ_ATTEMPT] = "attempt", [REQ_PERIODIC] = "periodic", NULL,
};
enum { RESULT_REQUEUE, RESULT_REQUEUE_AFTER, RESULT_PRIORITY };
const char *const luna_reconcile_result_fields[] = {
    [RESULT_REQUEUE] = "requeue", [RESULT_REQUEUE_AFTER] = "requeue_after",
    [RESULT_PRIORITY] = "priority", NULL,
};

struct luna_reconcile {
    struct luna_controller *c;
    char *key;
    unsigned long id_num;             /* unique across controllers and reloads */
    char id[24];                      /* id_num in hex, written when first asked for */
    lua_State *co;
    int co_ref;
    unsigned attempt;
    int priority;                     /* the key's, as the queue handed it out */
    double started;
    void (*cancel)(void *ud);         /* the operation waited for, if any */
    void *cancel_ud;
    struct luna_reconcile *prev, *next;
    /* In the ready line: its answer came past the slice, its nres values
     * are on top of co's stack, and it waits for its turn to resume. */
    bool in_ready_line;
    int ready_nres;
    struct luna_reconcile *ready_prev, *ready_next;
    char key_bytes[];                 /* what key points at (one allocation) */
};


/* The reconcile whose coroutine runs now (the innermost, should an API
 * answer resume one inside another's binding), for the bindings: only a
 * running coroutine calls them, so this replaces a coroutine → reconcile
 * map (a hash that went from empty to one entry and back on every
 * reconcile, allocating and freeing its table each time). */
static struct luna_reconcile *current;

struct luna_reconcile *luna_reconcile_of(lua_State *L)
{
    return current && current->co == L ? current : NULL;
}

struct luna_controller *luna_reconcile_controller(struct luna_reconcile *r) { return r->c; }
const char *luna_reconcile_key(const struct luna_reconcile *r) { return r->key; }
/* Formatted on first use: most reconciles log nothing at the default
 * level, and an snprintf per reconcile was measurable. */
const char *luna_reconcile_id(struct luna_reconcile *r)
{
    if (!r->id[0])
        snprintf(r->id, sizeof r->id, "%lx", r->id_num);
    return r->id;
}
lua_State *luna_reconcile_thread(const struct luna_reconcile *r) { return r->co; }
unsigned long luna_reconcile_serial(const struct luna_reconcile *r) { return r->id_num; }
struct luna_reconcile *luna_reconcile_next(const struct luna_reconcile *r) { return r->next; }

/* The ready line, oldest answer first, across controllers (dispatch.c
 * says when it may run).  Borrowed pointers: a reconcile leaves the line
 * when it resumes or is freed. */
static struct {
    struct luna_reconcile *head, *tail;
} ready_line;
static bool resuming_ready;           /* luna_reconcile_resume_ready does not nest */

static void ready_join(struct luna_reconcile *r, int nres)
{
    r->in_ready_line = true;
    r->ready_nres = nres;
    r->ready_next = NULL;
    r->ready_prev = ready_line.tail;
    if (ready_line.tail)
        ready_line.tail->ready_next = r;
    else
        ready_line.head = r;
    ready_line.tail = r;
}

static void ready_leave(struct luna_reconcile *r)
{
    if (!r->in_ready_line)
        return;
    if (r->ready_prev)
        r->ready_prev->ready_next = r->ready_next;
    else
        ready_line.head = r->ready_next;
    if (r->ready_next)
        r->ready_next->ready_prev = r->ready_prev;
    else
        ready_line.tail = r->ready_prev;
    r->ready_prev = r->ready_next = NULL;
    r->in_ready_line = false;
    if (!ready_line.head)
        luna_controller_ready_stop();
}

bool luna_reconcile_ready_waiting(void) { return ready_line.head != NULL; }

/* Unique across controllers and reloads: log readers pair start/done. */
static unsigned long next_reconcile_id;
unsigned long luna_reconcile_last_serial(void) { return next_reconcile_id; }

/* Frees r; an operation it still waits for is cancelled first, whatever
 * ended the reconcile (an error after the operation started, a watchdog
 * stop, abandonment), so no answer is ever delivered to a freed
 * reconcile. */
static void reconcile_free(struct luna_reconcile *r, bool reusable)
{
    struct luna_controller *c = r->c;
    if (current == r)
        current = NULL; /* never left pointing at freed memory */
    /* stopped or abandoned while its answer waited: never resumed */
    ready_leave(r);
    if (r->cancel) {
        void (*cancel)(void *) = r->cancel;
        r->cancel = NULL;
        cancel(r->cancel_ud);
        reusable = false;
    }
    if (r->prev)
        r->prev->next = r->next;
    else
        c->running = r->next;
    if (r->next)
        r->next->prev = r->prev;
    int pool = c->workers < LUNA_RECONCILE_POOL ? c->workers : LUNA_RECONCILE_POOL;
    if (reusable && c->nidle < pool && lua_status(r->co) == 0) {
        lua_settop(r->co, 0);
        c->idle[c->nidle] = r->co;
        c->idle_ref[c->nidle++] = r->co_ref;
    } else {
        luaL_unref(c->env.L, LUA_REGISTRYINDEX, r->co_ref);
    }
    free(r);
    c->active--;
}

void luna_reconcile_pool_free(struct luna_controller *c)
{
    while (c->nidle > 0)
        luaL_unref(c->env.L, LUA_REGISTRYINDEX, c->idle_ref[--c->nidle]);
}

/* A coroutine for a new reconcile of c: an idle one, or a new thread
 * anchored in the registry (*ref) that scripts cannot resume. */
static lua_State *take_thread(struct luna_controller *c, int *ref)
{
    lua_State *L = c->env.L;
    if (c->nidle > 0) {
        c->nidle--;
        *ref = c->idle_ref[c->nidle];
        lua_State *co = c->idle[c->nidle];
        /* what lua_newthread gives: the state's globals */
        lua_pushvalue(L, LUA_GLOBALSINDEX);
        lua_xmove(L, co, 1);
        lua_replace(co, LUA_GLOBALSINDEX);
        return co;
    }
    lua_State *co = lua_newthread(L);
    luna_sandbox_protect_top(L); /* scripts cannot resume it */
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return co;
}

/* "ns/name" → ns into buf ("" when cluster-scoped); returns the name. */
static const char *split_key(const char *key, char *buf, size_t size)
{
    const char *slash = strchr(key, '/');
    size_t n = slash ? (size_t)(slash - key) : 0;
    if (n >= size)
        n = size - 1;
    memcpy(buf, key, n);
    buf[n] = '\0';
    return slash ? slash + 1 : key;
}

/* One line per finished reconcile (formatted only at an enabled level:
 * the formatting is most of a short reconcile's finish). */
static void log_result(struct luna_reconcile *r, const char *msg, const char *result,
                       const char *error, const char *where, const char *stopped,
                       enum luna_log_level level)
{
    if (!luna_log_enabled(level))
        return;
    char attempt[16], ms[32];
    snprintf(attempt, sizeof attempt, "%u", r->attempt);
    snprintf(ms, sizeof ms, "%.3f",
             (luna_clock_now(r->c->env.clock) - r->started) * 1000.0);
    char ns[256];
    const char *name = split_key(r->key, ns, sizeof ns);
    luna_log(level, msg, "controller", r->c->name, "key", r->key, "reconcile_id",
             luna_reconcile_id(r), LUNA_LOG_NUM("attempt"), attempt, "result", result,
             LUNA_LOG_NUM("duration_ms"), ms, "error", error, "where", where, "stopped", stopped,
             "namespace", ns[0] ? ns : NULL, "name", name, NULL);
}

/* Runs in a protected call: the text of an error value (a string, a
 * number, what its __tostring makes of it, or its type). */
static int error_value_text(lua_State *L)
{
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
        return 1;
    if (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER)
        lua_pushstring(L, lua_tostring(L, 1));
    else
        lua_pushfstring(L, "(%s error value)", luaL_typename(L, 1));
    return 1;
}

/* The text of the value at idx of co (an error value raised or returned),
 * computed on the controller's state: __tostring may itself fail, and co
 * may be a coroutine that died with an error. */
static void value_text(struct luna_controller *c, lua_State *co, int idx, char *buf, size_t size)
{
    lua_State *L = c->env.L;
    lua_pushcfunction(L, error_value_text);
    lua_pushvalue(co, idx);
    lua_xmove(co, L, 1);
    /* __tostring is script code: run it with the controller's budgets */
    struct luna_watchdog_guard g = { .what = "tostring of an error", .owner = c->name,
                                     .limits = &c->limits };
    if (luna_watchdog_pcall(L, 1, 1, 0, &g) == 0)
        snprintf(buf, size, "%s", lua_tostring(L, -1));
    else
        snprintf(buf, size, "(error value whose __tostring failed: %s)",
                 lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?");
    lua_pop(L, 1);
}

/* Reads a result's priority at idx into *priority: nil leaves it, an
 * integer from -1e9 to 1e9 sets it; anything else returns false. */
static bool result_priority(lua_State *co, int idx, int *priority)
{
    if (lua_isnil(co, idx))
        return true;
    if (lua_type(co, idx) != LUA_TNUMBER)
        return false;
    lua_Number n = lua_tonumber(co, idx);
    if (!(n >= -1e9 && n <= 1e9) || n != (lua_Number)(int)n)
        return false;
    *priority = (int)n;
    return true;
}

/* What a finished reconcile asks for, read from its coroutine by
 * classify() and carried out by finish(), in the shape of
 * controller-runtime's reconcileHandler. */
struct result {
    enum luna_reconcile_result outcome;
    double after;            /* REQUEUE_AFTER: seconds */
    const char *error;       /* ERROR: the text logged */
    const char *where;       /* ERROR: the failed luna call ("luna.get at f:l"), or NULL */
    const char *stopped;     /* ERROR: why the watchdog stopped it, or NULL */
    bool trace;              /* error is a traceback on the controller state's stack */
    char text[1024], where_buf[512];
};

static void fail(struct result *res, const char *error)
{
    res->outcome = LUNA_RECONCILE_ERROR;
    res->error = error;
}

/* Checks the keys of the result table at idx of co (raw: lua_next runs
 * no metamethod): an unknown one (a misspelling such as requeue_afer
 * would otherwise pass as a plain success) fails the reconcile with the
 * key, the nearest known key and where the reconcile function is (its
 * return statement is gone with its frame).  Returns false if it failed. */
static bool result_keys_known(struct luna_reconcile *r, int idx, struct result *res)
{
    lua_State *co = r->co;
    for (lua_pushnil(co); lua_next(co, idx); lua_pop(co, 1)) {
        char name[128], hint[160] = "";
        int t = lua_type(co, -2);
        if (t == LUA_TSTRING) {
            size_t klen;
            const char *k = lua_tolstring(co, -2, &klen);
            const char *const *f = luna_reconcile_result_fields;
            while (*f && !(strlen(*f) == klen && memcmp(*f, k, klen) == 0))
                f++;
            if (*f)
                continue;
            snprintf(name, sizeof name, "'%.100s'", k);
            luna_controller_spec_suggest(luna_reconcile_result_fields, k, hint, sizeof hint);
        } else if (t == LUA_TNUMBER) {
            snprintf(name, sizeof name, "%.14g", lua_tonumber(co, -2));
        } else {
            snprintf(name, sizeof name, "(a %s)", luaL_typename(co, -2));
        }
        lua_pop(co, 2);
        lua_Debug ar;
        lua_rawgeti(co, LUA_REGISTRYINDEX, r->c->spec->reconcile_ref);
        const char *at = "?";
        int line = 0;
        if (lua_getinfo(co, ">S", &ar)) {
            at = ar.short_src;
            line = ar.linedefined;
        }
        snprintf(res->text, sizeof res->text,
                 "reconcile returned unknown result key %s%s in the reconcile function at %s:%d",
                 name, hint, at, line);
        fail(res, res->text);
        return false;
    }
    return true;
}

/* The result of a reconcile that returned (status 0): nothing or true is
 * success; nil, err and false are errors; a table asks for a requeue
 * (its priority, if any, replaces the key's).  Leaves co's stack as it
 * was; reads the table raw (no metamethod runs outside a protected
 * call). */
static void classify_returned(struct luna_reconcile *r, struct result *res)
{
    struct luna_controller *c = r->c;
    lua_State *co = r->co;
    int n = lua_gettop(co);
    if (n >= 2 && lua_isnil(co, 1) && !lua_isnil(co, 2)) {
        value_text(c, co, 2, res->text, sizeof res->text);
        fail(res, res->text);
        if (lua_istable(co, 2)) {
            /* luna API errors name the failed call: "luna.get at file:line" */
            lua_pushliteral(co, "where");
            lua_rawget(co, 2);
            if (lua_type(co, -1) == LUA_TSTRING) {
                snprintf(res->where_buf, sizeof res->where_buf, "%s", lua_tostring(co, -1));
                res->where = res->where_buf;
            }
            lua_pop(co, 1);
        }
    } else if (n >= 1 && lua_istable(co, 1) && result_keys_known(r, 1, res)) {
        lua_pushstring(co, luna_reconcile_result_fields[RESULT_REQUEUE_AFTER]);
        lua_rawget(co, 1);
        lua_pushstring(co, luna_reconcile_result_fields[RESULT_REQUEUE]);
        lua_rawget(co, 1);
        lua_pushstring(co, luna_reconcile_result_fields[RESULT_PRIORITY]);
        lua_rawget(co, 1);
        /* priority: the requeue's, instead of the key's (controller-
         * runtime's Result.Priority) */
        bool priority_ok = result_priority(co, -1, &r->priority);
        double after = lua_tonumber(co, -3);
        if (!lua_isnil(co, -3) &&
            (lua_type(co, -3) != LUA_TNUMBER || !(after >= 0) || after > 1e9)) {
            /* A typo'd type must not pass silently as done. */
            fail(res, "reconcile returned an invalid result: requeue_after must be a number "
                      "of seconds from 0 to 1e9");
        } else if (!priority_ok) {
            fail(res, "reconcile returned an invalid result: priority must be an integer from "
                      "-1e9 to 1e9");
        } else if (after > 0) {
            res->outcome = LUNA_RECONCILE_REQUEUE_AFTER;
            res->after = after;
        } else if (lua_toboolean(co, -2)) {
            res->outcome = LUNA_RECONCILE_REQUEUE;
        }
        lua_pop(co, 3);
    } else if (n >= 1 && lua_type(co, 1) == LUA_TBOOLEAN && !lua_toboolean(co, 1)) {
        fail(res, "reconcile returned false");
    }
}

/* Classifies how the coroutine ended.  stop is why the watchdog stopped it
 * (LUNA_WATCHDOG_RUNNING if it did not), reason its description. */
static void classify(struct luna_reconcile *r, int status, enum luna_watchdog_stop stop,
                     const char *reason, struct result *res)
{
    struct luna_controller *c = r->c;
    lua_State *co = r->co;
    *res = (struct result){ .outcome = LUNA_RECONCILE_SUCCESS };
    if (stop != LUNA_WATCHDOG_RUNNING) {
        /* The error value may be "not enough memory" or a message a pcall
         * in the script re-raised: the guard says what happened.  The
         * hook's own message also has the script position: keep it. */
        const char *msg = lua_type(co, -1) == LUA_TSTRING ? lua_tostring(co, -1) : NULL;
        luaL_traceback(c->env.L, co, msg && strstr(msg, reason) ? msg : reason, 0);
        fail(res, lua_tostring(c->env.L, -1));
        res->trace = true;
        res->stopped = luna_watchdog_stop_name(stop);
    } else if (status != 0) {
        value_text(c, co, -1, res->text, sizeof res->text);
        luaL_traceback(c->env.L, co, res->text, 0);
        fail(res, lua_tostring(c->env.L, -1));
        res->trace = true;
    } else {
        classify_returned(r, res);
    }
}

/* Carries out a finished reconcile's result: one switch does the queue
 * operation, the counter and the log line; then the metrics, and the key
 * is done. */
static void finish(struct luna_reconcile *r, int status, enum luna_watchdog_stop stop,
                   const char *reason)
{
    struct luna_controller *c = r->c;
    struct luna_workqueue *q = c->queue;
    struct result res;
    classify(r, status, stop, reason, &res);
    c->stats.reconciles++;
    switch (res.outcome) {
    case LUNA_RECONCILE_ERROR:
        luna_workqueue_add_rate_limited_priority(q, r->key, r->priority);
        c->stats.errors++;
        if (res.stopped) {
            c->stats.stopped++;
            luna_controller_count_stop(c, stop);
        }
        log_result(r, "reconcile failed", "error", res.error, res.where, res.stopped,
                   LUNA_LOG_ERROR);
        break;
    case LUNA_RECONCILE_REQUEUE_AFTER: {
        luna_workqueue_forget(q, r->key);
        luna_workqueue_add_after_priority(q, r->key, res.after, r->priority);
        c->stats.requeue_afters++;
        char secs[32];
        snprintf(secs, sizeof secs, "%g", res.after);
        log_result(r, "requeue after", secs, NULL, NULL, NULL, LUNA_LOG_DEBUG);
        break;
    }
    case LUNA_RECONCILE_REQUEUE:
        luna_workqueue_add_rate_limited_priority(q, r->key, r->priority);
        c->stats.requeues++;
        log_result(r, "reconcile done", "requeue", NULL, NULL, NULL, LUNA_LOG_DEBUG);
        break;
    case LUNA_RECONCILE_SUCCESS:
        luna_workqueue_forget(q, r->key);
        c->stats.successes++;
        log_result(r, "reconcile done", "success", NULL, NULL, NULL, LUNA_LOG_DEBUG);
        break;
    }
    if (res.trace)
        lua_pop(c->env.L, 1);
    if (c->metrics) {
        if (status != 0)
            luna_runtime_metrics_reconcile_panic(c->metrics);
        luna_runtime_metrics_reconcile_done(c->metrics, res.outcome,
                                            luna_clock_now(c->env.clock) - r->started);
    }
    luna_workqueue_done(q, r->key);
    reconcile_free(r, stop == LUNA_WATCHDOG_RUNNING && status == 0);
    /* The heap went past the cap: collect what the failed reconcile left
     * (its coroutine is unreferenced now) before the next one runs. */
    if (stop == LUNA_WATCHDOG_MEMORY)
        luna_watchdog_collect(c->env.L);
    c->trim_burst++;
    if (c->active == 0 && !luna_workqueue_len(q)) {
        /* the queue ran dry: a burst ends here, trimmed if it was one (a
         * trickle of keys that keeps drying the queue never trims: each
         * call walks every free chunk of the heap, freeing or not) */
        if (c->trim_burst >= LUNA_RECONCILE_TRIM_BURST)
            luna_heap_trim();
        c->trim_burst = 0;
    }
    luna_controller_kick(c);
    luna_controller_maybe_drained(c);
}

static void resume(struct luna_reconcile *r, int nargs)
{
    struct luna_controller *c = r->c;
    struct luna_watchdog_guard g = { .what = "reconcile", .owner = c->name, .key = r->key,
                                     .serial = r->id_num, .limits = &c->limits };
    double t0 = ev_time();
    struct luna_reconcile *outer = current;
    current = r;
    int rc = luna_watchdog_resume(r->co, nargs, &g);
    current = outer;
    luna_controller_charge(ev_time() - t0);
    if (g.stop != LUNA_WATCHDOG_RUNNING) {
        /* with the script's file:line, as a raised error has it */
        char reason[448];
        size_t at = strlen(g.where);
        memcpy(reason, g.where, at + 1);
        luna_watchdog_describe(&g, reason + at, sizeof reason - at);
        if (rc == LUA_YIELD && r->cancel) {
            /* stopped, yet it got to yield in an API call: abandon the call */
            r->cancel(r->cancel_ud);
            r->cancel = NULL;
            r->cancel_ud = NULL;
        }
        finish(r, rc == LUA_YIELD ? LUA_ERRRUN : rc, g.stop, reason);
        return;
    }
    if (rc == LUA_YIELD) {
        if (r->cancel)
            return; /* waiting for an API answer */
        lua_settop(r->co, 0);
        lua_pushstring(r->co, "reconcile yielded outside a luna API call "
                              "(coroutine.yield is not allowed in reconcile)");
        finish(r, LUA_ERRRUN, LUNA_WATCHDOG_RUNNING, NULL);
        return;
    }
    finish(r, rc, LUNA_WATCHDOG_RUNNING, NULL);
}

void luna_reconcile_wait(struct luna_reconcile *r, void (*cancel)(void *ud), void *ud)
{
    r->cancel = cancel;
    r->cancel_ud = ud;
}

void luna_reconcile_resume(struct luna_reconcile *r, int nres)
{
    if (!r->cancel || lua_status(r->co) != LUA_YIELD) {
        /* An answer for a reconcile that is not waiting (delivered while
         * its call was still starting): never resume it out of turn. */
        luna_error("api answer dropped", "controller", r->c->name, "key", r->key,
                   "reconcile_id", luna_reconcile_id(r), "error",
                   "the reconcile was not waiting for it");
        lua_pop(r->co, nres);
        return;
    }
    r->cancel = NULL;
    r->cancel_ud = NULL;
    /* Within the iteration's slice it resumes at once, as it always did;
     * past it, it waits in the ready line (dispatch.c), so N answers that
     * come in together do not run N reconciles back to back in their
     * callbacks.  Older answers waiting go first, and never inside another
     * reconcile's stretch (an answer delivered while that one's binding
     * drives libcurl): the outer stretch would be charged for this one. */
    enum luna_resume_turn turn = LUNA_RESUME_NEXT_ITERATION;
    if (!current && !ready_line.head)
        turn = luna_controller_resume_turn();
    if (turn == LUNA_RESUME_NOW) {
        resume(r, nres);
        return;
    }
    ready_join(r, nres);
    if (turn == LUNA_RESUME_NEXT_ITERATION)
        luna_controller_ready_kick();
}

void luna_reconcile_resume_ready(void)
{
    if (resuming_ready || current)
        return;
    resuming_ready = true;
    while (ready_line.head) {
        enum luna_resume_turn turn = luna_controller_resume_turn();
        if (turn == LUNA_RESUME_AFTER_BREATHER) {
            luna_controller_ready_stop(); /* the breather's timer kicks them */
            break;
        }
        if (turn == LUNA_RESUME_NEXT_ITERATION) {
            luna_controller_ready_kick();
            break;
        }
        /* out of the line before it runs: its stretch may free others in
         * it (a drained controller abandons its reconciles) */
        struct luna_reconcile *r = ready_line.head;
        int nres = r->ready_nres;
        ready_leave(r);
        resume(r, nres);
    }
    resuming_ready = false;
}

/* Registry key of the state's request constructor: a host function (the
 * state's own, never reachable by scripts) that returns a fresh request
 * table from a table constructor.  LuaJIT copies such a constructor's
 * template table whole (its hash part already sized and keyed) and then
 * stores into existing slots, where building the table from C inserted
 * (and interned the name of) every field one by one: a few hundred
 * instructions less per reconcile. */
static char key_request_ctor;

/* Pushes the request constructor of L's state (made on first use). */
static void push_request_ctor(lua_State *L)
{
    lua_pushlightuserdata(L, &key_request_ctor);
    lua_rawget(L, LUA_REGISTRYINDEX);
    if (lua_isfunction(L, -1))
        return;
    lua_pop(L, 1);
    char src[256];
    snprintf(src, sizeof src,
             "return function(a, b, c, d) return { %s = a, %s = b, %s = c, %s = d } end",
             luna_reconcile_request_fields[REQ_NAMESPACE], luna_reconcile_request_fields[REQ_NAME],
             luna_reconcile_request_fields[REQ_KEY], luna_reconcile_request_fields[REQ_ATTEMPT]);
    if (luaL_loadbuffer(L, src, strlen(src), "=luna.request") != 0)
        lua_error(L); /* cannot happen but for memory: as a raise of lua_createtable */
    lua_call(L, 0, 1);
    lua_pushlightuserdata(L, &key_request_ctor);
    lua_pushvalue(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
}

void luna_reconcile_start(struct luna_controller *c, const char *key, int priority)
{
    luna_event_latency_reconcile(key);
    size_t keylen = strlen(key);
    struct luna_reconcile *r = malloc(sizeof *r + keylen + 1);
    if (r) {
        memset(r, 0, sizeof *r);
        r->key = memcpy(r->key_bytes, key, keylen + 1);
    }
    if (!r) {
        luna_error("reconcile start failed", "controller", c->name, "key", key, "error",
                   "out of memory");
        luna_workqueue_add_rate_limited_priority(c->queue, key, priority);
        luna_workqueue_done(c->queue, key);
        return;
    }
    r->c = c;
    r->priority = priority;
    r->attempt = luna_workqueue_num_requeues(c->queue, key) + 1;
    r->started = luna_clock_now(c->env.clock);
    r->id_num = ++next_reconcile_id;
    r->co = take_thread(c, &r->co_ref);
    r->next = c->running;
    if (c->running)
        c->running->prev = r;
    c->running = r;
    c->active++;
    if (c->metrics)
        luna_runtime_metrics_reconcile_start(c->metrics);

    if (luna_log_enabled(LUNA_LOG_DEBUG)) {
        char ns[256];
        const char *name = split_key(key, ns, sizeof ns);
        char prio[16];
        snprintf(prio, sizeof prio, "%d", priority);
        luna_debug("reconcile start", "controller", c->name, "key", key, "reconcile_id",
                   luna_reconcile_id(r),
                   "namespace", ns[0] ? ns : NULL, "name", name, LUNA_LOG_NUM("priority"), prio);
    }
    lua_State *co = r->co;
    lua_rawgeti(co, LUA_REGISTRYINDEX, c->spec->reconcile_ref);
    push_request_ctor(co);
    const char *slash = strchr(key, '/');
    if (slash) {
        lua_pushlstring(co, key, (size_t)(slash - key));
        lua_pushstring(co, slash + 1);
    } else {
        lua_pushnil(co); /* cluster-scoped: no namespace field */
        lua_pushstring(co, key);
    }
    lua_pushstring(co, key);
    lua_pushinteger(co, (lua_Integer)r->attempt);
    lua_call(co, 4, 1); /* host code: never raises but for memory, as the pushes */
    if (strcmp(key, LUNA_PERIODIC_KEY) == 0) { /* periodic work (controller.h) */
        lua_pushboolean(co, 1);
        lua_setfield(co, -2, luna_reconcile_request_fields[REQ_PERIODIC]);
    }
    resume(r, 1);
}

void luna_reconcile_abandon(struct luna_reconcile *r, bool requeue)
{
    struct luna_controller *c = r->c;
    /* reconcile_free cancels the operation it waits for, once */
    if (c->queue) {
        /* An abandoned reconcile's key goes back to the queue (it has
         * a successor after a reload, or nobody after shutdown). */
        if (requeue)
            luna_workqueue_add_priority(c->queue, r->key, r->priority);
        luna_workqueue_done(c->queue, r->key);
    }
    luna_warn("reconcile abandoned", "controller", c->name, "key", r->key,
              "reconcile_id", luna_reconcile_id(r));
    reconcile_free(r, false);
}
