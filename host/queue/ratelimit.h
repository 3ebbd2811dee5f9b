/*
 * ratelimit.h — rate limiters: how long to wait before retrying a key.
 *
 * The semantics of client-go's util/workqueue default_rate_limiters.go,
 * with time from an injectable clock (clock.h) and delays in seconds:
 *
 *   exponential  per key: base_delay * 2^failures, capped at max_delay
 *                (defaults 5 ms, 1000 s).  Every when() counts one failure;
 *                forget() resets the key.  Never overflows: the exponent
 *                saturates and the delay is capped in floating point.
 *   bucket       one token bucket for all keys (qps, burst; defaults 10,
 *                100), with golang.org/x/time/rate's reservation semantics:
 *                the bucket starts full and refills at qps tokens/s up to
 *                burst; each when() takes one token, going into debt if
 *                none is left, and returns the time until that token exists
 *                (0 while tokens remain).  forget() does nothing;
 *                num_requeues() is 0.  qps = +inf means unlimited.
 *   fast_slow    per key: fast_delay for the first max_fast_attempts
 *                failures, slow_delay after (no defaults: all three are
 *                required).
 *   max_of       the largest of its children's delays (every child's when()
 *                is called, so each records the failure); forget() forgets
 *                in all; num_requeues() is the largest of the children's.
 *   default      max_of(exponential(5 ms, 1000 s), bucket(10 qps, 100)),
 *                with any of the four numbers overridden.
 *
 * Runs on the loop thread.  Invariant (per-key limiters): a key has a
 * failure record if and only if when() was called for it since its last
 * forget(); num_requeues() is the number of those calls (saturating at
 * UINT_MAX).
 *
 * Ownership: constructors return a limiter owned by the caller, freed with
 * luna_ratelimit_free().  Keys are borrowed for the call (per-key limiters
 * copy the keys they remember).  The clock is borrowed until the limiter is
 * freed.  max_of takes ownership of its children.
 */
#ifndef LUNA_RATELIMIT_H
#define LUNA_RATELIMIT_H

#include <stddef.h>

#include "base/clock.h"
#include "base/error.h"

#define LUNA_RATELIMIT_DEFAULT_BASE_DELAY 0.005
#define LUNA_RATELIMIT_DEFAULT_MAX_DELAY  1000.0
#define LUNA_RATELIMIT_DEFAULT_QPS        10.0
#define LUNA_RATELIMIT_DEFAULT_BURST      100

struct luna_ratelimit;

/* The interface; implementations embed struct luna_ratelimit first. */
struct luna_ratelimit_ops {
    /* Delay in seconds (finite, >= 0) before the key should be retried. */
    double (*when)(struct luna_ratelimit *rl, const char *key);
    void (*forget)(struct luna_ratelimit *rl, const char *key);
    unsigned (*num_requeues)(struct luna_ratelimit *rl, const char *key);
    void (*free)(struct luna_ratelimit *rl);
};

struct luna_ratelimit {
    const struct luna_ratelimit_ops *ops;
};

static inline double luna_ratelimit_when(struct luna_ratelimit *rl,
                                           const char *key)
{
    return rl->ops->when(rl, key);
}
static inline void luna_ratelimit_forget(struct luna_ratelimit *rl,
                                           const char *key)
{
    rl->ops->forget(rl, key);
}
static inline unsigned luna_ratelimit_num_requeues(struct luna_ratelimit *rl,
                                                     const char *key)
{
    return rl->ops->num_requeues(rl, key);
}
/* NULL is a no-op. */
void luna_ratelimit_free(struct luna_ratelimit *rl);

enum luna_ratelimit_kind {
    LUNA_RATELIMIT_DEFAULT,
    LUNA_RATELIMIT_EXPONENTIAL,
    LUNA_RATELIMIT_BUCKET,
    LUNA_RATELIMIT_FAST_SLOW,
    LUNA_RATELIMIT_MAX_OF,
};

/* A limiter description (from Lua or a controller file).  Fields that the
 * kind does not use are ignored. */
struct luna_ratelimit_config {
    enum luna_ratelimit_kind kind;
    double base_delay, max_delay;       /* default, exponential */
    double qps;                         /* default, bucket */
    double burst;                       /* default, bucket: an integer >= 1 */
    double fast_delay, slow_delay;      /* fast_slow */
    double max_fast_attempts;           /* fast_slow: an integer >= 0 */
    const struct luna_ratelimit_config *children; /* max_of: borrowed */
    size_t n_children;                  /* max_of: >= 1 */
};

/* Fills cfg with kind and the defaults above (children empty; the
 * fast_slow fields NaN, so they must be set). */
void luna_ratelimit_config_init(struct luna_ratelimit_config *cfg,
                                enum luna_ratelimit_kind kind);

/* "default", "exponential", "bucket", "fast_slow", "max_of"; -1 if unknown. */
int luna_ratelimit_kind_parse(const char *name);
const char *luna_ratelimit_kind_name(enum luna_ratelimit_kind kind);

/* Checks every number (delays finite and >= 0, qps > 0, burst an integer
 * >= 1, ...), then builds the limiter into *out.  LUNA_EINVAL with the
 * offending field named in err, or LUNA_ENOMEM; *out is untouched then. */
int luna_ratelimit_new(const struct luna_ratelimit_config *cfg,
                         const struct luna_clock *clock,
                         struct luna_ratelimit **out, luna_error *err);

/* The individual constructors (arguments already valid as above). */
int luna_ratelimit_exponential_new(double base_delay, double max_delay,
                                     struct luna_ratelimit **out,
                                     luna_error *err);
int luna_ratelimit_bucket_new(const struct luna_clock *clock, double qps,
                                unsigned burst, struct luna_ratelimit **out,
                                luna_error *err);
int luna_ratelimit_fast_slow_new(double fast_delay, double slow_delay,
                                   unsigned max_fast_attempts,
                                   struct luna_ratelimit **out,
                                   luna_error *err);
/* Takes ownership of children[0..n) (n >= 1) even when it fails; the array
 * itself is borrowed for the call. */
int luna_ratelimit_max_of_new(struct luna_ratelimit *const *children,
                                size_t n, struct luna_ratelimit **out,
                                luna_error *err);

#endif
