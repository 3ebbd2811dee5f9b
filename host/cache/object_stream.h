/*
 * object_stream.h — turns a LIST body or a WATCH stream, fed in chunks as
 * it arrives, into cached objects, one item at a time.
 *
 * Uses: json (the incremental parser and writer), object.  Runs on the
 * loop thread.
 *
 * No tree is built: while the parser validates an item and its identity
 * fields are picked out, the item's input bytes are kept; when it ends they
 * are copied as they came (escapes included) less metadata.managedFields,
 * which is left out unless the informer keeps it (it is a third of a typical
 * object and no controller reads it), and less any blanks between tokens.
 * Memory per item is the item's own bytes, whatever the size of the list.
 *
 * Metadata only (options.metadata_only, for PartialObjectMetadata lists
 * and watches): the object keeps its metadata and nothing else, under the
 * apiVersion and kind the caller names (the resource's own, as
 * controller-runtime sets them, not the server's "meta.k8s.io/v1"
 * "PartialObjectMetadata"), so an owner reference built from it is right
 * and a server that ignored the conversion (answered full objects) costs
 * no more memory.
 *
 *   LIST:  {"kind":"XList","metadata":{"resourceVersion":"..","continue":".."},
 *           "items":[ {...}, {...} ]}
 *          → on_item(LUNA_STREAM_LISTED, obj) per item; the list's
 *            resourceVersion, continue token, remainingItemCount and
 *            shardInfo.selector (KEP-5866) are available after
 *            luna_object_stream_finish().
 *   WATCH: {"type":"ADDED","object":{...}} {"type":"MODIFIED",...} ...
 *          → on_item(ADDED|MODIFIED|DELETED, obj); BOOKMARK → on_bookmark(rv);
 *            ERROR → on_error(code, reason, message) with the Status fields.
 *            A BOOKMARK whose metadata.annotations has
 *            "k8s.io/initial-events-end": "true" says so to on_bookmark.
 *
 * Every item naming a "kind" or "apiVersion" must name the stream's
 * (options.kind, options.api_version, when both are given; a metadata-only
 * stream also takes meta.k8s.io/v1 PartialObjectMetadata): another is an
 * error for the whole stream (LUNA_EPROTO), as a Secret in a watch of
 * ConfigMaps would be cached as one.  Items that name neither (a LIST's
 * items of built-in types) pass.
 *
 * An optional on_filter sees each item's namespace, uid and
 * resourceVersion once the item is complete and before its object is
 * built; an item it refuses is never built (no allocation, nothing handed
 * to on_item) and is counted in luna_object_stream_filtered().  The
 * reflector filters a shard this way when the server did not.
 *
 * Invariants:
 *   - every object handed to on_item has a name (an item without one is an
 *     error for the whole stream, since it cannot be cached);
 *   - a failed stream stays failed until reset.
 *
 * Ownership: on_item receives a new object reference it must take over
 * (store it or unref it).  Strings passed to on_bookmark / on_error are
 * borrowed for the call.  The stream owns its parser and buffers; free
 * with luna_object_stream_free().
 */
#ifndef LUNA_OBJECT_STREAM_H
#define LUNA_OBJECT_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "cache/object.h"

enum luna_stream_mode { LUNA_STREAM_LIST, LUNA_STREAM_WATCH };

enum luna_stream_event {
    LUNA_STREAM_LISTED,
    LUNA_STREAM_ADDED,
    LUNA_STREAM_MODIFIED,
    LUNA_STREAM_DELETED,
};

/* Nesting an object may have, the object itself counting 1: what
 * kube-apiserver v1.37 accepts (Go's encoding/json bound of 10000, measured
 * in docs/informers.md).  Deeper items are refused one by one (on_bad). */
#define LUNA_OBJECT_MAX_DEPTH 10000

struct luna_object_stream_handler {
    /* Return 0 to go on, negative to abort the stream with that code. */
    int (*on_item)(void *ud, enum luna_stream_event ev, struct luna_object *obj);
    /* initial_events_end: the bookmark carries the annotation
     * "k8s.io/initial-events-end": "true" (the end of a WatchList's
     * initial events, KEP-3157). */
    int (*on_bookmark)(void *ud, const char *resource_version, bool initial_events_end);
    int (*on_error)(void *ud, int code, const char *reason, const char *message);
    /* Optional: true to build and deliver the item, false to drop it.  The
     * strings are NULL when absent, borrowed for the call. */
    bool (*on_filter)(void *ud, enum luna_stream_event ev, const char *namespace_,
                      const char *uid, const char *resource_version);
    /* Optional: an item past the decoder's bounds (nesting deeper than
     * LUNA_OBJECT_MAX_DEPTH, a number out of double range) was left out;
     * the stream goes on.  Strings: NULL when absent, borrowed. */
    int (*on_bad)(void *ud, enum luna_stream_event ev, const char *namespace_,
                  const char *name, const char *reason);
    void *ud;
};

struct luna_object_stream_options {
    enum luna_stream_mode mode;
    bool keep_managed_fields;
    /* Keep only metadata: each object is stored as {"apiVersion":
     * api_version, "kind": kind, "metadata": ...} whatever else the item
     * held (borrowed for luna_object_stream_new; plain text, no quotes or
     * backslashes). */
    bool metadata_only;
    /* The stream's kind and apiVersion ("v1", "apps/v1"): with both given,
     * items naming another are refused (above).  Borrowed for the call. */
    const char *api_version, *kind;
    uint64_t max_item_bytes;  /* 0: 64 MiB */
};

struct luna_object_stream;

struct luna_object_stream *luna_object_stream_new(const struct luna_object_stream_options *o,
                                                  const struct luna_object_stream_handler *h,
                                                  luna_error *err);
void luna_object_stream_free(struct luna_object_stream *s);
/* Starts over (a new LIST page or a new watch connection). */
int luna_object_stream_reset(struct luna_object_stream *s);

int luna_object_stream_feed(struct luna_object_stream *s, const void *data, size_t len,
                            luna_error *err);
/* End of input: checks the document was complete; a LIST must have
 * "items" (an array or null), or it is an error (LUNA_EPROTO): a Status or
 * a lone object sent with 200 is not an empty list. */
int luna_object_stream_finish(struct luna_object_stream *s, luna_error *err);

/* LIST metadata, valid after finish (borrowed until reset/free; "" if absent). */
const char *luna_object_stream_list_rv(const struct luna_object_stream *s);
const char *luna_object_stream_continue(const struct luna_object_stream *s);
/* The list's top-level "kind" ("ConfigMapList"), "" if absent. */
const char *luna_object_stream_list_kind(const struct luna_object_stream *s);
long long luna_object_stream_remaining(const struct luna_object_stream *s); /* -1: absent */
/* metadata.shardInfo.selector of the list, NULL if the list had none. */
const char *luna_object_stream_shard_info(const struct luna_object_stream *s);
/* Items delivered since the last reset. */
size_t luna_object_stream_items(const struct luna_object_stream *s);
/* Items refused (on_bad) since the last reset. */
size_t luna_object_stream_bad(const struct luna_object_stream *s);

/* Items on_filter dropped since the last reset. */
size_t luna_object_stream_filtered(const struct luna_object_stream *s);

#endif
