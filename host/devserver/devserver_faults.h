/*
 * devserver_faults.h — fault injection for tests of clients against the dev
 * server: set from --faults SPEC at start and, when the admin endpoint is
 * enabled, changed at run time (PUT /luna/v1/faults with a SPEC body).
 *
 * SPEC is comma-separated key=value pairs (an empty SPEC clears all):
 *   watch-close-after=N    end every watch stream after N events
 *   watch-close-random=P   end a watch stream after each event with probability P
 *   delay=SECONDS          delay every response (watches: the stream's start);
 *                          setting the faults again ends every delay (and
 *                          hold) in progress
 *   delay-path=TEXT        delay only requests whose path contains TEXT
 *                          (e.g. /configmaps/slow; no commas, < 256 bytes)
 *   delay-on=all|read|write|watch  which requests delay applies to (as error-on)
 *   error-rate=P           answer a fraction P of requests with error-code
 *   error-code=500|429|503|403 (default 500); 429 carries Retry-After;
 *                          403 answers Forbidden as RBAC's refusal does
 *   error-path=TEXT        error-rate only for requests whose path contains
 *                          TEXT (e.g. /secrets/; as delay-path)
 *   error-on=all|read|write|watch  which requests error-rate applies to
 *                          (default all; read = GET including lists and
 *                          watches, write = every other method, watch =
 *                          GET with watch=true), so a spec can break an
 *                          informer's watches while its own writes succeed
 *   retry-after=SECONDS    (default 1)
 *   truncate-event=N       the next N watch events are cut mid-line, and
 *                          the connection is then dropped
 *   malformed-event=N      the next N watch events are sent as invalid JSON
 *   gone=N                 the next N watches get 410 Expired at once
 *   hold-watches=N         the next N watches are held until the faults are
 *                          set again, or `delay` seconds (60 if delay is 0),
 *                          after they took their state and
 *                          subscribed; the count goes down as each one does,
 *                          so a spec reading GET /luna/v1/faults knows its
 *                          watch has taken its state and can write "during"
 *                          the stream
 *   ignore-shard-selector=1  LIST and WATCH ignore shardSelector (no
 *                          filtering, no shardInfo), as a server without
 *                          KEP-5866 or with its feature gate off does
 *   watch-list-off=1       the WatchList feature gate off, as on kube-apiserver
 *                          v1.27–v1.33 by default: a watch with
 *                          sendInitialEvents is refused with 422 Invalid
 *                          (which makes client-go and luna list instead),
 *                          and a watch from "" or "0" ends its initial
 *                          ADDED events without a bookmark
 *   seed=N                 seed of the random choices (default 1)
 * Counters (truncate-event, malformed-event, gone, hold-watches) count
 * down as used.  GET /luna/v1/faults also reports "waiting": the requests
 * held back now by delay or hold-watches.
 * The settings are a value owned by one server (struct luna_ds); the
 * functions take it.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_FAULTS_H
#define LUNA_DEVSERVER_FAULTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

enum luna_ds_fault_scope {
    LUNA_DS_FAULT_ALL,
    LUNA_DS_FAULT_READ,
    LUNA_DS_FAULT_WRITE,
    LUNA_DS_FAULT_WATCH,
};

typedef struct luna_ds_faults {
    int watch_close_after;
    double watch_close_random;
    double delay;
    char delay_path[256];       /* "" = every path */
    char error_path[256];       /* "" = every path */
    double error_rate;
    int error_code;
    enum luna_ds_fault_scope error_on;
    enum luna_ds_fault_scope delay_on;
    int retry_after;
    int truncate_event;
    int malformed_event;
    int gone;
    int hold_watches;
    bool ignore_shard_selector;
    bool watch_list_off;
    unsigned seed;
    unsigned rng;               /* the random generator's state (from seed) */
    unsigned waiting;           /* requests held back now by delay or
                                   hold-watches: kept by the HTTP layer,
                                   not set by SPEC; GET shows it so a spec
                                   waits for its request to be held */
} luna_ds_faults;

/* No faults (the defaults). */
void luna_ds_faults_init(luna_ds_faults *f);

/* Replaces the settings with SPEC.  Returns 0, or LUNA_EINVAL (or
 * LUNA_ENOMEM) with err set and the settings unchanged. */
int luna_ds_faults_set(luna_ds_faults *f, const char *spec, luna_error *err);

/* The settings as a JSON object (caller owns). */
json_t *luna_ds_faults_json(const luna_ds_faults *f);

/* The delay to inject into a response to a request for path (0 = none);
 * the admin endpoint (/luna/v1/...) is never delayed. */
double luna_ds_faults_delay_for(const luna_ds_faults *f, const char *path);

/* True with probability p, from f's seeded generator. */
bool luna_ds_faults_chance(luna_ds_faults *f, double p);

/* True if scope (error_on, delay_on) covers a request with this method;
 * watch: the request is a GET with watch=true. */
bool luna_ds_faults_applies(enum luna_ds_fault_scope scope, const char *method, bool watch);

/* If *counter > 0, decrements it and returns true. */
bool luna_ds_faults_take(int *counter);

#endif
