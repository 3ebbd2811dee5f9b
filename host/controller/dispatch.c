/* controller/dispatch.c — the fair dispatcher every controller shares: when a
 * controller may start a reconcile and when an answered reconcile may
 * resume, the script-time slice of a loop iteration, the deferred line,
 * the ready line's watchers and the breather (controller_impl.h). */

#include "base/log.h"
#include "cluster/shard_set.h"
#include "controller/controller_impl.h"
#include "queue/workqueue.h"

#include <stddef.h>

void luna_controller_kick(struct luna_controller *c)
{
    if (!c->started || c->stopping || c->paused || c->active >= c->workers ||
        !luna_workqueue_len(c->queue) || luna_controller_shard_waits(c))
        return;
    ev_check_start(luna_loop(), &c->dispatch_check);
    ev_idle_start(luna_loop(), &c->dispatch_idle);
}

static void on_ready(void *ud) { luna_controller_kick(ud); }

void luna_controller_maybe_drained(struct luna_controller *c)
{
    if (c->stopping && c->active == 0 && c->drained) {
        void (*cb)(void *) = c->drained;
        c->drained = NULL;
        cb(c->drained_ud);
    }
}

/* How much script time one loop iteration may spend before the
 * dispatchers stop starting (and resuming) reconciles and let the loop
 * serve I/O (probes, webhook calls, watches, API answers).  A reconcile
 * that ends without yielding frees its worker at once: without this, a
 * queue of keys whose reconciles each spin up to the time budget would
 * hold the loop for keys x budget. */
#define DISPATCH_SLICE 0.010
/* Iterations a controller lets pass while the slice is used up before it
 * starts one reconcile anyway (no controller starves). */
#define DISPATCH_MAX_DEFERRALS 3
/* After a stretch of script code longer than LONG_STRETCH (a reconcile
 * that spins close to its time budget, or dies deep in C recursion), no
 * reconcile starts for a quarter of that stretch (BREATHER_MIN to
 * BREATHER_MAX) and the loop blocks on I/O meanwhile.  The slice alone
 * lets one such reconcile start per iteration, and the iterations between
 * them run in microseconds (the dispatchers' idle watcher keeps the loop
 * from blocking), so a probe that needs two or three iterations (accept,
 * read, answer) waited two or three stretches: /healthz missed its 1 s
 * with a 0.5 s budget on a loaded machine.  Now it waits one stretch at
 * most, and such reconciles run at most ~80% of the time. */
#define LONG_STRETCH 0.050
#define BREATHER_MIN 0.020
#define BREATHER_MAX 0.250

static struct {
    unsigned int iteration;
    double used;                      /* script seconds in this iteration */
    unsigned starts;                  /* reconciles started in this iteration */
    unsigned resumes;                 /* answered reconciles resumed in this iteration */
    bool valid;
} slice;

static void slice_roll(void)
{
    unsigned int it = ev_iteration(luna_loop());
    if (!slice.valid || it != slice.iteration) {
        slice.valid = true;
        slice.iteration = it;
        slice.used = 0;
        slice.starts = 0;
        slice.resumes = 0;
    }
}

/* The deferred line (controller_impl.h): once its head has waited
 * DISPATCH_MAX_DEFERRALS iterations, the next iteration's first start is
 * its, so every controller deferred by the slice gets its turn in the
 * order it was deferred, however many spin, and an iteration never runs
 * more than one reconcile past the slice. */
static struct {
    struct luna_controller *head, *tail;
} deferred_line;

/* The breather (see LONG_STRETCH): until `until` (ev_time), dispatchers
 * start nothing; the controllers that wanted to wait in the deferred line
 * with their watchers stopped, and the timer kicks them. */
static struct {
    double until;
    ev_timer timer;
    bool timer_init;
} breather;

static void deferred_join(struct luna_controller *c)
{
    if (c->in_deferred_line)
        return;
    c->in_deferred_line = true;
    c->deferred_next = NULL;
    c->deferred_prev = deferred_line.tail;
    if (deferred_line.tail)
        deferred_line.tail->deferred_next = c;
    else
        deferred_line.head = c;
    deferred_line.tail = c;
}

static void deferred_leave(struct luna_controller *c)
{
    if (!c->in_deferred_line)
        return;
    if (c->deferred_prev)
        c->deferred_prev->deferred_next = c->deferred_next;
    else
        deferred_line.head = c->deferred_next;
    if (c->deferred_next)
        c->deferred_next->deferred_prev = c->deferred_prev;
    else
        deferred_line.tail = c->deferred_prev;
    c->deferred_prev = c->deferred_next = NULL;
    c->in_deferred_line = false;
}

/* Stops c's dispatch watchers; it leaves the deferred line with them. */
void luna_controller_dispatch_stop(struct luna_controller *c)
{
    ev_check_stop(luna_loop(), &c->dispatch_check);
    ev_idle_stop(luna_loop(), &c->dispatch_idle);
    deferred_leave(c);
}

