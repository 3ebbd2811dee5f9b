/* workqueue.c — see workqueue.h. */
#include "queue/workqueue.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* One record per key the queue holds (see the invariants in workqueue.h).
 * The FIFO and the processing list are intrusive, so add/get/done cost one
 * hash lookup and no allocation for a key the queue already holds. */
struct item {
    UT_hash_handle hh;
    struct item *next;                   /* FIFO link; valid iff queued */
    struct item *proc_prev, *proc_next;  /* processing list, in start order */
    double dirty_since;                  /* valid iff dirty */
    double processing_since;             /* valid iff processing */
    double ready_at;                     /* valid iff waiting */
    uint64_t seq;                        /* waiting: tie-break, schedule order */
    size_t heap_index;                   /* valid iff waiting */
    bool dirty, processing, waiting;
    char key[];
};

struct luna_workqueue {
    ev_timer timer;                      /* first: the callback casts back */
    struct ev_loop *loop;                /* NULL: no timer */
    const struct luna_clock *clock;      /* borrowed */
    struct luna_ratelimit *limiter;    /* owned */
    char *name;

    struct item *items;                  /* uthash: every key held */
    struct item *head, *tail;            /* FIFO: dirty and not processing */
    size_t queued;
    struct item *proc_head, *proc_tail;  /* processing, oldest first */
    size_t processing;
    size_t depth;                        /* dirty keys */

    struct item **heap;                  /* min-heap on (ready_at, seq) */
    size_t heap_len, heap_cap;
    uint64_t next_seq;

    bool shutting_down;
    void (*drain_cb)(void *ud, bool drained); /* non-NULL iff drain pending */
    void *drain_ud;
    void (*ready_cb)(void *ud);
    void *ready_ud;
    struct luna_workqueue_observer observer;

    uint64_t adds_total, retries_total;
    double queue_duration_sum, work_duration_sum;
    uint64_t queue_duration_count, work_duration_count;
};

/* ---- items ------------------------------------------------------------------ */

static struct item *item_find(struct luna_workqueue *q, const char *key)
{
    struct item *it;
    HASH_FIND_STR(q->items, key, it);
    return it;
}

static struct item *item_get(struct luna_workqueue *q, const char *key)
{
    struct item *it = item_find(q, key);
    if (it)
        return it;
    size_t len = strlen(key);
    it = malloc(sizeof *it + len + 1);
    if (!it)
        return NULL;
    memset(it, 0, sizeof *it);
    memcpy(it->key, key, len + 1);
    HASH_ADD_KEYPTR(hh, q->items, it->key, len, it);
    return it;
}

/* Drops the record once the key is in no set. */
static void item_release(struct luna_workqueue *q, struct item *it)
{
    if (!it->dirty && !it->processing && !it->waiting) {
        HASH_DEL(q->items, it);
        free(it);
    }
}

static void fifo_push(struct luna_workqueue *q, struct item *it)
{
    it->next = NULL;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->queued++;
}

static struct item *fifo_pop(struct luna_workqueue *q)
{
    struct item *it = q->head;
    q->head = it->next;
    if (!q->head)
        q->tail = NULL;
    q->queued--;
    return it;
}

/* ---- delay heap ------------------------------------------------------------- */

static bool heap_less(const struct item *a, const struct item *b)
{
    return a->ready_at < b->ready_at || (a->ready_at == b->ready_at && a->seq < b->seq);
}

static void heap_set(struct luna_workqueue *q, size_t i, struct item *it)
{
    q->heap[i] = it;
    it->heap_index = i;
}

static void heap_up(struct luna_workqueue *q, size_t i)
{
    struct item *it = q->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(it, q->heap[parent]))
            break;
        heap_set(q, i, q->heap[parent]);
        i = parent;
    }
    heap_set(q, i, it);
}

static void heap_down(struct luna_workqueue *q, size_t i)
{
    struct item *it = q->heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= q->heap_len)
            break;
        if (child + 1 < q->heap_len && heap_less(q->heap[child + 1], q->heap[child]))
            child++;
        if (!heap_less(q->heap[child], it))
            break;
        heap_set(q, i, q->heap[child]);
        i = child;
    }
    heap_set(q, i, it);
}

