/* workqueue.c — see workqueue.h. */
#include "queue/workqueue.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* One record per key the queue holds (see the invariants in workqueue.h).
 * A key is queued or processing, never both, so one pair of links serves
 * its band's FIFO and the processing list: add/get/done cost one hash
 * lookup and no allocation for a key the queue already holds. */
struct item {
    UT_hash_handle hh;
    struct item *prev, *next;            /* band FIFO iff queued, else the
                                            processing list iff processing */
    double dirty_since;                  /* valid iff dirty */
    double processing_since;             /* valid iff processing */
    double ready_at;                     /* valid iff waiting */
    uint64_t seq;                        /* waiting: tie-break, schedule order */
    size_t heap_index;                   /* valid iff waiting */
    int priority;                        /* valid iff dirty */
    int wait_priority;                   /* valid iff waiting */
    bool dirty, processing, waiting;
    char key[];
};

/* The dirty keys of one priority.  Kept while any key is dirty at it, and
 * (up to BANDS_KEPT bands) after, so a queue that empties and fills again
 * does not allocate. */
struct band {
    UT_hash_handle hh;                   /* by priority */
    struct item *head, *tail;            /* queued keys, in queue order */
    size_t queued;                       /* keys in the FIFO */
    size_t depth;                        /* dirty keys: queued + processing */
    size_t heap_index;                   /* valid iff queued > 0 */
    int priority;
};

#define BANDS_KEPT 8

struct luna_workqueue {
    ev_timer timer;                      /* first: the callback casts back */
    struct ev_loop *loop;                /* NULL: no timer */
    const struct luna_clock *clock;      /* borrowed */
    struct luna_ratelimit *limiter;    /* owned */
    char *name;
    bool fifo;                           /* every add at priority 0 */

    struct item *items;                  /* uthash: every key held */
    struct band *bands;                  /* uthash by priority: owned */
    size_t nbands;
    struct band *last_band;              /* the band the last add used */
    struct band **band_heap;             /* max-heap on priority: bands with
                                            queued keys */
    size_t band_heap_len, band_heap_cap;
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

/* ---- bands: one FIFO per priority, the bands in a max-heap ------------------ */

static void band_heap_set(struct luna_workqueue *q, size_t i, struct band *b)
{
    q->band_heap[i] = b;
    b->heap_index = i;
}

static void band_heap_up(struct luna_workqueue *q, size_t i)
{
    struct band *b = q->band_heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (q->band_heap[parent]->priority >= b->priority)
            break;
        band_heap_set(q, i, q->band_heap[parent]);
        i = parent;
    }
    band_heap_set(q, i, b);
}

static void band_heap_down(struct luna_workqueue *q, size_t i)
{
    struct band *b = q->band_heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= q->band_heap_len)
            break;
        if (child + 1 < q->band_heap_len &&
            q->band_heap[child + 1]->priority > q->band_heap[child]->priority)
            child++;
        if (q->band_heap[child]->priority <= b->priority)
            break;
        band_heap_set(q, i, q->band_heap[child]);
        i = child;
    }
    band_heap_set(q, i, b);
}

static void band_heap_remove(struct luna_workqueue *q, struct band *b)
{
    size_t i = b->heap_index;
    struct band *last = q->band_heap[--q->band_heap_len];
    if (last == b)
        return;
    band_heap_set(q, i, last);
    band_heap_up(q, i);
    band_heap_down(q, last->heap_index);
}

/* band_get's slow path: a priority other than the last add's. */
static struct band *band_lookup(struct luna_workqueue *q, int priority)
{
    struct band *b;
    HASH_FIND_INT(q->bands, &priority, b);
    if (!b) {
        if (q->band_heap_cap <= q->nbands) {
            size_t cap = q->band_heap_cap ? 2 * q->band_heap_cap : 4;
            struct band **heap = realloc(q->band_heap, cap * sizeof *heap);
            if (!heap)
                return NULL;
            q->band_heap = heap;
            q->band_heap_cap = cap;
        }
        b = calloc(1, sizeof *b);
        if (!b)
            return NULL;
        b->priority = priority;
        HASH_ADD_INT(q->bands, priority, b);
        q->nbands++;
    }
    q->last_band = b;
    return b;
}

