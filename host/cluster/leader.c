/* leader.c — see leader.h. */
#include "cluster/leader.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/json_writer.h"
#include "base/log.h"
#include "cluster/lease.h"
#include "serve/runtime_metrics.h"

#define MAX_IDENTITY LUNA_LEASE_MAX_IDENTITY
#define MAX_TIME LUNA_LEASE_MAX_TIME
#define MAX_LEASE_BYTES LUNA_LEASE_MAX_BYTES

enum phase { PHASE_IDLE, PHASE_RUNNING, PHASE_RELEASING, PHASE_DONE };

/* What the request in flight is for. */
enum step {
    STEP_NONE,
    STEP_RENEW,        /* leader's optimistic update of the lease it wrote */
    STEP_GET,
    STEP_CREATE,
    STEP_UPDATE,
    STEP_RELEASE,
    STEP_RELEASE_GET,  /* re-read after a release hit 409 */
};

struct luna_leader {
    struct luna_kube_client *kc;
    char *name, *ns, *identity, *lease_id, *path, *collection;
    double lease_duration, renew_deadline, retry_period, jitter;
    int lease_seconds;
    const struct luna_clock *clock;
    struct ev_loop *loop;
    struct luna_runtime_metrics *metrics;
    void (*on_started_leading)(void *ud);
    void (*on_stopped_leading)(void *ud);
    void (*on_new_leader)(void *ud, const char *identity);
    void *ud;

    enum phase phase;
    enum step step;
    struct luna_kube_request *req;     /* the request in flight, or NULL */
    double attempt_now;                /* the clock when the attempt began */

    bool observed;                     /* rec, spec and observed_time are set */
    struct luna_lease_record rec;
    char *spec;                        /* the spec's JSON as last observed */
    size_t spec_len;
    double observed_time;              /* the clock when spec last changed */
    char *lease;                       /* the Lease as last read or written */
    size_t lease_len;
    char reported[MAX_IDENTITY];       /* last holder told to on_new_leader */
    bool reported_any;

    bool leading;
    double next_attempt, deadline;     /* clock times; INFINITY: none */
    bool healthy;
    char problem[256];
    bool release_retried;
    void (*release_done)(void *ud, bool released);
    void *release_ud;
    struct luna_leader_stats stats;
    uint64_t rng;
    ev_timer timer;
};

static double now_of(const struct luna_leader *le) { return luna_clock_now(le->clock); }

/* ---- small helpers -------------------------------------------------------- */

