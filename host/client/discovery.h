/*
 * discovery.h — REST mapping: "group/version/Kind" → the API resource that
 * serves it (plural name, namespaced or not, status subresource).
 *
 * Uses: kube_client, json, resource.  Runs on the loop thread.
 *
 * One request per group-version (/api/v1 or /apis/GROUP/VERSION), cached.
 * A kind missing from the cache fetches its group-version again, so a CRD
 * created after start is found without a restart (kubectl's discovery
 * refreshes on a miss the same way).  Concurrent resolves of one
 * group-version share one request.
 *
 * A resolve ends with the resource, or with an error whose code says
 * which failure it is:
 *   LUNA_ENOMATCH   the server answered and does not serve the kind: its
 *                   group-version is unknown (404, whatever the body) or
 *                   lists no such kind (client-go's NoKindMatchError);
 *   anything else   discovery itself failed (connection, timeout, 5xx, a
 *                   body that is not an APIResourceList): worth a retry.
 *
 * Only group-versions the server serves are kept once their fetch ended:
 * one it does not serve (404) or whose fetch failed is forgotten when its
 * resolves are answered (it is fetched again on the next resolve in any
 * case), so made-up kinds asked for by a script cannot grow the cache.
 *
 * Invariants:
 *   - a group-version is cached if and only if its last fetch got an
 *     answer (a resource list, or a 404 that lists nothing), and is kept
 *     after its fetch only if that answer was a resource list;
 *   - every resolve ends in exactly one callback unless canceled.
 *
 * Ownership: the discovery borrows the kube client.  Resources passed to
 * callbacks or returned by lookup are owned by the discovery cache and
 * valid until the next fetch of that group-version or luna_discovery_free;
 * copy them (luna_resource_copy) to keep them.
 */
#ifndef LUNA_DISCOVERY_H
#define LUNA_DISCOVERY_H

#include "base/error.h"
#include "client/kube_client.h"
#include "client/resource.h"

struct luna_discovery;
struct luna_discovery_wait;

/* err is NULL on success; res is NULL on failure. */
typedef void (*luna_discovery_fn)(void *ud, const struct luna_resource *res,
                                  const luna_error *err);

int luna_discovery_new(struct luna_kube_client *kc, struct luna_discovery **out, luna_error *err);
/* Cancels pending resolves without calling them. */
void luna_discovery_free(struct luna_discovery *d);

/* From the cache only: the resource or NULL. */
const struct luna_resource *luna_discovery_lookup(struct luna_discovery *d, const char *group,
                                                  const char *version, const char *kind);

/* Resolves a kind, fetching its group-version when it is not cached (or is
 * cached without the kind).  The callback may run before this returns (a
 * cache hit), in which case NULL is returned.  On a start failure returns
 * NULL with err set and no callback. */
struct luna_discovery_wait *luna_discovery_resolve(struct luna_discovery *d, const char *group,
                                                   const char *version, const char *kind,
                                                   luna_discovery_fn fn, void *ud,
                                                   luna_error *err);
void luna_discovery_cancel(struct luna_discovery_wait *w);


#endif
