/*
 * reflector.h — keeps an informer's DeltaFIFO in step with the API server:
 * the state (a watch list, else a paged LIST), then a WATCH from its
 * resourceVersion, for ever.
 *
 * Uses: kube_client (HTTP + credentials), object_stream (decoding), backoff,
 * delta_fifo and informer.  Runs on the loop thread.
 *
 * Semantics follow client-go's reflector:
 *   - LIST with client-go's resourceVersion choice: the first list asks
 *     for resourceVersion=0 (served whole from the API server's watch
 *     cache, which ignores limit), a relist for the last version seen (no
 *     limit unless page_size was set or the server paged before), and after
 *     a 410 on a list for "" (a consistent read, in pages of `page_size`
 *     with limit/continue); a 410 on a page restarts the list that way;
 *     the complete list replaces the FIFO's contents (deletions of vanished
 *     objects included) and its resourceVersion starts the watch;
 *   - WATCH with allowWatchBookmarks and a server timeout randomised in
 *     [min, max) so many informers do not reconnect in step; every applied
 *     event and bookmark advances the resourceVersion, and a watch that
 *     ends or breaks resumes from it; a watch ending cleanly resumes at
 *     once, a failure after a backoff;
 *   - 410 Gone (status or ERROR event) → relist; 504 "Too large resource
 *     version" (a server behind the version asked for, e.g. restored from
 *     an older etcd) → a consistent relist after a backoff; other 429 and
 *     5xx → back off, honouring Retry-After; connection errors → back off;
 *   - a watch silent for `idle_timeout` (bookmarks arrive about once a
 *     minute on a real server) is treated as hung and replaced;
 *   - a watch that ended (timeout, or the server's end) having brought
 *     nothing at all may be waiting for a version the server has not
 *     reached (kube-apiserver answers such a watch with silence): before it
 *     resumes, a LIST of one item with resourceVersionMatch=NotOlderThan
 *     checks the version; 504 Too large (or the version refused) → a
 *     consistent relist;
 *   - a malformed or truncated event stops that watch (logged, counted);
 *     the next one resumes from the last event applied, so nothing is lost;
 *   - an item or event the informer never asked for is refused like a
 *     malformed one (the list or watch fails, nothing of it is cached): one
 *     outside its namespace, one whose labels fail its label selector (not
 *     checked on DELETED, which carries the last state that matched), one
 *     of another kind or apiVersion (object_stream).
 * Watch list (KEP-3157, client-go's WatchListClient, on by default since
 * v0.35): unless told to list (LUNA_WATCH_LIST_OFF) or sharded, a sync
 * (the first one and every relist) is one WATCH with sendInitialEvents=true,
 * resourceVersionMatch=NotOlderThan and allowWatchBookmarks, from the last
 * version seen ("" at first and after a 410 or a too large version: a
 * consistent read).  The server streams the state as ADDED events, then a
 * BOOKMARK annotated "k8s.io/initial-events-end": "true"; the events
 * before it build the state aside, and at the bookmark the state replaces
 * the FIFO's contents at once (exactly as a complete LIST does: Replaced
 * deltas, deletions of vanished objects) and its resourceVersion is taken;
 * the same stream then goes on as the WATCH.  Before the bookmark:
 *   - 410 / 504 Too large → again at once from "";
 *   - 429 → again after a backoff;
 *   - any other error status or ERROR event (the 422 Invalid of a server
 *     without the WatchList gate, 403, 5xx) or an undecodable stream → this
 *     round is a LIST (client-go's fallback); the next relist tries a
 *     watch list again, as client-go's next ListAndWatch does;
 *   - a broken connection, a hung or truncated stream, or an end without
 *     the bookmark → again after a backoff, from scratch; after
 *     WATCH_LIST_ATTEMPTS (3) such ends in a row, this round lists;
 *   - a stream that never ends its initial events (bookmarks or blank lines
 *     keep the idle timeout away) is given up at the watch's deadline:
 *     every watch asks for timeoutSeconds in [min, 2 min) and is given up
 *     timeoutSeconds + 10% + 5 s after it started, as client-go's typed
 *     clients time the request out at timeoutSeconds.
 * Initial events build the state under the same checks as a LIST's items
 * (below) and cost the distinct keys, not every copy: the list in progress
 * is compacted when it fills (a million MODIFIED events of one object
 * before the bookmark hold one).
 * LUNA_WATCH_LIST_ON never falls back (each failure backs off and tries
 * again).  A sharded informer lists: only a LIST echoes shardInfo.
 *
 * Sharded (KEP-5866, base/shard.h): given a shard selector, every LIST page
 * and WATCH carries it as `shardSelector`.  A list whose every page echoes
 * it in metadata.shardInfo.selector was filtered by the server ("server"
 * mode); otherwise the server ignored it (older, or the feature gate off)
 * and the reflector filters on arrival ("client" mode).  Either way each
 * item's uid or namespace is hashed as it arrives, before its object is
 * built (object_stream's on_filter), and items outside the shard are
 * dropped: a WATCH carries no shardInfo, so a watch served by another API
 * server without the gate is caught too (in server mode such drops are
 * logged at warn once, as the server broke its word).  A dropped watch
 * event still advances the resourceVersion.  The mode is logged at info
 * once, when first known, and again only when it changes (not at every
 * relist nor at every shard change: the server is the same).  Changing the selector
 * (luna_reflector_set_shard) relists: objects that left the shard vanish
 * from the cache as deletions, objects that joined it arrive as adds.
 *
 * Metadata only (client-go's metadata informer): LIST asks for
 * LUNA_ACCEPT_METADATA_LIST and WATCH for LUNA_ACCEPT_METADATA_WATCH, the
 * media types client-go's metadata client sends less protobuf, each ending
 * in plain application/json: a server that cannot convert answers full
 * objects instead of 406, and the object stream keeps only their metadata
 * either way.  Cached objects carry the resource's own apiVersion and kind.
 *
 * On a relist, listed objects whose key and resourceVersion match the cache
 * reuse the cached object instead of a new copy, so relisting a synced
 * informer does not double its memory.
 *
 * Invariants:
 *   - at most one request (list page or watch) is in flight;
 *   - the resourceVersion only moves to one the server sent, after the
 *     event carrying it has been pushed into the FIFO.
 *
 * Ownership: the reflector borrows the kube client and the informer for its
 * life (free it before them); options are copied.
 */
