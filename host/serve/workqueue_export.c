/* workqueue_export.c — see workqueue_export.h. */
#include "serve/workqueue_export.h"

#include <stdio.h>
#include <stdlib.h>

/* client-go: prometheus.ExponentialBuckets(10e-9, 10, 10). */
static const double duration_buckets[] = { 1e-08, 1e-07, 1e-06, 1e-05, 1e-04,
                                           1e-03, 1e-02, 1e-01, 1, 10 };

enum series {
    S_DEPTH,
    S_ADDS,
    S_RETRIES,
    S_UNFINISHED,
    S_LONGEST,
    S_QUEUE_DURATION,
    S_WORK_DURATION,
    S_COUNT
};

#define NAME_LABEL ((const char *const[]){ "name", NULL })

static const struct luna_metric_desc descs[S_COUNT] = {
    [S_DEPTH] = { "workqueue_depth", "Current depth of workqueue", LUNA_METRIC_GAUGE,
                  NAME_LABEL, NULL, 0 },
    [S_ADDS] = { "workqueue_adds_total", "Total number of adds handled by workqueue",
                 LUNA_METRIC_COUNTER, NAME_LABEL, NULL, 0 },
    [S_RETRIES] = { "workqueue_retries_total", "Total number of retries handled by workqueue",
                    LUNA_METRIC_COUNTER, NAME_LABEL, NULL, 0 },
    [S_UNFINISHED] = { "workqueue_unfinished_work_seconds",
        "How many seconds of work has been done that is in progress and hasn't been "
        "observed by work_duration. Large values indicate stuck threads. One can deduce "
        "the number of stuck threads by observing the rate at which this increases.",
        LUNA_METRIC_GAUGE, NAME_LABEL, NULL, 0 },
    [S_LONGEST] = { "workqueue_longest_running_processor_seconds",
        "How many seconds has the longest running processor for workqueue been running.",
        LUNA_METRIC_GAUGE, NAME_LABEL, NULL, 0 },
    [S_QUEUE_DURATION] = { "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested",
        LUNA_METRIC_HISTOGRAM, NAME_LABEL, duration_buckets,
        sizeof duration_buckets / sizeof duration_buckets[0] },
    [S_WORK_DURATION] = { "workqueue_work_duration_seconds",
        "How long in seconds processing an item from workqueue takes.",
        LUNA_METRIC_HISTOGRAM, NAME_LABEL, duration_buckets,
        sizeof duration_buckets / sizeof duration_buckets[0] },
};

/* controller-runtime's cap on the priority label's values; past it the
 * rest of the depth is one series with this label. */
#define MAX_PRIORITIES 25
#define PRIORITY_OVERFLOW "exceeded_cardinality_limit"

static const struct luna_metric_desc priority_desc = {
    "workqueue_depth_by_priority", "Current depth of workqueue by workqueue and priority",
    LUNA_METRIC_GAUGE, (const char *const[]){ "name", "priority", NULL }, NULL, 0 };

struct luna_workqueue_export;

/* One series of workqueue_depth_by_priority. */
struct priority_series {
    struct luna_workqueue_export *x;
    int priority;
    bool overflow;                            /* the rest, past MAX_PRIORITIES */
    struct luna_metric_child *child;          /* reference */
};

struct luna_workqueue_export {
    struct luna_workqueue *q;                 /* borrowed: we die with it */
    struct luna_metric_child *child[S_COUNT]; /* references */
    struct luna_metric_family *by_priority;   /* reference */
    struct priority_series series[MAX_PRIORITIES + 1];
    size_t nseries;                           /* the overflow one is last */
};

static struct luna_workqueue_metrics read_metrics(void *ud)
{
    struct luna_workqueue_metrics m;
    luna_workqueue_metrics(((struct luna_workqueue_export *)ud)->q, &m);
    return m;
}

static double depth(void *ud) { return (double)read_metrics(ud).depth; }
static double adds(void *ud) { return (double)read_metrics(ud).adds_total; }
static double retries(void *ud) { return (double)read_metrics(ud).retries_total; }
static double unfinished(void *ud) { return read_metrics(ud).unfinished_work_seconds; }
static double longest(void *ud)
{
    return read_metrics(ud).longest_running_processor_seconds;
}

static void on_queue_duration(void *ud, double seconds)
{
    luna_metric_observe(((struct luna_workqueue_export *)ud)->child[S_QUEUE_DURATION], seconds);
}

static void on_work_duration(void *ud, double seconds)
{
    luna_metric_observe(((struct luna_workqueue_export *)ud)->child[S_WORK_DURATION], seconds);
}

static double priority_depth(void *ud)
{
    const struct priority_series *s = ud;
    if (!s->overflow)
        return (double)luna_workqueue_depth_at(s->x->q, s->priority);
    struct luna_workqueue_metrics m;
    luna_workqueue_metrics(s->x->q, &m);
    double rest = (double)m.depth;
    for (size_t i = 0; i < s->x->nseries; i++)
        if (!s->x->series[i].overflow)
            rest -= (double)luna_workqueue_depth_at(s->x->q, s->x->series[i].priority);
    return rest;
}