static int heap_push(struct luna_workqueue *q, struct item *it)
{
    if (q->heap_len == q->heap_cap) {
        size_t cap = q->heap_cap ? 2 * q->heap_cap : 64;
        struct item **heap = realloc(q->heap, cap * sizeof *heap);
        if (!heap)
            return LUNA_ENOMEM;
        q->heap = heap;
        q->heap_cap = cap;
    }
    heap_set(q, q->heap_len++, it);
    heap_up(q, it->heap_index);
    return 0;
}

static struct item *heap_pop(struct luna_workqueue *q)
{
    struct item *top = q->heap[0];
    struct item *last = q->heap[--q->heap_len];
    if (q->heap_len > 0) {
        heap_set(q, 0, last);
        heap_down(q, 0);
    }
    return top;
}

/* Arms the timer for the earliest waiting key (stops it if none). */
static void arm_timer(struct luna_workqueue *q)
{
    if (!q->loop)
        return;
    ev_timer_stop(q->loop, &q->timer);
    if (q->heap_len == 0)
        return;
    double delay = q->heap[0]->ready_at - luna_clock_now(q->clock);
    /* Not 0: the timer would fire in this same iteration. */
    ev_timer_set(&q->timer, delay > 1e-6 ? delay : 1e-6, 0.);
    ev_timer_start(q->loop, &q->timer);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    luna_workqueue_tick((struct luna_workqueue *)w);
}

/* ---- the queue -------------------------------------------------------------- */

int luna_workqueue_new(const struct luna_workqueue_options *opts,
                       struct luna_workqueue **out, luna_error *err)
{
    struct luna_ratelimit *limiter = opts->limiter;
    if (!opts->clock) {
        luna_ratelimit_free(limiter);
        return luna_error_set(err, LUNA_EINVAL, "workqueue: a clock is required");
    }
    const char *name = opts->name ? opts->name : "";
    struct luna_workqueue *q = calloc(1, sizeof *q);
    char *name_copy = strdup(name);
    if (!q || !name_copy) {
        free(q);
        free(name_copy);
        luna_ratelimit_free(limiter);
        return luna_error_set(err, LUNA_ENOMEM, "workqueue %s: out of memory", name);
    }
    if (!limiter) {
        struct luna_ratelimit_config cfg;
        luna_ratelimit_config_init(&cfg, LUNA_RATELIMIT_DEFAULT);
        int rc = luna_ratelimit_new(&cfg, opts->clock, &limiter, err);
        if (rc) {
            free(q);
            free(name_copy);
            return rc;
        }
    }
    q->name = name_copy;
    q->clock = opts->clock;
    q->loop = opts->loop;
    q->limiter = limiter;
    ev_timer_init(&q->timer, timer_cb, 0., 0.);
    *out = q;
    return 0;
}

void luna_workqueue_free(struct luna_workqueue *q)
{
    if (!q)
        return;
    if (q->observer.freed)
        q->observer.freed(q->observer.ud);
    if (q->loop)
        ev_timer_stop(q->loop, &q->timer);
    struct item *it, *tmp;
    HASH_ITER(hh, q->items, it, tmp) {
        HASH_DEL(q->items, it);
        free(it);
    }
    free(q->heap);
    luna_ratelimit_free(q->limiter);
    free(q->name);
    free(q);
}

const char *luna_workqueue_name(const struct luna_workqueue *q) { return q->name; }

/* Marks it dirty and queues it unless processing; true if it was queued. */
static bool add_item(struct luna_workqueue *q, struct item *it, double now)
{
    if (it->dirty)
        return false;
    it->dirty = true;
    it->dirty_since = now;
    q->depth++;
    q->adds_total++;
    if (it->processing)
        return false; /* done() queues it */
    fifo_push(q, it);
    return true;
}

