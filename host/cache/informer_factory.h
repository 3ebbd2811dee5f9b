/*
 * informer_factory.h — shared informers: one per (kind, namespace, label
 * selector, field selector), reference-counted, shared by every controller
 * that asks for the same thing (client-go's SharedInformerFactory).
 *
 * Uses: discovery (kind → resource), reflector, informer.  Runs on the
 * loop thread.
 *
 * Acquiring an informer that does not exist yet creates it and starts it:
 * discovery resolves the kind, then the reflector lists and watches.
 * Releasing the last reference stops it and drops its cache.  While the
 * kind cannot be resolved it is asked for again: after a failed discovery
 * with the reflector's backoff (each failure logged at warn), and while
 * the server answers that it does not serve the kind (NoKindMatch) at most
 * every LUNA_NOT_SERVED_POLL_MAX seconds (logged at warn once, then at
 * debug), so a CRD installed later is picked up without a restart.  Its
 * state says which (luna_shared_informer_state); the users of an informer
 * report what it means for them.
 * Selectors are canonicalised first, so "b=2,a=1" and "a=1, b=2" share;
 * a shard selector (KEP-5866) is part of the key in its canonical text, so
 * informers of different shards of one kind are different informers, and
 * so is the mode: a metadata-only informer (PartialObjectMetadata, see
 * reflector.h) and a full one of the same kind never share a cache, nor do
 * one that keeps managedFields and one that drops them.
 *
 * What a user of an informer may ask differently from another user of the
 * same one: nothing that changes the cache.  Every setting that does (kind,
 * namespace, selectors, shard, metadata-only, keep_managed_fields) is in
 * the key, so different wishes get different informers, never the first
 * acquirer's; resync is not an informer setting but a handler's
 * (informer.h).  The remaining fields (watch_list and the reflector's
 * tuning) are not a controller's to set: the runtime gives every informer
 * the same (its flags), and only specs pass others; for a shared informer
 * the first acquirer's hold.
 *
 * Invariants:
 *   - at most one shared informer exists per canonical key;
 *   - a shared informer exists if and only if its reference count is > 0.
 *
 * Ownership: the factory borrows the kube client and discovery.  Shared
 * informers are owned by the factory; acquire returns a borrowed pointer
 * valid until the matching release (or the factory's free).
 */
#ifndef LUNA_INFORMER_FACTORY_H
#define LUNA_INFORMER_FACTORY_H

#include <stdbool.h>

#include "client/discovery.h"
#include "base/error.h"
#include "cache/informer.h"
#include "client/kube_client.h"
#include "cache/reflector.h"

struct luna_informer_factory;
struct luna_shared_informer;

/* Seconds between two discovery requests for a kind the server does not
 * serve, at most. */
#define LUNA_NOT_SERVED_POLL_MAX 10.0

/* Where a shared informer is, in the order it gets there. */
enum luna_shared_informer_state {
    LUNA_SI_RESOLVING,   /* discovery has not answered yet */
    LUNA_SI_UNRESOLVED,  /* discovery failed (connection, 5xx, ...): retrying */
    LUNA_SI_NOT_SERVED,  /* the server does not serve the kind: asking again */
    LUNA_SI_LISTING,     /* resolved; the first list is not in the cache yet */
    LUNA_SI_SYNCED,      /* the first list is in the cache (stays so) */
};

struct luna_informer_spec {
    const char *group;           /* "" for the core group */
    const char *version;
    const char *kind;
    const char *namespace_;      /* NULL or "": all namespaces */
    const char *label_selector;  /* kube syntax; NULL or "": everything */
    const char *field_selector;
    const struct luna_shard_selector *shard;  /* NULL: whole collection; copied */
    bool keep_managed_fields;
    bool metadata_only;          /* cache apiVersion, kind and metadata only */
    /* DEFAULT: the factory's (luna_informer_factory_set_watch_list).  The
     * first acquirer's choice holds for a shared informer, as its tuning
     * below does (the runtime passes the same to all). */
    enum luna_watch_list_mode watch_list;
    /* Reflector tuning (0: defaults); backoff_* also pace discovery
     * retries while the kind is not served. */
    size_t page_size;
    double min_watch_timeout, max_watch_timeout, idle_timeout;
    double backoff_base, backoff_max;
};

int luna_informer_factory_new(struct luna_kube_client *kc, struct luna_discovery *disc,
                              struct luna_informer_factory **out, luna_error *err);
/* How informers created from now on whose spec leaves watch_list DEFAULT
 * get their state (default: DEFAULT, i.e. the reflector's AUTO). */
void luna_informer_factory_set_watch_list(struct luna_informer_factory *f,
                                          enum luna_watch_list_mode mode);
/* The idle timeout (seconds) of informers created from now on whose spec
 * leaves it 0 (default 0: the reflector's). */
void luna_informer_factory_set_idle_timeout(struct luna_informer_factory *f, double seconds);
/* The min_watch_timeout of informers created from now on whose spec leaves
 * it 0 (0: the reflector's default). */
void luna_informer_factory_set_min_watch_timeout(struct luna_informer_factory *f, double secs);
/* Stops and frees every shared informer, whatever its count. */
void luna_informer_factory_free(struct luna_informer_factory *f);

struct luna_shared_informer *luna_informer_factory_acquire(struct luna_informer_factory *f,
                                                           const struct luna_informer_spec *spec,
                                                           luna_error *err);
void luna_informer_factory_release(struct luna_informer_factory *f,
                                   struct luna_shared_informer *si);
size_t luna_informer_factory_count(const struct luna_informer_factory *f);
/* Moves a shared informer to another shard (copied; NULL: the whole
 * collection): its key changes, and its reflector (if the kind is
 * resolved) relists, so objects that left the shard leave the cache as
 * deletions and those that joined arrive as adds.  LUNA_EINVAL if another
 * informer already has the new key; on failure nothing changes.  The
 * informer's own name (in its log lines) keeps the key it was created
 * with. */
int luna_informer_factory_set_shard(struct luna_informer_factory *f,
                                    struct luna_shared_informer *si,
                                    const struct luna_shard_selector *shard, luna_error *err);
/* Calls fn(ud, si) for every shared informer, in no particular order
 * (metrics collection).  fn must not acquire or release informers. */
void luna_informer_factory_foreach(struct luna_informer_factory *f,
                                   void (*fn)(void *ud, struct luna_shared_informer *si),
                                   void *ud);

struct luna_informer *luna_shared_informer_informer(struct luna_shared_informer *si);
/* NULL until discovery has resolved the kind. */
struct luna_reflector *luna_shared_informer_reflector(struct luna_shared_informer *si);
/* NULL until resolved; borrowed. */
const struct luna_resource *luna_shared_informer_resource(const struct luna_shared_informer *si);
const char *luna_shared_informer_key(const struct luna_shared_informer *si);
/* The informer's state; *why (if why is non-NULL) is the last resolve
 * failure for UNRESOLVED and NOT_SERVED, else NULL (borrowed until the
 * informer's next resolve). */
enum luna_shared_informer_state luna_shared_informer_state(const struct luna_shared_informer *si,
                                                           const char **why);
/* "resolving", "unresolved", "not_served", "listing", "synced". */
const char *luna_shared_informer_state_name(enum luna_shared_informer_state state);
int luna_shared_informer_refs(const struct luna_shared_informer *si);

#endif