/* A priority got its first dirty key: its series, made once (the first
 * MAX_PRIORITIES priorities get their own; the rest share one).  Out of
 * memory, the series is missing: metrics never fail the queue. */
static void on_priority_seen(void *ud, int priority)
{
    struct luna_workqueue_export *x = ud;
    bool overflow = false;
    for (size_t i = 0; i < x->nseries; i++) {
        if (x->series[i].overflow)
            overflow = true;
        else if (x->series[i].priority == priority)
            return;
    }
    if (overflow)
        return;
    struct priority_series *s = &x->series[x->nseries];
    char label[sizeof PRIORITY_OVERFLOW];
    if (x->nseries == MAX_PRIORITIES) {
        s->overflow = true;
        snprintf(label, sizeof label, "%s", PRIORITY_OVERFLOW);
    } else {
        snprintf(label, sizeof label, "%d", priority);
    }
    s->x = x;
    s->priority = priority;
    const char *const values[] = { luna_workqueue_name(x->q), label, NULL };
    luna_error err = { 0 };
    if (luna_metric_func(x->by_priority, values, priority_depth, s, NULL, &s->child, &err) < 0)
        return;
    luna_metric_child_ref(s->child);
    x->nseries++;
}

/* Removes and releases every series, frees x. */
static void destroy(struct luna_workqueue_export *x)
{
    for (size_t i = 0; i < x->nseries; i++) {
        luna_metric_child_remove(x->series[i].child);
        luna_metric_child_unref(x->series[i].child);
    }
    luna_metric_family_unref(x->by_priority);
    for (int i = 0; i < S_COUNT; i++) {
        if (!x->child[i])
            continue;
        luna_metric_child_remove(x->child[i]);
        luna_metric_child_unref(x->child[i]);
    }
    free(x);
}

static void on_freed(void *ud) { destroy(ud); }

int luna_workqueue_export_attach(struct luna_metrics *reg, struct luna_workqueue *q,
                                 struct luna_workqueue_export **out, luna_error *err)
{
    const char *name = luna_workqueue_name(q);
    if (!*name)
        return luna_error_set(err, LUNA_EINVAL,
                              "workqueue metrics: the queue needs a name");
    const char *const values[] = { name, NULL };
    struct luna_metric_family *fam[S_COUNT];
    for (int i = 0; i < S_COUNT; i++) {
        int rc = luna_metrics_register(reg, &descs[i], &fam[i], err);
        if (rc)
            return rc;
    }
    struct luna_metric_family *by_priority;
    int rc = luna_metrics_register(reg, &priority_desc, &by_priority, err);
    if (rc)
        return rc;
    const struct luna_workqueue_observer *o = luna_workqueue_get_observer(q);
    if (o->queue_duration || o->work_duration || o->freed)
        return luna_error_set(err, LUNA_EINVAL,
                              "workqueue metrics: queue \"%s\" already has an observer "
                              "(exported twice?)", name);
    if (luna_metric_lookup(fam[S_DEPTH], values))
        return luna_error_set(err, LUNA_EINVAL,
                              "workqueue metrics: a queue named \"%s\" already exports them",
                              name);
    struct luna_workqueue_export *x = calloc(1, sizeof *x);
    if (!x)
        return luna_error_set(err, LUNA_ENOMEM, "workqueue metrics: out of memory");
    x->q = q;
    x->by_priority = by_priority;
    luna_metric_family_ref(by_priority);
    static const luna_metric_fn fns[S_QUEUE_DURATION] = {
        [S_DEPTH] = depth, [S_ADDS] = adds, [S_RETRIES] = retries,
        [S_UNFINISHED] = unfinished, [S_LONGEST] = longest,
    };
    for (int i = 0; i < S_COUNT && rc == 0; i++) {
        if (i < S_QUEUE_DURATION)
            rc = luna_metric_func(fam[i], values, fns[i], x, NULL, &x->child[i], err);
        else
            rc = luna_metric_child(fam[i], values, &x->child[i], err);
        if (rc == 0)
            luna_metric_child_ref(x->child[i]);
        else
            x->child[i] = NULL;
    }
    if (rc) {
        destroy(x);
        return rc;
    }
    struct luna_workqueue_observer obs = {
        .queue_duration = on_queue_duration,
        .work_duration = on_work_duration,
        .priority_seen = on_priority_seen,
        .freed = on_freed,
        .ud = x,
    };
    luna_workqueue_set_observer(q, &obs);
    luna_workqueue_each_priority(q, on_priority_seen, x);
    if (out)
        *out = x;
    return 0;
}

void luna_workqueue_export_detach(struct luna_workqueue_export *x)
{
    if (!x)
        return;
    luna_workqueue_set_observer(x->q, NULL);
    destroy(x);
}
