/* runtime_metrics.c — see runtime_metrics.h. */
#include "serve/runtime_metrics.h"

#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "serve/process_metrics.h"

/* controller-runtime's reconcile time buckets (pkg/internal/controller/metrics). */
static const double reconcile_buckets[] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
    0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9,
    10, 15, 20, 25, 30, 40, 50, 60,
};

enum fam {
    F_RECONCILE_TOTAL,
    F_RECONCILE_ERRORS,
    F_RECONCILE_PANICS,
    F_RECONCILE_TIME,
    F_MAX_CONCURRENT,
    F_ACTIVE_WORKERS,
    F_REST_REQUESTS,
    F_LEADER,
    F_INFORMER_OBJECTS,
    F_INFORMER_RELISTS,
    F_INFORMER_BAD,
    F_WATCH_RESTARTS,
    F_VERSION_CHECKS,
    F_RELOADS,
    F_RELOAD_LAST,
    F_LUA_MEMORY,
    F_SCRIPT_INFO,
    F_FILE_LOAD_FAILED,
    F_STALE,
    F_KINDS_NOT_SERVED,
    F_TRIGGERS,
    F_TRIGGER_KEYS,
    F_PAUSED,
    F_PERIODIC_TICKS,
    F_PERIODIC_NEXT,
    F_SHADOW_WRITES,
    F_SHARD_FRACTION,
    F_SHARD_RANGES,
    F_SHARD_MEMBERS,
    F_SHARD_DROPPED,
    F_SHARD_HANDOFFS,
    F_HTTP_RECEIVED,
    F_CONTROLLER_LUA_MEMORY,
    F_WATCHDOG_STOPS,
    F_API_WARNINGS,
    F_LOG_LINES,
    F_LOG_DROPPED,
    F_LOG_TRUNCATED,
    F_LOG_BUFFERED,
    F_COUNT
};

