/* event_latency.c — see event_latency.h. */
#include "cache/event_latency.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "base/log.h"

/* Histogram: values in whole microseconds.  Below 256 µs one bucket per
 * microsecond; above, each power of two [2^e, 2^(e+1)) is split into 128
 * equal buckets.  Values from 2^MAX_EXP µs (12 days) on share the top. */
#define LINEAR 256
#define SUB 128
#define SUB_BITS 7
#define MAX_EXP 40
#define NBUCKETS (LINEAR + (MAX_EXP - 8) * SUB)

#define SWEEP_AGE 60.0      /* seconds a pending key may wait before a sweep drops it */
#define SWEEP_INTERVAL 60.0

struct pending {
    double t0, t_chunk;
    UT_hash_handle hh;
    char key[];
};

bool luna_event_latency_on;

struct histogram {
    uint64_t *buckets;      /* NBUCKETS, allocated on the first observation */
    double sum, max;
};

static struct {
    struct pending *pending;
    struct histogram handoff, received;
    uint64_t count, unmatched;
    double chunk;           /* when the current watch chunk arrived */
    double last_sweep;
} st;

static const struct luna_clock *clk;

static double now_s(void)
{
    return luna_clock_now(clk ? clk : luna_clock_monotonic());
}

void luna_event_latency_set_clock(const struct luna_clock *clock) { clk = clock; }

static int bucket_of(uint64_t us)
{
    if (us < LINEAR)
        return (int)us;
    int e = 63 - __builtin_clzll(us);
    if (e >= MAX_EXP)
        return NBUCKETS - 1;
    int shift = e - SUB_BITS;
    return LINEAR + (e - 8) * SUB + (int)((us >> shift) - SUB);
}

/* The first microsecond above bucket b. */
static uint64_t bucket_upper(int b)
{
    if (b < LINEAR)
        return (uint64_t)b + 1;
    int e = 8 + (b - LINEAR) / SUB;
    int sub = (b - LINEAR) % SUB;
    return (uint64_t)(SUB + sub + 1) << (e - SUB_BITS);
}

void luna_event_latency_enable(bool on) { luna_event_latency_on = on; }

void luna_event_latency_init(void)
{
    const char *v = getenv("LUNA_EVENT_LATENCY");
    if (!v || !*v || strcmp(v, "0") == 0) {
        luna_event_latency_on = false;
    } else if (strcmp(v, "1") == 0) {
        luna_event_latency_on = true;
        luna_info("event latency probe on");
    } else {
        luna_event_latency_on = false;
        luna_warn("LUNA_EVENT_LATENCY ignored", "value", v, "expected", "0 or 1");
    }
}

static void add(struct histogram *h, double seconds)
{
    if (!(seconds > 0))
        seconds = 0;
    double us = seconds * 1e6;
    h->buckets[bucket_of(us >= 0x1p62 ? (uint64_t)1 << 62 : (uint64_t)us)]++;
    h->sum += seconds;
    if (seconds > h->max)
        h->max = seconds;
}

void luna_event_latency_observe(double handoff, double received)
{
    if (!st.handoff.buckets && !(st.handoff.buckets = calloc(NBUCKETS, sizeof(uint64_t))))
        return;
    if (!st.received.buckets && !(st.received.buckets = calloc(NBUCKETS, sizeof(uint64_t))))
        return;
    add(&st.handoff, handoff);
    add(&st.received, received);
    st.count++;
}

static void sweep(double now)
{
    st.last_sweep = now;
    struct pending *p, *tmp;
    HASH_ITER(hh, st.pending, p, tmp) {
        if (now - p->t0 > SWEEP_AGE) {
            HASH_DEL(st.pending, p);
            free(p);
            st.unmatched++;
        }
    }
}

void luna_event_latency_record_chunk(void) { st.chunk = now_s(); }

