/*
 * delta_fifo.h — client-go's DeltaFIFO: a queue of keys, each with the list
 * of changes (deltas) seen for it since it was last popped.
 *
 * Uses: object, indexer (the informer's cache, read as "known objects").
 * Runs on the loop thread.
 *
 * The reflector pushes Added / Updated / Deleted deltas from a watch and a
 * Replace with every object of a (re)list; the informer pops one key at a
 * time and applies its deltas to the cache in order.  Semantics follow
 * client-go's DeltaFIFO with EmitDeltaTypeReplaced = true:
 *   - a key is queued once however many deltas it collects (fair FIFO);
 *   - two consecutive deletions collapse into one, keeping the one that
 *     carries the object's known final state;
 *   - Delete of an object neither in the known objects nor queued is
 *     dropped (nothing would observe it);
 *   - Replace(list) queues Replaced for every listed object, and a Deleted
 *     with final_state_unknown for every known or queued key absent from
 *     the list (the object is the last state luna saw: client-go's
 *     DeletedFinalStateUnknown);
 *   - Resync queues Sync for every known object that has no pending deltas,
 *     each tagged with the caller's round (the informer delivers a Sync
 *     only to the handlers due in that round, informer.h).
 *   - has_synced is true once the first Replace's keys (or any earlier
 *     push) have all been popped.
 *
 * Invariants:
 *   - a key is in the queue if and only if it has at least one delta;
 *   - the queue holds each key at most once.
 *
 * Ownership: every delta holds one reference to its object (taken by the
 * push function; the caller keeps its own).  During pop the deltas are lent
 * to the process callback and released after it returns; a callback that
 * keeps an object takes its own reference.  `known` is borrowed for the
 * life of the FIFO.
 */
#ifndef LUNA_DELTA_FIFO_H
#define LUNA_DELTA_FIFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "cache/indexer.h"
#include "cache/object.h"

enum luna_delta_type {
    LUNA_DELTA_ADDED,
    LUNA_DELTA_UPDATED,
    LUNA_DELTA_DELETED,
    LUNA_DELTA_REPLACED,
    LUNA_DELTA_SYNC,
};

struct luna_delta {
    enum luna_delta_type type;
    bool final_state_unknown;  /* Deleted detected by a relist, not seen */
    struct luna_object *obj;
    uint64_t round;            /* Sync: the resync round that queued it; else 0 */
};

typedef int (*luna_delta_process)(const char *key, const struct luna_delta *deltas,
                                  size_t n, void *ud);

struct luna_delta_fifo;

struct luna_delta_fifo *luna_delta_fifo_new(const struct luna_indexer *known);
/* Drops every pending delta. */
void luna_delta_fifo_free(struct luna_delta_fifo *f);

int luna_delta_fifo_add(struct luna_delta_fifo *f, struct luna_object *obj);
int luna_delta_fifo_update(struct luna_delta_fifo *f, struct luna_object *obj);
int luna_delta_fifo_delete(struct luna_delta_fifo *f, struct luna_object *obj);
/* objs: the complete current list; borrowed for the call. */
int luna_delta_fifo_replace(struct luna_delta_fifo *f, struct luna_object *const *objs,
                            size_t n);
int luna_delta_fifo_resync(struct luna_delta_fifo *f, uint64_t round);

/* Pops the oldest key and calls process with its deltas (oldest first).
 * Returns process's result, or LUNA_ENOTFOUND if the queue is empty. */
int luna_delta_fifo_pop(struct luna_delta_fifo *f, luna_delta_process process, void *ud);

size_t luna_delta_fifo_len(const struct luna_delta_fifo *f);
bool luna_delta_fifo_has_synced(const struct luna_delta_fifo *f);
/* Number of pending deltas for key (0 if not queued). */
size_t luna_delta_fifo_pending(const struct luna_delta_fifo *f, const char *key);

const char *luna_delta_type_name(enum luna_delta_type type);

#endif
