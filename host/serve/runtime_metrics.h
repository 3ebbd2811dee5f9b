/*
 * runtime_metrics.h — the metric set luna exports: controller-runtime's
 * names (so its dashboards work) plus luna's own, with typed helpers the
 * controller runtime calls.
 *
 * Registered by luna_runtime_metrics_new (names, HELP, labels and buckets as
 * controller-runtime v0.16+ and client-go have them):
 *
 *   controller_runtime_reconcile_total{controller,result}      counter
 *       result: success, error, requeue, requeue_after
 *   controller_runtime_reconcile_errors_total{controller}      counter
 *   controller_runtime_reconcile_panics_total{controller}      counter
 *       (a reconcile that raised a Lua error rather than returning one)
 *   controller_runtime_reconcile_time_seconds{controller}      histogram
 *       0.005 ... 60 (controller-runtime's 40 buckets)
 *   controller_runtime_max_concurrent_reconciles{controller}   gauge
 *   controller_runtime_active_workers{controller}              gauge
 *   rest_client_requests_total{code,method,host}               counter
 *   leader_election_master_status{name}                        gauge
 *   luna_informer_objects{resource}                            gauge (function)
 *   luna_informer_relists_total{resource}                      counter
 *   luna_informer_undecodable_objects_total{resource}          counter
 *   luna_watch_restarts_total{resource,reason}                 counter
 *   luna_watch_version_checks_total{resource,result}           counter
 *       result: current, stale (the server had not reached the version a
 *       watch resumed from, which was then dropped for a consistent relist)
 *   luna_reloads_total{result}                                 counter
 *       result: success, failure (refused: the old code runs on),
 *       unresolved (applied, but a controller's kind is not served)
 *   luna_reload_last_timestamp_seconds                         gauge (last applied)
 *   luna_lua_memory_bytes{state}                               gauge (function)
 *   luna_controller_script_info{controller,sha256}             gauge (1)
 *   luna_controller_file_load_failed{file}                     gauge (1)
 *       (files of the directory that failed to load: the running code lacks them)
 *   luna_controllers_stale                                     gauge (0/1)
 *       (the running code is not the directory's: files failed to load, or
 *       the last reload was refused)
 *   luna_controller_kinds_not_served{controller}               gauge
 *       (sources whose kind the server does not serve)
 *   luna_triggers_total{controller,action}                     counter
 *       action: reconcile, pause, resume (admin requests, admin.h)
 *   luna_trigger_keys_total{controller}                        counter
 *   luna_controller_paused{controller}                         gauge (0/1)
 *   luna_periodic_ticks_total{controller}                      counter
 *   luna_periodic_next_run_timestamp_seconds{controller}       gauge (0: none)
 *   luna_shadow_writes_total{controller,verb,changed}          counter (--shadow)
 *   luna_controller_lua_memory_bytes{controller}               gauge (function)
 *       the Lua heap charged to the controller's memory account
 *   luna_controller_watchdog_stops_total{controller,reason}    counter
 *       reason: instructions, time, memory
 *   luna_api_warnings_total{controller}                        counter
 *       (Warning: 299 headers the API server sent to its reconciles' calls)
 *   luna_log_lines_total                                       counter (function)
 *   luna_log_lines_dropped_total                               counter (function)
 *       (the log reader did not keep up, or the output failed: base/log.h)
 *   luna_log_lines_truncated_total                             counter (function)
 *   luna_log_buffered_bytes                                    gauge (function)
 *   process_* (see process_metrics.h)
 *
 * The workqueue_* families come from workqueue_export.h, one set of series
 * per named queue.
 *
 * As in controller-runtime, a controller's series all exist (at 0) from
 * the moment it is added, and reconcile_total has all four results.  The
 * reloads series start at 0 when the set is registered.
 *
 * Uses metrics.h, process_metrics.h, LuaJIT (lua_gc for memory).  Runs on
 * the loop thread.  Helpers never fail the caller: metrics must not break
 * the runtime, so the void helpers drop an update they cannot make (out of
 * memory, or a registry already freed).
 *
 * Ownership: luna_runtime_metrics_new borrows the registry only for the
 * call; the set holds references on its families, so it may outlive the
 * registry (its updates are then not exported).  Free it with
 * luna_runtime_metrics_free(), which unregisters its families.  A
 * controller handle (luna_runtime_metrics_controller_new) holds references
 * on its series and is freed with luna_runtime_metrics_controller_free(),
 * which removes them; it may outlive the set.  Strings are copied.  A
 * lua_State given to lua_state_add is borrowed until lua_state_remove (or
 * the set is freed); an informer's objects callback ud until
 * informer_remove, when release(ud) runs.
 */
#ifndef LUNA_RUNTIME_METRICS_H
#define LUNA_RUNTIME_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "serve/metrics.h"

struct lua_State;
struct luna_runtime_metrics;
struct luna_controller_metrics;

