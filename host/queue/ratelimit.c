/* ratelimit.c — see ratelimit.h. */
#include "queue/ratelimit.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

void luna_ratelimit_free(struct luna_ratelimit *rl)
{
    if (rl)
        rl->ops->free(rl);
}

/* ---- per-key failure counts (exponential, fast_slow) -------------------- */

/* A record exists if and only if the key failed since its last forget. */
struct failure {
    UT_hash_handle hh;
    unsigned count; /* >= 1, saturating at UINT_MAX */
    char key[];
};

static unsigned failures_get(struct failure *head, const char *key)
{
    struct failure *f;
    HASH_FIND_STR(head, key, f);
    return f ? f->count : 0;
}

/* Records one more failure; returns the count before it.  Out of memory the
 * failure goes unrecorded and UINT_MAX is returned (the longest delay). */
static unsigned failures_incr(struct failure **head, const char *key)
{
    struct failure *f;
    HASH_FIND_STR(*head, key, f);
    if (f) {
        unsigned before = f->count;
        if (f->count < UINT_MAX)
            f->count++;
        return before;
    }
    size_t len = strlen(key);
    f = malloc(sizeof *f + len + 1);
    if (!f)
        return UINT_MAX;
    memcpy(f->key, key, len + 1);
    f->count = 1;
    HASH_ADD_KEYPTR(hh, *head, f->key, len, f);
    return 0;
}

static void failures_forget(struct failure **head, const char *key)
{
    struct failure *f;
    HASH_FIND_STR(*head, key, f);
    if (f) {
        HASH_DEL(*head, f);
        free(f);
    }
}

static void failures_clear(struct failure **head)
{
    struct failure *f, *tmp;
    HASH_ITER(hh, *head, f, tmp) {
        HASH_DEL(*head, f);
        free(f);
    }
}

/* ---- exponential ---------------------------------------------------------- */

struct exponential {
    struct luna_ratelimit base;
    double base_delay, max_delay;
    struct failure *failures;
};

static double exponential_when(struct luna_ratelimit *rl, const char *key)
{
    struct exponential *e = (struct exponential *)rl;
    unsigned before = failures_incr(&e->failures, key);
    /* 2^1100 already overflows a double: clamp the exponent so the int
     * conversion is defined; ldexp then returns +inf (or 0 for base 0),
     * never NaN, and the cap applies. */
    int exp = before > 1100 ? 1100 : (int)before;
    double delay = ldexp(e->base_delay, exp);
    return delay > e->max_delay ? e->max_delay : delay;
}

static void exponential_forget(struct luna_ratelimit *rl, const char *key)
{
    failures_forget(&((struct exponential *)rl)->failures, key);
}

static unsigned exponential_num_requeues(struct luna_ratelimit *rl,
                                         const char *key)
{
    return failures_get(((struct exponential *)rl)->failures, key);
}

static void exponential_free(struct luna_ratelimit *rl)
{
    struct exponential *e = (struct exponential *)rl;
    failures_clear(&e->failures);
    free(e);
}

static const struct luna_ratelimit_ops exponential_ops = {
    exponential_when, exponential_forget, exponential_num_requeues,
    exponential_free,
};

int luna_ratelimit_exponential_new(double base_delay, double max_delay,
                                     struct luna_ratelimit **out,
                                     luna_error *err)
{
    struct exponential *e = calloc(1, sizeof *e);
    if (!e)
        return luna_error_set(err, LUNA_ENOMEM, "exponential rate limiter: out of memory");
    e->base.ops = &exponential_ops;
    e->base_delay = base_delay;
    e->max_delay = max_delay;
    *out = &e->base;
    return 0;
}

/* ---- token bucket --------------------------------------------------------- */

struct bucket {
    struct luna_ratelimit base;
    const struct luna_clock *clock;
    double qps;
    double burst;
    double tokens;  /* may be negative: tokens already promised */
    double last;    /* clock reading tokens was computed at */
    int started;    /* the bucket starts full at the first when() */
};

