/*
 * shard_set.h — a replica's place in a shard set (`luna run --shards`):
 * its membership Lease, its claim on the 64-bit hash space, and the
 * hand-off that moves ranges between replicas without two of them ever
 * reconciling one key at once.  The protocol and why it is safe:
 * docs/sharding.md ("The hand-off protocol").
 *
 * Objects (coordination.k8s.io/v1 Leases in one namespace):
 *   - `<set>-member-<h>` per replica (h: FNV-1a 64 of its identity, in
 *     hex), labelled luna.dev/shard-set=<set>, holderIdentity = identity,
 *     renewed every retry period (client-go's timings);
 *   - `<set>-shards`, the claims object: its annotation
 *     luna.dev/shard-claims is a JSON object identity → claimed selector
 *     (KEP-5866 text).  Every change is a compare-and-swap (PUT with the
 *     resourceVersion read).
 *
 * One round, every retry period: renew our Lease; read the claims object;
 * list the member Leases (after the claims read, so a takeover is judged
 * on a Lease read newer than the claims it replaces); then decide:
 *   - target: our range of the equal split (luna_shard_split) over the
 *     live members (a Lease whose resourceVersion changed within its
 *     leaseDurationSeconds + skew margin on our monotonic clock), us
 *     included;
 *   - shrink first: ranges of our claim outside the target stop being
 *     reconciled at once (owns() says no), then once every reconcile that
 *     was in flight at that moment has ended (oldest_running), the CAS
 *     writes claim ∩ target;
 *   - grow after: the same CAS adds the parts of the target no live
 *     member claims, and removes the entries of expired members;
 *   - on success the claim is ours (confirmed) and on_claim moves the
 *     informers (a relist: every object of a new range is enqueued).
 * Stop: the renew deadline after the send of our last successful renewal,
 * a timer at the highest libev priority (so it runs before any I/O of the
 * loop iteration a frozen process wakes up in) calls on_stop — abandon
 * every reconcile in flight — and owns() and may_write() are false until a
 * renewal succeeds and a CAS confirms the claim again.  Meanwhile the
 * dispatchers take no key (acting() is false): keys wait in the queues,
 * their owner unknown, and go once on_resume says the claim is confirmed
 * (dropping them would lose them for good when the same claim comes back:
 * the informers do not move, so nothing enqueues them again).
 *
 * Uses: kube_client, json, lease, shard, log, runtime_metrics.  Runs on
 * the loop thread.
 *
 * Invariants:
 *   - at most one request is in flight;
 *   - owns() is true only while fresh (now < last renewal sent + renew
 *     deadline) and confirmed (a CAS succeeded since freshness began), and
 *     only for hashes in the active ranges;
 *   - active ⊆ claim; active ≠ claim exactly while draining.
 *
 * Ownership: new copies the options' strings; the kube client, loop and
 * metrics are borrowed until free.  informer_shard() is borrowed until the
 * next on_claim or free.  No callback runs after free.
 */
#ifndef LUNA_SHARD_SET_H
#define LUNA_SHARD_SET_H

#include <ev.h>
#include <stdbool.h>

#include "base/error.h"
#include "base/shard.h"
#include "client/kube_client.h"

struct luna_shard_set;
struct luna_runtime_metrics;

#define LUNA_SHARD_DEFAULT_SKEW_MARGIN 2.0
/* The clock rate error the timing rule allows for (1 %). */
#define LUNA_SHARD_CLOCK_RATE_ERROR 0.01
#define LUNA_SHARD_SET_LABEL "luna.dev/shard-set"
#define LUNA_SHARD_CLAIMS_ANNOTATION "luna.dev/shard-claims"

struct luna_shard_set_options {
    const char *set;            /* the set's name (a DNS label), required */
    const char *namespace_;     /* the Leases' namespace, required */
    const char *identity;       /* this replica, required */
    enum luna_shard_field field;
    double lease_duration, renew_deadline, retry_period; /* 0: 15, 10, 2 */
    double skew_margin;         /* 0: 2 */
    struct ev_loop *loop;       /* required */
    struct luna_runtime_metrics *metrics; /* NULL: none */
    /* The claim changed: move the sharded informers to this selector
     * (borrowed for the call). */
    void (*on_claim)(void *ud, const struct luna_shard_selector *shard);
    /* The serial (luna_reconcile_serial) of the oldest reconcile in
     * flight, or 0 when none is. */
    unsigned long (*oldest_running)(void *ud);
    /* The newest serial handed out so far (0: none). */
    unsigned long (*last_started)(void *ud);
    /* The Lease was not renewed in time: abandon every reconcile now. */
    void (*on_stop)(void *ud);
    /* A CAS confirmed the claim after a stop or at start: acting() is
     * true again, so the keys that waited in the queues may go. */
    void (*on_resume)(void *ud);
    void *ud;
};

/* The timing rule of docs/sharding.md: with ε = 1 %,
 * (lease + margin)/(1 + ε) - renew/(1 - ε) must leave a positive slack
 * (the write timeout is half of it); plus client-go's rules.  0 = default. */
int luna_shard_set_check_timing(double lease, double renew, double retry, double margin,
                                luna_error *err);

int luna_shard_set_new(struct luna_kube_client *kc, const struct luna_shard_set_options *o,
                       struct luna_shard_set **out, luna_error *err);
void luna_shard_set_free(struct luna_shard_set *s); /* NULL: no-op */
void luna_shard_set_start(struct luna_shard_set *s);
/* The metrics made after the set (borrowed until free; NULL: none). */
void luna_shard_set_set_metrics(struct luna_shard_set *s, struct luna_runtime_metrics *rm);

/* Whether this replica may act at all now: its claim is confirmed and its
 * Lease fresh.  When false, a dispatcher leaves its keys queued. */
bool luna_shard_set_acting(const struct luna_shard_set *s);
/* Whether this replica may reconcile the object with this namespace and
 * uid now (see the invariants). */
bool luna_shard_set_owns(struct luna_shard_set *s, const char *namespace_, const char *uid);
/* Whether a write may be sent now: fresh and confirmed.  *why (if not
 * NULL) says why not. */
bool luna_shard_set_may_write(struct luna_shard_set *s, const char **why);
/* The slack of the timing rule, in two halves: seconds a write request
 * may take at most (its timeout), and how long bytes sent on an API
 * connection may stay unacknowledged (luna_http_client_set_unacked_timeout:
 * after that the kernel drops them with the connection).  A write sent
 * after the freshness check thus lands within the slack or never, even
 * through a partition that holds it and then heals. */
double luna_shard_set_write_timeout(const struct luna_shard_set *s);
double luna_shard_set_unacked_timeout(const struct luna_shard_set *s);
/* The selector the sharded informers follow: the claim, or a selector of
 * one point when the claim is empty (never NULL). */
const struct luna_shard_selector *luna_shard_set_informer_shard(const struct luna_shard_set *s);
enum luna_shard_field luna_shard_set_field(const struct luna_shard_set *s);
/* Counts a key not reconciled here (luna_shard_keys_dropped_total{reason}:
 * "not_owned" at dispatch, "handed_off" for an object that left the
 * shard). */
void luna_shard_set_note_dropped(struct luna_shard_set *s, const char *reason);
/* Stops growing (shutdown has begun); renewals go on. */
void luna_shard_set_freeze(struct luna_shard_set *s);
/* Graceful leave, once no reconcile runs: removes our claim (CAS), deletes
 * our Lease, then done(ud) — also when that failed (peers take over after
 * the lease expires).  Rounds stop. */
void luna_shard_set_leave(struct luna_shard_set *s, void (*done)(void *ud), void *ud);

#endif