#define LABELS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const struct luna_metric_desc descs[F_COUNT] = {
    [F_RECONCILE_TOTAL] = { "controller_runtime_reconcile_total",
        "Total number of reconciliations per controller", LUNA_METRIC_COUNTER,
        LABELS("controller", "result"), NULL, 0 },
    [F_RECONCILE_ERRORS] = { "controller_runtime_reconcile_errors_total",
        "Total number of reconciliation errors per controller", LUNA_METRIC_COUNTER,
        LABELS("controller"), NULL, 0 },
    [F_RECONCILE_PANICS] = { "controller_runtime_reconcile_panics_total",
        "Total number of reconciliation panics per controller", LUNA_METRIC_COUNTER,
        LABELS("controller"), NULL, 0 },
    [F_RECONCILE_TIME] = { "controller_runtime_reconcile_time_seconds",
        "Length of time per reconciliation per controller", LUNA_METRIC_HISTOGRAM,
        LABELS("controller"), reconcile_buckets,
        sizeof reconcile_buckets / sizeof reconcile_buckets[0] },
    [F_MAX_CONCURRENT] = { "controller_runtime_max_concurrent_reconciles",
        "Maximum number of concurrent reconciles per controller", LUNA_METRIC_GAUGE,
        LABELS("controller"), NULL, 0 },
    [F_ACTIVE_WORKERS] = { "controller_runtime_active_workers",
        "Number of currently used workers per controller", LUNA_METRIC_GAUGE,
        LABELS("controller"), NULL, 0 },
    [F_REST_REQUESTS] = { "rest_client_requests_total",
        "Number of HTTP requests, partitioned by status code, method, and host.",
        LUNA_METRIC_COUNTER, LABELS("code", "method", "host"), NULL, 0 },
    [F_LEADER] = { "leader_election_master_status",
        "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
        "backup, 1 indicates master. 'name' is the string used to identify the lease. "
        "Please make sure to group by name.", LUNA_METRIC_GAUGE, LABELS("name"), NULL, 0 },
    [F_INFORMER_OBJECTS] = { "luna_informer_objects",
        "Number of objects in the informer's cache per resource", LUNA_METRIC_GAUGE,
        LABELS("resource"), NULL, 0 },
    [F_INFORMER_RELISTS] = { "luna_informer_relists_total",
        "Total number of full LISTs after the first one per resource (410 Gone, "
        "errors)", LUNA_METRIC_COUNTER, LABELS("resource"), NULL, 0 },
    [F_INFORMER_BAD] = { "luna_informer_undecodable_objects_total",
        "Total number of objects per resource left out of the cache because they were "
        "past the decoder's bounds (nesting deeper than kube-apiserver accepts, a number "
        "out of double range); the rest of their LIST page or watch stream was applied",
        LUNA_METRIC_COUNTER, LABELS("resource"), NULL, 0 },
    [F_WATCH_RESTARTS] = { "luna_watch_restarts_total",
        "Total number of restarted watches per resource and reason",
        LUNA_METRIC_COUNTER, LABELS("resource", "reason"), NULL, 0 },
    [F_VERSION_CHECKS] = { "luna_watch_version_checks_total",
        "Total number of checks, per resource and result (current, stale), of the "
        "resourceVersion a watch that brought nothing resumes from; stale: the server had "
        "not reached it (a restore from an older etcd backup), and the informer relisted",
        LUNA_METRIC_COUNTER, LABELS("resource", "result"), NULL, 0 },
    [F_RELOADS] = { "luna_reloads_total",
        "Total number of controller script reloads per result", LUNA_METRIC_COUNTER,
        LABELS("result"), NULL, 0 },
    [F_RELOAD_LAST] = { "luna_reload_last_timestamp_seconds",
        "Unix time of the last reload that was applied (0 before any)", LUNA_METRIC_GAUGE,
        NULL, NULL, 0 },
    [F_LUA_MEMORY] = { "luna_lua_memory_bytes",
        "Bytes of memory in use by each Lua state", LUNA_METRIC_GAUGE, LABELS("state"),
        NULL, 0 },
    [F_SCRIPT_INFO] = { "luna_controller_script_info",
        "The script each controller runs, by SHA-256 of its source; always 1",
        LUNA_METRIC_GAUGE, LABELS("controller", "sha256"), NULL, 0 },
    [F_FILE_LOAD_FAILED] = { "luna_controller_file_load_failed",
        "Controller files of the directory the running code lacks because they failed "
        "to load; always 1", LUNA_METRIC_GAUGE, LABELS("file"), NULL, 0 },
    [F_STALE] = { "luna_controllers_stale",
        "1 while the running code is not the code in the controllers directory (files "
        "failed to load, or the last reload was refused), else 0", LUNA_METRIC_GAUGE,
        NULL, NULL, 0 },
    [F_KINDS_NOT_SERVED] = { "luna_controller_kinds_not_served",
        "Number of the controller's sources whose kind the API server does not serve "
        "(the controller cannot start until it does)", LUNA_METRIC_GAUGE,
        LABELS("controller"), NULL, 0 },
    [F_TRIGGERS] = { "luna_triggers_total",
        "Total number of admin requests that acted on a controller, per action "
        "(reconcile, pause, resume)", LUNA_METRIC_COUNTER, LABELS("controller", "action"),
        NULL, 0 },
    [F_TRIGGER_KEYS] = { "luna_trigger_keys_total",
        "Total number of keys enqueued by admin reconcile requests", LUNA_METRIC_COUNTER,
        LABELS("controller"), NULL, 0 },
    [F_PAUSED] = { "luna_controller_paused",
        "1 while the controller is paused (its queue fills, no reconcile starts), else 0",
        LUNA_METRIC_GAUGE, LABELS("controller"), NULL, 0 },
    [F_PERIODIC_TICKS] = { "luna_periodic_ticks_total",
        "Total number of periodic ticks (every = ...) that enqueued the controller's "
        "periodic key", LUNA_METRIC_COUNTER, LABELS("controller"), NULL, 0 },
    [F_PERIODIC_NEXT] = { "luna_periodic_next_run_timestamp_seconds",
        "Unix time of the controller's next periodic tick (0: no schedule)",
        LUNA_METRIC_GAUGE, LABELS("controller"), NULL, 0 },
    [F_SHADOW_WRITES] = { "luna_shadow_writes_total",
        "Total number of writes sent as server-side dry runs in shadow mode, per verb and "
        "whether the object would have changed", LUNA_METRIC_COUNTER,
        LABELS("controller", "verb", "changed"), NULL, 0 },
    [F_SHARD_FRACTION] = { "luna_shard_owned_fraction",
        "Fraction of the 64-bit hash space this replica reconciles now (luna run --shards)",
        LUNA_METRIC_GAUGE, NULL, NULL, 0 },
    [F_SHARD_RANGES] = { "luna_shard_owned_ranges",
        "Number of hash ranges this replica reconciles now", LUNA_METRIC_GAUGE, NULL, NULL, 0 },
    [F_SHARD_MEMBERS] = { "luna_shard_members",
        "Live members of the shard set as this replica last saw them, itself included",
        LUNA_METRIC_GAUGE, NULL, NULL, 0 },
    [F_SHARD_DROPPED] = { "luna_shard_keys_dropped_total",
        "Total number of keys not reconciled here because another replica owns them, per "
        "reason (not_owned: at dispatch; handed_off: the object left this replica's shard)",
        LUNA_METRIC_COUNTER, LABELS("reason"), NULL, 0 },
    [F_SHARD_HANDOFFS] = { "luna_shard_handoffs_total",
        "Total number of claim changes written, per direction (grow, shrink)",
        LUNA_METRIC_COUNTER, LABELS("direction"), NULL, 0 },
    [F_HTTP_RECEIVED] = { "luna_http_received_bytes_total",
        "Total number of response body bytes received from the API server",
        LUNA_METRIC_COUNTER, NULL, NULL, 0 },
    [F_CONTROLLER_LUA_MEMORY] = { "luna_controller_lua_memory_bytes",
        "Bytes of the Lua heap charged to the controller: what its code allocated and "
        "was not freed yet (values it keeps, garbage not yet collected), block headers "
        "included", LUNA_METRIC_GAUGE, LABELS("controller"), NULL, 0 },
    [F_WATCHDOG_STOPS] = { "luna_controller_watchdog_stops_total",
        "Total number of the controller's Lua code stretches (reconciles, predicates, "
        "maps) the watchdog stopped, per reason (instructions, time, memory)",
        LUNA_METRIC_COUNTER, LABELS("controller", "reason"), NULL, 0 },
    [F_API_WARNINGS] = { "luna_api_warnings_total",
        "Total number of warnings (Warning: 299 response headers: an unknown field "
        "dropped from a write, a deprecated API) the API server sent to the controller's "
        "reconciles", LUNA_METRIC_COUNTER, LABELS("controller"), NULL, 0 },
    [F_LOG_LINES] = { "luna_log_lines_total",
        "Total number of log lines written or buffered for the log reader",
        LUNA_METRIC_COUNTER, NULL, NULL, 0 },
    [F_LOG_DROPPED] = { "luna_log_lines_dropped_total",
        "Total number of log lines dropped because the log reader did not keep up (the "
        "buffer was full) or the output failed", LUNA_METRIC_COUNTER, NULL, NULL, 0 },
    [F_LOG_TRUNCATED] = { "luna_log_lines_truncated_total",
        "Total number of log lines cut to the line bound (they end with truncated=N)",
        LUNA_METRIC_COUNTER, NULL, NULL, 0 },
    [F_LOG_BUFFERED] = { "luna_log_buffered_bytes",
        "Bytes of log output waiting for the log reader", LUNA_METRIC_GAUGE, NULL, NULL, 0 },
};