static double jitter_unit(struct luna_leader *le)
{
    /* xorshift64*: uniform in [0, 1) */
    le->rng ^= le->rng >> 12;
    le->rng ^= le->rng << 25;
    le->rng ^= le->rng >> 27;
    return (double)((le->rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static bool is_ours(const struct luna_leader *le)
{
    return le->observed && strcmp(le->rec.holder, le->identity) == 0;
}

/* client-go's isLeaseValid: observedTime + leaseDurationSeconds > now. */
static bool lease_valid(const struct luna_leader *le, double now)
{
    return le->observed && le->observed_time + (double)le->rec.duration > now;
}

static void set_master(struct luna_leader *le, bool leading)
{
    le->leading = leading;
    if (le->metrics)
        luna_runtime_metrics_leader(le->metrics, le->name, leading);
}

/* ---- the Lease's JSON ------------------------------------------------------ */

/* Copies a Lease replacing its top-level "spec" (metadata, labels,
 * annotations and resourceVersion are kept, as client-go's LeaseLock
 * updates the object it read). */
struct rewrite {
    luna_json_writer *w;
    const char *spec;
    size_t spec_len;
    bool skipping, wrote;
};

static int rewrite_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct rewrite *rw = ud;
    if (rw->skipping) {
        if (ev->depth == 1 && ev->type != LUNA_JSON_OBJECT_START &&
            ev->type != LUNA_JSON_ARRAY_START)
            rw->skipping = false; /* the old value's last event */
        return 0;
    }
    if (ev->depth == 1 && ev->type == LUNA_JSON_KEY && ev->len == 4 &&
        memcmp(ev->str, "spec", 4) == 0) {
        luna_json_write_key(rw->w, "spec", 4);
        luna_json_write_raw(rw->w, rw->spec, rw->spec_len);
        rw->skipping = rw->wrote = true;
        return 0;
    }
    if (ev->depth == 0 && ev->type == LUNA_JSON_OBJECT_END && !rw->wrote) {
        luna_json_write_key(rw->w, "spec", 4);
        luna_json_write_raw(rw->w, rw->spec, rw->spec_len);
        rw->wrote = true;
    }
    return luna_json_write_event(rw->w, ev);
}

/* The body that writes `record` over the Lease le->lease (or a new Lease
 * when le->lease is NULL).  Returns a malloc'd string or NULL. */
static char *lease_body(struct luna_leader *le, const char *holder, long duration,
                        const char *acquire, const char *renew, long transitions, size_t *len)
{
    luna_json_writer spec, w;
    luna_json_writer_init(&spec);
    luna_json_writer_init(&w);
    luna_lease_write_spec(&spec, holder, duration, acquire, renew, transitions);
    size_t spec_len;
    const char *spec_text = luna_json_writer_data(&spec, &spec_len);
    char *out = NULL;
    if (luna_json_writer_finish(&spec, NULL) == 0) {
        if (le->lease) {
            struct rewrite rw = { .w = &w, .spec = spec_text, .spec_len = spec_len };
            if (luna_json_parse(le->lease, le->lease_len, NULL, rewrite_event, &rw, NULL) < 0)
                luna_json_writer_reset(&w);
        } else {
            luna_json_write_object_start(&w);
            luna_lease_put_string(&w, "apiVersion", "coordination.k8s.io/v1");
            luna_lease_put_string(&w, "kind", "Lease");
            luna_json_write_key(&w, "metadata", 8);
            luna_json_write_object_start(&w);
            luna_lease_put_string(&w, "name", le->name);
            luna_lease_put_string(&w, "namespace", le->ns);
            luna_json_write_object_end(&w);
            luna_json_write_key(&w, "spec", 4);
            luna_json_write_raw(&w, spec_text, spec_len);
            luna_json_write_object_end(&w);
        }
        if (luna_json_writer_finish(&w, NULL) == 0)
            out = luna_json_writer_steal(&w, len);
    }
    luna_json_writer_free(&spec);
    luna_json_writer_free(&w);
    return out;
}

/* Takes in a Lease the server sent (read or written) at clock time now. */
static int observe(struct luna_leader *le, const char *json, size_t len, double now)
{
    struct luna_lease_record rec;
    uint64_t s0, s1;
    if (!json || luna_lease_parse(json, len, &rec, &s0, &s1) < 0)
        return LUNA_EPROTO;
    char *copy = malloc(len + 1);
    if (!copy)
        return LUNA_ENOMEM;
    memcpy(copy, json, len);
    copy[len] = '\0';
    size_t spec_len = (size_t)(s1 - s0);
    if (!le->observed || spec_len != le->spec_len ||
        memcmp(json + s0, le->spec ? le->spec : "", spec_len) != 0) {
        char *spec = malloc(spec_len + 1);
        if (!spec) {
            free(copy);
            return LUNA_ENOMEM;
        }
        memcpy(spec, json + s0, spec_len);
        spec[spec_len] = '\0';
        free(le->spec);
        le->spec = spec;
        le->spec_len = spec_len;
        le->rec = rec;
        le->observed_time = now;
        le->observed = true;
    }
    free(le->lease);
    le->lease = copy;
    le->lease_len = len;
    if (!le->reported_any || strcmp(le->reported, le->rec.holder) != 0) {
        le->reported_any = true;
        snprintf(le->reported, sizeof le->reported, "%s", le->rec.holder);
        if (*le->rec.holder)
            luna_info("new leader elected", "lease", le->lease_id, "identity", le->rec.holder);
        if (le->on_new_leader)
            le->on_new_leader(le->ud, le->reported);
    }
    return 0;
}

/* ---- requests --------------------------------------------------------------- */

static void on_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail);
static void arm(struct luna_leader *le);

static int send(struct luna_leader *le, enum step step, const char *method, const char *path,
                char *body, size_t body_len, luna_error *err)
{
    struct luna_kube_request_options o = {
        .method = method,
        .path = path,
        .body = body,
        .body_len = body_len,
        .timeout = le->renew_deadline,
        .max_response_bytes = MAX_LEASE_BYTES,
        .on_done = on_done,
        .ud = le,
    };
    le->step = step;
    le->req = luna_kube_request_start(le->kc, &o, err);
    free(body);
    if (!le->req) {
        le->step = STEP_NONE;
        return err->code ? err->code : LUNA_EIO;
    }
    return 0;
}

static void describe(const luna_http_response *resp, const luna_http_failure *fail,
                     const char *what, char *buf, size_t size)
{
    if (fail)
        snprintf(buf, size, "%s lease: %s", what, fail->err.msg);
    else
        snprintf(buf, size, "%s lease: HTTP %ld", what, resp->status);
}

static void lose(struct luna_leader *le)
{
    if (le->req) {
        luna_kube_request_cancel(le->req);
        le->req = NULL;
    }
    le->step = STEP_NONE;
    le->phase = PHASE_DONE;
    le->deadline = le->next_attempt = INFINITY;
    if (le->loop)
        ev_timer_stop(le->loop, &le->timer);
    set_master(le, false);
    luna_error("leader election lost", "lease", le->lease_id, "identity", le->identity);
    if (le->on_stopped_leading)
        le->on_stopped_leading(le->ud);
}

static void attempt_succeeded(struct luna_leader *le)
{
    double now = now_of(le);
    le->stats.attempts++;
    le->healthy = true;
    le->problem[0] = '\0';
    if (le->leading && now >= le->deadline) {
        lose(le);
        return;
    }
    le->deadline = INFINITY;
    le->next_attempt = now + le->retry_period;
    if (le->leading) {
        le->stats.renewals++;
        return;
    }
    le->stats.acquisitions++;
    set_master(le, true);
    luna_info("leader lease acquired", "lease", le->lease_id, "identity", le->identity);
    if (le->on_started_leading)
        le->on_started_leading(le->ud);
}

/* The attempt did not end holding the lease; healthy: the server answered
 * and the lease was read (someone else holds it, or a write raced). */
static void attempt_failed(struct luna_leader *le, bool healthy, const char *problem)
{
    double now = now_of(le);
    le->stats.attempts++;
    le->stats.failures++;
    bool changed = le->healthy != healthy || strcmp(le->problem, problem) != 0;
    le->healthy = healthy;
    snprintf(le->problem, sizeof le->problem, "%s", healthy ? "" : problem);
    if (le->leading) {
        luna_warn("leader lease renewal failed", "lease", le->lease_id, "error", problem);
        if (now >= le->deadline) {
            lose(le);
            return;
        }
        le->next_attempt = now + le->retry_period;
        return;
    }
    if (!healthy && changed)
        luna_warn("leader election attempt failed", "lease", le->lease_id, "error", problem);
    double factor = le->jitter > 0 ? 1.0 + le->jitter * jitter_unit(le) : 1.0;
    le->next_attempt = now + le->retry_period * factor;
}

static void start_get(struct luna_leader *le)
{
    luna_error err = { 0 };
    if (send(le, STEP_GET, "GET", le->path, NULL, 0, &err) < 0)
        attempt_failed(le, false, err.msg);
}

/* Writes the lease holding it (create when there is none to update).
 * Returns 0 with the request in flight, or a negative code (err set). */
static int start_write(struct luna_leader *le, enum step step, const char *acquire,
                       long transitions, luna_error *err)
{
    char renew[MAX_TIME];
    luna_lease_micro_time(renew, sizeof renew);
    size_t len = 0;
    char *body = lease_body(le, le->identity, le->lease_seconds, acquire, renew, transitions,
                            &len);
    if (!body)
        return luna_error_set(err, LUNA_ENOMEM, "building the lease: out of memory");
    bool create = step == STEP_CREATE;
    return send(le, step, create ? "POST" : "PUT", create ? le->collection : le->path, body,
                len, err);
}

static void write_or_fail(struct luna_leader *le, enum step step, const char *acquire,
                          long transitions)
{
    luna_error err = { 0 };
    if (start_write(le, step, acquire, transitions, &err) < 0)
        attempt_failed(le, false, err.msg);
}

static void attempt(struct luna_leader *le)
{
    double now = now_of(le);
    le->attempt_now = now;
    if (le->leading && isinf(le->deadline))
        le->deadline = now + le->renew_deadline; /* a renewal round begins */
    luna_error err = { 0 };
    if (is_ours(le) && lease_valid(le, now) && le->lease &&
        start_write(le, STEP_RENEW, le->rec.acquire, le->rec.transitions, &err) == 0)
        return;
    start_get(le);
}

/* ---- release ----------------------------------------------------------------- */

static void release_finish(struct luna_leader *le, bool released)
{
    le->phase = PHASE_DONE;
    le->step = STEP_NONE;
    set_master(le, false);
    if (released)
        luna_info("leader lease released", "lease", le->lease_id, "identity", le->identity);
    void (*done)(void *, bool) = le->release_done;
    le->release_done = NULL;
    if (done)
        done(le->release_ud, released);
}

static void start_release(struct luna_leader *le)
{
    char now[MAX_TIME];
    luna_lease_micro_time(now, sizeof now);
    size_t len = 0;
    char *body = lease_body(le, "", 1, now, now, le->rec.transitions, &len);
    luna_error err = { 0 };
    if (!body || send(le, STEP_RELEASE, "PUT", le->path, body, len, &err) < 0) {
        luna_warn("leader lease release failed", "lease", le->lease_id, "error",
                  body ? err.msg : "out of memory");
        release_finish(le, false);
    }
}

void luna_leader_release(struct luna_leader *le, void (*done)(void *ud, bool released),
                         void *ud)
{
    if (le->phase == PHASE_RELEASING) {
        if (done)
            done(ud, false); /* the first release goes on */
        return;
    }
    if (le->req) {
        luna_kube_request_cancel(le->req);
        le->req = NULL;
    }
    le->step = STEP_NONE;
    le->deadline = le->next_attempt = INFINITY;
    if (le->loop)
        ev_timer_stop(le->loop, &le->timer);
    if (le->phase != PHASE_RUNNING || !is_ours(le) || !le->lease) {
        le->phase = PHASE_DONE;
        set_master(le, false);
        if (done)
            done(ud, false);
        return;
    }
    le->phase = PHASE_RELEASING;
    le->release_done = done;
    le->release_ud = ud;
    le->release_retried = false;
    start_release(le);
}

/* ---- answers ------------------------------------------------------------------- */

static void on_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct luna_leader *le = ud;
    enum step step = le->step;
    le->req = NULL;
    le->step = STEP_NONE;
    long status = fail ? 0 : resp->status;
    const char *body = fail ? NULL : resp->body;
    size_t body_len = fail ? 0 : resp->body_len;
    char problem[1100];
    if (status == 409)
        le->stats.conflicts++;

    switch (step) {
    case STEP_RENEW:
        if (status == 200 && observe(le, body, body_len, le->attempt_now) == 0) {
            attempt_succeeded(le);
        } else {
            describe(resp, fail, "renew", problem, sizeof problem);
            luna_debug("leader lease update failed, reading it again", "lease", le->lease_id,
                       "error", problem);
            start_get(le);
        }
        break;
    case STEP_GET:
        if (status == 404) {
            free(le->lease);
            le->lease = NULL;
            char acquire[MAX_TIME];
            luna_lease_micro_time(acquire, sizeof acquire);
            write_or_fail(le, STEP_CREATE, acquire, 0);
        } else if (status == 200 && observe(le, body, body_len, le->attempt_now) == 0) {
            if (*le->rec.holder && !is_ours(le) && lease_valid(le, le->attempt_now)) {
                snprintf(problem, sizeof problem, "lease held by %s", le->rec.holder);
                attempt_failed(le, true, problem);
            } else if (is_ours(le)) {
                write_or_fail(le, STEP_UPDATE, le->rec.acquire, le->rec.transitions);
            } else {
                char acquire[MAX_TIME];
                luna_lease_micro_time(acquire, sizeof acquire);
                write_or_fail(le, STEP_UPDATE, acquire, le->rec.transitions + 1);
            }
        } else {
            describe(resp, fail, "get", problem, sizeof problem);
            attempt_failed(le, false, problem);
        }
        break;
    case STEP_CREATE:
    case STEP_UPDATE:
        if ((status == 200 || status == 201) &&
            observe(le, body, body_len, le->attempt_now) == 0) {
            attempt_succeeded(le);
        } else {
            describe(resp, fail, step == STEP_CREATE ? "create" : "update", problem,
                     sizeof problem);
            attempt_failed(le, status == 409, problem);
        }
        break;
    case STEP_RELEASE:
        if (status == 200) {
            observe(le, body, body_len, now_of(le));
            release_finish(le, true);
        } else if (status == 409 && !le->release_retried) {
            le->release_retried = true;
            luna_error err = { 0 };
            if (send(le, STEP_RELEASE_GET, "GET", le->path, NULL, 0, &err) < 0)
                release_finish(le, false);
        } else {
            describe(resp, fail, "release", problem, sizeof problem);
            luna_warn("leader lease release failed", "lease", le->lease_id, "error", problem);
            release_finish(le, false);
        }
        return;
    case STEP_RELEASE_GET:
        if (status == 200 && observe(le, body, body_len, now_of(le)) == 0 && is_ours(le)) {
            start_release(le);
        } else {
            if (status == 200)
                luna_info("leader lease already taken over", "lease", le->lease_id,
                          "identity", le->rec.holder);
            release_finish(le, false);
        }
        return;
    case STEP_NONE:
        return;
    }
    arm(le);
}