#ifndef LUNA_REFLECTOR_H
#define LUNA_REFLECTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/shard.h"
#include "cache/informer.h"
#include "client/kube_client.h"
#include "client/resource.h"

#define LUNA_ACCEPT_METADATA_LIST \
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
#define LUNA_ACCEPT_METADATA_WATCH \
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
/* How a sync gets the state. */
enum luna_watch_list_mode {
    LUNA_WATCH_LIST_DEFAULT = 0,  /* the owner's default; for a reflector: AUTO */
    LUNA_WATCH_LIST_AUTO,         /* watch list, LIST when the server refuses */
    LUNA_WATCH_LIST_ON,           /* watch list only */
    LUNA_WATCH_LIST_OFF,          /* LIST only */
};

/* "auto", "on", "off" → the mode; LUNA_EINVAL for anything else. */
int luna_watch_list_mode_parse(const char *text, enum luna_watch_list_mode *out);
/* "default", "auto", "on", "off". */
const char *luna_watch_list_mode_name(enum luna_watch_list_mode m);

struct luna_reflector_options {
    const struct luna_resource *resource;
    const char *namespace_;        /* NULL or "": all namespaces */
    const char *label_selector;    /* NULL or "": none */
    const char *field_selector;
    const struct luna_shard_selector *shard;  /* NULL: the whole collection; copied */
    size_t page_size;              /* 0: 500, and relists are not paged */
    bool keep_managed_fields;
    bool metadata_only;            /* list and watch PartialObjectMetadata */
    enum luna_watch_list_mode watch_list;
    double min_watch_timeout;      /* 0: 300 s */
    double max_watch_timeout;      /* 0: 2 × min */
    double idle_timeout;           /* 0: 180 s */
    double backoff_base;           /* 0: client-go's 0.8 s doubling to 30 s */
    double backoff_max;
};