static void notify_ready(struct luna_workqueue *q)
{
    if (q->ready_cb)
        q->ready_cb(q->ready_ud);
}

int luna_workqueue_add(struct luna_workqueue *q, const char *key)
{
    if (q->shutting_down)
        return LUNA_ECANCELED;
    struct item *it = item_get(q, key);
    if (!it)
        return LUNA_ENOMEM;
    if (it->dirty)
        return 0;
    if (add_item(q, it, luna_clock_now(q->clock)))
        notify_ready(q);
    return 0;
}

int luna_workqueue_add_after(struct luna_workqueue *q, const char *key,
                             double seconds)
{
    if (!isfinite(seconds))
        return LUNA_EINVAL;
    if (q->shutting_down)
        return LUNA_ECANCELED;
    q->retries_total++;
    if (seconds <= 0)
        return luna_workqueue_add(q, key);
    struct item *it = item_get(q, key);
    if (!it)
        return LUNA_ENOMEM;
    double ready_at = luna_clock_now(q->clock) + seconds;
    if (it->waiting) {
        if (ready_at >= it->ready_at)
            return 0; /* the earlier time stands */
        it->ready_at = ready_at;
        it->seq = q->next_seq++;
        heap_up(q, it->heap_index);
    } else {
        it->ready_at = ready_at;
        it->seq = q->next_seq++;
        if (heap_push(q, it) != 0) {
            item_release(q, it);
            return LUNA_ENOMEM;
        }
        it->waiting = true;
    }
    if (it->heap_index == 0)
        arm_timer(q);
    return 0;
}

int luna_workqueue_add_rate_limited(struct luna_workqueue *q, const char *key)
{
    if (q->shutting_down)
        return LUNA_ECANCELED;
    return luna_workqueue_add_after(q, key, luna_ratelimit_when(q->limiter, key));
}

void luna_workqueue_forget(struct luna_workqueue *q, const char *key)
{
    luna_ratelimit_forget(q->limiter, key);
}

unsigned luna_workqueue_num_requeues(struct luna_workqueue *q, const char *key)
{
    return luna_ratelimit_num_requeues(q->limiter, key);
}

enum luna_workqueue_status luna_workqueue_get(struct luna_workqueue *q,
                                              const char **key)
{
    if (!q->head)
        return q->shutting_down ? LUNA_WORKQUEUE_SHUTDOWN : LUNA_WORKQUEUE_EMPTY;
    struct item *it = fifo_pop(q);
    double now = luna_clock_now(q->clock);
    double waited = now - it->dirty_since;
    it->dirty = false;
    q->depth--;
    it->processing = true;
    it->processing_since = now;
    it->proc_next = NULL;
    it->proc_prev = q->proc_tail;
    if (q->proc_tail)
        q->proc_tail->proc_next = it;
    else
        q->proc_head = it;
    q->proc_tail = it;
    q->processing++;
    q->queue_duration_sum += waited;
    q->queue_duration_count++;
    if (q->observer.queue_duration)
        q->observer.queue_duration(q->observer.ud, waited);
    *key = it->key;
    return LUNA_WORKQUEUE_ITEM;
}

int luna_workqueue_done(struct luna_workqueue *q, const char *key)
{
    struct item *it = item_find(q, key);
    if (!it || !it->processing)
        return LUNA_ENOTFOUND;
    double worked = luna_clock_now(q->clock) - it->processing_since;
    if (it->proc_prev)
        it->proc_prev->proc_next = it->proc_next;
    else
        q->proc_head = it->proc_next;
    if (it->proc_next)
        it->proc_next->proc_prev = it->proc_prev;
    else
        q->proc_tail = it->proc_prev;
    it->processing = false;
    q->processing--;
    q->work_duration_sum += worked;
    q->work_duration_count++;
    if (q->observer.work_duration)
        q->observer.work_duration(q->observer.ud, worked);

    bool requeued = false;
    if (it->dirty) {
        fifo_push(q, it);
        requeued = true;
    } else {
        item_release(q, it); /* it may be gone now */
    }
    void (*drain_cb)(void *, bool) = NULL;
    void *drain_ud = NULL;
    if (q->drain_cb && q->processing == 0) {
        drain_cb = q->drain_cb;
        drain_ud = q->drain_ud;
        q->drain_cb = NULL;
        q->drain_ud = NULL;
    }
    if (requeued)
        notify_ready(q);
    if (drain_cb)
        drain_cb(drain_ud, true);
    return 0;
}