/* ---- scheduling ----------------------------------------------------------------- */

static void arm(struct luna_leader *le)
{
    if (!le->loop)
        return;
    ev_timer_stop(le->loop, &le->timer);
    if (le->phase != PHASE_RUNNING)
        return;
    double wake = le->req ? INFINITY : le->next_attempt;
    if (le->leading && le->deadline < wake)
        wake = le->deadline;
    if (isinf(wake))
        return;
    double delay = wake - now_of(le);
    ev_timer_set(&le->timer, delay > 0 ? delay : 0.0, 0.0);
    ev_timer_start(le->loop, &le->timer);
}

void luna_leader_tick(struct luna_leader *le)
{
    if (le->phase != PHASE_RUNNING)
        return;
    double now = now_of(le);
    if (le->leading && now >= le->deadline) {
        lose(le);
        return;
    }
    if (!le->req && now >= le->next_attempt)
        attempt(le);
    arm(le);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    luna_leader_tick((struct luna_leader *)((char *)w - offsetof(struct luna_leader, timer)));
}

void luna_leader_start(struct luna_leader *le)
{
    if (le->phase != PHASE_IDLE)
        return;
    le->phase = PHASE_RUNNING;
    set_master(le, false);
    char secs[3][32];
    snprintf(secs[0], sizeof secs[0], "%g", le->lease_duration);
    snprintf(secs[1], sizeof secs[1], "%g", le->renew_deadline);
    snprintf(secs[2], sizeof secs[2], "%g", le->retry_period);
    luna_info("attempting to acquire leader lease", "lease", le->lease_id, "identity", le->identity,
              LUNA_LOG_NUM("lease_duration"), secs[0], LUNA_LOG_NUM("renew_deadline"), secs[1],
              LUNA_LOG_NUM("retry_period"), secs[2]);
    le->next_attempt = now_of(le);
    luna_leader_tick(le);
}

