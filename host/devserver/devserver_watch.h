/*
 * devserver_watch.h — one WATCH request: the stream of newline-delimited
 * JSON events ({"type":"ADDED","object":{...}}) kube-apiserver sends.
 *
 * A watch subscribes to its type's collection, filters each event through
 * its namespace and selectors (an object that stops matching is sent as
 * DELETED with its previous content at the event's RV; one that starts
 * matching as ADDED), converts objects to the requested version, and queues
 * the lines for the transport, which pulls them with luna_ds_watch_read()
 * and is woken through the wake callback when new bytes are queued.
 * Bookmarks, timeoutSeconds, 410 Expired (as an ERROR event) and injected
 * faults are handled here.  It uses the libev loop for its timers.
 *
 * Invariants: `ended` is true if and only if no more bytes will be queued;
 * the watch is subscribed if and only if !ended.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_WATCH_H
#define LUNA_DEVSERVER_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "devserver/devserver_filter.h"
#include "devserver/devserver_status.h"
#include "devserver/devserver_types.h"

typedef struct luna_ds_watch luna_ds_watch;

enum luna_ds_watch_start {
    LUNA_DS_WATCH_FROM_STATE, /* RV unset or "0": ADDED for every object, then live */
    LUNA_DS_WATCH_FROM_RV,    /* events after rv */
};

typedef struct luna_ds_watch_opts {
    luna_ds_type *type;
    luna_ds_filter filter;          /* moved into the watch (cleared here) */
    enum luna_ds_watch_start start;
    uint64_t rv;
    bool bookmarks;                 /* allowWatchBookmarks */
    bool send_initial_events;       /* sendInitialEvents=true: state, then an
                                       initial-events-end BOOKMARK */
    double timeout;                 /* seconds; 0 = none */
    double bookmark_interval;       /* seconds between BOOKMARKs */
} luna_ds_watch_opts;

/* Starts a watch; the filter is moved out of opts.  Never fails: a too-old
 * RV yields a stream holding one ERROR (410 Expired) event. */
luna_ds_watch *luna_ds_watch_start(luna_ds_watch_opts *opts);

/* The transport's wake-up: called (from the loop) when bytes are queued or
 * the stream ends while the transport waits. */
void luna_ds_watch_set_wake(luna_ds_watch *w, void (*wake)(void *ctx), void *ctx);

/* Copies up to max queued bytes into buf.  Returns the count (> 0), 0 when
 * nothing is queued yet (the transport waits for wake), -1 at the end of
 * the stream, -2 when the connection must be dropped (injected fault). */
ssize_t luna_ds_watch_read(luna_ds_watch *w, char *buf, size_t max);

/* Number of watches open (for the dump and tests). */
int luna_ds_watch_count(void);

/* Ends every open watch cleanly (server shutdown). */
void luna_ds_watch_end_all(void);

void luna_ds_watch_free(luna_ds_watch *w);

#endif
