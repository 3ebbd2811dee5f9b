/*
 * metrics.h — a Prometheus metrics registry and its text exposition
 * (format 0.0.4), the model of client_golang's registry and *Vec types.
 *
 * A registry holds metric families (counter, gauge, histogram), each with a
 * name, a HELP text and a fixed list of label names.  A family exports one
 * series (a "child") per label-value tuple that has been asked for; a
 * family without labels has one child with the empty tuple, created like any
 * other (a family with no children prints nothing, as in client_golang).
 * Hot paths look a child up once and then update it through the pointer:
 *
 *     struct luna_metric_child *ok;
 *     luna_metric_child(reconcile_total, (const char *[]){ "ctl", "success", NULL },
 *                       &ok, &err);
 *     ...
 *     luna_metric_inc(ok);                    // no lookup, no allocation
 *
 * Counters and gauges may instead be function children: the value is read
 * from a callback when the registry is rendered (memory in use, objects in
 * a cache, a queue's own counters).
 *
 * Rendering writes families sorted by name and, within a family, children
 * sorted by their label values (compared as byte strings, label by label),
 * so output is stable.  Values print as Prometheus parses them: integral
 * values up to 2^53 in magnitude as integers ("42", "1000000", never
 * "1e+06"), other finite values with the fewest significant digits (15 to
 * 17, %g style) that read back as the same double ("0.1", "1e-08",
 * "0.30000000000000004", "1e+300"), and "+Inf", "-Inf", "NaN".  HELP escapes backslash and
 * newline; label values escape backslash, double quote and newline.
 *
 * Uses uthash, textbuf.h.  Runs on the loop thread; nothing here blocks or
 * locks.  Rendering calls function children, which must not change the
 * registry's structure (create, remove, register, unregister: those return
 * LUNA_EINVAL while a render is in progress; updating values is fine).
 *
 * Invariants:
 *   - a family is registered if and only if it is in its registry's table
 *     (and only registered families are rendered or get new children);
 *   - a child is listed if and only if it is in its family's table, and
 *     only listed children are rendered; a family has listed children only
 *     while it is registered;
 *   - a histogram child's count equals the sum of its bucket counts; the
 *     rendered buckets are cumulative and the "+Inf" bucket equals count.
 *
 * Ownership: every object is reference counted.  The registry holds one
 * reference on each registered family, a family one on each listed child,
 * and a child one on its family.  Pointers returned by the lookup and
 * registration functions are borrowed: a family until it is unregistered,
 * a child until it is removed (either also ends with luna_metrics_free).
 * Callers that keep one longer take a reference (luna_metric_family_ref /
 * luna_metric_child_ref) and drop it with the matching unref; such a
 * handle stays valid after removal, updates to it are then simply not
 * exported, and a removed child is never listed again (asking for the same
 * labels creates a fresh child at zero), as with client_golang's
 * DeleteLabelValues.  Strings passed in are copied.  A function child's
 * `release(ud)` (if given) is called once when the child is destroyed; ud is
 * borrowed until then.
 */
#ifndef LUNA_METRICS_H
#define LUNA_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/textbuf.h"

#define LUNA_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* Label names per family and buckets per histogram, at most. */
#define LUNA_METRICS_MAX_LABELS 16
#define LUNA_METRICS_MAX_BUCKETS 256

enum luna_metric_type {
    LUNA_METRIC_COUNTER,
    LUNA_METRIC_GAUGE,
    LUNA_METRIC_HISTOGRAM,
};

struct luna_metrics;
struct luna_metric_family;
struct luna_metric_child;

typedef double (*luna_metric_fn)(void *ud);

/* What a family is.  name: [a-zA-Z_:][a-zA-Z0-9_:]*; label names:
 * [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__", distinct, and not "le" for
 * histograms.  help and label values must be well-formed UTF-8 (Prometheus
 * drops a whole scrape over one bad byte).  buckets: strictly increasing
 * finite upper bounds (a trailing +Inf is implied and may be given);
 * NULL/0 = client_golang's DefBuckets. */
struct luna_metric_desc {
    const char *name;
    const char *help;                 /* NULL = "" */
    enum luna_metric_type type;
    const char *const *labels;        /* NULL-terminated; NULL = none */
    const double *buckets;            /* histograms only */
    size_t nbuckets;
};

/* ---- registry --------------------------------------------------------------- */

int luna_metrics_new(struct luna_metrics **out, luna_error *err);
/* Unregisters every family (see luna_metric_family_unregister) and frees
 * the registry; handles still referenced elsewhere stay valid, detached.
 * NULL is a no-op.  Not from a function child during a render. */
void luna_metrics_free(struct luna_metrics *reg);

/* The process-wide registry /metrics serves: created on first use, lives
 * until exit (never freed).  NULL if it could not be allocated. */
struct luna_metrics *luna_metrics_default(void);

/* Registers a family, or returns the registered family of that name if its
 * description is identical (type, help, labels, buckets) — so two callers
 * can share a family, as client_golang's AlreadyRegisteredError allows.
 * LUNA_EINVAL on a bad description or a name taken by a different family
 * (including a histogram's _bucket/_sum/_count series), LUNA_ENOMEM.
 * *out is borrowed (see above). */
int luna_metrics_register(struct luna_metrics *reg, const struct luna_metric_desc *desc,
                          struct luna_metric_family **out, luna_error *err);

/* The registered family of that name, or NULL.  Borrowed. */
struct luna_metric_family *luna_metrics_find(const struct luna_metrics *reg,
                                             const char *name);

/* Removes every child whose label `label` equals `value`, in every family
 * that has that label (e.g. controller="x" when x goes away).  Returns how
 * many, or LUNA_EINVAL during a render. */