struct luna_runtime_metrics {
    struct luna_metric_family *fam[F_COUNT];  /* references */
    struct luna_metric_child *reloads[3];     /* references, by enum luna_reload_result */
    struct luna_metric_child *reload_last;
    struct luna_metric_child *stale;
};

struct luna_controller_metrics {
    struct luna_metric_family *shadow_family; /* reference */
    struct luna_metric_child *total[4];       /* by enum luna_reconcile_result */
    struct luna_metric_child *errors, *panics, *time, *max_concurrent, *active;
    struct luna_metric_child *not_served;
    struct luna_metric_child *triggers[LUNA_TRIGGER_ACTIONS], *trigger_keys, *paused;
    struct luna_metric_child *periodic_ticks, *periodic_next;
    struct luna_metric_child *script;         /* NULL until a script is set */
    struct luna_metric_child *lua_memory;     /* function child reading memory_fn */
    struct luna_metric_child *stops[LUNA_WATCHDOG_STOP_REASONS];
    struct luna_metric_child *api_warnings;
    luna_metric_fn memory_fn;                 /* NULL: reads 0 */
    void *memory_ud;
    struct luna_metric_family *script_family; /* reference */
    char *name;
};

const char *luna_reload_result_name(enum luna_reload_result result)
{
    switch (result) {
    case LUNA_RELOAD_SUCCESS: return "success";
    case LUNA_RELOAD_FAILURE: return "failure";
    case LUNA_RELOAD_UNRESOLVED: return "unresolved";
    }
    return "failure";
}

