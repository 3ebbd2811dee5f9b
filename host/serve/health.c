/* health.c — see health.h. */
#include "serve/health.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#define MAX_NAME 128
#define MAX_REASON 512

struct check {
    UT_hash_handle hh;      /* in h->checks, in registration order */
    bool ok;
    char *reason;           /* "" if none */
    char name[];
};

struct luna_health {
    ev_timer timer;                   /* first: the callback casts back */
    struct ev_loop *loop;             /* NULL: no timer */
    const struct luna_clock *clock;   /* borrowed */
    double interval, timeout;
    _Atomic double last_beat;         /* read from any thread */
    struct check *checks;
};

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    luna_health_beat((struct luna_health *)w);
}

int luna_health_new(const struct luna_health_options *opts, struct luna_health **out,
                    luna_error *err)
{
    double interval = opts->interval ? opts->interval : 1.0;
    double timeout = opts->timeout ? opts->timeout : LUNA_HEALTH_DEFAULT_TIMEOUT;
    if (!isfinite(interval) || !isfinite(timeout) || interval <= 0 || timeout <= interval)
        return luna_error_set(err, LUNA_EINVAL,
                              "health: want 0 < interval < timeout (finite), got "
                              "interval %g, timeout %g", interval, timeout);
    struct luna_health *h = calloc(1, sizeof *h);
    if (!h)
        return luna_error_set(err, LUNA_ENOMEM, "health: out of memory");
    h->clock = opts->clock ? opts->clock : luna_clock_monotonic();
    h->loop = opts->loop;
    h->interval = interval;
    h->timeout = timeout;
    atomic_init(&h->last_beat, luna_clock_now(h->clock));
    ev_timer_init(&h->timer, timer_cb, interval, interval);
    if (h->loop) {
        ev_timer_start(h->loop, &h->timer);
        ev_unref(h->loop);
    }
    *out = h;
    return 0;
}

void luna_health_free(struct luna_health *h)
{
    if (!h)
        return;
    if (h->loop) {
        ev_ref(h->loop);
        ev_timer_stop(h->loop, &h->timer);
    }
    struct check *c, *tmp;
    HASH_ITER(hh, h->checks, c, tmp) {
        HASH_DEL(h->checks, c);
        free(c->reason);
        free(c);
    }
    free(h);
}

void luna_health_beat(struct luna_health *h)
{
    atomic_store_explicit(&h->last_beat, luna_clock_now(h->clock), memory_order_relaxed);
}

double luna_health_heartbeat_age(const struct luna_health *h)
{
    double last = atomic_load_explicit(&((struct luna_health *)h)->last_beat,
                                       memory_order_relaxed);
    return luna_clock_now(h->clock) - last;
}

bool luna_health_live(const struct luna_health *h)
{
    return luna_health_heartbeat_age(h) <= h->timeout;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MAX_NAME)
        return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '/' || c == '-'))
            return false;
    }
    return true;
}

/* A copy of reason fit for one line: control characters become spaces, at
 * most MAX_REASON bytes (not splitting a UTF-8 sequence). */
static char *clean_reason(const char *reason)
{
    if (!reason)
        reason = "";
    size_t n = strlen(reason);
    if (n > MAX_REASON) {
        n = MAX_REASON;
        while (n > 0 && ((unsigned char)reason[n] & 0xC0) == 0x80)
            n--;
    }
    char *copy = malloc(n + 1);
    if (!copy)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)reason[i];
        copy[i] = (c < 0x20 || c == 0x7F) ? ' ' : (char)c;
    }
    copy[n] = '\0';
    return copy;
}

int luna_health_set(struct luna_health *h, const char *name, bool ok, const char *reason,
                    luna_error *err)
{
    if (!name || !valid_name(name))
        return luna_error_set(err, LUNA_EINVAL,
                              "health: invalid check name \"%s\" (want [A-Za-z0-9._/-], "
                              "1 to %d bytes)", name ? name : "(null)", MAX_NAME);
    char *copy = clean_reason(reason);
    if (!copy)
        return luna_error_set(err, LUNA_ENOMEM, "health: out of memory");
    struct check *c;
    HASH_FIND_STR(h->checks, name, c);
    if (!c) {
        size_t len = strlen(name);
        c = calloc(1, sizeof *c + len + 1);
        if (!c) {
            free(copy);
            return luna_error_set(err, LUNA_ENOMEM, "health: out of memory");
        }
        memcpy(c->name, name, len + 1);
        HASH_ADD_KEYPTR(hh, h->checks, c->name, len, c);
    }
    free(c->reason);
    c->reason = copy;
    c->ok = ok;
    return 0;
}

