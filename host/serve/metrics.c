/* metrics.c — see metrics.h.
 *
 * One concept over ~900 lines: one registry, its families and series,
 * and their exposition; the parts share every invariant.
 */
#include "serve/metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

struct luna_metrics {
    struct luna_metric_family *families;  /* uthash by name: registered */
    bool sorted;                          /* families are in name order */
    bool rendering;                       /* inside luna_metrics_render */
};

struct luna_metric_family {
    UT_hash_handle hh;                    /* in reg->families iff registered */
    struct luna_metrics *reg;             /* non-NULL iff registered */
    unsigned refs;
    enum luna_metric_type type;
    char *name;
    char *help;
    char **labels;                        /* nlabels names */
    size_t nlabels;
    double *bounds;                       /* nbuckets, without +Inf */
    char (*bound_text)[32];               /* bounds as the le label prints them */
    size_t nbuckets;
    struct luna_metric_child *children;   /* uthash by key: listed children */
    bool children_sorted;
};

struct luna_metric_child {
    UT_hash_handle hh;                    /* in family->children iff listed */
    struct luna_metric_family *family;    /* a reference */
    unsigned refs;
    enum luna_metric_type type;
    bool listed;
    bool is_func;
    double value;                         /* counter, gauge */
    luna_metric_fn fn;                    /* non-NULL iff is_func */
    void *ud;
    void (*release)(void *ud);
    double sum;                           /* histogram */
    uint64_t count;
    uint64_t *buckets;                    /* nbuckets + 1, not cumulative */
    char *key;                            /* each value followed by a NUL */
    size_t keylen;
    char *labels_text;                    /* a="x",b="y" (escaped), or "" */
    size_t labels_len;
};

static const double default_buckets[] = { .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10 };

const char *luna_metric_type_name(enum luna_metric_type type)
{
    switch (type) {
    case LUNA_METRIC_COUNTER: return "counter";
    case LUNA_METRIC_GAUGE: return "gauge";
    case LUNA_METRIC_HISTOGRAM: return "histogram";
    }
    return "untyped";
}

/* ---- formatting ---------------------------------------------------------------- */

static size_t format_u64(uint64_t v, char *buf)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = '\0';
    return n;
}

size_t luna_metrics_format_value(double v, char *buf)
{
    if (isnan(v)) {
        memcpy(buf, "NaN", 4);
        return 3;
    }
    if (isinf(v)) {
        memcpy(buf, v > 0 ? "+Inf" : "-Inf", 5);
        return 4;
    }
    if (v == 0) { /* also -0 */
        memcpy(buf, "0", 2);
        return 1;
    }
    if (v == trunc(v) && fabs(v) <= 9007199254740992.0) { /* 2^53 */
        if (v < 0) {
            buf[0] = '-';
            return 1 + format_u64((uint64_t)-v, buf + 1);
        }
        return format_u64((uint64_t)v, buf);
    }
    /* The fewest of 15, 16, 17 significant digits that read back as v (17
     * always do). */
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return (size_t)n;
}

static void put_value(struct luna_textbuf *out, double v)
{
    char buf[32];
    luna_textbuf_append(out, buf, luna_metrics_format_value(v, buf));
}

static void put_count(struct luna_textbuf *out, uint64_t v)
{
    char buf[24];
    luna_textbuf_append(out, buf, format_u64(v, buf));
}

/* HELP text: backslash and newline escaped. */
static void put_help(struct luna_textbuf *out, const char *s)
{
    const char *run = s;
    for (; *s; s++) {
        if (*s != '\\' && *s != '\n')
            continue;
        luna_textbuf_append(out, run, (size_t)(s - run));
        luna_textbuf_append(out, *s == '\\' ? "\\\\" : "\\n", 2);
        run = s + 1;
    }
    luna_textbuf_append(out, run, (size_t)(s - run));
}

/* Length of s as an escaped label value (backslash, quote, newline). */
static size_t escaped_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += (*s == '\\' || *s == '"' || *s == '\n') ? 2 : 1;
    return n;
}

