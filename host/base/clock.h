/*
 * clock.h — injectable time for the modules whose behaviour depends on it
 * (workqueue delays, rate limiters, backoff), so specs can step time instead
 * of sleeping.
 *
 * A clock is a function returning seconds plus its userdata.  Readings only
 * ever increase; they are comparable with each other, not with wall time.
 * Two clocks exist:
 *   - the monotonic clock: CLOCK_MONOTONIC.  Not ev_now(): libev's loop time
 *     follows the wall clock (and its jumps), while delays and token
 *     refills must not.  libev timers are relative and monotonic too, so a
 *     delay computed from this clock arms an ev_timer directly.
 *   - a fake clock: a number that changes only through
 *     luna_fake_clock_set/advance; it never moves backwards.
 *
 * Runs on the loop thread.  Ownership: luna_clock_monotonic() returns a
 * static clock, never freed.  A luna_fake_clock is caller-owned storage
 * (embed it or put it on the stack); modules that take a clock borrow it
 * until they are freed, so it must outlive them.
 */
#ifndef LUNA_CLOCK_H
#define LUNA_CLOCK_H

#include "base/error.h"

struct luna_clock {
    double (*now)(void *ud); /* seconds, never decreasing */
    void *ud;
};

static inline double luna_clock_now(const struct luna_clock *clock)
{
    return clock->now(clock->ud);
}

/* The process-wide monotonic clock (static; never freed). */
const struct luna_clock *luna_clock_monotonic(void);

/* A controllable clock.  `clock` is what modules borrow: &fc->clock. */
struct luna_fake_clock {
    struct luna_clock clock; /* clock.ud == this struct */
    double now;
};

/* The wall clock scripts read (luna.time.now, os.time, os.date): seconds
 * since the epoch, CLOCK_REALTIME; or, once luna_wall_clock_follow(c) was
 * called, the real time at that call plus how far c moved since (so under
 * `luna test` the wall clock steps with the fake clock and stands still
 * otherwise).  Process-wide, loop thread only. */
double luna_wall_clock_now(void);
/* c (borrowed for the rest of the process; NULL: back to CLOCK_REALTIME). */
void luna_wall_clock_follow(const struct luna_clock *c);

/* Starts the clock at `start` seconds (finite). */
void luna_fake_clock_init(struct luna_fake_clock *fc, double start);

/* Moves the clock forward by seconds (finite, >= 0); LUNA_EINVAL otherwise,
 * leaving the clock unchanged. */
int luna_fake_clock_advance(struct luna_fake_clock *fc, double seconds,
                            luna_error *err);

/* Sets the clock to t (finite, >= the current reading); LUNA_EINVAL
 * otherwise, leaving the clock unchanged. */
int luna_fake_clock_set(struct luna_fake_clock *fc, double t, luna_error *err);

#endif