static double bucket_when(struct luna_ratelimit *rl, const char *key)
{
    struct bucket *b = (struct bucket *)rl;
    if (isinf(b->qps))
        return 0;
    double now = luna_clock_now(b->clock);
    if (!b->started) {
        b->started = 1;
        b->tokens = b->burst;
    } else if (now > b->last) {
        b->tokens += (now - b->last) * b->qps;
        if (b->tokens > b->burst)
            b->tokens = b->burst;
    }
    b->last = now;
    b->tokens -= 1;
    return b->tokens < 0 ? -b->tokens / b->qps : 0;
}

static void bucket_forget(struct luna_ratelimit *rl, const char *key) {}

static unsigned bucket_num_requeues(struct luna_ratelimit *rl, const char *key)
{
    return 0;
}

static void bucket_free(struct luna_ratelimit *rl) { free(rl); }

static const struct luna_ratelimit_ops bucket_ops = {
    bucket_when, bucket_forget, bucket_num_requeues, bucket_free,
};

int luna_ratelimit_bucket_new(const struct luna_clock *clock, double qps,
                                unsigned burst, struct luna_ratelimit **out,
                                luna_error *err)
{
    struct bucket *b = calloc(1, sizeof *b);
    if (!b)
        return luna_error_set(err, LUNA_ENOMEM, "bucket rate limiter: out of memory");
    b->base.ops = &bucket_ops;
    b->clock = clock;
    b->qps = qps;
    b->burst = burst;
    *out = &b->base;
    return 0;
}

/* ---- fast/slow ------------------------------------------------------------ */

struct fast_slow {
    struct luna_ratelimit base;
    double fast_delay, slow_delay;
    unsigned max_fast_attempts;
    struct failure *failures;
};

static double fast_slow_when(struct luna_ratelimit *rl, const char *key)
{
    struct fast_slow *fs = (struct fast_slow *)rl;
    unsigned before = failures_incr(&fs->failures, key);
    return before < fs->max_fast_attempts ? fs->fast_delay : fs->slow_delay;
}

static void fast_slow_forget(struct luna_ratelimit *rl, const char *key)
{
    failures_forget(&((struct fast_slow *)rl)->failures, key);
}

static unsigned fast_slow_num_requeues(struct luna_ratelimit *rl,
                                       const char *key)
{
    return failures_get(((struct fast_slow *)rl)->failures, key);
}

static void fast_slow_free(struct luna_ratelimit *rl)
{
    struct fast_slow *fs = (struct fast_slow *)rl;
    failures_clear(&fs->failures);
    free(fs);
}

static const struct luna_ratelimit_ops fast_slow_ops = {
    fast_slow_when, fast_slow_forget, fast_slow_num_requeues, fast_slow_free,
};

int luna_ratelimit_fast_slow_new(double fast_delay, double slow_delay,
                                   unsigned max_fast_attempts,
                                   struct luna_ratelimit **out,
                                   luna_error *err)
{
    struct fast_slow *fs = calloc(1, sizeof *fs);
    if (!fs)
        return luna_error_set(err, LUNA_ENOMEM, "fast_slow rate limiter: out of memory");
    fs->base.ops = &fast_slow_ops;
    fs->fast_delay = fast_delay;
    fs->slow_delay = slow_delay;
    fs->max_fast_attempts = max_fast_attempts;
    *out = &fs->base;
    return 0;
}

/* ---- max of --------------------------------------------------------------- */

struct max_of {
    struct luna_ratelimit base;
    size_t n;
    struct luna_ratelimit *children[]; /* owned */
};

static double max_of_when(struct luna_ratelimit *rl, const char *key)
{
    struct max_of *m = (struct max_of *)rl;
    double delay = 0;
    for (size_t i = 0; i < m->n; i++) {
        double d = luna_ratelimit_when(m->children[i], key);
        if (d > delay)
            delay = d;
    }
    return delay;
}

static void max_of_forget(struct luna_ratelimit *rl, const char *key)
{
    struct max_of *m = (struct max_of *)rl;
    for (size_t i = 0; i < m->n; i++)
        luna_ratelimit_forget(m->children[i], key);
}

static unsigned max_of_num_requeues(struct luna_ratelimit *rl, const char *key)
{
    struct max_of *m = (struct max_of *)rl;
    unsigned most = 0;
    for (size_t i = 0; i < m->n; i++) {
        unsigned r = luna_ratelimit_num_requeues(m->children[i], key);
        if (r > most)
            most = r;
    }
    return most;
}

