/* cron.c — see cron.h. */
#include "base/cron.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct field {
    const char *name;
    int lo, hi;
    const char *const *names; /* names for lo, lo+1, ... or NULL */
};

static const char *const month_names[] = { "jan", "feb", "mar", "apr", "may", "jun",
                                           "jul", "aug", "sep", "oct", "nov", "dec", NULL };
static const char *const dow_names[] = { "sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL };

static const struct field fields[5] = {
    { "minute", 0, 59, NULL },
    { "hour", 0, 23, NULL },
    { "day of month", 1, 31, NULL },
    { "month", 1, 12, month_names },
    { "day of week", 0, 7, dow_names },
};

/* A number or a name of field f at *p (advanced); -1 if neither. */
static int value(const struct field *f, const char **p)
{
    const char *s = *p;
    if (*s >= '0' && *s <= '9') {
        long v = 0;
        while (*s >= '0' && *s <= '9' && v < 1000)
            v = v * 10 + (*s++ - '0');
        *p = s;
        return (int)v;
    }
    for (int i = 0; f->names && f->names[i]; i++) {
        if (strncasecmp(s, f->names[i], 3) == 0) {
            *p = s + 3;
            return f->lo + i;
        }
    }
    return -1;
}

/* Parses one field (len bytes at s) into bits.  star: an element of the
 * list is `*` or `?` with no step or a step of 1.  That is robfig/cron v3's
 * rule, which CronJobs follow: a star with a step above 1 counts as restricted,
 * so day-of-month "star slash 2" with day-of-week 1 runs on odd days OR
 * Mondays (Vixie cron would say AND). */
static int parse_field(const struct field *f, const char *s, size_t len, uint64_t *bits,
                       bool *star, luna_error *err)
{
    char buf[LUNA_CRON_MAX_TEXT + 1];
    memcpy(buf, s, len);
    buf[len] = '\0';
    *bits = 0;
    *star = false;
    /* strtok_r skips empty elements: "1,,2" and "1," would pass as "1,2"
     * and "1", which robfig/cron (and so a CronJob) refuses */
    if (len == 0 || buf[0] == ',' || buf[len - 1] == ',' || strstr(buf, ",,"))
        return luna_error_set(err, LUNA_EINVAL, "cron: %s: empty list element in \"%s\"",
                              f->name, buf);
    char *save = NULL;
    for (char *part = strtok_r(buf, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
        const char *p = part;
        int a, b, step = 1;
        bool range = false; /* "a-b": a step stays within it, even when a == b */
        bool any = *p == '*' || *p == '?';
        if (any) {
            a = f->lo;
            b = f->hi == 7 ? 6 : f->hi;
            p++;
        } else {
            if ((a = value(f, &p)) < 0)
                return luna_error_set(err, LUNA_EINVAL, "cron: %s: bad value \"%s\"", f->name,
                                      part);
            b = a;
            if (*p == '-') {
                range = true;
                p++;
                if ((b = value(f, &p)) < 0)
                    return luna_error_set(err, LUNA_EINVAL, "cron: %s: bad range \"%s\"",
                                          f->name, part);
            }
        }
        if (*p == '/') {
            p++;
            const char *q = p;
            step = value(&(struct field){ f->name, 0, 0, NULL }, &q);
            if (step < 1 || q == p)
                return luna_error_set(err, LUNA_EINVAL, "cron: %s: bad step \"%s\"", f->name,
                                      part);
            p = q;
            if (!range && !any)
                b = f->hi == 7 ? 6 : f->hi; /* "5/15": from 5 to the end */
        }
        if (*p)
            return luna_error_set(err, LUNA_EINVAL, "cron: %s: bad value \"%s\"", f->name, part);
        if (any && step == 1)
            *star = true;
        if (a < f->lo || a > f->hi || b < f->lo || b > f->hi)
            return luna_error_set(err, LUNA_EINVAL, "cron: %s: %d out of range %d-%d", f->name,
                                  a < f->lo || a > f->hi ? a : b, f->lo, f->hi);
        if (a > b)
            return luna_error_set(err, LUNA_EINVAL, "cron: %s: range %d-%d runs backwards",
                                  f->name, a, b);
        for (int v = a; v <= b; v += step)
            *bits |= 1ull << (f->hi == 7 && v == 7 ? 0 : v);
    }
    if (!*bits)
        return luna_error_set(err, LUNA_EINVAL, "cron: %s: empty", f->name);
    return 0;
}

static const struct { const char *name, *spec; } macros[] = {
    { "@yearly", "0 0 1 1 *" }, { "@annually", "0 0 1 1 *" }, { "@monthly", "0 0 1 * *" },
    { "@weekly", "0 0 * * 0" }, { "@daily", "0 0 * * *" },    { "@midnight", "0 0 * * *" },
    { "@hourly", "0 * * * *" },
};

int luna_cron_parse(const char *text, struct luna_cron *out, luna_error *err)
{
    memset(out, 0, sizeof *out);
    if (!text || strlen(text) > LUNA_CRON_MAX_TEXT)
        return luna_error_set(err, LUNA_EINVAL, "cron: want five fields of at most %d bytes",
                              LUNA_CRON_MAX_TEXT);
    while (*text == ' ' || *text == '\t')
        text++;
    if (*text == '@') {
        size_t n = strcspn(text, " \t");
        for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++)
            if (strlen(macros[i].name) == n && strncmp(text, macros[i].name, n) == 0 &&
                !text[n + strspn(text + n, " \t")])
                return luna_cron_parse(macros[i].spec, out, err);
        return luna_error_set(err, LUNA_EINVAL, "cron: unknown macro \"%.*s\" (want @yearly, "
                              "@monthly, @weekly, @daily or @hourly)", (int)n, text);
    }
    const char *p = text;
    uint64_t bits[5];
    bool star[5];
    for (int i = 0; i < 5; i++) {
        p += strspn(p, " \t");
        size_t n = strcspn(p, " \t");
        if (n == 0)
            return luna_error_set(err, LUNA_EINVAL, "cron: want five fields (minute hour "
                                  "day-of-month month day-of-week), got %d", i);
        int rc = parse_field(&fields[i], p, n, &bits[i], &star[i], err);
        if (rc < 0)
            return rc;
        p += n;
    }
    p += strspn(p, " \t");
    if (*p)
        return luna_error_set(err, LUNA_EINVAL, "cron: want five fields, got more: \"%s\"", p);
    out->minute = bits[0];
    out->hour = (uint32_t)bits[1];
    out->dom = (uint32_t)bits[2];
    out->month = (uint16_t)bits[3];
    out->dow = (uint8_t)bits[4];
    out->dom_star = star[2];
    out->dow_star = star[4];
    return 0;
}

#define CRON_LAST_TIME LUNA_CRON_MAX_TIME

static bool day_matches(const struct luna_cron *c, const struct tm *t)
{
    bool dom = c->dom >> t->tm_mday & 1, dow = c->dow >> t->tm_wday & 1;
    if (c->dom_star || c->dow_star)
        return dom && dow;
    return dom || dow;
}

double luna_cron_next(const struct luna_cron *c, double after)
{
    /* Unix time 0 to the end of year 9999: beyond, the minute arithmetic
     * below would overflow time_t and gmtime_r could fail. */
    if (!(after >= 0 && after <= CRON_LAST_TIME))
        return -1;
    time_t t = (time_t)floor(after / 60.0) * 60 + 60; /* the next whole minute */
    time_t limit = t + (time_t)5 * 366 * 86400;
    struct tm tm;
    while (t < limit) {
        if (!gmtime_r(&t, &tm))
            return -1;
        if (!(c->month >> (tm.tm_mon + 1) & 1)) {
            /* the first day of the next month */
            tm.tm_mday = 1;
            tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
            tm.tm_mon++;
            t = timegm(&tm);
            continue;
        }
        if (!day_matches(c, &tm)) {
            t += 86400 - (tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec);
            continue;
        }
        if (!(c->hour >> tm.tm_hour & 1)) {
            t += 3600 - (tm.tm_min * 60 + tm.tm_sec);
            continue;
        }
        if (!(c->minute >> tm.tm_min & 1)) {
            t += 60 - tm.tm_sec;
            continue;
        }
        return (double)t;
    }
    return -1;
}