enum luna_reconcile_result {
    LUNA_RECONCILE_SUCCESS,
    LUNA_RECONCILE_ERROR,
    LUNA_RECONCILE_REQUEUE,
    LUNA_RECONCILE_REQUEUE_AFTER,
};

/* "success", "error", "requeue", "requeue_after". */
const char *luna_reconcile_result_name(enum luna_reconcile_result result);

enum luna_reload_result {
    LUNA_RELOAD_SUCCESS,     /* applied; every kind resolved */
    LUNA_RELOAD_FAILURE,     /* refused (load or validation error): old code runs on */
    LUNA_RELOAD_UNRESOLVED,  /* applied; some controller's kind is not served (or
                              * discovery failed): it waits, reported */
};

/* "success", "failure", "unresolved". */
const char *luna_reload_result_name(enum luna_reload_result result);

/* Registers the set in reg.  LUNA_EINVAL if reg already has it (one set per
 * registry) or a family of the same name differs; LUNA_ENOMEM. */
int luna_runtime_metrics_new(struct luna_metrics *reg, struct luna_runtime_metrics **out,
                             luna_error *err);
/* Unregisters the set's families and frees it.  NULL is a no-op. */
void luna_runtime_metrics_free(struct luna_runtime_metrics *rm);

/* ---- controllers --------------------------------------------------------------- */

/* Creates the controller's series: reconcile_total for each result,
 * errors, panics, time at 0, active_workers 0, max_concurrent_reconciles =
 * workers.  LUNA_EINVAL if a controller of that name already has series,
 * LUNA_ENOMEM. */
int luna_runtime_metrics_controller_new(struct luna_runtime_metrics *rm, const char *name,
                                        int workers, struct luna_controller_metrics **out,
                                        luna_error *err);
/* Removes the controller's series (all of them, script info included) and
 * frees the handle.  NULL is a no-op. */
void luna_runtime_metrics_controller_free(struct luna_controller_metrics *cm);

void luna_runtime_metrics_set_workers(struct luna_controller_metrics *cm, int workers);
/* luna_controller_kinds_not_served{controller} = n. */
void luna_runtime_metrics_kinds_not_served(struct luna_controller_metrics *cm, size_t n);
/* A worker starts a reconcile: active_workers + 1. */
void luna_runtime_metrics_reconcile_start(struct luna_controller_metrics *cm);
/* It ended after `seconds`: active_workers - 1, reconcile_total{result} + 1,
 * reconcile_errors_total + 1 for ERROR, the time observed. */
void luna_runtime_metrics_reconcile_done(struct luna_controller_metrics *cm,
                                         enum luna_reconcile_result result, double seconds);
/* The reconcile raised (counted in addition to its done(ERROR)). */
void luna_runtime_metrics_reconcile_panic(struct luna_controller_metrics *cm);
/* An admin request acted on the controller (admin.h): triggers_total
 * {action} + 1, and trigger_keys_total + keys (the keys it enqueued). */
enum luna_trigger_action { LUNA_TRIGGER_RECONCILE, LUNA_TRIGGER_PAUSE, LUNA_TRIGGER_RESUME };
#define LUNA_TRIGGER_ACTIONS 3
const char *luna_trigger_action_name(enum luna_trigger_action a);
void luna_runtime_metrics_trigger(struct luna_controller_metrics *cm,
                                  enum luna_trigger_action action, size_t keys);
/* luna_controller_paused{controller} = paused. */
void luna_runtime_metrics_paused(struct luna_controller_metrics *cm, bool paused);
/* Periodic work (controller.h): a tick, and when the next one is due. */
void luna_runtime_metrics_periodic_tick(struct luna_controller_metrics *cm);
void luna_runtime_metrics_periodic_next(struct luna_controller_metrics *cm, double unix_seconds);
/* A write sent as a dry run in shadow mode (verb: create, update, ...). */
void luna_runtime_metrics_shadow_write(struct luna_controller_metrics *cm, const char *verb,
                                       bool changed);
/* Why the watchdog stopped a controller's code (script/watchdog.h's stops;
 * serve/ does not include script/). */
enum luna_watchdog_stop_reason {
    LUNA_WATCHDOG_STOP_INSTRUCTIONS,
    LUNA_WATCHDOG_STOP_TIME,
    LUNA_WATCHDOG_STOP_MEMORY,
};
#define LUNA_WATCHDOG_STOP_REASONS 3
/* luna_api_warnings_total{controller} + n. */
void luna_runtime_metrics_api_warnings(struct luna_controller_metrics *cm, unsigned n);
/* luna_controller_watchdog_stops_total{controller, reason} + 1. */
void luna_runtime_metrics_watchdog_stop(struct luna_controller_metrics *cm,
                                        enum luna_watchdog_stop_reason reason);
/* luna_controller_lua_memory_bytes{controller} reads fn(ud) at each scrape
 * (0 while none is set); the next call replaces it.  ud is borrowed until
 * unsource(cm, ud) or the handle is freed. */