const char *luna_reconcile_result_name(enum luna_reconcile_result result)
{
    switch (result) {
    case LUNA_RECONCILE_SUCCESS: return "success";
    case LUNA_RECONCILE_ERROR: return "error";
    case LUNA_RECONCILE_REQUEUE: return "requeue";
    case LUNA_RECONCILE_REQUEUE_AFTER: return "requeue_after";
    }
    return "error";
}

/* Gets the child and takes a reference on it. */
static int held_child(struct luna_metric_family *f, const char *const *values,
                      struct luna_metric_child **out, luna_error *err)
{
    int rc = luna_metric_child(f, values, out, err);
    if (rc == 0)
        luna_metric_child_ref(*out);
    return rc;
}

static double log_stat(int which)
{
    struct luna_log_stats st;
    luna_log_get_stats(&st);
    return which == 0 ? (double)st.lines : which == 1 ? (double)st.dropped
         : which == 2 ? (double)st.truncated : (double)st.buffered;
}
static double log_lines(void *ud) { (void)ud; return log_stat(0); }
static double log_dropped(void *ud) { (void)ud; return log_stat(1); }
static double log_truncated(void *ud) { (void)ud; return log_stat(2); }
static double log_buffered(void *ud) { (void)ud; return log_stat(3); }

int luna_runtime_metrics_new(struct luna_metrics *reg, struct luna_runtime_metrics **out,
                             luna_error *err)
{
    if (luna_metrics_find(reg, descs[F_RECONCILE_TOTAL].name))
        return luna_error_set(err, LUNA_EINVAL,
                              "runtime metrics: already registered in this registry");
    struct luna_runtime_metrics *rm = calloc(1, sizeof *rm);
    if (!rm)
        return luna_error_set(err, LUNA_ENOMEM, "runtime metrics: out of memory");
    int rc = 0;
    for (int i = 0; i < F_COUNT && rc == 0; i++) {
        rc = luna_metrics_register(reg, &descs[i], &rm->fam[i], err);
        if (rc == 0)
            luna_metric_family_ref(rm->fam[i]);
        else
            rm->fam[i] = NULL;
    }
    for (int r = 0; r < 3 && rc == 0; r++)
        rc = held_child(rm->fam[F_RELOADS],
                        LABELS(luna_reload_result_name((enum luna_reload_result)r)),
                        &rm->reloads[r], err);
    if (rc == 0)
        rc = held_child(rm->fam[F_RELOAD_LAST], NULL, &rm->reload_last, err);
    if (rc == 0)
        rc = held_child(rm->fam[F_STALE], NULL, &rm->stale, err);
    /* the log writer's counters, read at every scrape */
    static const luna_metric_fn log_fns[] = { log_lines, log_dropped, log_truncated,
                                              log_buffered };
    for (int i = 0; i < 4 && rc == 0; i++)
        rc = luna_metric_func(rm->fam[F_LOG_LINES + i], NULL, log_fns[i], NULL, NULL, NULL, err);
    if (rc == 0)
        rc = luna_process_metrics_register(reg, err);
    if (rc) {
        luna_runtime_metrics_free(rm);
        return rc;
    }
    *out = rm;
    return 0;
}

void luna_runtime_metrics_free(struct luna_runtime_metrics *rm)
{
    if (!rm)
        return;
    for (int i = 0; i < F_COUNT; i++) {
        if (!rm->fam[i])
            continue;
        luna_metric_family_unregister(rm->fam[i]);
        luna_metric_family_unref(rm->fam[i]);
    }
    for (int r = 0; r < 3; r++)
        luna_metric_child_unref(rm->reloads[r]);
    luna_metric_child_unref(rm->reload_last);
    luna_metric_child_unref(rm->stale);
    free(rm);
}

/* ---- controllers --------------------------------------------------------------- */

static void drop_child(struct luna_metric_child *c)
{
    if (!c)
        return;
    luna_metric_child_remove(c);
    luna_metric_child_unref(c);
}