static void breather_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
    /* kicking starts the watchers; the line keeps its order (the head
     * still goes first).  One with nothing to start leaves the line: the
     * end of its reconcile or a new key kicks it again. */
    struct luna_controller *next;
    for (struct luna_controller *c = deferred_line.head; c; c = next) {
        next = c->deferred_next;
        if (!c->started || c->stopping || c->paused || c->active >= c->workers ||
            !luna_workqueue_len(c->queue))
            deferred_leave(c);
        else
            luna_controller_kick(c);
    }
    if (luna_reconcile_ready_waiting())
        luna_controller_ready_kick();
}

void luna_controller_charge(double seconds)
{
    slice_roll();
    slice.used += seconds;
    if (seconds > LONG_STRETCH) {
        double b = seconds / 4;
        b = b < BREATHER_MIN ? BREATHER_MIN : b > BREATHER_MAX ? BREATHER_MAX : b;
        double until = ev_time() + b;
        if (until > breather.until)
            breather.until = until;
    }
}

/* Seconds the breather still lasts (0: none). */
static double breather_left(void)
{
    /* ev_now (this iteration's start) is never later than the real time:
     * past the breather by it, no clock read on each reconcile start */
    if (breather.until <= ev_now(luna_loop()))
        return 0;
    double left = breather.until - ev_time();
    return left > 0 ? left : 0;
}

/* Starts the breather's timer, which kicks the deferred line and the
 * ready line when the breather ends. */
static void breather_arm(void)
{
    if (!breather.timer_init) {
        ev_timer_init(&breather.timer, breather_cb, 0., 0.);
        breather.timer_init = true;
    }
    if (!ev_is_active(&breather.timer)) {
        /* libev counts from the iteration's cached time, which is behind
         * by the stretch that just ran: `left` from it would fire early */
        ev_timer_set(&breather.timer, breather.until - ev_now(luna_loop()), 0.);
        ev_timer_start(luna_loop(), &breather.timer);
    }
}

/* True (c waits in the deferred line, its watchers stopped, until the
 * breather's timer) while a breather lasts. */
static bool breathing(struct luna_controller *c)
{
    if (breather_left() <= 0)
        return false;
    /* a turn lost to the breather counts as a deferral: the breather lets
     * one reconcile start after it, and without the count the line's head
     * never came to wait, so whichever controller the loop happened to call
     * first took every such start (seen: 8 of 15 controllers, the canary
     * among them, never started in 30 s beside slow recursive ones) */
    c->deferrals++;
    deferred_join(c);
    ev_check_stop(luna_loop(), &c->dispatch_check);
    ev_idle_stop(luna_loop(), &c->dispatch_idle);
    breather_arm();
    return true;
}

/* ---- the ready line: answered reconciles waiting for their turn ----
 *
 * An API answer resumes its reconcile at once while the iteration's slice
 * lasts (luna_controller_resume_turn); past it the reconcile waits in the
 * ready line (reconcile.c), which these watchers run in later iterations
 * under the same slice, ahead of new starts.  Without it, N answers that
 * libcurl completes in one iteration resumed N reconciles back to back in
 * their callbacks: 40 that spin 30 ms each after their answer held the
 * loop 1.2 s, a webhook request or a probe waiting all of it. */
static struct {
    ev_check check;
    ev_idle idle;                     /* the loop does not block meanwhile */
    bool init;
} ready_watchers;

static void ready_check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
    luna_reconcile_resume_ready();
}

static void ready_idle_cb(struct ev_loop *loop, ev_idle *w, int revents) {}

void luna_controller_ready_kick(void)
{
    if (!ready_watchers.init) {
        ev_check_init(&ready_watchers.check, ready_check_cb);
        ev_idle_init(&ready_watchers.idle, ready_idle_cb);
        ready_watchers.init = true;
    }
    ev_check_start(luna_loop(), &ready_watchers.check);
    ev_idle_start(luna_loop(), &ready_watchers.idle);
}

void luna_controller_ready_stop(void)
{
    if (!ready_watchers.init)
        return;
    ev_check_stop(luna_loop(), &ready_watchers.check);
    ev_idle_stop(luna_loop(), &ready_watchers.idle);
}

/* Iterations the ready line was held back (by the slice, a breather or
 * the deferred line's waiting head) since it last resumed a reconcile,
 * counted once per iteration: at DISPATCH_MAX_DEFERRALS it goes before a
 * waiting head, as the head of the deferred line goes before the others.
 * Without it a line of controllers whose reconciles spin held every
 * resume back while it lasted (seen: a canary's reconcile waited 30 s for
 * its answer's turn beside the attack files). */
static struct {
    unsigned deferrals;
    unsigned int iteration;           /* of the last deferral counted */
    bool counted;
} ready_turns;

