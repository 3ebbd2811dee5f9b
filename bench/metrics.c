/*
 * bench/metrics.c — the cost of metrics on the hot path and of a scrape,
 * on one core.  Prints one `bench <name> key=value ...` line per case:
 *
 *   metrics_inc       counter increments through a child handle
 *   metrics_observe   histogram observations (controller-runtime's 40
 *                     reconcile buckets), through a child handle
 *   metrics_lookup    child lookup by two label values, then increment
 *                     (what a per-request series such as
 *                     rest_client_requests_total costs)
 *   metrics_render    rendering a registry of N series (counters with two
 *                     labels, plus histograms counted per line), best of 5
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/metrics.h"
#include "base/textbuf.h"

#define MIN_SECONDS 0.5

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const luna_error *err)
{
    fprintf(stderr, "bench metrics: %s: %s\n", what, err->msg);
    exit(1);
}

static struct luna_metric_family *define(struct luna_metrics *reg,
                                         const struct luna_metric_desc *d)
{
    struct luna_metric_family *f;
    luna_error err;
    if (luna_metrics_register(reg, d, &f, &err))
        die("register", &err);
    return f;
}

static struct luna_metric_child *child(struct luna_metric_family *f,
                                       const char *const *values)
{
    struct luna_metric_child *c;
    luna_error err;
    if (luna_metric_child(f, values, &c, &err))
        die("child", &err);
    return c;
}

static void report_ops(const char *name, unsigned long ops, double secs)
{
    printf("bench %s ops=%lu seconds=%.3f per_s=%.0f ns_per_op=%.2f\n", name, ops, secs,
           ops / secs, secs * 1e9 / ops);
    fflush(stdout);
}

static const double reconcile_buckets[] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
    0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9,
    10, 15, 20, 25, 30, 40, 50, 60,
};

static void bench_hot_path(void)
{
    struct luna_metrics *reg;
    luna_error err;
    if (luna_metrics_new(&reg, &err))
        die("new", &err);
    struct luna_metric_desc cd = { .name = "reconcile_total", .type = LUNA_METRIC_COUNTER,
                                   .labels = (const char *const[]){ "controller", "result",
                                                                    NULL } };
    struct luna_metric_family *counter = define(reg, &cd);
    struct luna_metric_child *ok = child(counter, (const char *const[]){ "ctl", "success",
                                                                         NULL });
    unsigned long ops = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 10000000; i++)
            luna_metric_inc(ok);
        ops += 10000000;
    } while ((t = now() - t0) < MIN_SECONDS);
    report_ops("metrics_inc", ops, t);

    struct luna_metric_desc hd = { .name = "reconcile_time_seconds",
                                   .type = LUNA_METRIC_HISTOGRAM,
                                   .labels = (const char *const[]){ "controller", NULL },
                                   .buckets = reconcile_buckets,
                                   .nbuckets = sizeof reconcile_buckets /
                                               sizeof reconcile_buckets[0] };
    struct luna_metric_child *h = child(define(reg, &hd), (const char *const[]){ "ctl", NULL });
    double v[1024];
    unsigned seed = 1;
    for (int i = 0; i < 1024; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (seed >> 8) % 70000 / 1000.0; /* 0 .. 70 s */
    }
    ops = 0;
    t0 = now();
    do {
        for (int i = 0; i < 10000000; i++)
            luna_metric_observe(h, v[i & 1023]);
        ops += 10000000;
    } while ((t = now() - t0) < MIN_SECONDS);
    report_ops("metrics_observe", ops, t);

    static const char *const codes[] = { "200", "201", "404", "409", "500" };
    static const char *const methods[] = { "GET", "PUT", "POST", "PATCH" };
    struct luna_metric_desc rd = { .name = "requests_total", .type = LUNA_METRIC_COUNTER,
                                   .labels = (const char *const[]){ "code", "method", NULL } };
    struct luna_metric_family *requests = define(reg, &rd);
    ops = 0;
    t0 = now();
    do {
        for (int i = 0; i < 1000000; i++)
            luna_metric_inc(child(requests, (const char *const[]){ codes[i % 5],
                                                                   methods[i % 4], NULL }));
        ops += 1000000;
    } while ((t = now() - t0) < MIN_SECONDS);
    report_ops("metrics_lookup", ops, t);
    luna_metrics_free(reg);
}

static void bench_render(int counters, int histograms)
{
    struct luna_metrics *reg;
    luna_error err;
    if (luna_metrics_new(&reg, &err))
        die("new", &err);
    struct luna_metric_desc cd = { .name = "objects_total", .type = LUNA_METRIC_COUNTER,
                                   .labels = (const char *const[]){ "namespace", "name",
                                                                    NULL } };
    struct luna_metric_family *c = define(reg, &cd);
    for (int i = 0; i < counters; i++) {
        char ns[32], name[32];
        snprintf(ns, sizeof ns, "namespace-%d", i % 100);
        snprintf(name, sizeof name, "object-%d", i);
        luna_metric_add(child(c, (const char *const[]){ ns, name, NULL }), i * 1.5);
    }
    struct luna_metric_desc hd = { .name = "reconcile_time_seconds",
                                   .type = LUNA_METRIC_HISTOGRAM,
                                   .labels = (const char *const[]){ "controller", NULL },
                                   .buckets = reconcile_buckets,
                                   .nbuckets = sizeof reconcile_buckets /
                                               sizeof reconcile_buckets[0] };
    struct luna_metric_family *h = define(reg, &hd);
    for (int i = 0; i < histograms; i++) {
        char ctl[32];
        snprintf(ctl, sizeof ctl, "controller-%d", i);
        struct luna_metric_child *hc = child(h, (const char *const[]){ ctl, NULL });
        for (int j = 0; j < 100; j++)
            luna_metric_observe(hc, j * 0.37);
    }
    struct luna_textbuf out = LUNA_TEXTBUF_INIT;
    double best = 1e9;
    for (int round = 0; round < 5; round++) {
        luna_textbuf_reset(&out);
        double t0 = now();
        if (luna_metrics_render(reg, &out, &err))
            die("render", &err);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    int series = counters + histograms * (int)(hd.nbuckets + 3);
    printf("bench metrics_render series=%d bytes=%zu ms=%.2f series_per_s=%.0f\n", series,
           out.len, best * 1e3, series / best);
    fflush(stdout);
    luna_textbuf_free(&out);
    luna_metrics_free(reg);
}

int main(void)
{
    bench_hot_path();
    bench_render(1000, 10);
    bench_render(100000, 100);
    return 0;
}
