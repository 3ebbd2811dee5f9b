/*
 * informer.h — one shared informer: a DeltaFIFO fed by a reflector, drained
 * into the indexer, with event handlers told of every change.
 *
 * Uses: delta_fifo, indexer, object, loop (libev).  Runs on the loop thread.
 *
 * The reflector (or a spec) pushes deltas into luna_informer_fifo() and
 * calls luna_informer_wake().  A small backlog (a watch event: at most
 * LUNA_INFORMER_IMMEDIATE keys) is drained at once, inside wake, so the
 * reconcile an event causes can start before the rest of its watch chunk
 * is even parsed; a larger one (a list) drains in batches from the loop,
 * so a 100,000-object list never blocks it for long.  Draining applies
 * each delta to the cache and then calls handlers in registration order:
 *     Added / Replaced / Sync / Updated of a key not cached → on_add
 *     ... of a cached key                                 → on_update(old, new)
 *     Deleted                                             → on_delete(last state)
 * After each drain step that delivered changes, every handler's
 * on_batch_end (optional) is called once: the place for work that must not
 * run inside a notification, such as starting reconciles.
 * except a Sync delta (a resync), which goes only to the handlers whose
 * resync round it is (below).
 * on_add's in_initial_list is true for the objects of the first list.
 * A handler added after objects are cached first receives on_add for every
 * cached object, with in_initial_list true (client-go's shared informer
 * does the same), so every handler sees every object.
 *
 * Resync is per handler (client-go's AddEventHandlerWithResyncPeriod): a
 * handler with a resync period gets on_update(obj, obj) for every cached
 * object about every `resync` seconds, counted from when it was added,
 * and a handler without one never does, whoever else shares the informer.
 * One timer serves all: it fires when the earliest handler is due; each
 * firing is a round (numbered) that marks every handler then due and
 * queues Sync deltas tagged with the round for every cached key without
 * pending deltas.  A Sync of round r reaches exactly the handlers marked
 * in a round >= r: those due in r, and those due later while that Sync
 * was still queued (their own round skipped the key because of it).
 *
 * Invariants:
 *   - handlers run only from the drain, never re-entrantly from a push, and
 *     never from a drain inside a handler (a wake there only schedules);
 *   - for one key, handlers see changes in the order they were pushed;
 *   - has_synced is true if and only if the first complete list has been
 *     applied to the cache (and stays true);
 *   - the resync timer runs if and only if a handler has a resync period.
 *
 * Ownership: the informer owns its indexer and FIFO.  Objects passed to
 * handlers are borrowed for the call (take a reference to keep one).
 * Handler userdata is borrowed until the handler is removed.  A handler
 * must not free the informer (nor, through the factory, its reflector,
 * whose parser may be what called wake).
 */
#ifndef LUNA_INFORMER_H
#define LUNA_INFORMER_H

#include <stdbool.h>
#include <stddef.h>

#include "cache/delta_fifo.h"
#include "base/error.h"
#include "cache/indexer.h"

struct luna_informer;

struct luna_informer_handler {
    void (*on_add)(void *ud, struct luna_object *obj, bool in_initial_list);
    void (*on_update)(void *ud, struct luna_object *old, struct luna_object *obj);
    void (*on_delete)(void *ud, struct luna_object *obj, bool final_state_unknown);
    void *ud;
    void (*on_batch_end)(void *ud);   /* may be NULL */
    double resync;                    /* seconds between this handler's resyncs;
                                       * 0: none */
};

/* Keys drained per loop iteration before yielding to other watchers. */
#define LUNA_INFORMER_BATCH 2048
/* Backlogs up to this many keys are drained inside luna_informer_wake. */
#define LUNA_INFORMER_IMMEDIATE 64
/* A drain of at least this many keys without the FIFO emptying (a list or
 * relist) ends by returning free heap pages to the system (malloc_trim). */
#define LUNA_INFORMER_TRIM_BURST 10000

/* `name` is for logs (e.g. "v1/configmaps ns=prod labels=app=x"); copied. */
struct luna_informer *luna_informer_new(const char *name, luna_error *err);
/* Stops the drain and the resync timer; drops the cache and pending deltas. */
void luna_informer_free(struct luna_informer *inf);

const char *luna_informer_name(const struct luna_informer *inf);
struct luna_indexer *luna_informer_indexer(struct luna_informer *inf);
struct luna_delta_fifo *luna_informer_fifo(struct luna_informer *inf);

/* Call after pushing into the FIFO: drains now (small backlog, not inside
 * a drain) or schedules a drain on the loop. */
void luna_informer_wake(struct luna_informer *inf);
/* Drains at most max keys now (specs and shutdown), then calls the
 * on_batch_end callbacks if any key was drained; returns how many.  Inside
 * a handler it drains nothing and returns 0. */
size_t luna_informer_drain(struct luna_informer *inf, size_t max);

/* Returns a handler id (> 0) for removal, or a negative code.  The handler
 * struct is copied. */
int luna_informer_add_handler(struct luna_informer *inf,
                              const struct luna_informer_handler *h);
void luna_informer_remove_handler(struct luna_informer *inf, int id);

bool luna_informer_has_synced(const struct luna_informer *inf);


#endif
