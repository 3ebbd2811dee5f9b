/* devserver_faults.c — see devserver_faults.h. */
#include "devserver/devserver_faults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static luna_ds_faults current = { .error_code = 500, .retry_after = 1, .seed = 1 };
static unsigned rng_state = 1;

luna_ds_faults *luna_ds_faults_get(void) { return &current; }

static int parse_number(const char *v, double lo, double hi, double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || d < lo || d > hi)
        return -1;
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
    return -1;
}

int luna_ds_faults_set(const char *spec, char *msg, size_t msgsize)
{
    luna_ds_faults f = { .error_code = 500, .retry_after = 1, .seed = 1 };
    char *copy = strdup(spec ? spec : "");
    if (!copy)
        abort();
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (!*tok)
            continue;
        char *eq = strchr(tok, '=');
        if (!eq) {
            snprintf(msg, msgsize, "fault '%s' needs a value (key=value)", tok);
            free(copy);
            return -1;
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
        else if (strcmp(k, "seed") == 0)
            bad = parse_number(v, 0, 4e9, &d) || ((f.seed = (unsigned)d), 0);
        else {
            snprintf(msg, msgsize, "unknown fault '%s'", k);
            free(copy);
            return -1;
        }
        if (bad) {
            snprintf(msg, msgsize, "fault '%s': bad value '%s'", k, v);
            free(copy);
            return -1;
        }
    }
    free(copy);
    current = f;
    rng_state = f.seed ? f.seed : 1;
    return 0;
}

json_t *luna_ds_faults_json(void)
{
    return json_pack("{s:i,s:f,s:f,s:s,s:s,s:f,s:i,s:s,s:i,s:i,s:i,s:i,s:i}",
                     "watch-close-after", current.watch_close_after,
                     "watch-close-random", current.watch_close_random,
                     "delay", current.delay,
                     "delay-path", current.delay_path,
                     "delay-on", scopes[current.delay_on],
                     "error-rate", current.error_rate,
                     "error-code", current.error_code,
                     "error-on", scopes[current.error_on],
                     "retry-after", current.retry_after,
                     "truncate-event", current.truncate_event,
                     "malformed-event", current.malformed_event,
                     "gone", current.gone,
                     "seed", (int)current.seed);
}

double luna_ds_faults_delay_for(const char *path)
{
    if (current.delay <= 0 || strncmp(path, "/luna/v1/", 9) == 0)
        return 0;
    if (current.delay_path[0] && !strstr(path, current.delay_path))
        return 0;
    return current.delay;
}

bool luna_ds_faults_chance(double p)
{
    if (p <= 0)
        return false;
    if (p >= 1)
        return true;
    return (double)rand_r(&rng_state) / ((double)RAND_MAX + 1.0) < p;
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
