/*
 * workqueue.h — the rate-limited, delaying work queue controllers take keys
 * from.
 *
 * The semantics of client-go's util/workqueue (queue.go, delaying_queue.go,
 * rate_limiting_queue.go) on one event loop instead of goroutines:
 *
 *   - Prioritized (controller-runtime's priority queue): every add carries
 *     a priority, an int, higher first; keys of one priority are handed out
 *     in the order they were queued (FIFO).  A key added again while dirty
 *     keeps the highest priority it was added with (never lowered); raised
 *     while queued, it moves to the tail of its new priority.  The runtime
 *     adds keys from an informer's initial list, resyncs and unchanged
 *     relisted objects at LUNA_WORKQUEUE_PRIORITY_LOW, live events at
 *     LUNA_WORKQUEUE_PRIORITY_DEFAULT, so a live change waits behind no
 *     backlog of startup keys.  With options.fifo every add is priority 0:
 *     client-go's plain FIFO (fair: keys in the order they were added).
 *   - Stingy: a key added many times before it is processed is processed
 *     once; a key added while it is being processed is processed once more,
 *     after luna_workqueue_done().  A key is never processed by two workers
 *     at the same time.
 *   - Delaying: add_after(key, d) adds the key once d seconds have passed on
 *     the queue's clock.  A key already waiting keeps the earlier of its two
 *     ready times and the higher of its two priorities; it is added with
 *     that priority when due.  Waiting keys become ready in ready-time
 *     order, equal times in the order they were scheduled.  (Waiting is
 *     apart from dirty, as in client-go: a queued key that is also
 *     add_after'ed is processed now and again when due, where
 *     controller-runtime folds the two.)  One ev_timer, armed for the
 *     earliest waiting key, drives this; without a loop the owner calls
 *     luna_workqueue_tick() after moving its (fake) clock.
 *   - Rate limited: add_rate_limited(key) = add_after(key, limiter.when(key));
 *     forget(key) ends the key's retry history — callers must forget a key
 *     once it was processed successfully, or its backoff keeps growing.
 *   - Shutdown: adds of every kind are dropped and waiting keys are
 *     discarded; get still returns the keys already queued, then reports
 *     SHUTDOWN.  shutdown_with_drain also calls back once no key is being
 *     processed (client-go's ShutDownWithDrain, as a notification).
 *
 * Uses: libev (one ev_timer), uthash, clock.h, ratelimit.h.  Runs on the
 * loop thread; nothing here blocks.  Every operation is O(1) but for the
 * heaps: O(log waiting) for delays, O(log priorities in use) when a
 * priority gains its first queued key or loses its last.
 *
 * Invariants (per key; "dirty" = needs processing, "processing" = handed
 * out by get and not yet done, "waiting" = scheduled by add_after):
 *   - a key is queued (in the FIFO of the band of its priority) if and only
 *     if it is dirty and not processing (every element of the queue is
 *     dirty and not processing);
 *   - a band (the keys of one priority) is in the band heap if and only if
 *     it has queued keys; the heap's top is the highest such priority;
 *   - a band's depth is the number of dirty keys at its priority; a band
 *     exists while its depth > 0 (and a few empty ones are kept);
 *   - a key is processing if and only if get returned it and done has not
 *     been called for it since: at most one worker processes a key at once;
 *   - a key is waiting if and only if it is in the delay heap, at most once;
 *   - the queue holds a copy of a key if and only if the key is dirty,
 *     processing or waiting.
 *
 * Ownership: luna_workqueue_new returns a queue owned by the caller, freed
 * with luna_workqueue_free() (which stops the timer; a pending drain
 * callback is then never called).  Keys passed in are borrowed for the call
 * (the queue copies a key the first time it sees it and frees the copy when
 * the key is neither dirty, processing nor waiting).  The key returned by
 * get is the queue's copy, valid until done() is called for it.  The clock
 * is borrowed until the queue is freed; the limiter is owned by the queue.
 *
 * Callbacks: ready and drain run synchronously from the call that caused
 * them, as its last step; they may call any function here except
 * luna_workqueue_free (defer that, e.g. with an ev_idle).  Observer
 * functions run in the middle of get/done and must not call into the queue.
 */