/* The band of priority, made if needed; NULL when out of memory.  Room in
 * the band heap is reserved, so a later push cannot fail.  Adds mostly
 * repeat the last add's priority: that one is at hand. */
static inline struct band *band_get(struct luna_workqueue *q, int priority)
{
    struct band *b = q->last_band;
    return b && b->priority == priority ? b : band_lookup(q, priority);
}

/* Frees b, at which no key is dirty. */
static void band_free(struct luna_workqueue *q, struct band *b)
{
    if (q->last_band == b)
        q->last_band = NULL;
    HASH_DEL(q->bands, b);
    q->nbands--;
    free(b);
}

/* Frees b once no key is dirty at it and more than BANDS_KEPT exist. */
static inline void band_release(struct luna_workqueue *q, struct band *b)
{
    if (b->depth == 0 && q->nbands > BANDS_KEPT)
        band_free(q, b);
}

static inline void band_push(struct luna_workqueue *q, struct band *b, struct item *it)
{
    it->next = NULL;
    it->prev = b->tail;
    if (b->tail)
        b->tail->next = it;
    else
        b->head = it;
    b->tail = it;
    if (b->queued++ == 0) {
        band_heap_set(q, q->band_heap_len++, b);
        band_heap_up(q, b->heap_index);
    }
    q->queued++;
}

static inline void band_unlink(struct luna_workqueue *q, struct band *b, struct item *it)
{
    if (it->prev)
        it->prev->next = it->next;
    else
        b->head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    else
        b->tail = it->prev;
    if (--b->queued == 0)
        band_heap_remove(q, b);
    q->queued--;
}

static struct band *band_find(const struct luna_workqueue *q, int priority)
{
    struct band *b;
    HASH_FIND_INT(q->bands, &priority, b);
    return b;
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
    q->fifo = opts->fifo;
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
    struct band *b, *btmp;
    HASH_ITER(hh, q->bands, b, btmp) {
        HASH_DEL(q->bands, b);
        free(b);
    }
    free(q->band_heap);
    free(q->heap);
    luna_ratelimit_free(q->limiter);
    free(q->name);
    free(q);
}

const char *luna_workqueue_name(const struct luna_workqueue *q) { return q->name; }

/* Marks it dirty at priority (raising the priority of a dirty key) and
 * queues it unless processing.  Returns 1 if it was newly queued, 0 if
 * not, LUNA_ENOMEM (nothing changed) if its band could not be made. */
static inline int add_item(struct luna_workqueue *q, struct item *it, int priority, double now)
{
    if (q->fifo)
        priority = LUNA_WORKQUEUE_PRIORITY_DEFAULT;
    if (it->dirty && priority <= it->priority)
        return 0;
    struct band *b = band_get(q, priority);
    if (!b)
        return LUNA_ENOMEM;
    bool seen = b->depth == 0;
    int queued = 0;
    if (it->dirty) {
        /* raised: from the old band to the tail of the new one */
        struct band *old = band_find(q, it->priority);
        if (!it->processing)
            band_unlink(q, old, it);
        old->depth--;
        band_release(q, old);
    } else {
        it->dirty = true;
        it->dirty_since = now;
        q->depth++;
        q->adds_total++;
        queued = !it->processing;
    }
    it->priority = priority;
    b->depth++;
    if (!it->processing)
        band_push(q, b, it);
    if (seen && q->observer.priority_seen)
        q->observer.priority_seen(q->observer.ud, priority);
    return queued;
}

static void notify_ready(struct luna_workqueue *q)
{
    if (q->ready_cb)
        q->ready_cb(q->ready_ud);
}

