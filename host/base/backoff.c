/* backoff.c — see backoff.h. */
#include "base/backoff.h"

#include <time.h>

void luna_backoff_init(struct luna_backoff *b, double base, double max, double factor,
                       double jitter, double reset_after, uint64_t seed)
{
    b->base = base;
    b->max = max;
    b->factor = factor;
    b->jitter = jitter;
    b->reset_after = reset_after;
    b->current = 0;
    b->last_failure = 0;
    b->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

void luna_backoff_init_default(struct luna_backoff *b)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec * 0x2545f4914f6cdd1dull ^ (uint64_t)(uintptr_t)b;
    luna_backoff_init(b, 0.8, 30.0, 2.0, 1.0, 120.0, seed);
}

double luna_backoff_random(struct luna_backoff *b)
{
    /* xorshift64*: good enough for jitter, and reproducible in specs. */
    uint64_t x = b->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    b->rng = x;
    return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

double luna_backoff_next(struct luna_backoff *b, double now)
{
    if (b->current == 0 || now - b->last_failure >= b->reset_after)
        b->current = b->base;
    else if (b->current < b->max)
        b->current = b->current * b->factor < b->max ? b->current * b->factor : b->max;
    b->last_failure = now;
    double delay = b->current;
    if (b->jitter > 0)
        delay += delay * b->jitter * luna_backoff_random(b);
    return delay;
}

void luna_backoff_reset(struct luna_backoff *b)
{
    b->current = 0;
}