static char *put_escaped(char *p, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '\\': *p++ = '\\'; *p++ = '\\'; break;
        case '"':  *p++ = '\\'; *p++ = '"'; break;
        case '\n': *p++ = '\\'; *p++ = 'n'; break;
        default:   *p++ = *s;
        }
    }
    return p;
}

/* ---- validation ----------------------------------------------------------------- */

static bool valid_metric_name(const char *s)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(p > s && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

static bool valid_label_name(const char *s)
{
    if (!s || !*s || (s[0] == '_' && s[1] == '_'))
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(p > s && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

/* Well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF): Prometheus rejects a whole scrape over one bad byte. */
static bool valid_utf8(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned char c = *s;
        size_t n;
        unsigned cp;
        if (c < 0x80) {
            s++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 1, cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2, cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3, cp = c & 0x07;
        } else {
            return false;
        }
        for (size_t i = 1; i <= n; i++) {
            if ((s[i] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return false;
        s += n + 1;
    }
    return true;
}

static size_t count_strings(const char *const *list)
{
    size_t n = 0;
    while (list && list[n])
        n++;
    return n;
}

/* Checks desc; on success sets the bucket list to use (*bounds, *nb). */
static int check_desc(const struct luna_metric_desc *d, const double **bounds,
                      size_t *nb, luna_error *err)
{
    if (!valid_metric_name(d->name))
        return luna_error_set(err, LUNA_EINVAL,
                              "metrics: invalid metric name \"%s\" (want [a-zA-Z_:][a-zA-Z0-9_:]*)",
                              d->name ? d->name : "(null)");
    if (d->type != LUNA_METRIC_COUNTER && d->type != LUNA_METRIC_GAUGE &&
        d->type != LUNA_METRIC_HISTOGRAM)
        return luna_error_set(err, LUNA_EINVAL, "metrics %s: unknown type %d", d->name,
                              (int)d->type);
    if (d->help && !valid_utf8(d->help))
        return luna_error_set(err, LUNA_EINVAL, "metrics %s: help is not valid UTF-8",
                              d->name);
    size_t nl = count_strings(d->labels);
    if (nl > LUNA_METRICS_MAX_LABELS)
        return luna_error_set(err, LUNA_EINVAL, "metrics %s: %zu labels (at most %d)",
                              d->name, nl, LUNA_METRICS_MAX_LABELS);
    for (size_t i = 0; i < nl; i++) {
        const char *l = d->labels[i];
        if (!valid_label_name(l))
            return luna_error_set(err, LUNA_EINVAL,
                                  "metrics %s: invalid label name \"%s\" (want "
                                  "[a-zA-Z_][a-zA-Z0-9_]*, not starting with __)",
                                  d->name, l);
        if (d->type == LUNA_METRIC_HISTOGRAM && strcmp(l, "le") == 0)
            return luna_error_set(err, LUNA_EINVAL,
                                  "metrics %s: label \"le\" is reserved for histogram buckets",
                                  d->name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(d->labels[j], l) == 0)
                return luna_error_set(err, LUNA_EINVAL, "metrics %s: duplicate label \"%s\"",
                                      d->name, l);
    }
    *bounds = NULL;
    *nb = 0;
    if (d->type != LUNA_METRIC_HISTOGRAM) {
        if (d->buckets || d->nbuckets)
            return luna_error_set(err, LUNA_EINVAL, "metrics %s: buckets on a %s",
                                  d->name, luna_metric_type_name(d->type));
        return 0;
    }
    if (!d->buckets || d->nbuckets == 0) {
        *bounds = default_buckets;
        *nb = sizeof default_buckets / sizeof default_buckets[0];
        return 0;
    }
    size_t n = d->nbuckets;
    if (isinf(d->buckets[n - 1]) && d->buckets[n - 1] > 0)
        n--; /* the implied +Inf, given explicitly */
    if (n > LUNA_METRICS_MAX_BUCKETS)
        return luna_error_set(err, LUNA_EINVAL, "metrics %s: %zu buckets (at most %d)",
                              d->name, n, LUNA_METRICS_MAX_BUCKETS);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(d->buckets[i]))
            return luna_error_set(err, LUNA_EINVAL,
                                  "metrics %s: bucket %zu is %g (only the last may be +Inf)",
                                  d->name, i + 1, d->buckets[i]);
        if (i > 0 && !(d->buckets[i] > d->buckets[i - 1]))
            return luna_error_set(err, LUNA_EINVAL,
                                  "metrics %s: buckets must be strictly increasing "
                                  "(bucket %zu is %g after %g)",
                                  d->name, i + 1, d->buckets[i], d->buckets[i - 1]);
    }
    *bounds = d->buckets;
    *nb = n;
    return 0;
}

/* ---- families ------------------------------------------------------------------- */

static void family_destroy(struct luna_metric_family *f)
{
    for (size_t i = 0; i < f->nlabels; i++)
        free(f->labels[i]);
    free(f->labels);
    free(f->bounds);
    free(f->bound_text);
    free(f->name);
    free(f->help);
    free(f);
}

void luna_metric_family_ref(struct luna_metric_family *f) { f->refs++; }

void luna_metric_family_unref(struct luna_metric_family *f)
{
    /* refs reaches 0 only once the family is unregistered and no child
     * (each holds a reference) is left. */
    if (f && --f->refs == 0)
        family_destroy(f);
}

static struct luna_metric_family *family_new(const struct luna_metric_desc *d,
                                             const double *bounds, size_t nb)
{
    struct luna_metric_family *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->type = d->type;
    f->name = strdup(d->name);
    f->help = strdup(d->help ? d->help : "");
    f->nlabels = count_strings(d->labels);
    f->labels = calloc(f->nlabels ? f->nlabels : 1, sizeof *f->labels);
    f->nbuckets = nb;
    if (nb) {
        f->bounds = malloc(nb * sizeof *f->bounds);
        f->bound_text = malloc(nb * sizeof *f->bound_text);
    }
    bool ok = f->name && f->help && f->labels && (!nb || (f->bounds && f->bound_text));
    for (size_t i = 0; ok && i < f->nlabels; i++)
        ok = (f->labels[i] = strdup(d->labels[i])) != NULL;
    if (!ok) {
        family_destroy(f);
        return NULL;
    }
    for (size_t i = 0; i < nb; i++) {
        f->bounds[i] = bounds[i];
        luna_metrics_format_value(bounds[i], f->bound_text[i]);
    }
    f->refs = 1;
    f->children_sorted = true;
    return f;
}

static bool same_desc(const struct luna_metric_family *f, const struct luna_metric_desc *d,
                      const double *bounds, size_t nb)
{
    if (f->type != d->type || strcmp(f->help, d->help ? d->help : "") != 0 ||
        f->nlabels != count_strings(d->labels) || f->nbuckets != nb)
        return false;
    for (size_t i = 0; i < f->nlabels; i++)
        if (strcmp(f->labels[i], d->labels[i]) != 0)
            return false;
    for (size_t i = 0; i < nb; i++)
        if (f->bounds[i] != bounds[i])
            return false;
    return true;
}

static bool is_rendering(const struct luna_metric_family *f)
{
    return f->reg && f->reg->rendering;
}

/* ---- children ------------------------------------------------------------------- */

static void child_destroy(struct luna_metric_child *c)
{
    if (c->is_func && c->release)
        c->release(c->ud);
    luna_metric_family_unref(c->family);
    free(c);
}

void luna_metric_child_ref(struct luna_metric_child *c) { c->refs++; }

void luna_metric_child_unref(struct luna_metric_child *c)
{
    if (c && --c->refs == 0)
        child_destroy(c);
}

static void child_unlist(struct luna_metric_family *f, struct luna_metric_child *c)
{
    HASH_DEL(f->children, c);
    c->listed = false;
    luna_metric_child_unref(c);
}

static void family_remove_all(struct luna_metric_family *f)
{
    struct luna_metric_child *c, *tmp;
    HASH_ITER(hh, f->children, c, tmp)
        child_unlist(f, c);
    f->children_sorted = true;
}

/* The joined key of a value tuple, in buf if it fits (else malloc'd: *heap
 * is set and the caller frees it).  LUNA_EINVAL on a wrong count. */
static int build_key(const struct luna_metric_family *f, const char *const *values,
                     char *buf, size_t bufsize, char **key, size_t *keylen, char **heap)
{
    size_t n = count_strings(values);
    *heap = NULL;
    if (n != f->nlabels)
        return LUNA_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!valid_utf8(values[i]))
            return LUNA_EINVAL;
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += strlen(values[i]) + 1;
    char *p = buf;
    if (len > bufsize) {
        p = *heap = malloc(len);
        if (!p)
            return LUNA_ENOMEM;
    }
    *key = p;
    *keylen = len;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(values[i]) + 1;
        memcpy(p, values[i], l);
        p += l;
    }
    return 0;
}

static struct luna_metric_child *find_key(const struct luna_metric_family *f,
                                          const char *key, size_t keylen)
{
    struct luna_metric_child *c;
    HASH_FIND(hh, f->children, key, keylen, c);
    return c;
}

/* A new listed child for key (the family's reference is its first). */
static struct luna_metric_child *child_new(struct luna_metric_family *f, const char *key,
                                           size_t keylen)
{
    size_t labels_len = 0;
    const char *v = key;
    for (size_t i = 0; i < f->nlabels; i++) {
        labels_len += (i ? 1 : 0) + strlen(f->labels[i]) + 2 + escaped_len(v) + 1;
        v += strlen(v) + 1;
    }
    size_t nb = f->type == LUNA_METRIC_HISTOGRAM ? f->nbuckets + 1 : 0;
    size_t size = sizeof(struct luna_metric_child) + nb * sizeof(uint64_t) + keylen + 1 +
                  labels_len + 1;
    struct luna_metric_child *c = malloc(size);
    if (!c)
        return NULL;
    memset(c, 0, sizeof *c);
    c->buckets = (uint64_t *)(c + 1);
    memset(c->buckets, 0, nb * sizeof(uint64_t));
    c->key = (char *)(c->buckets + nb);
    memcpy(c->key, key, keylen);
    c->key[keylen] = '\0';
    c->keylen = keylen;
    c->labels_text = c->key + keylen + 1;
    char *p = c->labels_text;
    v = key;
    for (size_t i = 0; i < f->nlabels; i++) {
        if (i)
            *p++ = ',';
        size_t ln = strlen(f->labels[i]);
        memcpy(p, f->labels[i], ln);
        p += ln;
        *p++ = '=';
        *p++ = '"';
        p = put_escaped(p, v);
        *p++ = '"';
        v += strlen(v) + 1;
    }
    *p = '\0';
    c->labels_len = labels_len;
    c->type = f->type;
    c->family = f;
    luna_metric_family_ref(f);
    c->refs = 1;
    c->listed = true;
    HASH_ADD_KEYPTR(hh, f->children, c->key, c->keylen, c);
    f->children_sorted = false;
    return c;
}

static int child_get(struct luna_metric_family *f, const char *const *values, bool func,
                     struct luna_metric_child **out, luna_error *err)
{
    if (!f->reg)
        return luna_error_set(err, LUNA_EINVAL, "metrics %s: family is not registered",
                              f->name);
    if (is_rendering(f))
        return luna_error_set(err, LUNA_EINVAL,
                              "metrics %s: cannot add series during a render", f->name);
    if (func && f->type == LUNA_METRIC_HISTOGRAM)
        return luna_error_set(err, LUNA_EINVAL,
                              "metrics %s: a histogram cannot be a function", f->name);
    char buf[256], *key, *heap;
    size_t keylen;
    int rc = build_key(f, values, buf, sizeof buf, &key, &keylen, &heap);
    if (rc == LUNA_EINVAL && count_strings(values) != f->nlabels)
        return luna_error_set(err, rc, "metrics %s: %zu label values for %zu labels",
                              f->name, count_strings(values), f->nlabels);
    if (rc == LUNA_EINVAL)
        return luna_error_set(err, rc, "metrics %s: a label value is not valid UTF-8",
                              f->name);
    if (rc)
        return luna_error_set(err, rc, "metrics %s: out of memory", f->name);
    struct luna_metric_child *c = find_key(f, key, keylen);
    if (c && (func || c->is_func)) {
        free(heap);
        return luna_error_set(err, LUNA_EINVAL,
                              func ? "metrics %s: series {%s} already exists"
                                   : "metrics %s: series {%s} is a function",
                              f->name, c->labels_text);
    }
    if (!c)
        c = child_new(f, key, keylen);
    free(heap);
    if (!c)
        return luna_error_set(err, LUNA_ENOMEM, "metrics %s: out of memory", f->name);
    *out = c;
    return 0;
}

int luna_metric_child(struct luna_metric_family *f, const char *const *values,
                      struct luna_metric_child **out, luna_error *err)
{
    return child_get(f, values, false, out, err);
}

int luna_metric_func(struct luna_metric_family *f, const char *const *values,
                     luna_metric_fn fn, void *ud, void (*release)(void *ud),
                     struct luna_metric_child **out, luna_error *err)
{
    if (!fn)
        return luna_error_set(err, LUNA_EINVAL, "metrics %s: no function given", f->name);
    struct luna_metric_child *c;
    int rc = child_get(f, values, true, &c, err);
    if (rc)
        return rc;
    c->is_func = true;
    c->fn = fn;
    c->ud = ud;
    c->release = release;
    if (out)
        *out = c;
    return 0;
}

struct luna_metric_child *luna_metric_lookup(const struct luna_metric_family *f,
                                             const char *const *values)
{
    char buf[256], *key, *heap;
    size_t keylen;
    if (build_key(f, values, buf, sizeof buf, &key, &keylen, &heap))
        return NULL;
    struct luna_metric_child *c = find_key(f, key, keylen);
    free(heap);
    return c;
}

int luna_metric_child_remove(struct luna_metric_child *c)
{
    if (!c->listed)
        return LUNA_ENOTFOUND;
    if (is_rendering(c->family))
        return LUNA_EINVAL;
    child_unlist(c->family, c);
    return 0;
}

int luna_metric_remove(struct luna_metric_family *f, const char *const *values)
{
    if (is_rendering(f))
        return LUNA_EINVAL;
    struct luna_metric_child *c = luna_metric_lookup(f, values);
    if (!c)
        return LUNA_ENOTFOUND;
    child_unlist(f, c);
    return 0;
}

struct luna_metric_family *luna_metric_child_family(const struct luna_metric_child *c)
{
    return c->family;
}

bool luna_metric_child_listed(const struct luna_metric_child *c) { return c->listed; }
bool luna_metric_child_is_func(const struct luna_metric_child *c) { return c->is_func; }

const char *luna_metric_child_label(const struct luna_metric_child *c, size_t i)
{
    if (i >= c->family->nlabels)
        return NULL;
    const char *v = c->key;
    while (i--)
        v += strlen(v) + 1;
    return v;
}

/* ---- updates -------------------------------------------------------------------- */

int luna_metric_inc(struct luna_metric_child *c)
{
    if (c->type == LUNA_METRIC_HISTOGRAM || c->is_func)
        return LUNA_EINVAL;
    c->value += 1;
    return 0;
}

int luna_metric_add(struct luna_metric_child *c, double v)
{
    if (c->type == LUNA_METRIC_HISTOGRAM || c->is_func ||
        (c->type == LUNA_METRIC_COUNTER && !(v >= 0)))
        return LUNA_EINVAL;
    c->value += v;
    return 0;
}

int luna_metric_set(struct luna_metric_child *c, double v)
{
    if (c->type != LUNA_METRIC_GAUGE || c->is_func)
        return LUNA_EINVAL;
    c->value = v;
    return 0;
}

int luna_metric_observe(struct luna_metric_child *c, double v)
{
    if (c->type != LUNA_METRIC_HISTOGRAM)
        return LUNA_EINVAL;
    const double *bounds = c->family->bounds;
    size_t lo = 0, hi = c->family->nbuckets;
    while (lo < hi) { /* the first bound >= v; none for NaN */
        size_t mid = lo + (hi - lo) / 2;
        if (bounds[mid] >= v)
            hi = mid;
        else
            lo = mid + 1;
    }
    c->buckets[lo]++;
    c->count++;
    c->sum += v;
    return 0;
}

double luna_metric_value(const struct luna_metric_child *c)
{
    if (c->type == LUNA_METRIC_HISTOGRAM)
        return NAN;
    return c->is_func ? c->fn(c->ud) : c->value;
}

int luna_metric_histogram_read(const struct luna_metric_child *c, uint64_t *count,
                               double *sum, uint64_t *buckets)
{
    if (c->type != LUNA_METRIC_HISTOGRAM)
        return LUNA_EINVAL;
    if (count)
        *count = c->count;
    if (sum)
        *sum = c->sum;
    if (buckets) {
        uint64_t cum = 0;
        for (size_t i = 0; i <= c->family->nbuckets; i++)
            buckets[i] = cum += c->buckets[i];
    }
    return 0;
}

/* ---- family accessors and removal ---------------------------------------------- */

const char *luna_metric_family_name(const struct luna_metric_family *f) { return f->name; }
const char *luna_metric_family_help(const struct luna_metric_family *f) { return f->help; }
enum luna_metric_type luna_metric_family_type(const struct luna_metric_family *f)
{
    return f->type;
}
size_t luna_metric_family_label_count(const struct luna_metric_family *f)
{
    return f->nlabels;
}
const char *luna_metric_family_label(const struct luna_metric_family *f, size_t i)
{
    return i < f->nlabels ? f->labels[i] : NULL;
}
size_t luna_metric_family_bucket_count(const struct luna_metric_family *f)
{
    return f->nbuckets;
}
double luna_metric_family_bucket(const struct luna_metric_family *f, size_t i)
{
    return i < f->nbuckets ? f->bounds[i] : NAN;
}
size_t luna_metric_family_child_count(const struct luna_metric_family *f)
{
    return HASH_COUNT(f->children);
}
bool luna_metric_family_registered(const struct luna_metric_family *f) { return f->reg; }

int luna_metric_family_clear(struct luna_metric_family *f)
{
    if (is_rendering(f))
        return LUNA_EINVAL;
    family_remove_all(f);
    return 0;
}

int luna_metric_family_remove_matching(struct luna_metric_family *f, const char *label,
                                       const char *value)
{
    if (is_rendering(f))
        return LUNA_EINVAL;
    size_t idx = f->nlabels;
    for (size_t i = 0; i < f->nlabels; i++)
        if (strcmp(f->labels[i], label) == 0)
            idx = i;
    if (idx == f->nlabels)
        return 0;
    int n = 0;
    struct luna_metric_child *c, *tmp;
    HASH_ITER(hh, f->children, c, tmp) {
        if (strcmp(luna_metric_child_label(c, idx), value) == 0) {
            child_unlist(f, c);
            n++;
        }
    }
    return n;
}

int luna_metric_family_unregister(struct luna_metric_family *f)
{
    struct luna_metrics *reg = f->reg;
    if (!reg)
        return LUNA_ENOTFOUND;
    if (reg->rendering)
        return LUNA_EINVAL;
    family_remove_all(f);
    HASH_DEL(reg->families, f);
    f->reg = NULL;
    luna_metric_family_unref(f);
    return 0;
}

/* ---- registry ------------------------------------------------------------------- */

int luna_metrics_new(struct luna_metrics **out, luna_error *err)
{
    struct luna_metrics *reg = calloc(1, sizeof *reg);
    if (!reg)
        return luna_error_set(err, LUNA_ENOMEM, "metrics: out of memory");
    reg->sorted = true;
    *out = reg;
    return 0;
}

void luna_metrics_free(struct luna_metrics *reg)
{
    if (!reg)
        return;
    struct luna_metric_family *f, *tmp;
    HASH_ITER(hh, reg->families, f, tmp)
        luna_metric_family_unregister(f);
    free(reg);
}

struct luna_metrics *luna_metrics_default(void)
{
    static struct luna_metrics *reg;
    if (!reg)
        luna_metrics_new(&reg, NULL);
    return reg;
}

struct luna_metric_family *luna_metrics_find(const struct luna_metrics *reg,
                                             const char *name)
{
    struct luna_metric_family *f;
    HASH_FIND_STR(reg->families, name, f);
    return f;
}

size_t luna_metrics_family_count(const struct luna_metrics *reg)
{
    return HASH_COUNT(reg->families);
}

/* The name of a registered family whose series would collide with name's
 * (a histogram's name_bucket, name_sum, name_count), or NULL. */
static const char *series_clash(const struct luna_metrics *reg, const char *name,
                                enum luna_metric_type type)
{
    static const char *const suffixes[] = { "_bucket", "_sum", "_count" };
    size_t len = strlen(name);
    char buf[512];
    for (size_t i = 0; i < 3; i++) {
        size_t sl = strlen(suffixes[i]);
        /* name = histogram stem + suffix? */
        if (len > sl && strcmp(name + len - sl, suffixes[i]) == 0 && len - sl < sizeof buf) {
            memcpy(buf, name, len - sl);
            buf[len - sl] = '\0';
            struct luna_metric_family *f = luna_metrics_find(reg, buf);
            if (f && f->type == LUNA_METRIC_HISTOGRAM)
                return f->name;
        }
        /* a histogram whose series are other families' names? */
        if (type == LUNA_METRIC_HISTOGRAM && len + sl < sizeof buf) {
            memcpy(buf, name, len);
            memcpy(buf + len, suffixes[i], sl + 1);
            struct luna_metric_family *f = luna_metrics_find(reg, buf);
            if (f)
                return f->name;
        }
    }
    return NULL;
}

int luna_metrics_register(struct luna_metrics *reg, const struct luna_metric_desc *desc,
                          struct luna_metric_family **out, luna_error *err)
{
    const double *bounds;
    size_t nb;
    int rc = check_desc(desc, &bounds, &nb, err);
    if (rc)
        return rc;
    if (reg->rendering)
        return luna_error_set(err, LUNA_EINVAL,
                              "metrics %s: cannot register during a render", desc->name);
    struct luna_metric_family *f = luna_metrics_find(reg, desc->name);
    if (f) {
        if (!same_desc(f, desc, bounds, nb))
            return luna_error_set(err, LUNA_EINVAL,
                                  "metrics %s: already registered with a different "
                                  "type, help, labels or buckets", desc->name);
        *out = f;
        return 0;
    }
    const char *clash = series_clash(reg, desc->name, desc->type);
    if (clash)
        return luna_error_set(err, LUNA_EINVAL,
                              "metrics %s: its series would collide with those of %s",
                              desc->name, clash);
    f = family_new(desc, bounds, nb);
    if (!f)
        return luna_error_set(err, LUNA_ENOMEM, "metrics %s: out of memory", desc->name);
    f->reg = reg;
    HASH_ADD_KEYPTR(hh, reg->families, f->name, strlen(f->name), f);
    reg->sorted = false;
    *out = f;
    return 0;
}

int luna_metrics_remove_matching(struct luna_metrics *reg, const char *label,
                                 const char *value)
{
    if (reg->rendering)
        return LUNA_EINVAL;
    int n = 0;
    for (struct luna_metric_family *f = reg->families; f; f = f->hh.next)
        n += luna_metric_family_remove_matching(f, label, value);
    return n;
}

/* ---- rendering ------------------------------------------------------------------ */

static int cmp_family(const struct luna_metric_family *a, const struct luna_metric_family *b)
{
    return strcmp(a->name, b->name);
}

/* Label tuples in order: each value ends in a NUL, which sorts first, so
 * comparing the joined keys compares the tuples label by label. */
static int cmp_child(const struct luna_metric_child *a, const struct luna_metric_child *b)
{
    size_t n = a->keylen < b->keylen ? a->keylen : b->keylen;
    int c = memcmp(a->key, b->key, n);
    if (c)
        return c;
    return a->keylen < b->keylen ? -1 : a->keylen > b->keylen;
}

/* name{labels[,extra]} ; extra is e.g. le="0.5" (without a comma). */
static void put_series(struct luna_textbuf *out, const char *name, const char *suffix,
                       const struct luna_metric_child *c, const char *le)
{
    luna_textbuf_puts(out, name);
    if (suffix)
        luna_textbuf_puts(out, suffix);
    if (c->labels_len || le) {
        luna_textbuf_putc(out, '{');
        luna_textbuf_append(out, c->labels_text, c->labels_len);
        if (le) {
            if (c->labels_len)
                luna_textbuf_putc(out, ',');
            luna_textbuf_append(out, "le=\"", 4);
            luna_textbuf_puts(out, le);
            luna_textbuf_putc(out, '"');
        }
        luna_textbuf_putc(out, '}');
    }
    luna_textbuf_putc(out, ' ');
}

static void render_child(struct luna_textbuf *out, const struct luna_metric_family *f,
                         const struct luna_metric_child *c)
{
    if (f->type != LUNA_METRIC_HISTOGRAM) {
        put_series(out, f->name, NULL, c, NULL);
        put_value(out, c->is_func ? c->fn(c->ud) : c->value);
        luna_textbuf_putc(out, '\n');
        return;
    }
    uint64_t cum = 0;
    for (size_t i = 0; i <= f->nbuckets; i++) {
        cum += c->buckets[i];
        put_series(out, f->name, "_bucket", c, i < f->nbuckets ? f->bound_text[i] : "+Inf");
        put_count(out, cum);
        luna_textbuf_putc(out, '\n');
    }
    put_series(out, f->name, "_sum", c, NULL);
    put_value(out, c->sum);
    luna_textbuf_putc(out, '\n');
    put_series(out, f->name, "_count", c, NULL);
    put_count(out, c->count);
    luna_textbuf_putc(out, '\n');
}

int luna_metrics_render(struct luna_metrics *reg, struct luna_textbuf *out, luna_error *err)
{
    if (reg->rendering)
        return luna_error_set(err, LUNA_EINVAL,
                              "metrics: render called from a metric function");
    reg->rendering = true;
    if (!reg->sorted) {
        HASH_SRT(hh, reg->families, cmp_family);
        reg->sorted = true;
    }
    for (struct luna_metric_family *f = reg->families; f; f = f->hh.next) {
        if (!f->children)
            continue;
        if (!f->children_sorted) {
            HASH_SRT(hh, f->children, cmp_child);
            f->children_sorted = true;
        }
        luna_textbuf_append(out, "# HELP ", 7);
        luna_textbuf_puts(out, f->name);
        luna_textbuf_putc(out, ' ');
        put_help(out, f->help);
        luna_textbuf_append(out, "\n# TYPE ", 8);
        luna_textbuf_puts(out, f->name);
        luna_textbuf_putc(out, ' ');
        luna_textbuf_puts(out, luna_metric_type_name(f->type));
        luna_textbuf_putc(out, '\n');
        for (const struct luna_metric_child *c = f->children; c; c = c->hh.next)
            render_child(out, f, c);
    }
    reg->rendering = false;
    if (out->failed)
        return luna_error_set(err, LUNA_ENOMEM, "metrics: out of memory while rendering");
    return 0;
}