void luna_runtime_metrics_controller_free(struct luna_controller_metrics *cm)
{
    if (!cm)
        return;
    for (int i = 0; i < 4; i++)
        drop_child(cm->total[i]);
    drop_child(cm->errors);
    drop_child(cm->panics);
    drop_child(cm->time);
    drop_child(cm->max_concurrent);
    drop_child(cm->active);
    drop_child(cm->not_served);
    for (int i = 0; i < LUNA_TRIGGER_ACTIONS; i++)
        drop_child(cm->triggers[i]);
    drop_child(cm->trigger_keys);
    drop_child(cm->paused);
    drop_child(cm->periodic_ticks);
    drop_child(cm->periodic_next);
    drop_child(cm->script);
    drop_child(cm->lua_memory);
    for (int i = 0; i < LUNA_WATCHDOG_STOP_REASONS; i++)
        drop_child(cm->stops[i]);
    drop_child(cm->api_warnings);
    luna_metric_family_unref(cm->script_family);
    if (cm->shadow_family) {
        luna_metric_family_remove_matching(cm->shadow_family, "controller", cm->name);
        luna_metric_family_unref(cm->shadow_family);
    }
    free(cm->name);
    free(cm);
}

static const char *stop_reason_name(int r)
{
    static const char *const names[LUNA_WATCHDOG_STOP_REASONS] = { "instructions", "time",
                                                                   "memory" };
    return names[r];
}

static double controller_lua_memory(void *ud)
{
    struct luna_controller_metrics *cm = ud;
    return cm->memory_fn ? cm->memory_fn(cm->memory_ud) : 0;
}

void luna_runtime_metrics_lua_memory_source(struct luna_controller_metrics *cm,
                                            luna_metric_fn fn, void *ud)
{
    cm->memory_fn = fn;
    cm->memory_ud = ud;
}

void luna_runtime_metrics_lua_memory_unsource(struct luna_controller_metrics *cm, void *ud)
{
    if (cm->memory_ud == ud) {
        cm->memory_fn = NULL;
        cm->memory_ud = NULL;
    }
}

void luna_runtime_metrics_api_warnings(struct luna_controller_metrics *cm, unsigned n)
{
    luna_metric_add(cm->api_warnings, (double)n);
}

void luna_runtime_metrics_watchdog_stop(struct luna_controller_metrics *cm,
                                        enum luna_watchdog_stop_reason reason)
{
    if ((unsigned)reason < LUNA_WATCHDOG_STOP_REASONS)
        luna_metric_inc(cm->stops[reason]);
}