struct luna_reflector_stats {
    unsigned long lists;           /* complete states applied (LIST or watch list) */
    unsigned long watch_lists;     /* of which by watch list */
    unsigned long watch_list_items;      /* events before initial-events-end bookmarks */
    unsigned long watch_list_fallbacks;  /* syncs that listed as a watch list failed */
    unsigned long list_pages;
    unsigned long watches;         /* watch requests started */
    unsigned long watch_events;
    unsigned long bookmarks;
    unsigned long gone;            /* 410 responses and ERROR events */
    unsigned long failures;        /* requests that failed or broke off */
    unsigned long decode_errors;
    /* Watches that ended, by why (each is followed by a new watch or a
     * relist): 410 Gone, an error status or broken connection, the idle
     * timeout, a clean end by the server, a stream that did not decode. */
    unsigned long watch_gone, watch_errors, watch_timeouts, watch_closed, watch_decode;
    /* Items outside the shard dropped on arrival (LIST items and WATCH
     * events), never stored. */
    unsigned long shard_dropped;
    /* Watches that ended having brought nothing (no event, no bookmark)
     * whose resourceVersion was then checked; checks the server answered
     * with the version current (the watch resumed from it), and checks that
     * found the server behind it (followed by a consistent relist).  The
     * rest failed (network, other statuses) and were retried. */
    unsigned long rv_checks, rv_current, rv_stale;
    /* Objects the stream decoder refused (nested deeper than kube-apiserver
     * accepts, a number out of double range): each left out alone, the
     * rest of its LIST page or watch stream applied. */
    unsigned long bad_objects;
};

/* Who applies the shard selector. */
enum luna_reflector_shard_mode {
    LUNA_SHARD_MODE_NONE,     /* no selector */
    LUNA_SHARD_MODE_PENDING,  /* no list with it has completed yet */
    LUNA_SHARD_MODE_SERVER,   /* the last list echoed shardInfo */
    LUNA_SHARD_MODE_CLIENT,   /* it did not: filtered on arrival */
};

struct luna_reflector;

int luna_reflector_new(struct luna_kube_client *kc, struct luna_informer *inf,
                       const struct luna_reflector_options *o, struct luna_reflector **out,
                       luna_error *err);
/* Stops any request and timer; the informer keeps its cache. */
void luna_reflector_free(struct luna_reflector *r);

void luna_reflector_start(struct luna_reflector *r);
void luna_reflector_stop(struct luna_reflector *r);

/* The last resourceVersion applied ("" before the first list). */
const char *luna_reflector_resource_version(const struct luna_reflector *r);
struct luna_reflector_stats luna_reflector_stats(const struct luna_reflector *r);
/* The last object the decoder refused, "namespace/name: reason", "" if
 * none (borrowed). */
const char *luna_reflector_last_bad(const struct luna_reflector *r);
/* The last failure's message, "" if none (borrowed). */
const char *luna_reflector_last_error(const struct luna_reflector *r);

enum luna_reflector_shard_mode luna_reflector_shard_mode(const struct luna_reflector *r);
/* "none", "pending", "server", "client". */
const char *luna_reflector_shard_mode_name(enum luna_reflector_shard_mode m);
/* The selector's canonical text, NULL without one (borrowed until the
 * next set_shard or free). */
const char *luna_reflector_shard_text(const struct luna_reflector *r);
/* Replaces the shard selector (copied; NULL: none) and, if the reflector
 * runs and the selector changed, cancels what is in flight and relists.
 * LUNA_ENOMEM leaves the old selector in place. */
int luna_reflector_set_shard(struct luna_reflector *r, const struct luna_shard_selector *shard,
                             luna_error *err);

#endif