void luna_event_latency_record_event(const char *key)
{
    struct pending *p;
    size_t len = strlen(key);
    HASH_FIND(hh, st.pending, key, len, p);
    if (p)
        return;
    double now = now_s();
    if (HASH_COUNT(st.pending) >= LUNA_EVENT_LATENCY_MAX_PENDING &&
        now - st.last_sweep > SWEEP_INTERVAL)
        sweep(now);
    if (!(p = malloc(sizeof *p + len + 1)))
        return;
    memcpy(p->key, key, len + 1);
    p->t0 = now;
    p->t_chunk = st.chunk > 0 && st.chunk <= now ? st.chunk : now;
    HASH_ADD_KEYPTR(hh, st.pending, p->key, len, p);
}

void luna_event_latency_record_reconcile(const char *key)
{
    struct pending *p;
    HASH_FIND(hh, st.pending, key, strlen(key), p);
    if (!p)
        return;
    double now = now_s();
    luna_event_latency_observe(now - p->t0, now - p->t_chunk);
    HASH_DEL(st.pending, p);
    free(p);
}

static double percentile(const struct histogram *h, double q)
{
    if (!st.count || !h->buckets)
        return 0;
    /* The rank of the q-quantile, 1-based: the smallest value with at
     * least q * count values at or below it. */
    uint64_t rank = (uint64_t)(q * (double)st.count + 0.999999);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        seen += h->buckets[b];
        if (seen >= rank) {
            double upper = (double)bucket_upper(b) / 1e6;
            return upper < h->max ? upper : h->max;
        }
    }
    return h->max;
}

static void stats(const struct histogram *h, struct luna_event_latency_stats *out)
{
    out->p50 = percentile(h, 0.50);
    out->p90 = percentile(h, 0.90);
    out->p99 = percentile(h, 0.99);
    out->max = h->max;
    out->mean = st.count ? h->sum / (double)st.count : 0;
}

void luna_event_latency_summary(struct luna_event_latency_summary *out)
{
    memset(out, 0, sizeof *out);
    out->count = st.count;
    out->unmatched = st.unmatched;
    out->pending = HASH_COUNT(st.pending);
    stats(&st.handoff, &out->handoff);
    stats(&st.received, &out->received);
}

void luna_event_latency_report(void)
{
    if (!luna_event_latency_on)
        return;
    struct luna_event_latency_summary s;
    luna_event_latency_summary(&s);
    char events[24], unmatched[24], pending[24], v[8][32];
    snprintf(events, sizeof events, "%llu", (unsigned long long)s.count);
    snprintf(unmatched, sizeof unmatched, "%llu", (unsigned long long)s.unmatched);
    snprintf(pending, sizeof pending, "%llu", (unsigned long long)s.pending);
    const double ms[8] = { s.handoff.p50, s.handoff.p90, s.handoff.p99, s.handoff.max,
                           s.handoff.mean, s.received.p50, s.received.p99, s.received.max };
    for (int i = 0; i < 8; i++)
        snprintf(v[i], sizeof v[i], "%.3f", ms[i] * 1e3);
    luna_info("event latency", LUNA_LOG_NUM("events"), events, LUNA_LOG_NUM("p50_ms"), v[0],
              LUNA_LOG_NUM("p90_ms"), v[1], LUNA_LOG_NUM("p99_ms"), v[2], LUNA_LOG_NUM("max_ms"),
              v[3], LUNA_LOG_NUM("mean_ms"), v[4], LUNA_LOG_NUM("recv_p50_ms"), v[5],
              LUNA_LOG_NUM("recv_p99_ms"), v[6], LUNA_LOG_NUM("recv_max_ms"), v[7],
              LUNA_LOG_NUM("pending"), pending, LUNA_LOG_NUM("unmatched"), unmatched);
}

void luna_event_latency_clear(void)
{
    struct histogram *hs[2] = { &st.handoff, &st.received };
    for (int i = 0; i < 2; i++) {
        if (hs[i]->buckets)
            memset(hs[i]->buckets, 0, NBUCKETS * sizeof(uint64_t));
        hs[i]->sum = hs[i]->max = 0;
    }
    st.count = st.unmatched = 0;
}

void luna_event_latency_reset(void)
{
    struct pending *p, *tmp;
    HASH_ITER(hh, st.pending, p, tmp) {
        HASH_DEL(st.pending, p);
        free(p);
    }
    free(st.handoff.buckets);
    free(st.received.buckets);
    memset(&st, 0, sizeof st);
}