static void max_of_free(struct luna_ratelimit *rl)
{
    struct max_of *m = (struct max_of *)rl;
    for (size_t i = 0; i < m->n; i++)
        luna_ratelimit_free(m->children[i]);
    free(m);
}

static const struct luna_ratelimit_ops max_of_ops = {
    max_of_when, max_of_forget, max_of_num_requeues, max_of_free,
};

int luna_ratelimit_max_of_new(struct luna_ratelimit *const *children,
                                size_t n, struct luna_ratelimit **out,
                                luna_error *err)
{
    struct max_of *m = NULL;
    if (n >= 1 && n <= (SIZE_MAX - sizeof *m) / sizeof m->children[0])
        m = malloc(sizeof *m + n * sizeof m->children[0]);
    if (!m) {
        for (size_t i = 0; i < n; i++)
            luna_ratelimit_free(children[i]);
        if (n == 0)
            return luna_error_set(err, LUNA_EINVAL, "max_of rate limiter: needs at least one child");
        return luna_error_set(err, LUNA_ENOMEM, "max_of rate limiter: out of memory");
    }
    m->base.ops = &max_of_ops;
    m->n = n;
    memcpy(m->children, children, n * sizeof children[0]);
    *out = &m->base;
    return 0;
}

/* ---- configuration -------------------------------------------------------- */

static const char *const kind_names[] = {
    [LUNA_RATELIMIT_DEFAULT] = "default",
    [LUNA_RATELIMIT_EXPONENTIAL] = "exponential",
    [LUNA_RATELIMIT_BUCKET] = "bucket",
    [LUNA_RATELIMIT_FAST_SLOW] = "fast_slow",
    [LUNA_RATELIMIT_MAX_OF] = "max_of",
};

int luna_ratelimit_kind_parse(const char *name)
{
    for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++)
        if (strcmp(name, kind_names[i]) == 0)
            return (int)i;
    return -1;
}

const char *luna_ratelimit_kind_name(enum luna_ratelimit_kind kind)
{
    if ((size_t)kind < sizeof kind_names / sizeof kind_names[0])
        return kind_names[kind];
    return "unknown";
}

void luna_ratelimit_config_init(struct luna_ratelimit_config *cfg,
                                enum luna_ratelimit_kind kind)
{
    *cfg = (struct luna_ratelimit_config){
        .kind = kind,
        .base_delay = LUNA_RATELIMIT_DEFAULT_BASE_DELAY,
        .max_delay = LUNA_RATELIMIT_DEFAULT_MAX_DELAY,
        .qps = LUNA_RATELIMIT_DEFAULT_QPS,
        .burst = LUNA_RATELIMIT_DEFAULT_BURST,
        /* fast_slow has no defaults (client-go has none either): NaN fails
         * the checks until the caller sets them. */
        .fast_delay = NAN,
        .slow_delay = NAN,
        .max_fast_attempts = NAN,
    };
}

static int check_delay(const char *kind, const char *field, double v,
                       luna_error *err)
{
    if (isfinite(v) && v >= 0)
        return 0;
    return luna_error_set(err, LUNA_EINVAL,
                          "%s rate limiter: %s must be a finite number of "
                          "seconds >= 0, got %g", kind, field, v);
}

static int check_count(const char *kind, const char *field, double v,
                       double min, luna_error *err)
{
    if (v >= min && v <= UINT_MAX && v == floor(v))
        return 0;
    return luna_error_set(err, LUNA_EINVAL,
                          "%s rate limiter: %s must be an integer from %g to "
                          "%u, got %g", kind, field, min, UINT_MAX, v);
}

static int check_delays(const char *kind, const struct luna_ratelimit_config *cfg,
                        luna_error *err)
{
    int rc = check_delay(kind, "base_delay", cfg->base_delay, err);
    return rc ? rc : check_delay(kind, "max_delay", cfg->max_delay, err);
}