int luna_health_remove(struct luna_health *h, const char *name)
{
    struct check *c;
    HASH_FIND_STR(h->checks, name, c);
    if (!c)
        return LUNA_ENOTFOUND;
    HASH_DEL(h->checks, c);
    free(c->reason);
    free(c);
    return 0;
}

int luna_health_check(const struct luna_health *h, const char *name, bool *ok,
                      const char **reason)
{
    struct check *c;
    HASH_FIND_STR(h->checks, name, c);
    if (!c)
        return LUNA_ENOTFOUND;
    if (ok)
        *ok = c->ok;
    if (reason)
        *reason = c->reason;
    return 0;
}

size_t luna_health_check_count(const struct luna_health *h) { return HASH_COUNT(h->checks); }

bool luna_health_ready(const struct luna_health *h)
{
    if (!luna_health_live(h))
        return false;
    for (const struct check *c = h->checks; c; c = c->hh.next)
        if (!c->ok)
            return false;
    return true;
}

/* ---- rendering ------------------------------------------------------------------ */

static bool listed(const char *const *list, const char *name)
{
    for (; list && *list; list++)
        if (strcmp(*list, name) == 0)
            return true;
    return false;
}

/* One check's line; returns whether it passed (excluded ones do). */
static bool put_check(struct luna_textbuf *out, const char *name, bool ok,
                      const char *reason, const char *const *exclude)
{
    if (listed(exclude, name)) {
        luna_textbuf_printf(out, "[+]%s excluded: ok\n", name);
        return true;
    }
    if (ok && *reason) /* a passing check's note (objects-decoded) */
        luna_textbuf_printf(out, "[+]%s ok: %s\n", name, reason);
    else if (ok)
        luna_textbuf_printf(out, "[+]%s ok\n", name);
    else if (*reason)
        luna_textbuf_printf(out, "[-]%s failed: %s\n", name, reason);
    else
        luna_textbuf_printf(out, "[-]%s failed\n", name);
    return ok;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The warning line for excluded names that match no check (sorted,
 * quoted, as kube-apiserver writes it). */
static void put_unmatched(struct luna_textbuf *out, const struct luna_health *h,
                          enum luna_health_endpoint endpoint, const char *const *exclude)
{
    size_t n = 0;
    while (exclude && exclude[n])
        n++;
    if (n == 0)
        return;
    const char **unmatched = calloc(n + 1, sizeof *unmatched); /* NULL-ended */
    if (!unmatched) {
        out->failed = true;
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = exclude[i];
        struct check *c = NULL;
        if (endpoint == LUNA_HEALTH_READYZ)
            HASH_FIND_STR(h->checks, name, c);
        if (c || strcmp(name, "loop") == 0 || listed(unmatched, name))
            continue;
        unmatched[m++] = name;
    }
    if (m) {
        qsort(unmatched, m, sizeof *unmatched, cmp_str);
        luna_textbuf_puts(out, "warn: some health checks cannot be excluded: no matches for ");
        for (size_t i = 0; i < m; i++)
            luna_textbuf_printf(out, "%s\"%s\"", i ? "," : "", unmatched[i]);
        luna_textbuf_putc(out, '\n');
    }
    free(unmatched);
}

int luna_health_render(const struct luna_health *h, enum luna_health_endpoint endpoint,
                       bool verbose, const char *const *exclude, struct luna_textbuf *out)
{
    const char *what = endpoint == LUNA_HEALTH_READYZ ? "readyz" : "healthz";
    struct luna_textbuf lines = LUNA_TEXTBUF_INIT;
    double age = luna_health_heartbeat_age(h);
    char reason[96];
    bool live = age <= h->timeout;
    if (!live)
        snprintf(reason, sizeof reason, "no heartbeat for %.1fs (timeout %gs)", age,
                 h->timeout);
    bool pass = put_check(&lines, "loop", live, live ? "" : reason, exclude);
    if (endpoint == LUNA_HEALTH_READYZ)
        for (const struct check *c = h->checks; c; c = c->hh.next)
            pass &= put_check(&lines, c->name, c->ok, c->reason, exclude);
    put_unmatched(&lines, h, endpoint, exclude);
    if (pass && !verbose && !lines.failed)
        luna_textbuf_puts(out, "ok");
    else if (!lines.failed) {
        luna_textbuf_append(out, lines.data, lines.len);
        luna_textbuf_printf(out, "%s check %s\n", what, pass ? "passed" : "failed");
    }
    bool failed = lines.failed || out->failed;
    luna_textbuf_free(&lines);
    if (failed) {
        out->failed = true;
        return LUNA_ENOMEM;
    }
    return pass ? 200 : 500;
}