size_t luna_workqueue_len(const struct luna_workqueue *q) { return q->queued; }

double luna_workqueue_next_ready(const struct luna_workqueue *q)
{
    if (q->heap_len == 0)
        return -1;
    double d = q->heap[0]->ready_at - luna_clock_now(q->clock);
    return d > 0 ? d : 0;
}

bool luna_workqueue_is_shutting_down(const struct luna_workqueue *q)
{
    return q->shutting_down;
}

/* Stops taking adds and discards the waiting keys. */
static void stop(struct luna_workqueue *q)
{
    q->shutting_down = true;
    if (q->loop)
        ev_timer_stop(q->loop, &q->timer);
    while (q->heap_len > 0) {
        struct item *it = q->heap[--q->heap_len];
        it->waiting = false;
        item_release(q, it);
    }
}

void luna_workqueue_shutdown(struct luna_workqueue *q)
{
    stop(q);
    void (*drain_cb)(void *, bool) = q->drain_cb;
    void *drain_ud = q->drain_ud;
    q->drain_cb = NULL;
    q->drain_ud = NULL;
    if (drain_cb)
        drain_cb(drain_ud, false);
}

int luna_workqueue_shutdown_with_drain(struct luna_workqueue *q,
                                       void (*cb)(void *ud, bool drained),
                                       void *ud)
{
    if (q->drain_cb)
        return LUNA_EINVAL;
    stop(q);
    if (q->processing == 0) {
        if (cb)
            cb(ud, true);
        return 0;
    }
    if (cb) {
        q->drain_cb = cb;
        q->drain_ud = ud;
    }
    return 0;
}

void luna_workqueue_tick(struct luna_workqueue *q)
{
    if (q->heap_len == 0)
        return;
    double now = luna_clock_now(q->clock);
    bool added = false;
    while (q->heap_len > 0 && q->heap[0]->ready_at <= now) {
        struct item *it = heap_pop(q);
        it->waiting = false;
        added |= add_item(q, it, now);
    }
    arm_timer(q);
    if (added)
        notify_ready(q);
}

void luna_workqueue_set_ready_cb(struct luna_workqueue *q, void (*cb)(void *ud),
                                 void *ud)
{
    q->ready_cb = cb;
    q->ready_ud = cb ? ud : NULL;
}

void luna_workqueue_set_observer(struct luna_workqueue *q,
                                 const struct luna_workqueue_observer *obs)
{
    if (obs)
        q->observer = *obs;
    else
        memset(&q->observer, 0, sizeof q->observer);
}

const struct luna_workqueue_observer *
luna_workqueue_get_observer(const struct luna_workqueue *q)
{
    return &q->observer;
}

void luna_workqueue_metrics(const struct luna_workqueue *q,
                            struct luna_workqueue_metrics *out)
{
    *out = (struct luna_workqueue_metrics){
        .depth = q->depth,
        .queued = q->queued,
        .processing = q->processing,
        .waiting = q->heap_len,
        .adds_total = q->adds_total,
        .retries_total = q->retries_total,
        .queue_duration_sum = q->queue_duration_sum,
        .queue_duration_count = q->queue_duration_count,
        .work_duration_sum = q->work_duration_sum,
        .work_duration_count = q->work_duration_count,
    };
    if (!q->proc_head)
        return;
    double now = luna_clock_now(q->clock);
    out->longest_running_processor_seconds = now - q->proc_head->processing_since;
    for (const struct item *it = q->proc_head; it; it = it->proc_next)
        out->unfinished_work_seconds += now - it->processing_since;
}