static int check_bucket(const char *kind, const struct luna_ratelimit_config *cfg,
                        luna_error *err)
{
    if (!(cfg->qps > 0)) /* also rejects NaN; +inf means unlimited */
        return luna_error_set(err, LUNA_EINVAL,
                              "%s rate limiter: qps must be > 0, got %g",
                              kind, cfg->qps);
    return check_count(kind, "burst", cfg->burst, 1, err);
}

static int check_config(const struct luna_ratelimit_config *cfg, luna_error *err)
{
    const char *kind = luna_ratelimit_kind_name(cfg->kind);
    int rc = 0;
    switch (cfg->kind) {
    case LUNA_RATELIMIT_DEFAULT:
        if ((rc = check_delays(kind, cfg, err)))
            return rc;
        return check_bucket(kind, cfg, err);
    case LUNA_RATELIMIT_EXPONENTIAL:
        return check_delays(kind, cfg, err);
    case LUNA_RATELIMIT_BUCKET:
        return check_bucket(kind, cfg, err);
    case LUNA_RATELIMIT_FAST_SLOW:
        if ((rc = check_delay(kind, "fast_delay", cfg->fast_delay, err)) ||
            (rc = check_delay(kind, "slow_delay", cfg->slow_delay, err)))
            return rc;
        return check_count(kind, "max_fast_attempts", cfg->max_fast_attempts, 0, err);
    case LUNA_RATELIMIT_MAX_OF:
        if (cfg->n_children == 0)
            return luna_error_set(err, LUNA_EINVAL,
                                  "max_of rate limiter: needs at least one child");
        for (size_t i = 0; i < cfg->n_children; i++)
            if ((rc = check_config(&cfg->children[i], err)))
                return rc;
        return 0;
    }
    return luna_error_set(err, LUNA_EINVAL, "rate limiter: unknown kind %d", (int)cfg->kind);
}

static int build(const struct luna_ratelimit_config *cfg,
                 const struct luna_clock *clock, struct luna_ratelimit **out,
                 luna_error *err)
{
    switch (cfg->kind) {
    case LUNA_RATELIMIT_EXPONENTIAL:
        return luna_ratelimit_exponential_new(cfg->base_delay, cfg->max_delay, out, err);
    case LUNA_RATELIMIT_BUCKET:
        return luna_ratelimit_bucket_new(clock, cfg->qps, (unsigned)cfg->burst, out, err);
    case LUNA_RATELIMIT_FAST_SLOW:
        return luna_ratelimit_fast_slow_new(cfg->fast_delay, cfg->slow_delay,
                                              (unsigned)cfg->max_fast_attempts, out, err);
    case LUNA_RATELIMIT_DEFAULT: {
        struct luna_ratelimit *kids[2] = { NULL, NULL };
        int rc = luna_ratelimit_exponential_new(cfg->base_delay, cfg->max_delay,
                                                  &kids[0], err);
        if (rc == 0)
            rc = luna_ratelimit_bucket_new(clock, cfg->qps, (unsigned)cfg->burst,
                                             &kids[1], err);
        if (rc) {
            luna_ratelimit_free(kids[0]);
            return rc;
        }
        return luna_ratelimit_max_of_new(kids, 2, out, err);
    }
    case LUNA_RATELIMIT_MAX_OF: {
        struct luna_ratelimit **kids = calloc(cfg->n_children, sizeof *kids);
        if (!kids)
            return luna_error_set(err, LUNA_ENOMEM, "max_of rate limiter: out of memory");
        int rc = 0;
        for (size_t i = 0; i < cfg->n_children && rc == 0; i++)
            rc = build(&cfg->children[i], clock, &kids[i], err);
        if (rc) {
            for (size_t i = 0; i < cfg->n_children; i++)
                luna_ratelimit_free(kids[i]);
        } else {
            rc = luna_ratelimit_max_of_new(kids, cfg->n_children, out, err);
        }
        free(kids);
        return rc;
    }
    }
    return luna_error_set(err, LUNA_EINVAL, "rate limiter: unknown kind %d", (int)cfg->kind);
}

int luna_ratelimit_new(const struct luna_ratelimit_config *cfg,
                         const struct luna_clock *clock,
                         struct luna_ratelimit **out, luna_error *err)
{
    int rc = check_config(cfg, err);
    return rc ? rc : build(cfg, clock, out, err);
}
