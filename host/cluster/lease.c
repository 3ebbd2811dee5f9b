/* lease.c — see lease.h. */
#include "cluster/lease.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void luna_lease_micro_time(char *buf, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%.20s.%06dZ", date, (int)((ts.tv_nsec / 1000) % 1000000));
}

bool luna_lease_dns_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            return false;
    return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

static int lookup_string(const char *json, size_t len, const char *path, char *buf,
                         size_t size)
{
    luna_json_value v;
    buf[0] = '\0';
    int rc = luna_json_lookup(json, len, path, &v, buf, size, NULL);
    if (rc == LUNA_ENOTFOUND || (rc == 0 && v.type == LUNA_JSON_NULL)) {
        buf[0] = '\0';
        return 0;
    }
    if (rc < 0)
        return rc;
    if (v.type != LUNA_JSON_STRING) {
        buf[0] = '\0';
        return LUNA_EPROTO;
    }
    return 0;
}

static int lookup_long(const char *json, size_t len, const char *path, long *out)
{
    luna_json_value v;
    char buf[64];
    *out = 0;
    int rc = luna_json_lookup(json, len, path, &v, buf, sizeof buf, NULL);
    if (rc == LUNA_ENOTFOUND || (rc == 0 && v.type == LUNA_JSON_NULL))
        return 0;
    if (rc < 0)
        return rc;
    if (v.type != LUNA_JSON_NUMBER || v.kind != LUNA_JSON_INT)
        return LUNA_EPROTO;
    *out = (long)v.i;
    return 0;
}

int luna_lease_parse(const char *json, size_t len, struct luna_lease_record *rec,
                     uint64_t *spec_start, uint64_t *spec_end)
{
    memset(rec, 0, sizeof *rec);
    *spec_start = *spec_end = 0;
    luna_json_value v;
    char buf[8];
    int rc = luna_json_lookup(json, len, "spec", &v, buf, sizeof buf, NULL);
    if (rc == 0 && v.type == LUNA_JSON_OBJECT_START) {
        *spec_start = v.start;
        *spec_end = v.end;
    } else if (rc != LUNA_ENOTFOUND && !(rc == 0 && v.type == LUNA_JSON_NULL)) {
        return LUNA_EPROTO;
    }
    if (lookup_string(json, len, "spec.holderIdentity", rec->holder, sizeof rec->holder) < 0 ||
        lookup_long(json, len, "spec.leaseDurationSeconds", &rec->duration) < 0 ||
        lookup_long(json, len, "spec.leaseTransitions", &rec->transitions) < 0 ||
        lookup_string(json, len, "spec.acquireTime", rec->acquire, sizeof rec->acquire) < 0)
        return LUNA_EPROTO;
    return 0;
}

void luna_lease_put_string(luna_json_writer *w, const char *key, const char *value)
{
    luna_json_write_key(w, key, strlen(key));
    luna_json_write_string(w, value, strlen(value));
}

void luna_lease_write_spec(luna_json_writer *w, const char *holder, long duration,
                           const char *acquire, const char *renew, long transitions)
{
    luna_json_write_object_start(w);
    luna_lease_put_string(w, "holderIdentity", holder);
    luna_json_write_key(w, "leaseDurationSeconds", 20);
    luna_json_write_int(w, duration);
    if (*acquire)
        luna_lease_put_string(w, "acquireTime", acquire);
    luna_lease_put_string(w, "renewTime", renew);
    luna_json_write_key(w, "leaseTransitions", 16);
    luna_json_write_int(w, transitions);
    luna_json_write_object_end(w);
}

int luna_lease_check_timing(const char *what, double lease, double renew, double retry,
                            double jitter, luna_error *err)
{
    if (!isfinite(lease) || !isfinite(renew) || !isfinite(retry) || !isfinite(jitter) ||
        retry <= 0 || renew <= 0)
        return luna_error_set(err, LUNA_EINVAL, "%s: durations must be finite and positive",
                              what);
    if (lease < 1)
        return luna_error_set(err, LUNA_EINVAL, "%s: lease duration must be at least 1 second, "
                              "got %g", what, lease);
    if (lease <= renew)
        return luna_error_set(err, LUNA_EINVAL, "%s: lease duration (%g s) must be greater "
                              "than the renew deadline (%g s)", what, lease, renew);
    double factor = jitter > 0 ? jitter : 1.0;
    if (renew <= factor * retry)
        return luna_error_set(err, LUNA_EINVAL, "%s: renew deadline (%g s) must be greater "
                              "than %g x the retry period (%g s)", what, renew, factor, retry);
    return 0;
}
