/*
 * bench/workqueue.c — workqueue cycles per second on one core.
 *
 * A cycle is what a trivial reconcile costs the queue: add (enqueue), get,
 * done.  Real monotonic clock (three clock reads per cycle), default rate
 * limiter, no loop.  Prints one `bench <name> key=value ...` line per case:
 *
 *   workqueue_cycle          N distinct keys added, then all taken and done
 *   workqueue_cycle_repeat   the same 1,000 keys, each added three times per
 *                            cycle (two dedupes), taken and done
 *   workqueue_cycle_steady   queue held at N keys: each cycle adds one new
 *                            key and takes and finishes the oldest
 *   workqueue_delayed        N keys through add_after (fake clock, random
 *                            delays up to 10 s), ticked in 10 ms steps
 *   workqueue_rate_limited   add_rate_limited + get + done + forget on a
 *                            fake clock (the default limiter, stepped 1 ms)
 *   workqueue_cycle_fifo     workqueue_cycle on a queue without priorities
 *                            (options.fifo): what priorities cost
 *   workqueue_priority_mixed N keys at priority -100 (a first list) with a
 *                            live key at 0 after every tenth, then all
 *                            taken and done (live keys first)
 *   workqueue_priority_raise N keys at -100, each added again at 0 (moved
 *                            to the other priority), then taken and done
 *
 * Every queue but the fifo one has priorities on (the default).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "queue/workqueue.h"

#define N_KEYS 100000
#define MIN_SECONDS 1.0

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char (*keys)[32];

static struct luna_workqueue *new_queue_opts(const struct luna_clock *clock, bool fifo)
{
    struct luna_workqueue *q;
    struct luna_workqueue_options opts = { .name = "bench", .clock = clock, .fifo = fifo };
    luna_error err;
    if (luna_workqueue_new(&opts, &q, &err)) {
        fprintf(stderr, "bench: %s\n", err.msg);
        exit(1);
    }
    return q;
}

static struct luna_workqueue *new_queue(const struct luna_clock *clock)
{
    return new_queue_opts(clock, false);
}

static void take_done(struct luna_workqueue *q)
{
    const char *k;
    if (luna_workqueue_get(q, &k) != LUNA_WORKQUEUE_ITEM) {
        fputs("bench: queue unexpectedly empty\n", stderr);
        exit(1);
    }
    luna_workqueue_done(q, k);
}

static void report(const char *name, const char *extra, unsigned long ops, double secs)
{
    printf("bench %s %sops=%lu seconds=%.3f per_s=%.0f ns_per_op=%.1f\n", name,
           extra, ops, secs, ops / secs, secs * 1e9 / ops);
    fflush(stdout);
}

static void bench_distinct(bool fifo)
{
    struct luna_workqueue *q = new_queue_opts(luna_clock_monotonic(), fifo);
    unsigned long ops = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < N_KEYS; i++)
            luna_workqueue_add(q, keys[i]);
        for (int i = 0; i < N_KEYS; i++)
            take_done(q);
        ops += N_KEYS;
    } while ((t = now() - t0) < MIN_SECONDS);
    report(fifo ? "workqueue_cycle_fifo" : "workqueue_cycle", "keys=100000 ", ops, t);
    luna_workqueue_free(q);
}

static void bench_priority_mixed(void)
{
    struct luna_workqueue *q = new_queue(luna_clock_monotonic());
    static char live[N_KEYS / 10][32];
    for (int i = 0; i < N_KEYS / 10; i++)
        snprintf(live[i], sizeof live[i], "live/object-%d", i);
    unsigned long ops = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < N_KEYS; i++) {
            luna_workqueue_add_priority(q, keys[i], LUNA_WORKQUEUE_PRIORITY_LOW);
            if (i % 10 == 9)
                luna_workqueue_add_priority(q, live[i / 10], LUNA_WORKQUEUE_PRIORITY_DEFAULT);
        }
        for (int i = 0; i < N_KEYS + N_KEYS / 10; i++)
            take_done(q);
        ops += N_KEYS + N_KEYS / 10;
    } while ((t = now() - t0) < MIN_SECONDS);
    report("workqueue_priority_mixed", "keys=100000 live=10000 ", ops, t);
    luna_workqueue_free(q);
}

static void bench_priority_raise(void)
{
    struct luna_workqueue *q = new_queue(luna_clock_monotonic());
    unsigned long ops = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < N_KEYS; i++)
            luna_workqueue_add_priority(q, keys[i], LUNA_WORKQUEUE_PRIORITY_LOW);
        for (int i = 0; i < N_KEYS; i++)
            luna_workqueue_add_priority(q, keys[i], LUNA_WORKQUEUE_PRIORITY_DEFAULT);
        for (int i = 0; i < N_KEYS; i++)
            take_done(q);
        ops += N_KEYS;
    } while ((t = now() - t0) < MIN_SECONDS);
    report("workqueue_priority_raise", "keys=100000 ", ops, t);
    luna_workqueue_free(q);
}

static void bench_repeat(void)
{
    struct luna_workqueue *q = new_queue(luna_clock_monotonic());
    unsigned long ops = 0;
    double t0 = now(), t;
    do {
        for (int round = 0; round < 100; round++) {
            for (int i = 0; i < 1000; i++) {
                luna_workqueue_add(q, keys[i]);
                luna_workqueue_add(q, keys[i]);
                luna_workqueue_add(q, keys[i]);
            }
            for (int i = 0; i < 1000; i++)
                take_done(q);
        }
        ops += 100 * 1000;
    } while ((t = now() - t0) < MIN_SECONDS);
    report("workqueue_cycle_repeat", "keys=1000 adds_per_cycle=3 ", ops, t);
    luna_workqueue_free(q);
}

static void bench_steady(void)
{
    struct luna_workqueue *q = new_queue(luna_clock_monotonic());
    for (int i = 0; i < N_KEYS / 2; i++)
        luna_workqueue_add(q, keys[i]);
    unsigned long ops = 0;
    int next = N_KEYS / 2;
    double t0 = now(), t;
    do {
        for (int i = 0; i < N_KEYS; i++) {
            luna_workqueue_add(q, keys[next]);
            next = next + 1 == N_KEYS ? 0 : next + 1;
            take_done(q);
        }
        ops += N_KEYS;
    } while ((t = now() - t0) < MIN_SECONDS);
    report("workqueue_cycle_steady", "depth=50000 ", ops, t);
    luna_workqueue_free(q);
}

static void bench_delayed(void)
{
    struct luna_fake_clock fc;
    luna_fake_clock_init(&fc, 0);
    struct luna_workqueue *q = new_queue(&fc.clock);
    unsigned seed = 1;
    unsigned long ops = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < N_KEYS; i++) {
            seed = seed * 1103515245u + 12345u;
            luna_workqueue_add_after(q, keys[i], 0.001 + (seed >> 8) % 10000 / 1000.0);
        }
        size_t left = N_KEYS;
        while (left > 0) {
            luna_fake_clock_advance(&fc, 0.01, NULL);
            luna_workqueue_tick(q);
            for (size_t n = luna_workqueue_len(q); n > 0; n--, left--)
                take_done(q);
        }
        ops += N_KEYS;
    } while ((t = now() - t0) < MIN_SECONDS);
    report("workqueue_delayed", "keys=100000 ", ops, t);
    luna_workqueue_free(q);
}

static void bench_rate_limited(void)
{
    struct luna_fake_clock fc;
    luna_fake_clock_init(&fc, 0);
    struct luna_workqueue *q = new_queue(&fc.clock);
    unsigned long ops = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 10000; i++) {
            luna_workqueue_add_rate_limited(q, keys[i]);
            while (luna_workqueue_len(q) == 0) {
                luna_fake_clock_advance(&fc, 0.001, NULL);
                luna_workqueue_tick(q);
            }
            const char *k;
            luna_workqueue_get(q, &k);
            luna_workqueue_done(q, k);
            luna_workqueue_forget(q, k);
        }
        ops += 10000;
    } while ((t = now() - t0) < MIN_SECONDS);
    report("workqueue_rate_limited", "keys=10000 ", ops, t);
    luna_workqueue_free(q);
}

int main(void)
{
    keys = malloc(sizeof *keys * N_KEYS);
    if (!keys)
        return 1;
    for (int i = 0; i < N_KEYS; i++)
        snprintf(keys[i], sizeof keys[i], "namespace-%d/object-%d", i % 100, i);
    bench_distinct(false);
    bench_repeat();
    bench_steady();
    bench_delayed();
    bench_rate_limited();
    bench_distinct(true);
    bench_priority_mixed();
    bench_priority_raise();
    free(keys);
    return 0;
}