int luna_runtime_metrics_controller_new(struct luna_runtime_metrics *rm, const char *name,
                                        int workers, struct luna_controller_metrics **out,
                                        luna_error *err)
{
    const char *const ctl[] = { name, NULL };
    if (luna_metric_lookup(rm->fam[F_MAX_CONCURRENT], ctl))
        return luna_error_set(err, LUNA_EINVAL,
                              "runtime metrics: controller \"%s\" already has metrics", name);
    struct luna_controller_metrics *cm = calloc(1, sizeof *cm);
    if (!cm || !(cm->name = strdup(name))) {
        free(cm);
        return luna_error_set(err, LUNA_ENOMEM, "runtime metrics: out of memory");
    }
    cm->script_family = rm->fam[F_SCRIPT_INFO];
    luna_metric_family_ref(cm->script_family);
    cm->shadow_family = rm->fam[F_SHADOW_WRITES];
    luna_metric_family_ref(cm->shadow_family);
    int rc = 0;
    for (int r = 0; r < 4 && rc == 0; r++)
        rc = held_child(rm->fam[F_RECONCILE_TOTAL],
                        LABELS(name, luna_reconcile_result_name((enum luna_reconcile_result)r)),
                        &cm->total[r], err);
    if (rc == 0)
        rc = held_child(rm->fam[F_RECONCILE_ERRORS], ctl, &cm->errors, err);
    if (rc == 0)
        rc = held_child(rm->fam[F_RECONCILE_PANICS], ctl, &cm->panics, err);
    if (rc == 0)
        rc = held_child(rm->fam[F_RECONCILE_TIME], ctl, &cm->time, err);
    if (rc == 0)
        rc = held_child(rm->fam[F_ACTIVE_WORKERS], ctl, &cm->active, err);
    if (rc == 0)
        rc = held_child(rm->fam[F_MAX_CONCURRENT], ctl, &cm->max_concurrent, err);
    if (rc == 0)
        rc = held_child(rm->fam[F_KINDS_NOT_SERVED], ctl, &cm->not_served, err);
    for (int a = 0; a < LUNA_TRIGGER_ACTIONS && rc == 0; a++)
        rc = held_child(rm->fam[F_TRIGGERS],
                        LABELS(name, luna_trigger_action_name((enum luna_trigger_action)a)),
                        &cm->triggers[a], err);
    if (rc == 0)
        rc = held_child(rm->fam[F_TRIGGER_KEYS], ctl, &cm->trigger_keys, err);
    if (rc == 0)
        rc = held_child(rm->fam[F_PAUSED], ctl, &cm->paused, err);
    if (rc == 0)
        rc = held_child(rm->fam[F_PERIODIC_TICKS], ctl, &cm->periodic_ticks, err);
    if (rc == 0)
        rc = held_child(rm->fam[F_PERIODIC_NEXT], ctl, &cm->periodic_next, err);
    for (int r = 0; r < LUNA_WATCHDOG_STOP_REASONS && rc == 0; r++)
        rc = held_child(rm->fam[F_WATCHDOG_STOPS], LABELS(name, stop_reason_name(r)),
                        &cm->stops[r], err);
    if (rc == 0)
        rc = held_child(rm->fam[F_API_WARNINGS], ctl, &cm->api_warnings, err);
    if (rc == 0) {
        rc = luna_metric_func(rm->fam[F_CONTROLLER_LUA_MEMORY], ctl, controller_lua_memory, cm,
                              NULL, &cm->lua_memory, err);
        if (rc == 0)
            luna_metric_child_ref(cm->lua_memory);
    }
    if (rc) {
        luna_runtime_metrics_controller_free(cm);
        return rc;
    }
    luna_metric_set(cm->max_concurrent, workers);
    *out = cm;
    return 0;
}

void luna_runtime_metrics_set_workers(struct luna_controller_metrics *cm, int workers)
{
    luna_metric_set(cm->max_concurrent, workers);
}

void luna_runtime_metrics_kinds_not_served(struct luna_controller_metrics *cm, size_t n)
{
    luna_metric_set(cm->not_served, (double)n);
}

const char *luna_trigger_action_name(enum luna_trigger_action a)
{
    switch (a) {
    case LUNA_TRIGGER_RECONCILE: return "reconcile";
    case LUNA_TRIGGER_PAUSE: return "pause";
    case LUNA_TRIGGER_RESUME: return "resume";
    }
    return "reconcile";
}

void luna_runtime_metrics_trigger(struct luna_controller_metrics *cm,
                                  enum luna_trigger_action action, size_t keys)
{
    if ((unsigned)action >= LUNA_TRIGGER_ACTIONS)
        return;
    luna_metric_inc(cm->triggers[action]);
    if (keys)
        luna_metric_add(cm->trigger_keys, (double)keys);
}

void luna_runtime_metrics_paused(struct luna_controller_metrics *cm, bool paused)
{
    luna_metric_set(cm->paused, paused ? 1 : 0);
}

void luna_runtime_metrics_periodic_tick(struct luna_controller_metrics *cm)
{
    luna_metric_inc(cm->periodic_ticks);
}

void luna_runtime_metrics_periodic_next(struct luna_controller_metrics *cm, double unix_seconds)
{
    luna_metric_set(cm->periodic_next, unix_seconds);
}

void luna_runtime_metrics_shadow_write(struct luna_controller_metrics *cm, const char *verb,
                                       bool changed)
{
    struct luna_metric_child *c;
    if (luna_metric_child(cm->shadow_family, LABELS(cm->name, verb, changed ? "true" : "false"),
                          &c, NULL) == 0)
        luna_metric_inc(c);
}

void luna_runtime_metrics_reconcile_start(struct luna_controller_metrics *cm)
{
    luna_metric_add(cm->active, 1);
}

