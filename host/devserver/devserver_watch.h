/*
 * devserver_watch.h — one WATCH request: the stream of newline-delimited
 * JSON events ({"type":"ADDED","object":{...}}) kube-apiserver sends.
 *
 * A watch subscribes to its type's collection, filters each event through
 * its namespace and selectors (an object that stops matching is sent as
 * DELETED with its previous content at the event's RV; one that starts
 * matching as ADDED), converts objects to the requested version (or to
 * PartialObjectMetadata, devserver_negotiate.h), and queues
 * the lines for the transport, which pulls them with luna_ds_watch_read()
 * and is woken through the wake callback when new bytes are queued.
 * Bookmarks, timeoutSeconds, 410 Expired (as an ERROR event) and injected
 * faults are handled here.  It uses the libev loop for its timers.
 *
 * The initial state (a watch from "" or "0", or sendInitialEvents) is
 * taken at once (one reference per object) but queued 256 KB at a time
 * as the transport reads, then the initial-events-end bookmark; events
 * that happen meanwhile wait behind it.  So a 100,000-object watch list
 * neither holds its whole text nor trips the backlog bound, which
 * applies to live events.
 *
 * Slow watchers are cut off, as kube-apiserver's watch cache ends a
 * watcher whose channel is full: when a live event comes for a watch
 * whose unread bytes (queued, not yet taken by the transport) are over
 * its registry's max_queued (--watch-buffer, default 4 MiB), or over 64
 * KiB while all the server's watches hold over 256 MiB, the watch ends:
 * its unread bytes are freed (but the rest of the line being sent), the
 * stream ends after that line, a warning is logged and the registry's
 * cut_off count grows.  The client watches again from the last
 * resourceVersion it saw.
 *
 * A watch that cannot queue (out of memory) ends with its connection
 * dropped, as an injected truncation does: the client re-watches from the
 * last resourceVersion it saw and loses nothing.
 *
 * The open watches of one server are linked in its luna_ds_watches, so
 * the server can end them all at shutdown.
 *
 * Conversion webhooks (devserver_convert.h): an event whose object must be
 * converted by a webhook waits for its answer, and the events after it
 * wait behind it, so the stream keeps the store's order; periodic
 * bookmarks are skipped meanwhile (their resourceVersion would pass the
 * events still waiting).  A failed conversion ends the stream with an
 * ERROR event holding kube's 500 Status.
 *
 * Invariants: `ended` is true if and only if no more bytes will be queued;
 * the watch is subscribed if and only if !ended; a watch is in its
 * registry's list if and only if it is not freed.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_WATCH_H
#define LUNA_DEVSERVER_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "devserver/devserver_faults.h"
#include "devserver/devserver_filter.h"
#include "devserver/devserver_status.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"

typedef struct luna_ds_watch luna_ds_watch;

#define LUNA_DS_WATCH_BUFFER_DEFAULT ((size_t)4 << 20)

/* The open watches of one server (zero-initialise; caller storage).
 * queued is the sum of every open watch's unread bytes. */
typedef struct luna_ds_watches {
    luna_ds_watch *open;
    size_t max_queued;       /* a watch's unread bytes before it is cut off; 0: the default */
    size_t queued;
    uint64_t cut_off;        /* watches ended for falling behind, since start */
} luna_ds_watches;

enum luna_ds_watch_start {
    LUNA_DS_WATCH_FROM_STATE, /* RV unset or "0": ADDED for every object, then live */
    LUNA_DS_WATCH_FROM_RV,    /* events after rv */
};

typedef struct luna_ds_watch_opts {
    luna_ds_watches *watches;       /* the registry it joins (borrowed) */
    luna_ds_faults *faults;         /* injected faults (borrowed) */
    const luna_ds_store *store;     /* for the bookmarks' RV (borrowed) */
    luna_ds_type *type;             /* the requested version */
    luna_ds_type *storage;          /* the storage version of its collection */
    luna_ds_filter filter;          /* moved into the watch (cleared here) */
    enum luna_ds_watch_start start;
    uint64_t rv;
    bool bookmarks;                 /* allowWatchBookmarks */
    bool send_initial_events;       /* sendInitialEvents=true: state, then an
                                       initial-events-end BOOKMARK */
    double timeout;                 /* seconds; 0 = none */
    const char *partial;            /* "v1"/"v1beta1": objects as meta.k8s.io
                                       PartialObjectMetadata (static); NULL: whole */
    bool end_on_object;             /* end the stream cleanly instead of sending
                                       any object or bookmark (kube, asked for
                                       PartialObjectMetadataList, cannot encode one) */
    double bookmark_interval;       /* seconds between BOOKMARKs */
    bool too_large;                 /* a watch list from a version the store has
                                       not reached: one ERROR event (504) */
    struct luna_ds *ds;             /* the server, for conversion webhooks (borrowed;
                                       NULL: apiVersion rewritten only) */
} luna_ds_watch_opts;

/* Starts a watch; the filter is moved out of opts.  A too-old RV yields a
 * stream holding one ERROR (410 Expired) event.  NULL only when out of
 * memory (the filter is then cleared).  The pointers in opts must outlive
 * the watch. */
luna_ds_watch *luna_ds_watch_start(luna_ds_watch_opts *opts);

/* The transport's wake-up: called (from the loop) when bytes are queued or
 * the stream ends while the transport waits. */
void luna_ds_watch_set_wake(luna_ds_watch *w, void (*wake)(void *ctx), void *ctx);

enum {
    LUNA_DS_WATCH_END = -1,   /* the stream ended cleanly */
    LUNA_DS_WATCH_DROP = -2,  /* drop the connection (injected fault, out of memory) */
};

/* Copies up to max queued bytes into buf.  Returns the count (> 0), 0 when
 * nothing is queued yet (the transport waits for wake), LUNA_DS_WATCH_END
 * at the end of the stream, LUNA_DS_WATCH_DROP when the connection must be
 * dropped. */
ssize_t luna_ds_watch_read(luna_ds_watch *w, char *buf, size_t max);

/* Ends every open watch of reg cleanly (server shutdown). */
void luna_ds_watch_end_all(luna_ds_watches *reg);

void luna_ds_watch_free(luna_ds_watch *w);

#endif
