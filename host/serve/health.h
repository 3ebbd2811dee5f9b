/*
 * health.h — liveness and readiness state, and the bodies of /healthz and
 * /readyz in kube-apiserver's style.
 *
 *   /healthz  the event loop is alive: a heartbeat, stamped by an ev_timer
 *             every `interval` seconds, is younger than `timeout`.
 *   /readyz   the loop is alive and every named readiness check is true
 *             ("informers-synced", "leader-or-standby", "shutdown", ...).
 *
 * Bodies (luna_health_render): when everything passes and verbose is false,
 * "ok"; otherwise one line per check, in registration order with the
 * built-in "loop" check first, then the verdict:
 *
 *     [+]loop ok
 *     [+]informers-synced ok
 *     [-]leader-or-standby failed: lease not acquired yet
 *     readyz check failed
 *
 * with status 500 on failure (failures are always verbose, as in
 * kube-apiserver).  An excluded check prints "[+]name excluded: ok" and
 * does not count; excluded names that match no check add the line
 * `warn: some health checks cannot be excluded: no matches for "a","b"`.
 *
 * Uses libev (one ev_timer, unref'd so it alone does not keep ev_run
 * going), clock.h, textbuf.h, uthash, C11 atomics.  Runs on the loop
 * thread, except luna_health_live() and luna_health_render(.., HEALTHZ, ..),
 * which read only the atomic heartbeat and may be called from any thread
 * (an HTTP server thread can see a wedged loop; the loop itself cannot).
 *
 * Invariants: a check is listed if and only if it was set and not removed;
 * ready if and only if live and every listed check is ok; live if and
 * only if now - last heartbeat <= timeout on the health object's clock.
 *
 * Ownership: luna_health_new returns an object freed with
 * luna_health_free() (which stops the timer).  The clock and loop are
 * borrowed until then.  Names and reasons are copied; reasons returned by
 * luna_health_check are borrowed until the check is next set or removed.
 */
#ifndef LUNA_HEALTH_H
#define LUNA_HEALTH_H

#include <ev.h>
#include <stdbool.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/textbuf.h"

struct luna_health;

/* The heartbeat's default staleness bound: /healthz fails once the loop
 * has not turned for this long. */
#define LUNA_HEALTH_DEFAULT_TIMEOUT 10.0

struct luna_health_options {
    const struct luna_clock *clock; /* NULL = the monotonic clock */
    struct ev_loop *loop;           /* NULL: no timer, the owner calls beat */
    double interval;                /* heartbeat period; 0 = 1 s */
    double timeout;                 /* stale after; 0 = LUNA_HEALTH_DEFAULT_TIMEOUT; > interval */
};

enum luna_health_endpoint { LUNA_HEALTH_HEALTHZ, LUNA_HEALTH_READYZ };

/* LUNA_EINVAL on a non-finite or negative interval/timeout, or timeout <=
 * interval; LUNA_ENOMEM.  The heartbeat starts now. */
int luna_health_new(const struct luna_health_options *opts, struct luna_health **out,
                    luna_error *err);
void luna_health_free(struct luna_health *h); /* NULL: no-op */

/* Stamps the heartbeat with the clock's current reading. */
void luna_health_beat(struct luna_health *h);
/* Seconds since the last heartbeat.  Any thread. */
double luna_health_heartbeat_age(const struct luna_health *h);
bool luna_health_live(const struct luna_health *h); /* any thread */

/* Sets (creating on first use) the readiness check `name`: [A-Za-z0-9._/-]+,
 * at most 128 bytes.  reason (may be NULL) is kept for the failed line (a
 * passing check's non-empty reason is a note: "[+]name ok: note");
 * control characters become spaces and it is cut to 512 bytes.
 * LUNA_EINVAL on a bad name, LUNA_ENOMEM. */
int luna_health_set(struct luna_health *h, const char *name, bool ok, const char *reason,
                    luna_error *err);
/* 0, or LUNA_ENOTFOUND. */
int luna_health_remove(struct luna_health *h, const char *name);
/* One check's state (for /readyz/<name>): 0, or LUNA_ENOTFOUND.  *reason
 * is "" when none was given. */
int luna_health_check(const struct luna_health *h, const char *name, bool *ok,
                      const char **reason);
size_t luna_health_check_count(const struct luna_health *h);
bool luna_health_ready(const struct luna_health *h);

/* Appends the endpoint's body to out (see above) and returns the HTTP
 * status, 200 or 500; LUNA_ENOMEM if the buffer failed.  exclude: a
 * NULL-terminated list of check names, or NULL. */
int luna_health_render(const struct luna_health *h, enum luna_health_endpoint endpoint,
                       bool verbose, const char *const *exclude, struct luna_textbuf *out);

#endif
