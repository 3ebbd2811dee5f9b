/*
 * cron.h — cron schedules ("0 3 * * 1-5") as Kubernetes CronJobs and
 * robfig/cron's standard parser read them: five fields, minute (0-59),
 * hour (0-23), day of month (1-31), month (1-12 or jan-dec), day of week
 * (0-6 or sun-sat, 7 is Sunday too); each field `*`, a value, a range
 * `a-b`, a list `a,b`, and a step `*\/n` or `a-b/n`; the macros @yearly
 * (@annually), @monthly, @weekly, @daily (@midnight), @hourly.  When both
 * day of month and day of week are restricted, a day matching either
 * runs (as cron does).  Times are UTC.
 *
 * Errors are LUNA_EINVAL with the field and the reason ("cron: minute: 61
 * out of range 0-59").  Pure functions; no loop, no allocation.
 */
#ifndef LUNA_CRON_H
#define LUNA_CRON_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

#define LUNA_CRON_MAX_TEXT 128
/* The last second luna_cron_next takes: 9999-12-31T23:59:59Z. */
#define LUNA_CRON_MAX_TIME 253402300799.0

struct luna_cron {
    uint64_t minute;   /* bit m: minute m */
    uint32_t hour;     /* bit h */
    uint32_t dom;      /* bit d: day d of the month (1..31) */
    uint16_t month;    /* bit m: month m (1..12) */
    uint8_t dow;       /* bit d: day d of the week (0 Sunday..6) */
    bool dom_star, dow_star; /* the field was `*` (or a step over it) */
};

int luna_cron_parse(const char *text, struct luna_cron *out, luna_error *err);
/* The first minute of the schedule strictly after `after` (Unix seconds),
 * or -1 if none within five years (a schedule like "0 0 30 2 *") or `after`
 * is outside 0 (1970) .. 253402300799 (the end of year 9999), NaN included. */
double luna_cron_next(const struct luna_cron *c, double after);

#endif
