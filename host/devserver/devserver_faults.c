/* devserver_faults.c — see devserver_faults.h. */
#include "devserver/devserver_faults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const luna_ds_faults none = { .error_code = 500, .retry_after = 1, .seed = 1, .rng = 1 };

void luna_ds_faults_init(luna_ds_faults *f) { *f = none; }

static int parse_number(const char *v, double lo, double hi, double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || d < lo || d > hi)
        return LUNA_EINVAL;
    *out = d;
    return 0;
}

static const char *const scopes[] = { "all", "read", "write", "watch" };

static int parse_scope(const char *v, enum luna_ds_fault_scope *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(v, scopes[i]) == 0) {
            *out = (enum luna_ds_fault_scope)i;
            return 0;
        }
    return LUNA_EINVAL;
}

int luna_ds_faults_set(luna_ds_faults *out, const char *spec, luna_error *err)
{
    luna_ds_faults f = none;
    char *copy = strdup(spec ? spec : "");
    if (!copy)
        return luna_error_set(err, LUNA_ENOMEM, "faults: out of memory");
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (!*tok)
            continue;
        char *eq = strchr(tok, '=');
        if (!eq) {
            luna_error_set(err, LUNA_EINVAL, "fault '%s' needs a value (key=value)", tok);
            free(copy);
            return LUNA_EINVAL;
        }
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        double d = 0;
        int bad = 0;
        if (strcmp(k, "watch-close-after") == 0)
            bad = parse_number(v, 0, 1e9, &d) || ((f.watch_close_after = (int)d), 0);
        else if (strcmp(k, "watch-close-random") == 0)
            bad = parse_number(v, 0, 1, &f.watch_close_random);
        else if (strcmp(k, "delay") == 0)
            bad = parse_number(v, 0, 3600, &f.delay);
        else if (strcmp(k, "delay-path") == 0) {
            bad = !*v || strlen(v) >= sizeof f.delay_path;
            if (!bad)
                snprintf(f.delay_path, sizeof f.delay_path, "%s", v);
        } else if (strcmp(k, "error-path") == 0) {
            bad = !*v || strlen(v) >= sizeof f.error_path;
            if (!bad)
                snprintf(f.error_path, sizeof f.error_path, "%s", v);
        } else if (strcmp(k, "error-rate") == 0)
            bad = parse_number(v, 0, 1, &f.error_rate);
        else if (strcmp(k, "error-code") == 0) {
            bad = parse_number(v, 400, 599, &d) || ((f.error_code = (int)d), 0);
        } else if (strcmp(k, "error-on") == 0)
            bad = parse_scope(v, &f.error_on);
        else if (strcmp(k, "delay-on") == 0)
            bad = parse_scope(v, &f.delay_on);
        else if (strcmp(k, "retry-after") == 0)
            bad = parse_number(v, 0, 3600, &d) || ((f.retry_after = (int)d), 0);
        else if (strcmp(k, "truncate-event") == 0)
            bad = parse_number(v, 0, 1e9, &d) || ((f.truncate_event = (int)d), 0);
        else if (strcmp(k, "malformed-event") == 0)
            bad = parse_number(v, 0, 1e9, &d) || ((f.malformed_event = (int)d), 0);
        else if (strcmp(k, "gone") == 0)
            bad = parse_number(v, 0, 1e9, &d) || ((f.gone = (int)d), 0);
        else if (strcmp(k, "hold-watches") == 0)
            bad = parse_number(v, 0, 1e9, &d) || ((f.hold_watches = (int)d), 0);
        else if (strcmp(k, "ignore-shard-selector") == 0) {
            bad = parse_number(v, 0, 1, &d) || d != (int)d;
            f.ignore_shard_selector = d == 1;
        } else if (strcmp(k, "watch-list-off") == 0) {
            bad = parse_number(v, 0, 1, &d) || d != (int)d;
            f.watch_list_off = d == 1;
        } else if (strcmp(k, "seed") == 0)
            bad = parse_number(v, 0, 4e9, &d) || ((f.seed = (unsigned)d), 0);
        else {
            luna_error_set(err, LUNA_EINVAL, "unknown fault '%s'", k);
            free(copy);
            return LUNA_EINVAL;
        }
        if (bad) {
            luna_error_set(err, LUNA_EINVAL, "fault '%s': bad value '%s'", k, v);
            free(copy);
            return LUNA_EINVAL;
        }
    }
    free(copy);
    f.rng = f.seed ? f.seed : 1;
    f.waiting = out->waiting;
    *out = f;
    return 0;
}

json_t *luna_ds_faults_json(const luna_ds_faults *f)
{
    return json_pack("{s:i,s:f,s:f,s:s,s:s,s:s,s:f,s:i,s:s,s:i,s:i,s:i,s:i,s:i,s:b,s:b,s:i,s:i}",
                     "watch-close-after", f->watch_close_after,
                     "watch-close-random", f->watch_close_random,
                     "delay", f->delay,
                     "delay-path", f->delay_path,
                     "delay-on", scopes[f->delay_on],
                     "error-path", f->error_path,
                     "error-rate", f->error_rate,
                     "error-code", f->error_code,
                     "error-on", scopes[f->error_on],
                     "retry-after", f->retry_after,
                     "truncate-event", f->truncate_event,
                     "malformed-event", f->malformed_event,
                     "gone", f->gone,
                     "hold-watches", f->hold_watches,
                     "ignore-shard-selector", f->ignore_shard_selector,
                     "watch-list-off", f->watch_list_off,
                     "seed", (int)f->seed,
                     "waiting", (int)f->waiting);
}

double luna_ds_faults_delay_for(const luna_ds_faults *f, const char *path)
{
    if (f->delay <= 0 || strncmp(path, "/luna/v1/", 9) == 0)
        return 0;
    if (f->delay_path[0] && !strstr(path, f->delay_path))
        return 0;
    return f->delay;
}

bool luna_ds_faults_chance(luna_ds_faults *f, double p)
{
    if (p <= 0)
        return false;
    if (p >= 1)
        return true;
    return (double)rand_r(&f->rng) / ((double)RAND_MAX + 1.0) < p;
}

bool luna_ds_faults_applies(enum luna_ds_fault_scope scope, const char *method, bool watch)
{
    bool read = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    switch (scope) {
    case LUNA_DS_FAULT_ALL:   return true;
    case LUNA_DS_FAULT_READ:  return read;
    case LUNA_DS_FAULT_WRITE: return !read;
    case LUNA_DS_FAULT_WATCH: return read && watch;
    }
    return true;
}

bool luna_ds_faults_take(int *counter)
{
    if (*counter > 0) {
        (*counter)--;
        return true;
    }
    return false;
}
