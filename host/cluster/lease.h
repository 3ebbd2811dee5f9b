/*
 * lease.h — what every user of a coordination.k8s.io/v1 Lease shares: the
 * MicroTime the Lease's times are written in, its spec as client-go's
 * LeaderElectionRecordToLeaseSpec writes it, its record as read back, the
 * name rules, and the timing rules of client-go's leader election
 * (lease duration > renew deadline > jitter × retry period > 0).
 *
 * Used by leader.c (one Lease per replica set, one holder) and
 * shard_set.c (one Lease per replica, plus the claims object).
 *
 * Pure functions; no loop use.  Strings are written into caller buffers.
 */
#ifndef LUNA_LEASE_H
#define LUNA_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json_writer.h"

#define LUNA_LEASE_MAX_IDENTITY 512
#define LUNA_LEASE_MAX_TIME 48
/* Bytes of a Lease (or a LIST of them) read at most. */
#define LUNA_LEASE_MAX_BYTES (1u << 20)

/* The Lease's spec as read (LeaderElectionRecord). */
struct luna_lease_record {
    char holder[LUNA_LEASE_MAX_IDENTITY];
    long duration;                    /* leaseDurationSeconds */
    long transitions;                 /* leaseTransitions */
    char acquire[LUNA_LEASE_MAX_TIME]; /* acquireTime, as the server wrote it */
};

/* Wall-clock MicroTime ("2006-01-02T15:04:05.000000Z"). */
void luna_lease_micro_time(char *buf, size_t size);

/* A DNS subdomain name (Lease names, namespaces). */
bool luna_lease_dns_name(const char *s);

/* Reads a Lease's record from json and the byte range of its spec
 * ([0, 0) if none).  LUNA_EPROTO when a field has the wrong type. */
int luna_lease_parse(const char *json, size_t len, struct luna_lease_record *rec,
                     uint64_t *spec_start, uint64_t *spec_end);

/* Writes a Lease spec object: holderIdentity, leaseDurationSeconds,
 * acquireTime (left out when ""), renewTime, leaseTransitions. */
void luna_lease_write_spec(luna_json_writer *w, const char *holder, long duration,
                           const char *acquire, const char *renew, long transitions);

/* Writes `"key": "value"`. */
void luna_lease_put_string(luna_json_writer *w, const char *key, const char *value);

/* client-go's rules for (lease, renew, retry) with jitter (<= 0: none):
 * 0, or LUNA_EINVAL saying which rule is broken; `what` prefixes the
 * message ("leader election", "sharding"). */
int luna_lease_check_timing(const char *what, double lease, double renew, double retry,
                            double jitter, luna_error *err);

#endif