void luna_runtime_metrics_lua_memory_source(struct luna_controller_metrics *cm,
                                            luna_metric_fn fn, void *ud);
/* Clears the source if it is still ud's (a successor may have set its own). */
void luna_runtime_metrics_lua_memory_unsource(struct luna_controller_metrics *cm, void *ud);

/* The controller runs a script with this SHA-256 (hex): its info series
 * becomes {controller, sha256} = 1, replacing the previous one. */
int luna_runtime_metrics_script(struct luna_controller_metrics *cm, const char *sha256,
                                luna_error *err);

/* ---- API client ---------------------------------------------------------------- */

/* One request finished with HTTP status code (0 = no response: the code
 * label is "<error>", as client-go writes it); method as sent ("GET"). */
void luna_runtime_metrics_rest_request(struct luna_runtime_metrics *rm, int code,
                                       const char *method, const char *host);

/* ---- informers ------------------------------------------------------------------ */

/* luna_informer_objects{resource} = objects(ud) at each scrape; also
 * creates relists_total{resource} at 0.  LUNA_EINVAL if the resource is
 * already there; on failure release is not called. */
int luna_runtime_metrics_informer_add(struct luna_runtime_metrics *rm, const char *resource,
                                      luna_metric_fn objects, void *ud,
                                      void (*release)(void *ud), luna_error *err);
/* Removes every series of that resource (objects, relists, watch
 * restarts, version checks). */
void luna_runtime_metrics_informer_remove(struct luna_runtime_metrics *rm,
                                          const char *resource);
/* One object of the resource left out of the cache, past the decoder's
 * bounds. */
void luna_runtime_metrics_informer_bad(struct luna_runtime_metrics *rm, const char *resource);
void luna_runtime_metrics_informer_relist(struct luna_runtime_metrics *rm,
                                          const char *resource);
/* A watch ended and is restarted; reason is a short stable token:
 * "gone" (410), "error", "timeout", "closed", "decode". */
void luna_runtime_metrics_watch_restart(struct luna_runtime_metrics *rm,
                                        const char *resource, const char *reason);
/* A watch that brought nothing had its resourceVersion checked (a one-item
 * LIST) before resuming; stale: the server had not reached it. */
void luna_runtime_metrics_version_check(struct luna_runtime_metrics *rm,
                                        const char *resource, bool stale);

/* ---- reloads, Lua states, leader election ------------------------------------ */

/* The running code against the controllers directory: stale (see
 * luna_controllers_stale) and the n files (names, borrowed for the call)
 * that failed to load; the series of other files are removed. */
void luna_runtime_metrics_code_state(struct luna_runtime_metrics *rm, bool stale,
                                     const char *const *files, size_t n);

/* A reload finished at unix_seconds: reloads_total{result} + 1, and when
 * it was applied (success, unresolved) reload_last_timestamp_seconds =
 * unix_seconds. */
void luna_runtime_metrics_reload(struct luna_runtime_metrics *rm,
                                 enum luna_reload_result result, double unix_seconds);
/* luna_lua_memory_bytes{state=name} reads L's heap size at each scrape.
 * LUNA_EINVAL if name is taken. */
int luna_runtime_metrics_lua_state_add(struct luna_runtime_metrics *rm, const char *name,
                                       struct lua_State *L, luna_error *err);
/* The same for a set of states read by bytes(ud) (the controllers'
 * states, one per file: controller/generation.h); ud is borrowed until
 * lua_state_remove. */
int luna_runtime_metrics_lua_memory_add(struct luna_runtime_metrics *rm, const char *name,
                                        double (*bytes)(void *ud), void *ud, luna_error *err);
void luna_runtime_metrics_lua_state_remove(struct luna_runtime_metrics *rm,
                                           const char *name);
/* leader_election_master_status{name=lease} = 1 if leading, else 0. */
void luna_runtime_metrics_leader(struct luna_runtime_metrics *rm, const char *lease,
                                 bool leading);
/* Sharding (shard_set.h): luna_shard_owned_fraction, luna_shard_owned_ranges,
 * luna_shard_members; luna_shard_keys_dropped_total{reason};
 * luna_shard_handoffs_total{direction}. */
void luna_runtime_metrics_shard(struct luna_runtime_metrics *rm, double fraction, size_t ranges,
                                size_t members);
void luna_runtime_metrics_shard_dropped(struct luna_runtime_metrics *rm, const char *reason);
void luna_runtime_metrics_shard_handoff(struct luna_runtime_metrics *rm, const char *direction);
/* luna_http_received_bytes_total: fn(ud) at each scrape (ud borrowed
 * until rm is freed). */
int luna_runtime_metrics_http_received(struct luna_runtime_metrics *rm, double (*fn)(void *ud),
                                       void *ud, luna_error *err);

#endif