/* ---- construction ------------------------------------------------------------------ */

int luna_leader_check_timing(double lease_duration, double renew_deadline, double retry_period,
                             luna_error *err)
{
    return luna_lease_check_timing(
        "leader election", lease_duration ? lease_duration : LUNA_LEADER_DEFAULT_LEASE_DURATION,
        renew_deadline ? renew_deadline : LUNA_LEADER_DEFAULT_RENEW_DEADLINE,
        retry_period ? retry_period : LUNA_LEADER_DEFAULT_RETRY_PERIOD, LUNA_LEADER_JITTER, err);
}

int luna_leader_new(struct luna_kube_client *kc, const struct luna_leader_options *o,
                    struct luna_leader **out, luna_error *err)
{
    *out = NULL;
    double lease = o->lease_duration ? o->lease_duration : LUNA_LEADER_DEFAULT_LEASE_DURATION;
    double renew = o->renew_deadline ? o->renew_deadline : LUNA_LEADER_DEFAULT_RENEW_DEADLINE;
    double retry = o->retry_period ? o->retry_period : LUNA_LEADER_DEFAULT_RETRY_PERIOD;
    double jitter = o->jitter == 0 ? LUNA_LEADER_JITTER : o->jitter;
    if (!o->name || !luna_lease_dns_name(o->name))
        return luna_error_set(err, LUNA_EINVAL, "leader election: lease name \"%s\" is not a "
                              "DNS subdomain name", o->name ? o->name : "");
    if (!o->namespace_ || !luna_lease_dns_name(o->namespace_))
        return luna_error_set(err, LUNA_EINVAL, "leader election: namespace \"%s\" is not a "
                              "valid name", o->namespace_ ? o->namespace_ : "");
    if (!o->identity || !*o->identity || strlen(o->identity) >= MAX_IDENTITY ||
        luna_json_utf8_valid_prefix(o->identity, strlen(o->identity)) != strlen(o->identity))
        return luna_error_set(err, LUNA_EINVAL, "leader election: identity must be non-empty "
                              "UTF-8 of at most %d bytes", MAX_IDENTITY - 1);
    int rc = luna_lease_check_timing("leader election", lease, renew, retry, jitter, err);
    if (rc < 0)
        return rc;
    struct luna_leader *le = calloc(1, sizeof *le);
    if (!le)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    le->kc = kc;
    le->lease_duration = lease;
    le->renew_deadline = renew;
    le->retry_period = retry;
    le->jitter = jitter;
    le->lease_seconds = (int)ceil(lease);
    le->clock = o->clock ? o->clock : luna_clock_monotonic();
    le->loop = o->loop;
    le->metrics = o->metrics;
    le->on_started_leading = o->on_started_leading;
    le->on_stopped_leading = o->on_stopped_leading;
    le->on_new_leader = o->on_new_leader;
    le->ud = o->ud;
    le->next_attempt = le->deadline = INFINITY;
    snprintf(le->problem, sizeof le->problem, "lease not observed yet");
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    le->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^
              (uint64_t)(uintptr_t)le;
    if (!le->rng)
        le->rng = 0x9E3779B97F4A7C15ULL;
    ev_timer_init(&le->timer, timer_cb, 0.0, 0.0);
    size_t plen = strlen(o->namespace_) + strlen(o->name) + 64;
    le->name = strdup(o->name);
    le->ns = strdup(o->namespace_);
    le->identity = strdup(o->identity);
    le->lease_id = malloc(plen);
    le->path = malloc(plen);
    le->collection = malloc(plen);
    if (!le->name || !le->ns || !le->identity || !le->lease_id || !le->path ||
        !le->collection) {
        luna_leader_free(le);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    snprintf(le->lease_id, plen, "%s/%s", o->namespace_, o->name);
    snprintf(le->collection, plen, "/apis/coordination.k8s.io/v1/namespaces/%s/leases",
             o->namespace_);
    snprintf(le->path, plen, "%s/%s", le->collection, o->name);
    *out = le;
    return 0;
}

void luna_leader_free(struct luna_leader *le)
{
    if (!le)
        return;
    if (le->loop)
        ev_timer_stop(le->loop, &le->timer);
    if (le->req)
        luna_kube_request_cancel(le->req);
    free(le->name);
    free(le->ns);
    free(le->identity);
    free(le->lease_id);
    free(le->path);
    free(le->collection);
    free(le->spec);
    free(le->lease);
    free(le);
}

/* ---- queries ---------------------------------------------------------------------- */

bool luna_leader_is_leader(const struct luna_leader *le) { return le->leading; }
const char *luna_leader_holder(const struct luna_leader *le)
{
    return le->observed ? le->rec.holder : "";
}
bool luna_leader_healthy(const struct luna_leader *le, const char **reason)
{
    if (le->leading || le->healthy) {
        if (reason)
            *reason = "";
        return true;
    }
    if (reason)
        *reason = le->problem;
    return false;
}
bool luna_leader_busy(const struct luna_leader *le) { return le->req != NULL; }
struct luna_leader_stats luna_leader_stats(const struct luna_leader *le) { return le->stats; }