#ifndef LUNA_WORKQUEUE_H
#define LUNA_WORKQUEUE_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/clock.h"
#include "base/error.h"
#include "queue/ratelimit.h"

struct luna_workqueue;

/* Priorities: higher is handed out first.  LOW is controller-runtime's
 * handler.LowPriority. */
#define LUNA_WORKQUEUE_PRIORITY_DEFAULT 0
#define LUNA_WORKQUEUE_PRIORITY_LOW (-100)

struct luna_workqueue_options {
    const char *name;                 /* for logs and metrics; copied; NULL = "" */
    bool fifo;                        /* ignore priorities: every add is 0 */
    const struct luna_clock *clock;   /* required; borrowed until free */
    struct ev_loop *loop;             /* NULL: no timer, the owner ticks */
    struct luna_ratelimit *limiter; /* taken (even on failure); NULL = default
                                         limiter on `clock` */
};

/* Histogram feeds for the metrics module: each observation as it happens.
 * freed (may be NULL) is called once, first thing in luna_workqueue_free:
 * the observer's last call, so it can drop what it keeps about the queue. */
struct luna_workqueue_observer {
    void (*queue_duration)(void *ud, double seconds); /* dirty -> get */
    void (*work_duration)(void *ud, double seconds);  /* get -> done */
    /* a key became dirty at a priority no dirty key had (may repeat for
     * one priority: the metrics module keeps the set) */
    void (*priority_seen)(void *ud, int priority);
    void (*freed)(void *ud);
    void *ud;
};

/* client-go's workqueue metrics, as numbers; durations in seconds. */
struct luna_workqueue_metrics {
    size_t depth;                  /* dirty keys (client-go's depth gauge) */
    size_t queued;                 /* keys get can return now */
    size_t processing;
    size_t waiting;                /* keys scheduled by add_after */
    uint64_t adds_total;           /* adds that made a key dirty */
    uint64_t retries_total;        /* add_after and add_rate_limited calls */
    double queue_duration_sum;  uint64_t queue_duration_count;
    double work_duration_sum;   uint64_t work_duration_count;
    double unfinished_work_seconds;            /* sum over processing keys */
    double longest_running_processor_seconds;  /* 0 if none */
};

enum luna_workqueue_status {
    LUNA_WORKQUEUE_ITEM,     /* *key is the next key, now processing */
    LUNA_WORKQUEUE_EMPTY,    /* nothing to do now */
    LUNA_WORKQUEUE_SHUTDOWN, /* shut down and nothing left: stop working */
};

int luna_workqueue_new(const struct luna_workqueue_options *opts,
                       struct luna_workqueue **out, luna_error *err);
/* NULL is a no-op. */
void luna_workqueue_free(struct luna_workqueue *q);

/* Marks key dirty at `priority` and queues it unless it is being
 * processed; a key already dirty takes the higher of its two priorities
 * (moving to the tail of the new one if queued).  0 (also when it was
 * already dirty), LUNA_ECANCELED when shutting down (dropped), or
 * LUNA_ENOMEM (nothing changed). */
int luna_workqueue_add_priority(struct luna_workqueue *q, const char *key, int priority);
/* add_priority(key, LUNA_WORKQUEUE_PRIORITY_DEFAULT). */
int luna_workqueue_add(struct luna_workqueue *q, const char *key);

/* seconds <= 0 adds now; else schedules as above.  LUNA_EINVAL if seconds
 * is NaN or infinite, LUNA_ECANCELED when shutting down, LUNA_ENOMEM. */
int luna_workqueue_add_after_priority(struct luna_workqueue *q, const char *key,
                                      double seconds, int priority);
int luna_workqueue_add_after(struct luna_workqueue *q, const char *key,
                             double seconds);

/* add_after(key, limiter.when(key)); same results.  Shutting down, the
 * limiter is not consulted.  A retry passes the priority the key was
 * handed out with, so it keeps its place among priorities. */
int luna_workqueue_add_rate_limited_priority(struct luna_workqueue *q, const char *key,
                                             int priority);