int luna_workqueue_add_priority(struct luna_workqueue *q, const char *key, int priority)
{
    if (q->shutting_down)
        return LUNA_ECANCELED;
    struct item *it = item_get(q, key);
    if (!it)
        return LUNA_ENOMEM;
    int rc = add_item(q, it, priority, luna_clock_now(q->clock));
    if (rc < 0) {
        item_release(q, it);
        return rc;
    }
    if (rc > 0)
        notify_ready(q);
    return 0;
}

int luna_workqueue_add(struct luna_workqueue *q, const char *key)
{
    return luna_workqueue_add_priority(q, key, LUNA_WORKQUEUE_PRIORITY_DEFAULT);
}

int luna_workqueue_add_after_priority(struct luna_workqueue *q, const char *key,
                                      double seconds, int priority)
{
    if (!isfinite(seconds))
        return LUNA_EINVAL;
    if (q->shutting_down)
        return LUNA_ECANCELED;
    q->retries_total++;
    if (seconds <= 0)
        return luna_workqueue_add_priority(q, key, priority);
    struct item *it = item_get(q, key);
    if (!it)
        return LUNA_ENOMEM;
    double ready_at = luna_clock_now(q->clock) + seconds;
    if (it->waiting) {
        if (priority > it->wait_priority)
            it->wait_priority = priority;
        if (ready_at >= it->ready_at)
            return 0; /* the earlier time stands */
        it->ready_at = ready_at;
        it->seq = q->next_seq++;
        heap_up(q, it->heap_index);
    } else {
        it->ready_at = ready_at;
        it->wait_priority = priority;
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

int luna_workqueue_add_after(struct luna_workqueue *q, const char *key, double seconds)
{
    return luna_workqueue_add_after_priority(q, key, seconds, LUNA_WORKQUEUE_PRIORITY_DEFAULT);
}

int luna_workqueue_add_rate_limited_priority(struct luna_workqueue *q, const char *key,
                                             int priority)
{
    if (q->shutting_down)
        return LUNA_ECANCELED;
    return luna_workqueue_add_after_priority(q, key, luna_ratelimit_when(q->limiter, key),
                                             priority);
}

int luna_workqueue_add_rate_limited(struct luna_workqueue *q, const char *key)
{
    return luna_workqueue_add_rate_limited_priority(q, key, LUNA_WORKQUEUE_PRIORITY_DEFAULT);
}

void luna_workqueue_forget(struct luna_workqueue *q, const char *key)
{
    luna_ratelimit_forget(q->limiter, key);
}

unsigned luna_workqueue_num_requeues(struct luna_workqueue *q, const char *key)
{
    return luna_ratelimit_num_requeues(q->limiter, key);
}

enum luna_workqueue_status luna_workqueue_get_priority(struct luna_workqueue *q,
                                                       const char **key, int *priority)
{
    if (q->band_heap_len == 0)
        return q->shutting_down ? LUNA_WORKQUEUE_SHUTDOWN : LUNA_WORKQUEUE_EMPTY;
    struct band *b = q->band_heap[0];
    struct item *it = b->head;
    band_unlink(q, b, it);
    b->depth--;
    double now = luna_clock_now(q->clock);
    double waited = now - it->dirty_since;
    it->dirty = false;
    q->depth--;
    it->processing = true;
    it->processing_since = now;
    it->next = NULL;
    it->prev = q->proc_tail;
    if (q->proc_tail)
        q->proc_tail->next = it;
    else
        q->proc_head = it;
    q->proc_tail = it;
    q->processing++;
    q->queue_duration_sum += waited;
    q->queue_duration_count++;
    if (q->observer.queue_duration)
        q->observer.queue_duration(q->observer.ud, waited);
    *key = it->key;
    if (priority)
        *priority = it->priority;
    band_release(q, b);
    return LUNA_WORKQUEUE_ITEM;
}

enum luna_workqueue_status luna_workqueue_get(struct luna_workqueue *q, const char **key)
{
    return luna_workqueue_get_priority(q, key, NULL);
}

int luna_workqueue_done(struct luna_workqueue *q, const char *key)
{
    struct item *it = item_find(q, key);
    if (!it || !it->processing)
        return LUNA_ENOTFOUND;
    double worked = luna_clock_now(q->clock) - it->processing_since;
    if (it->prev)
        it->prev->next = it->next;
    else
        q->proc_head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    else
        q->proc_tail = it->prev;
    it->processing = false;
    q->processing--;
    q->work_duration_sum += worked;
    q->work_duration_count++;
    if (q->observer.work_duration)
        q->observer.work_duration(q->observer.ud, worked);

    bool requeued = false;
    if (it->dirty) {
        /* its band exists: it holds this dirty key */
        band_push(q, band_find(q, it->priority), it);
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

size_t luna_workqueue_depth_at(const struct luna_workqueue *q, int priority)
{
    const struct band *b = band_find(q, priority);
    return b ? b->depth : 0;
}

bool luna_workqueue_fifo(const struct luna_workqueue *q) { return q->fifo; }

void luna_workqueue_each_priority(const struct luna_workqueue *q,
                                  void (*fn)(void *ud, int priority), void *ud)
{
    for (const struct band *b = q->bands; b; b = b->hh.next)
        if (b->depth > 0)
            fn(ud, b->priority);
}

int luna_workqueue_set_fifo(struct luna_workqueue *q, bool fifo)
{
    if (fifo == q->fifo)
        return 0;
    q->fifo = fifo;
    if (!fifo || q->depth == 0)
        return 0;
    struct band *zero = band_get(q, LUNA_WORKQUEUE_PRIORITY_DEFAULT);
    if (!zero) {
        q->fifo = false;
        return LUNA_ENOMEM;
    }
    /* the queued keys, highest priority first, become one FIFO at 0 */
    struct item *head = NULL, *tail = NULL;
    while (q->band_heap_len > 0) {
        struct band *b = q->band_heap[0];
        while (b->head) {
            struct item *it = b->head;
            band_unlink(q, b, it);
            it->next = NULL;
            it->prev = tail;
            if (tail)
                tail->next = it;
            else
                head = it;
            tail = it;
        }
    }
    for (struct item *it = q->proc_head; it; it = it->next)
        if (it->dirty)
            it->priority = LUNA_WORKQUEUE_PRIORITY_DEFAULT;
    struct band *b, *tmp;
    HASH_ITER(hh, q->bands, b, tmp) {
        b->depth = 0;
        if (b != zero)
            band_release(q, b);
    }
    zero->depth = q->depth;
    if (q->observer.priority_seen)
        q->observer.priority_seen(q->observer.ud, LUNA_WORKQUEUE_PRIORITY_DEFAULT);
    while (head) {
        struct item *it = head;
        head = it->next;
        it->priority = LUNA_WORKQUEUE_PRIORITY_DEFAULT;
        band_push(q, zero, it);
    }
    return 0;
}

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
        int rc = add_item(q, it, it->wait_priority, now);
        if (rc < 0) {
            /* no band for its priority: it waits again, and the timer
             * retries it (the memory may be back by then) */
            it->ready_at = now + 0.001;
            if (heap_push(q, it) == 0) {
                it->waiting = true;
                break;
            }
            item_release(q, it);
            continue;
        }
        added |= rc > 0;
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

size_t luna_workqueue_waiting(const struct luna_workqueue *q) { return q->heap_len; }

bool luna_workqueue_is_waiting(struct luna_workqueue *q, const char *key)
{
    struct item *it = item_find(q, key);
    return it && it->waiting;
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
    for (const struct item *it = q->proc_head; it; it = it->next)
        out->unfinished_work_seconds += now - it->processing_since;
}
