/*
 * workqueue_export.h — a workqueue's numbers as client-go's workqueue_*
 * metrics (what controller-runtime registers), one set of series per queue
 * name:
 *
 *   workqueue_depth{name}                              gauge
 *   workqueue_adds_total{name}                         counter
 *   workqueue_retries_total{name}                      counter
 *   workqueue_queue_duration_seconds{name}             histogram
 *   workqueue_work_duration_seconds{name}              histogram
 *   workqueue_unfinished_work_seconds{name}            gauge
 *   workqueue_longest_running_processor_seconds{name}  gauge
 *   workqueue_depth_by_priority{name, priority}        gauge
 *
 * The last is controller-runtime's priority label on its depth (which
 * luna keeps as client-go's total): a series per priority from the
 * queue's first dirty key at it, at most 25; keys of further priorities
 * are counted in one series labelled priority="exceeded_cardinality_limit".
 *
 * Durations use client-go's buckets, ExponentialBuckets(10e-9, 10, 10):
 * 1e-08 ... 10 seconds.  Depth, adds, retries, unfinished work and the
 * longest running processor are read from luna_workqueue_metrics() at each
 * scrape (exact, where client-go samples the last two every 500 ms); the
 * two histograms are fed by the queue's observer as keys are taken and
 * finished.
 *
 * Uses metrics.h, workqueue.h.  Runs on the loop thread.
 *
 * Invariant: the queue's series are listed if and only if the export is
 * attached, i.e. until luna_workqueue_export_detach() or the queue is freed.
 *
 * Ownership: attaching takes the queue's observer slot (a later
 * luna_workqueue_set_observer on that queue breaks the export).  The
 * export belongs to the queue: it is freed with the queue, or earlier by
 * luna_workqueue_export_detach(); the pointer is borrowed until then.  The
 * registry is borrowed only for the call (the export keeps references on
 * its series, so it may outlive the registry).
 */
#ifndef LUNA_WORKQUEUE_EXPORT_H
#define LUNA_WORKQUEUE_EXPORT_H

#include "base/error.h"
#include "serve/metrics.h"
#include "queue/workqueue.h"

struct luna_workqueue_export;

/* Registers the workqueue_* families in reg (shared by every queue) and
 * creates q's series.  Attach right after creating the queue: the
 * histograms only see what happens from now on.  LUNA_EINVAL if the queue
 * has no name (client-go exports nothing for unnamed queues), already has
 * an observer (it is exported already), or another queue of that name
 * exports its metrics there; LUNA_ENOMEM. */
int luna_workqueue_export_attach(struct luna_metrics *reg, struct luna_workqueue *q,
                                 struct luna_workqueue_export **out, luna_error *err);

/* Removes the queue's series, clears its observer and frees the export. */
void luna_workqueue_export_detach(struct luna_workqueue_export *x);

#endif