int luna_workqueue_add_rate_limited(struct luna_workqueue *q, const char *key);
void luna_workqueue_forget(struct luna_workqueue *q, const char *key);
unsigned luna_workqueue_num_requeues(struct luna_workqueue *q, const char *key);

/* Takes the next key (the oldest queued key of the highest priority):
 * ITEM with *key set (borrowed until done) and *priority (may be NULL) the
 * priority it was queued with, EMPTY, or SHUTDOWN once shut down with
 * nothing queued. */
enum luna_workqueue_status luna_workqueue_get_priority(struct luna_workqueue *q,
                                                       const char **key, int *priority);
enum luna_workqueue_status luna_workqueue_get(struct luna_workqueue *q,
                                              const char **key);

/* Ends processing of key; re-queues it if it was added meanwhile.
 * LUNA_ENOTFOUND (and nothing changes) if key is not being processed. */
int luna_workqueue_done(struct luna_workqueue *q, const char *key);

/* Number of keys get can return now. */
size_t luna_workqueue_len(const struct luna_workqueue *q);
/* Dirty keys (queued, or added again while processing) at priority. */
size_t luna_workqueue_depth_at(const struct luna_workqueue *q, int priority);
/* Calls fn(ud, priority) for each priority some dirty key has, in no
 * particular order; fn must not call into the queue. */
void luna_workqueue_each_priority(const struct luna_workqueue *q,
                                  void (*fn)(void *ud, int priority), void *ud);
/* True if the queue ignores priorities (options.fifo). */
bool luna_workqueue_fifo(const struct luna_workqueue *q);
/* Turns priorities off (fifo) or on, as a reload that changes a
 * controller's priority_queue does.  Turning them off moves every dirty
 * key to priority 0, the queued ones in the order get would have handed
 * them out.  0, or LUNA_ENOMEM (nothing changed). */
int luna_workqueue_set_fifo(struct luna_workqueue *q, bool fifo);
/* Keys waiting for a delay (add_after, add_rate_limited), and whether
 * key is one of them. */
size_t luna_workqueue_waiting(const struct luna_workqueue *q);
bool luna_workqueue_is_waiting(struct luna_workqueue *q, const char *key);
/* Seconds on the queue's clock until the first waiting key is due (0 if
 * it is due already), or -1 when no key is waiting. */
double luna_workqueue_next_ready(const struct luna_workqueue *q);

/* Stops accepting adds and discards waiting keys.  A pending drain callback
 * is called now with drained = false (client-go: ShutDown ends the wait of
 * ShutDownWithDrain). */
void luna_workqueue_shutdown(struct luna_workqueue *q);

/* Shuts down as above, then calls cb(ud, true) once no key is processing:
 * before returning if none is, else from the done() that finishes the last
 * one.  Keys still queued are not waited for (a worker that keeps calling
 * get receives them, as in client-go).  LUNA_EINVAL if a drain callback is
 * already pending. */
int luna_workqueue_shutdown_with_drain(struct luna_workqueue *q,
                                       void (*cb)(void *ud, bool drained),
                                       void *ud);
bool luna_workqueue_is_shutting_down(const struct luna_workqueue *q);

/* Adds every waiting key whose ready time has come on the clock, then
 * re-arms the timer (if any) for the next one.  The timer calls this; so
 * does the owner of a queue without a loop, after moving its clock. */
void luna_workqueue_tick(struct luna_workqueue *q);

/* cb(ud) is called whenever keys became available to get (after add,
 * after a done that re-queues, once per tick that added any).  NULL clears. */
void luna_workqueue_set_ready_cb(struct luna_workqueue *q, void (*cb)(void *ud),
                                 void *ud);
/* Copied; NULL clears. */
void luna_workqueue_set_observer(struct luna_workqueue *q,
                                 const struct luna_workqueue_observer *obs);
/* The observer in place (all NULL if none); borrowed. */
const struct luna_workqueue_observer *
luna_workqueue_get_observer(const struct luna_workqueue *q);

void luna_workqueue_metrics(const struct luna_workqueue *q,
                            struct luna_workqueue_metrics *out);
const char *luna_workqueue_name(const struct luna_workqueue *q);

#endif