static enum luna_resume_turn resume_turn(void)
{
    if (breather_left() > 0) {
        breather_arm(); /* its timer kicks the ready line when it ends */
        return LUNA_RESUME_AFTER_BREATHER;
    }
    /* the deferred line's waiting head has the iteration's first start
     * (dispatch) unless the ready line has waited as long, as long as the
     * head's watchers run (it starts or leaves the line then).  A head
     * whose watchers do not run (a sharded replica that may not act)
     * holds no resume back. */
    struct luna_controller *head = deferred_line.head;
    if (head && head->deferrals >= DISPATCH_MAX_DEFERRALS && slice.starts == 0 &&
        ev_is_active(&head->dispatch_check) && ready_turns.deferrals < DISPATCH_MAX_DEFERRALS)
        return LUNA_RESUME_NEXT_ITERATION;
    /* past the slice one reconcile stretch still runs in an iteration
     * that ran none (script outside reconciles, webhook calls, cannot hold
     * resumes back), as for starts: at most one past the slice */
    if (slice.used > DISPATCH_SLICE && (slice.starts > 0 || slice.resumes > 0))
        return LUNA_RESUME_NEXT_ITERATION;
    return LUNA_RESUME_NOW;
}

enum luna_resume_turn luna_controller_resume_turn(void)
{
    slice_roll();
    enum luna_resume_turn turn = resume_turn();
    if (turn == LUNA_RESUME_NOW) {
        slice.resumes++;
        ready_turns.deferrals = 0;
    } else if (!ready_turns.counted || ready_turns.iteration != slice.iteration) {
        ready_turns.counted = true;
        ready_turns.iteration = slice.iteration;
        ready_turns.deferrals++;
    }
    return turn;
}

/* Starts reconciles while keys and workers are free and the iteration's
 * script time is under the slice; past it, the watchers go on in the next
 * iteration.  A controller deferred DISPATCH_MAX_DEFERRALS times at the
 * head of the deferred line has the next fresh slice to itself: the others
 * wait until it started (no controller starves; one spinning reconcile per
 * iteration at most, so the loop still serves probes and watches).  Runs
 * from the dispatch watchers, and right after an informer drain step (so
 * an event's reconcile starts in the loop iteration the event arrived in);
 * never nested in itself. */
static void dispatch(struct luna_controller *c)
{
    if (!c->started || c->dispatching || c->paused)
        return;
    c->dispatching = true;
    bool started = false;
    while (!c->stopping && c->active < c->workers) {
        if (breathing(c)) {
            c->dispatching = false;
            return;
        }
        slice_roll();
        struct luna_controller *head = deferred_line.head;
        bool head_waits = head && head->deferrals >= DISPATCH_MAX_DEFERRALS;
        /* the waiting head starts even past the slice (script time spent
         * outside reconciles, index or map functions, cannot hold it back)
         * as long as no reconcile started or resumed in this iteration
         * (a resume takes the turn when the ready line waited as long) */
        bool head_goes = head_waits && head == c && !started && slice.starts == 0 &&
                         slice.resumes == 0;
        if (!head_goes &&
            (slice.used > DISPATCH_SLICE || (head_waits && head != c && !started))) {
            if (!started) {
                deferred_join(c);
                c->deferrals++;
            }
            c->dispatching = false;
            luna_controller_kick(c);
            return;
        }
        const char *key;
        int priority;
        if (luna_controller_shard_waits(c) ||
            luna_workqueue_get_priority(c->queue, &key, &priority) != LUNA_WORKQUEUE_ITEM)
            break;
        if (c->sharding) {
            bool owned = luna_controller_key_owned(c, key);
            luna_controller_tombstone_drop(c, key);
            if (!owned) {
                luna_debug("shard: key not owned here", "controller", c->name, "key", key);
                luna_shard_set_note_dropped(c->sharding, "not_owned");
                luna_workqueue_forget(c->queue, key);
                luna_workqueue_done(c->queue, key);
                continue;
            }
        }
        /* key is borrowed from the queue until done: copy before Lua runs */
        c->deferrals = 0;
        deferred_leave(c);
        slice.starts++;
        luna_reconcile_start(c, key, priority);
        started = true;
    }
    c->dispatching = false;
    /* a sharded replica that may not act stops its watchers too (they
     * would spin the loop until it may): the shard set kicks every
     * controller when it acts again */
    if (c->stopping || c->active >= c->workers || !luna_workqueue_len(c->queue) ||
        luna_controller_shard_waits(c))
        luna_controller_dispatch_stop(c);
}

static void dispatch_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    /* answered reconciles resume ahead of new starts, whichever check
     * watcher libev calls first.  Not from the informer's batch end: a
     * resumed reconcile that ends may drain and free a retiring
     * controller, whose handlers that informer is calling. */
    luna_reconcile_resume_ready();
    dispatch((struct luna_controller *)((char *)w -
                                        offsetof(struct luna_controller, dispatch_check)));
}

void luna_controller_on_batch_end(void *ud)
{
    struct source *src = ud;
    if (luna_workqueue_len(src->c->queue))
        dispatch(src->c);
}

static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents) {}

void luna_controller_dispatch_init(struct luna_controller *c)
{
    ev_check_init(&c->dispatch_check, dispatch_cb);
    ev_idle_init(&c->dispatch_idle, idle_cb);
}

void luna_controller_dispatch_follow(struct luna_controller *c)
{
    luna_workqueue_set_ready_cb(c->queue, on_ready, c);
}
