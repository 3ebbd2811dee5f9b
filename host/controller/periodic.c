/* controller/periodic.c — periodic work: `every` and its cron form queue the
 * key "@every" on schedule, with jitter, never piling up (controller_impl.h). */

#include "base/log.h"
#include "controller/controller_impl.h"
#include "queue/workqueue.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- periodic work ---------------------------------------------------------- */

static bool has_schedule(const struct luna_controller_spec *s)
{
    return s->every > 0 || s->every_cron;
}

bool luna_controller_periodic(const struct luna_controller *c) { return has_schedule(c->spec); }

/* A uniform draw in [0, 1) (xorshift64*; jitter needs no more). */
static double periodic_rand(struct luna_controller *c)
{
    uint64_t x = c->every_rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->every_rng = x;
    return (double)((x * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* The period the jitter is a fraction of: every, or the gap from the cron
 * slot `base` to the one after it. */
static double periodic_period(const struct luna_controller *c, double base)
{
    if (c->spec->every > 0)
        return c->spec->every;
    double after = luna_cron_next(&c->spec->cron, base);
    return after > base ? after - base : 60;
}

static void periodic_arm(struct luna_controller *c)
{
    /* libev counts a timer from the loop's time (ev_now), which lags the
     * clock while an iteration runs: from ev_time() the tick could come
     * before it is due */
    double delay = c->every_due - ev_now(luna_loop());
    ev_timer_set(&c->every_timer, delay > 0 ? delay : 0., 0.);
    ev_timer_start(luna_loop(), &c->every_timer);
    if (c->metrics)
        luna_runtime_metrics_periodic_next(c->metrics, c->every_due);
}

/* Draws the due time of the slot base. */
static void periodic_schedule(struct luna_controller *c, double base)
{
    c->every_base = base;
    c->every_due = base + periodic_rand(c) * c->spec->jitter * periodic_period(c, base);
}

static void periodic_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct luna_controller *c =
        (struct luna_controller *)((char *)w - offsetof(struct luna_controller, every_timer));
    if (!c->started || c->stopping)
        return;
    double now = ev_time();
    luna_debug("periodic tick", "controller", c->name);
    if (c->metrics)
        luna_runtime_metrics_periodic_tick(c->metrics);
    luna_controller_enqueue(c, LUNA_PERIODIC_KEY, LUNA_WORKQUEUE_PRIORITY_DEFAULT);
    double base;
    if (c->spec->every > 0) {
        base = c->every_base + c->spec->every;
        if (base <= now)
            base = now + c->spec->every; /* missed slots are skipped */
    } else {
        base = luna_cron_next(&c->spec->cron, c->every_base > now ? c->every_base : now);
        if (base < 0)
            return; /* no slot within five years */
    }
    periodic_schedule(c, base);
    periodic_arm(c);
}

/* At start: a fresh schedule (or the one a reload handed over) is armed. */
void luna_controller_periodic_start(struct luna_controller *c)
{
    if (!has_schedule(c->spec))
        return;
    if (c->every_due == 0) {
        double now = ev_time();
        if (c->spec->every > 0) {
            c->every_base = c->every_due = now; /* the first tick at once */
        } else {
            double base = luna_cron_next(&c->spec->cron, now);
            if (base < 0)
                return;
            periodic_schedule(c, base);
        }
    }
    periodic_arm(c);
}

void luna_controller_periodic_stop(struct luna_controller *c)
{
    ev_timer_stop(luna_loop(), &c->every_timer);
}

/* Reload: the same schedule keeps its next due time. */
void luna_controller_periodic_take(struct luna_controller *to, const struct luna_controller *from)
{
    const struct luna_controller_spec *a = to->spec, *b = from->spec;
    bool same = has_schedule(a) && a->every == b->every && a->jitter == b->jitter &&
                (a->every_cron ? b->every_cron && strcmp(a->every_cron, b->every_cron) == 0
                               : !b->every_cron);
    if (same && from->every_due > 0) {
        to->every_base = from->every_base;
        to->every_due = from->every_due;
    }
}

void luna_controller_periodic_init(struct luna_controller *c)
{
    ev_timer_init(&c->every_timer, periodic_cb, 0., 0.);
    c->every_rng = ((uint64_t)(uintptr_t)c ^ (uint64_t)(ev_time() * 1e6)) | 1;
}