void luna_runtime_metrics_reconcile_done(struct luna_controller_metrics *cm,
                                         enum luna_reconcile_result result, double seconds)
{
    luna_metric_add(cm->active, -1);
    if ((unsigned)result > LUNA_RECONCILE_REQUEUE_AFTER)
        result = LUNA_RECONCILE_ERROR;
    luna_metric_inc(cm->total[result]);
    if (result == LUNA_RECONCILE_ERROR)
        luna_metric_inc(cm->errors);
    luna_metric_observe(cm->time, seconds);
}

void luna_runtime_metrics_reconcile_panic(struct luna_controller_metrics *cm)
{
    luna_metric_inc(cm->panics);
}

int luna_runtime_metrics_script(struct luna_controller_metrics *cm, const char *sha256,
                                luna_error *err)
{
    if (cm->script && strcmp(luna_metric_child_label(cm->script, 1), sha256) == 0 &&
        luna_metric_child_listed(cm->script))
        return 0;
    struct luna_metric_child *c;
    int rc = held_child(cm->script_family, LABELS(cm->name, sha256), &c, err);
    if (rc)
        return rc;
    luna_metric_set(c, 1);
    drop_child(cm->script);
    cm->script = c;
    return 0;
}

/* ---- client, informers, reloads, Lua, leader ------------------------------------ */

void luna_runtime_metrics_rest_request(struct luna_runtime_metrics *rm, int code,
                                       const char *method, const char *host)
{
    char code_text[16];
    if (code > 0)
        snprintf(code_text, sizeof code_text, "%d", code);
    else
        memcpy(code_text, "<error>", 8);
    struct luna_metric_child *c;
    if (luna_metric_child(rm->fam[F_REST_REQUESTS], LABELS(code_text, method, host), &c,
                          NULL) == 0)
        luna_metric_inc(c);
}

int luna_runtime_metrics_informer_add(struct luna_runtime_metrics *rm, const char *resource,
                                      luna_metric_fn objects, void *ud,
                                      void (*release)(void *ud), luna_error *err)
{
    const char *const res[] = { resource, NULL };
    if (luna_metric_lookup(rm->fam[F_INFORMER_OBJECTS], res))
        return luna_error_set(err, LUNA_EINVAL,
                              "runtime metrics: informer \"%s\" already has metrics", resource);
    struct luna_metric_child *relists;
    int rc = luna_metric_child(rm->fam[F_INFORMER_RELISTS], res, &relists, err);
    if (rc)
        return rc;
    struct luna_metric_child *bad;
    rc = luna_metric_child(rm->fam[F_INFORMER_BAD], res, &bad, err);
    if (rc)
        return rc;
    return luna_metric_func(rm->fam[F_INFORMER_OBJECTS], res, objects, ud, release, NULL,
                            err);
}

void luna_runtime_metrics_informer_remove(struct luna_runtime_metrics *rm,
                                          const char *resource)
{
    const char *const res[] = { resource, NULL };
    luna_metric_remove(rm->fam[F_INFORMER_OBJECTS], res);
    luna_metric_remove(rm->fam[F_INFORMER_RELISTS], res);
    luna_metric_remove(rm->fam[F_INFORMER_BAD], res);
    luna_metric_family_remove_matching(rm->fam[F_WATCH_RESTARTS], "resource", resource);
    luna_metric_family_remove_matching(rm->fam[F_VERSION_CHECKS], "resource", resource);
}

void luna_runtime_metrics_informer_relist(struct luna_runtime_metrics *rm,
                                          const char *resource)
{
    struct luna_metric_child *c;
    if (luna_metric_child(rm->fam[F_INFORMER_RELISTS], LABELS(resource), &c, NULL) == 0)
        luna_metric_inc(c);
}

void luna_runtime_metrics_informer_bad(struct luna_runtime_metrics *rm, const char *resource)
{
    struct luna_metric_child *c;
    if (luna_metric_child(rm->fam[F_INFORMER_BAD], LABELS(resource), &c, NULL) == 0)
        luna_metric_inc(c);
}

void luna_runtime_metrics_watch_restart(struct luna_runtime_metrics *rm,
                                        const char *resource, const char *reason)
{
    struct luna_metric_child *c;
    if (luna_metric_child(rm->fam[F_WATCH_RESTARTS], LABELS(resource, reason), &c,
                          NULL) == 0)
        luna_metric_inc(c);
}

