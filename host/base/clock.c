/* clock.c — see clock.h. */
#include "base/clock.h"

#include <math.h>
#include <time.h>

static double monotonic_now(void *ud)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const struct luna_clock monotonic = { monotonic_now, NULL };

const struct luna_clock *luna_clock_monotonic(void) { return &monotonic; }

static double realtime_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return (double)time(NULL);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The clock the wall clock follows, the wall time when it began to and
 * that clock's reading then. */
static struct {
    const struct luna_clock *clock;
    double wall0, clock0;
} wall;

double luna_wall_clock_now(void)
{
    if (!wall.clock)
        return realtime_now();
    return wall.wall0 + (luna_clock_now(wall.clock) - wall.clock0);
}

void luna_wall_clock_follow(const struct luna_clock *c)
{
    wall.clock = NULL;
    if (c) {
        wall.wall0 = realtime_now();
        wall.clock0 = luna_clock_now(c);
        wall.clock = c;
    }
}

static double fake_now(void *ud)
{
    return ((const struct luna_fake_clock *)ud)->now;
}

void luna_fake_clock_init(struct luna_fake_clock *fc, double start)
{
    fc->clock.now = fake_now;
    fc->clock.ud = fc;
    fc->now = isfinite(start) ? start : 0;
}

int luna_fake_clock_advance(struct luna_fake_clock *fc, double seconds,
                            luna_error *err)
{
    if (!isfinite(seconds) || seconds < 0)
        return luna_error_set(err, LUNA_EINVAL,
                              "fake clock: cannot advance by %g seconds "
                              "(want a finite number >= 0)", seconds);
    fc->now += seconds;
    return 0;
}

int luna_fake_clock_set(struct luna_fake_clock *fc, double t, luna_error *err)
{
    if (!isfinite(t) || t < fc->now)
        return luna_error_set(err, LUNA_EINVAL,
                              "fake clock: cannot set to %g (now %g; time "
                              "never moves backwards)", t, fc->now);
    fc->now = t;
    return 0;
}
