/*
 * leader.h — leader election on a coordination.k8s.io/v1 Lease, with the
 * semantics of client-go's tools/leaderelection (LeaseLock,
 * ReleaseOnCancel).
 *
 * Every replica runs an elector on the same Lease (namespace/name); the
 * one whose identity is the Lease's holderIdentity leads.  One attempt
 * (client-go's tryAcquireOrRenew) is:
 *   - leading and the lease still valid: update the Lease we last wrote
 *     (its resourceVersion makes it optimistic); on any failure, go on
 *     with a fresh read below (a 409 Conflict means someone else wrote);
 *   - read the Lease; 404 → create it holding it (transitions 0);
 *   - if its spec differs from the one observed last, note it and the
 *     local time of the observation (observedTime);
 *   - held by someone else (holderIdentity not empty, not us) and valid —
 *     observedTime + leaseDurationSeconds > now — → not acquired;
 *   - else update it (resourceVersion from the read) holding it:
 *     acquireTime and leaseTransitions kept if it was ours, else
 *     acquireTime = now and leaseTransitions + 1.
 * Expiry is judged on the local clock from when the holder's last change
 * was seen, not on renewTime, so clock skew between replicas does not
 * matter (client-go's rule).  An empty holderIdentity (a released lease)
 * is free at once.
 *
 * Timing (client-go's defaults 15 / 10 / 2 s):
 *   - standby: an attempt every retry_period × [1, 1 + jitter) (jitter
 *     1.2, as wait.JitterUntil);
 *   - leading: a renewal round every retry_period after the last success;
 *     a round retries every retry_period and fails when it has not
 *     succeeded within renew_deadline of its start: leadership is then
 *     lost — on_stopped_leading runs at once and the elector stops (as
 *     client-go's Run returns).  The caller must stop acting as leader
 *     immediately.
 * Valid settings: lease_duration > renew_deadline > jitter × retry_period
 * > 0, lease_duration >= 1 (leaseDurationSeconds is whole seconds,
 * rounded up).
 *
 * luna_leader_release (ReleaseOnCancel) stops the elector and, if it
 * holds the Lease, writes holderIdentity "", leaseDurationSeconds 1,
 * acquireTime = renewTime = now, transitions kept, so a standby takes
 * over on its next attempt instead of waiting for expiry.
 *
 * Times written to the Lease (acquireTime, renewTime) are wall-clock
 * MicroTime ("2006-01-02T15:04:05.000000Z"); every decision uses the
 * injected clock.  With a loop, one ev_timer wakes the elector at the next
 * attempt or deadline; without one (specs on a fake clock) the owner calls
 * luna_leader_tick() after moving the clock.  HTTP answers arrive on the
 * loop either way.
 *
 * Uses kube_client, json, clock, log, lease (the Lease's shared parts), runtime_metrics
 * (leader_election_master_status{name}).  Runs on the loop thread.
 *
 * Invariants:
 *   - at most one request is in flight;
 *   - luna_leader_is_leader() is true if and only if on_started_leading
 *     has run and neither on_stopped_leading nor a successful release has
 *     since; the master_status gauge is 1 exactly then;
 *   - while leading, a renewal deadline is armed if and only if a round
 *     is in progress.
 *
 * Ownership: luna_leader_new copies the options' strings and borrows the
 * kube client, clock, loop, metrics and ud until luna_leader_free (which
 * cancels any request; no callback runs after it).  Strings returned are
 * borrowed until the next attempt completes or the elector is freed.
 */
#ifndef LUNA_LEADER_H
#define LUNA_LEADER_H

#include <ev.h>
#include <stdbool.h>

#include "base/clock.h"
#include "base/error.h"
#include "client/kube_client.h"

struct luna_leader;
struct luna_runtime_metrics;

#define LUNA_LEADER_DEFAULT_LEASE_DURATION 15.0
#define LUNA_LEADER_DEFAULT_RENEW_DEADLINE 10.0
#define LUNA_LEADER_DEFAULT_RETRY_PERIOD 2.0
#define LUNA_LEADER_JITTER 1.2

struct luna_leader_options {
    const char *name;              /* the Lease's name, required */
    const char *namespace_;        /* its namespace, required */
    const char *identity;          /* holderIdentity, required (the pod name) */
    double lease_duration;         /* seconds; 0: 15 */
    double renew_deadline;         /* 0: 10 */
    double retry_period;           /* 0: 2 */
    double jitter;                 /* 0: 1.2; < 0: none (specs) */
    const struct luna_clock *clock;            /* NULL: monotonic */
    struct ev_loop *loop;                      /* NULL: the owner ticks */
    struct luna_runtime_metrics *metrics;      /* NULL: none */
    /* Callbacks (each may be NULL).  None may call luna_leader_free;
     * on_new_leader (called while an answer is being handled) must not
     * call into the elector at all. */
    void (*on_started_leading)(void *ud);
    void (*on_stopped_leading)(void *ud);      /* lost, not released */
    void (*on_new_leader)(void *ud, const char *identity); /* "" = nobody */
    void *ud;
};

struct luna_leader_stats {
    unsigned long attempts;        /* attempts finished */
    unsigned long failures;        /* ... that did not end holding the lease */
    unsigned long conflicts;       /* 409 answers */
    unsigned long acquisitions;    /* times leadership began */
    unsigned long renewals;        /* successful attempts while leading */
};

/* Checks durations as luna_leader_new does (0 = default, jitter 1.2):
 * 0, or LUNA_EINVAL with the rule broken (for command-line checks). */
int luna_leader_check_timing(double lease_duration, double renew_deadline, double retry_period,
                             luna_error *err);

int luna_leader_new(struct luna_kube_client *kc, const struct luna_leader_options *o,
                    struct luna_leader **out, luna_error *err);
void luna_leader_free(struct luna_leader *le); /* NULL: no-op */

/* Makes the first attempt now. */
void luna_leader_start(struct luna_leader *le);
/* Without a loop: runs what is due on the clock (an attempt, a missed
 * deadline).  With one it is what the timer calls. */
void luna_leader_tick(struct luna_leader *le);

/* Stops the elector; if it leads, gives the Lease up (see above) and calls
 * done(ud, true) once written, done(ud, false) if that failed.  If it does
 * not lead, done(ud, false) runs before this returns.  A release already
 * under way, or an elector that lost, also ends at once with false. */
void luna_leader_release(struct luna_leader *le, void (*done)(void *ud, bool released),
                         void *ud);

bool luna_leader_is_leader(const struct luna_leader *le);
/* The holder last observed ("" if none yet or the lease was released). */
const char *luna_leader_holder(const struct luna_leader *le);
/* Whether a standby is healthy: its last attempt reached the API server
 * and read the Lease.  false with *reason before the first attempt ends
 * and after a failed request.  true while leading. */
bool luna_leader_healthy(const struct luna_leader *le, const char **reason);
/* True while a request is in flight. */
bool luna_leader_busy(const struct luna_leader *le);
struct luna_leader_stats luna_leader_stats(const struct luna_leader *le);

#endif