int luna_metrics_remove_matching(struct luna_metrics *reg, const char *label,
                                 const char *value);

/* Appends the exposition of every registered family to out.  LUNA_ENOMEM if
 * the buffer failed (out->failed), LUNA_EINVAL if called from a function
 * child during a render. */
int luna_metrics_render(struct luna_metrics *reg, struct luna_textbuf *out,
                        luna_error *err);

size_t luna_metrics_family_count(const struct luna_metrics *reg);

/* ---- families --------------------------------------------------------------- */

/* Removes every child, takes the family out of its registry and drops the
 * registry's reference.  0, or LUNA_ENOTFOUND if it was not registered,
 * LUNA_EINVAL during a render. */
int luna_metric_family_unregister(struct luna_metric_family *f);
/* Removes every child (client_golang's Reset).  0 or LUNA_EINVAL during a
 * render. */
int luna_metric_family_clear(struct luna_metric_family *f);
/* Removes every child whose label `label` equals `value`; returns how many
 * (0 if the family has no such label), or LUNA_EINVAL during a render. */
int luna_metric_family_remove_matching(struct luna_metric_family *f,
                                       const char *label, const char *value);

void luna_metric_family_ref(struct luna_metric_family *f);
void luna_metric_family_unref(struct luna_metric_family *f); /* NULL: no-op */

const char *luna_metric_family_name(const struct luna_metric_family *f);
const char *luna_metric_family_help(const struct luna_metric_family *f);
enum luna_metric_type luna_metric_family_type(const struct luna_metric_family *f);
size_t luna_metric_family_label_count(const struct luna_metric_family *f);
const char *luna_metric_family_label(const struct luna_metric_family *f, size_t i);
/* Upper bounds of a histogram's buckets, without the implied +Inf. */
size_t luna_metric_family_bucket_count(const struct luna_metric_family *f);
double luna_metric_family_bucket(const struct luna_metric_family *f, size_t i);
size_t luna_metric_family_child_count(const struct luna_metric_family *f);
bool luna_metric_family_registered(const struct luna_metric_family *f);

/* ---- children --------------------------------------------------------------- */

/* The child for a tuple of label values (NULL-terminated, one per label
 * name, in order; NULL or { NULL } for a family without labels), created at
 * zero if missing.  LUNA_EINVAL if the count is wrong, a value is not
 * UTF-8, the family is not
 * registered, the child is a function child, or during a render;
 * LUNA_ENOMEM.  *out is borrowed until the child is removed. */
int luna_metric_child(struct luna_metric_family *f, const char *const *values,
                      struct luna_metric_child **out, luna_error *err);

/* A new function child for a counter or gauge: fn(ud) is its value at
 * every render.  LUNA_EINVAL if the child already exists (of either kind),
 * on a histogram, an unregistered family, or during a render; LUNA_ENOMEM.
 * On failure release(ud) is not called: ud stays the caller's.  out may be
 * NULL. */
int luna_metric_func(struct luna_metric_family *f, const char *const *values,
                     luna_metric_fn fn, void *ud, void (*release)(void *ud),
                     struct luna_metric_child **out, luna_error *err);

/* The listed child for that tuple, or NULL (never creates).  Borrowed. */
struct luna_metric_child *luna_metric_lookup(const struct luna_metric_family *f,
                                             const char *const *values);

/* Unlists the child (drops the family's reference).  0, LUNA_ENOTFOUND if
 * it was not listed, LUNA_EINVAL during a render. */
int luna_metric_child_remove(struct luna_metric_child *c);
/* Same, by label values. */
int luna_metric_remove(struct luna_metric_family *f, const char *const *values);

void luna_metric_child_ref(struct luna_metric_child *c);
void luna_metric_child_unref(struct luna_metric_child *c); /* NULL: no-op */

struct luna_metric_family *luna_metric_child_family(const struct luna_metric_child *c);
bool luna_metric_child_listed(const struct luna_metric_child *c);
bool luna_metric_child_is_func(const struct luna_metric_child *c);
/* The i-th label value (borrowed while the child lives). */
const char *luna_metric_child_label(const struct luna_metric_child *c, size_t i);

/* ---- updates (hot path: no lookup, no allocation) ---------------------------- */

/* Counter or gauge += 1.  LUNA_EINVAL on a histogram or function child. */
int luna_metric_inc(struct luna_metric_child *c);
/* += v.  Counters only go up: LUNA_EINVAL (unchanged) if v < 0 or NaN;
 * also on a histogram or function child. */
int luna_metric_add(struct luna_metric_child *c, double v);
/* Gauge = v.  LUNA_EINVAL on anything else. */
int luna_metric_set(struct luna_metric_child *c, double v);
/* Histogram: counts v in the first bucket whose bound is >= v (the +Inf
 * bucket if none is, or if v is NaN, as client_golang does) and adds v to
 * the sum.  LUNA_EINVAL on anything else. */
int luna_metric_observe(struct luna_metric_child *c, double v);

/* ---- reads (specs, adapters) ------------------------------------------------- */

/* A counter's or gauge's value (calls fn for a function child); NaN for a
 * histogram. */
double luna_metric_value(const struct luna_metric_child *c);
/* A histogram's count and sum, and (if buckets is non-NULL) its cumulative
 * bucket counts, bucket_count + 1 of them with the +Inf bucket last.
 * LUNA_EINVAL if c is not a histogram child. */
int luna_metric_histogram_read(const struct luna_metric_child *c, uint64_t *count,
                               double *sum, uint64_t *buckets);

/* ---- formatting ---------------------------------------------------------------- */

/* Formats v as the exposition does (see above) into buf (>= 32 bytes);
 * returns the length. */
size_t luna_metrics_format_value(double v, char *buf);

const char *luna_metric_type_name(enum luna_metric_type type);

#endif
