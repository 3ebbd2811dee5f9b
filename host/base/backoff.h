/*
 * backoff.h — exponential backoff with jitter, as client-go's reflector uses
 * (wait.NewExponentialBackoffManager(800ms, 30s, 2min, 2.0, 1.0)).
 *
 * Each failure returns the next delay: base, then doubling up to max, each
 * stretched by a random factor in [1, 1 + jitter).  After `reset_after`
 * seconds without a failure the next delay starts from base again, so a
 * connection that worked for a while is retried quickly.
 *
 * Time comes in as arguments (seconds on any monotonic clock) so specs can
 * step it; randomness comes from a small per-instance generator that specs
 * can seed.  Pure data: no allocation, no loop use.
 */
#ifndef LUNA_BACKOFF_H
#define LUNA_BACKOFF_H

#include <stdint.h>

struct luna_backoff {
    double base, max, factor, jitter, reset_after;
    double current;       /* the un-jittered delay of the last failure; 0 = none yet */
    double last_failure;  /* time of the last failure */
    uint64_t rng;         /* xorshift state, never 0 */
};

/* client-go's reflector defaults, seeded from the clock and address. */
void luna_backoff_init_default(struct luna_backoff *b);
void luna_backoff_init(struct luna_backoff *b, double base, double max, double factor,
                       double jitter, double reset_after, uint64_t seed);

/* Records a failure at `now` and returns how long to wait before retrying. */
double luna_backoff_next(struct luna_backoff *b, double now);
/* Forgets past failures (after a success that proves the peer is healthy). */
void luna_backoff_reset(struct luna_backoff *b);

/* A uniform random number in [0, 1) from the instance's generator. */
double luna_backoff_random(struct luna_backoff *b);

#endif