void luna_runtime_metrics_version_check(struct luna_runtime_metrics *rm,
                                        const char *resource, bool stale)
{
    struct luna_metric_child *c;
    if (luna_metric_child(rm->fam[F_VERSION_CHECKS],
                          LABELS(resource, stale ? "stale" : "current"), &c, NULL) == 0)
        luna_metric_inc(c);
}

void luna_runtime_metrics_reload(struct luna_runtime_metrics *rm,
                                 enum luna_reload_result result, double unix_seconds)
{
    if ((unsigned)result > LUNA_RELOAD_UNRESOLVED)
        result = LUNA_RELOAD_FAILURE;
    luna_metric_inc(rm->reloads[result]);
    if (result != LUNA_RELOAD_FAILURE)
        luna_metric_set(rm->reload_last, unix_seconds);
}

void luna_runtime_metrics_code_state(struct luna_runtime_metrics *rm, bool stale,
                                     const char *const *files, size_t n)
{
    luna_metric_set(rm->stale, stale ? 1 : 0);
    luna_metric_family_clear(rm->fam[F_FILE_LOAD_FAILED]);
    for (size_t i = 0; i < n; i++) {
        struct luna_metric_child *c;
        if (luna_metric_child(rm->fam[F_FILE_LOAD_FAILED], LABELS(files[i]), &c, NULL) == 0)
            luna_metric_set(c, 1);
    }
}

static double lua_memory(void *ud)
{
    lua_State *L = ud;
    return (double)lua_gc(L, LUA_GCCOUNT, 0) * 1024.0 + (double)lua_gc(L, LUA_GCCOUNTB, 0);
}

int luna_runtime_metrics_lua_state_add(struct luna_runtime_metrics *rm, const char *name,
                                       struct lua_State *L, luna_error *err)
{
    return luna_metric_func(rm->fam[F_LUA_MEMORY], LABELS(name), lua_memory, L, NULL, NULL,
                            err);
}

int luna_runtime_metrics_lua_memory_add(struct luna_runtime_metrics *rm, const char *name,
                                        double (*bytes)(void *ud), void *ud, luna_error *err)
{
    return luna_metric_func(rm->fam[F_LUA_MEMORY], LABELS(name), bytes, ud, NULL, NULL, err);
}

void luna_runtime_metrics_lua_state_remove(struct luna_runtime_metrics *rm,
                                           const char *name)
{
    luna_metric_remove(rm->fam[F_LUA_MEMORY], LABELS(name));
}

void luna_runtime_metrics_leader(struct luna_runtime_metrics *rm, const char *lease,
                                 bool leading)
{
    struct luna_metric_child *c;
    if (luna_metric_child(rm->fam[F_LEADER], LABELS(lease), &c, NULL) == 0)
        luna_metric_set(c, leading ? 1 : 0);
}

void luna_runtime_metrics_shard(struct luna_runtime_metrics *rm, double fraction, size_t ranges,
                                size_t members)
{
    struct luna_metric_child *c;
    if (luna_metric_child(rm->fam[F_SHARD_FRACTION], NULL, &c, NULL) == 0)
        luna_metric_set(c, fraction);
    if (luna_metric_child(rm->fam[F_SHARD_RANGES], NULL, &c, NULL) == 0)
        luna_metric_set(c, (double)ranges);
    if (luna_metric_child(rm->fam[F_SHARD_MEMBERS], NULL, &c, NULL) == 0)
        luna_metric_set(c, (double)members);
}

void luna_runtime_metrics_shard_dropped(struct luna_runtime_metrics *rm, const char *reason)
{
    struct luna_metric_child *c;
    if (luna_metric_child(rm->fam[F_SHARD_DROPPED], LABELS(reason), &c, NULL) == 0)
        luna_metric_inc(c);
}

void luna_runtime_metrics_shard_handoff(struct luna_runtime_metrics *rm, const char *direction)
{
    struct luna_metric_child *c;
    if (luna_metric_child(rm->fam[F_SHARD_HANDOFFS], LABELS(direction), &c, NULL) == 0)
        luna_metric_inc(c);
}

int luna_runtime_metrics_http_received(struct luna_runtime_metrics *rm, double (*fn)(void *ud),
                                       void *ud, luna_error *err)
{
    return luna_metric_func(rm->fam[F_HTTP_RECEIVED], NULL, fn, ud, NULL, NULL, err);
}
