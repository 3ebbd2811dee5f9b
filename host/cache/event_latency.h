/*
 * event_latency.h — an optional probe for the controller runtime's event
 * latency: the time from a watch event reaching an informer (the reflector
 * pushing it into the DeltaFIFO) to the start of the reconcile for that
 * object's key.
 *
 * Uses: clock.h (the monotonic clock, or one a spec sets), uthash, log.  Runs on the loop
 * thread; process-wide state (one luna process has one loop).
 *
 * A second histogram measures from the moment the bytes carrying the event
 * reached the reflector (the watch chunk it was parsed from), so time an
 * event spends behind others of the same chunk counts too.
 *
 * Off by default: luna_event_latency_init() turns it on when the
 * environment has LUNA_EVENT_LATENCY=1 (`luna run` calls it).  While off,
 * each hook costs one branch on a global flag.  While on:
 *   - luna_event_latency_chunk() notes that a watch chunk arrived (the
 *     reflector calls it before parsing the chunk);
 *   - luna_event_latency_event(key) remembers when the first event for key
 *     arrived that no reconcile has started for yet, and the time of the
 *     chunk it came in (later events for the same key keep those times:
 *     the reconcile they wait for is the same);
 *   - luna_event_latency_reconcile(key) takes those times, if any, and adds
 *     now - then to the two histograms (1 µs buckets below 256 µs, then 128 per
 *     power of two: under 0.8% error), so memory stays bounded however
 *     long luna runs;
 *   - luna_event_latency_report() logs "event latency" with events, p50_ms,
 *     p90_ms, p99_ms, max_ms and mean_ms, then recv_p50_ms, recv_p99_ms
 *     and recv_max_ms from the chunk's arrival (`luna run` calls it at exit, and
 *     on SIGUSR1 followed by luna_event_latency_clear(), so a benchmark
 *     can leave out its warm-up).
 * Keys are "namespace/name".  An event whose key no reconcile starts for
 * (an owned child mapped to its owner, an event a predicate drops) stays
 * pending until more than LUNA_EVENT_LATENCY_MAX_PENDING keys are pending;
 * then those older than 60 s are dropped and counted as unmatched.
 *
 * Invariants:
 *   - a key is pending if and only if an event for it was recorded and no
 *     reconcile of it has started since (and it was not dropped);
 *   - count == the sum of the buckets of each histogram.
 *
 * Ownership: keys are borrowed for the call (the probe copies them).
 * luna_event_latency_reset() frees everything the probe holds.
 */
#ifndef LUNA_EVENT_LATENCY_H
#define LUNA_EVENT_LATENCY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/clock.h"

#define LUNA_EVENT_LATENCY_MAX_PENDING 100000

extern bool luna_event_latency_on;

struct luna_event_latency_stats {
    double p50, p90, p99; /* seconds: the upper bound of the bucket holding
                             the percentile, at most max (0 when empty) */
    double max, mean;     /* seconds, exact */
};

struct luna_event_latency_summary {
    uint64_t count;       /* latencies recorded */
    uint64_t unmatched;   /* pending keys dropped without a reconcile */
    uint64_t pending;     /* keys waiting for their reconcile now */
    struct luna_event_latency_stats handoff;  /* informer hand-off → start */
    struct luna_event_latency_stats received; /* chunk arrival → start */
};

/* Reads LUNA_EVENT_LATENCY: "1" turns the probe on, "0" or unset leaves it
 * off; any other value logs a warning and leaves it off. */
void luna_event_latency_init(void);
/* Turns the probe on or off (specs, tools); the data is kept. */
void luna_event_latency_enable(bool on);
/* The clock the probe reads; NULL restores the monotonic clock.  Borrowed
 * until replaced. */
void luna_event_latency_set_clock(const struct luna_clock *clock);

void luna_event_latency_record_chunk(void);
void luna_event_latency_record_event(const char *key);
void luna_event_latency_record_reconcile(const char *key);

/* The hooks the reflector and the controller call. */
static inline void luna_event_latency_chunk(void)
{
    if (luna_event_latency_on)
        luna_event_latency_record_chunk();
}
static inline void luna_event_latency_event(const char *key)
{
    if (luna_event_latency_on)
        luna_event_latency_record_event(key);
}
static inline void luna_event_latency_reconcile(const char *key)
{
    if (luna_event_latency_on)
        luna_event_latency_record_reconcile(key);
}

/* Adds one observation (seconds, negative counts as 0) to the histograms
 * directly: handoff and received. */
void luna_event_latency_observe(double handoff, double received);

void luna_event_latency_summary(struct luna_event_latency_summary *out);
/* Logs the summary (INFO "event latency") if the probe is on. */
void luna_event_latency_report(void);
/* Empties the histogram; pending keys stay (their reconciles count in the
 * next report). */
void luna_event_latency_clear(void);
/* Forgets every pending key and the histogram; the on/off flag stays. */
void luna_event_latency_reset(void);

#endif
