/* informer.c — see informer.h. */
#include "cache/informer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#endif

#include "base/heap.h"
#include "base/log.h"
#include "base/loop.h"

struct handler_slot {
    int id;
    struct luna_informer_handler h;
    double next_resync;   /* loop time its next resync is due (h.resync > 0) */
    uint64_t resync_round; /* the last round it was due in; 0: none yet */
};

struct luna_informer {
    char *name;
    struct luna_indexer *indexer;
    struct luna_delta_fifo *fifo;
    struct handler_slot *handlers;
    size_t nhandlers, cap;
    int next_id;
    bool synced;
    bool draining;            /* handlers are being called */
    size_t burst;   /* keys drained since the FIFO was last empty */
    uint64_t round; /* the last resync round (informer.h) */
    /* Draining: ev_check does the work after each loop iteration; ev_idle
     * keeps the loop from blocking while work remains. */
    ev_check drain_check;
    ev_idle drain_idle;
    ev_timer resync;
};

static void drain_cb(struct ev_loop *loop, ev_check *w, int revents);
static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents) {}
static void resync_cb(struct ev_loop *loop, ev_timer *w, int revents);

struct luna_informer *luna_informer_new(const char *name, luna_error *err)
{
    struct luna_informer *inf = calloc(1, sizeof *inf);
    if (!inf || !(inf->name = strdup(name)) || !(inf->indexer = luna_indexer_new()) ||
        !(inf->fifo = luna_delta_fifo_new(inf->indexer))) {
        if (inf) {
            luna_indexer_free(inf->indexer);
            free(inf->name);
            free(inf);
        }
        luna_error_set(err, LUNA_ENOMEM, "out of memory creating informer %s", name);
        return NULL;
    }
    ev_check_init(&inf->drain_check, drain_cb);
    ev_idle_init(&inf->drain_idle, idle_cb);
    ev_timer_init(&inf->resync, resync_cb, 0., 0.);
    return inf;
}

void luna_informer_free(struct luna_informer *inf)
{
    if (!inf)
        return;
    struct ev_loop *loop = luna_loop();
    ev_check_stop(loop, &inf->drain_check);
    ev_idle_stop(loop, &inf->drain_idle);
    ev_timer_stop(loop, &inf->resync);
    luna_delta_fifo_free(inf->fifo);
    luna_indexer_free(inf->indexer);
    free(inf->handlers);
    free(inf->name);
    free(inf);
}

const char *luna_informer_name(const struct luna_informer *inf) { return inf->name; }
struct luna_indexer *luna_informer_indexer(struct luna_informer *inf) { return inf->indexer; }
struct luna_delta_fifo *luna_informer_fifo(struct luna_informer *inf) { return inf->fifo; }
bool luna_informer_has_synced(const struct luna_informer *inf) { return inf->synced; }
void luna_informer_wake(struct luna_informer *inf)
{
    if (luna_delta_fifo_len(inf->fifo) == 0) {
        /* An empty first list has nothing to drain but still syncs. */
        if (!inf->synced)
            luna_informer_drain(inf, 0);
        return;
    }
    if (!inf->draining && luna_delta_fifo_len(inf->fifo) <= LUNA_INFORMER_IMMEDIATE)
        luna_informer_drain(inf, LUNA_INFORMER_IMMEDIATE);
    if (luna_delta_fifo_len(inf->fifo) == 0)
        return;
    struct ev_loop *loop = luna_loop();
    ev_check_start(loop, &inf->drain_check);
    ev_idle_start(loop, &inf->drain_idle);
}

/* Handlers may add or remove handlers while being called: iterate over ids
 * by position and re-check bounds each time. */
static void notify_add(struct luna_informer *inf, struct luna_object *obj, bool initial)
{
    for (size_t i = 0; i < inf->nhandlers; i++)
        if (inf->handlers[i].h.on_add)
            inf->handlers[i].h.on_add(inf->handlers[i].h.ud, obj, initial);
}

static void notify_update(struct luna_informer *inf, struct luna_object *old,
                          struct luna_object *obj)
{
    for (size_t i = 0; i < inf->nhandlers; i++)
        if (inf->handlers[i].h.on_update)
            inf->handlers[i].h.on_update(inf->handlers[i].h.ud, old, obj);
}

/* A Sync delta of `round`: only to the handlers due in that round or
 * since (informer.h). */
static void notify_sync(struct luna_informer *inf, struct luna_object *old,
                        struct luna_object *obj, uint64_t round)
{
    for (size_t i = 0; i < inf->nhandlers; i++)
        if (inf->handlers[i].h.on_update && round > 0 && inf->handlers[i].resync_round >= round)
            inf->handlers[i].h.on_update(inf->handlers[i].h.ud, old, obj);
}

static void notify_delete(struct luna_informer *inf, struct luna_object *obj, bool unknown)
{
    for (size_t i = 0; i < inf->nhandlers; i++)
        if (inf->handlers[i].h.on_delete)
            inf->handlers[i].h.on_delete(inf->handlers[i].h.ud, obj, unknown);
}

static int process_deltas(const char *key, const struct luna_delta *deltas, size_t n, void *ud)
{
    struct luna_informer *inf = ud;
    for (size_t i = 0; i < n; i++) {
        const struct luna_delta *d = &deltas[i];
        if (d->type == LUNA_DELTA_DELETED) {
            struct luna_object *old;
            luna_indexer_delete(inf->indexer, key, &old);
            struct luna_object *last = d->obj ? d->obj : old;
            if (last)
                notify_delete(inf, last, d->final_state_unknown);
            luna_object_unref(old);
            continue;
        }
        struct luna_object *old;
        if (luna_indexer_put(inf->indexer, d->obj, &old) < 0) {
            luna_error("informer cache update failed", "informer", inf->name, "key", key,
                       "error", "out of memory");
            continue;
        }
        if (old && d->type == LUNA_DELTA_SYNC)
            notify_sync(inf, old, d->obj, d->round);
        else if (old)
            notify_update(inf, old, d->obj);
        else
            notify_add(inf, d->obj, d->type == LUNA_DELTA_REPLACED && !inf->synced);
        luna_object_unref(old);
    }
    return 0;
}

static void notify_batch_end(struct luna_informer *inf)
{
    for (size_t i = 0; i < inf->nhandlers; i++)
        if (inf->handlers[i].h.on_batch_end)
            inf->handlers[i].h.on_batch_end(inf->handlers[i].h.ud);
}

size_t luna_informer_drain(struct luna_informer *inf, size_t max)
{
    if (inf->draining)
        return 0;
    size_t done = 0;
    inf->draining = true;
    while (done < max && luna_delta_fifo_pop(inf->fifo, process_deltas, inf) != LUNA_ENOTFOUND)
        done++;
    inf->draining = false;
    if (!inf->synced && luna_delta_fifo_has_synced(inf->fifo)) {
        inf->synced = true;
        char count[24];
        snprintf(count, sizeof count, "%zu", luna_indexer_len(inf->indexer));
        luna_info("informer synced", "informer", inf->name, LUNA_LOG_NUM("objects"), count);
    }
    if (done > 0)
        notify_batch_end(inf);
    return done;
}

static void drain_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    struct luna_informer *inf = (struct luna_informer *)((char *)w -
                                                         offsetof(struct luna_informer, drain_check));
    inf->burst += luna_informer_drain(inf, LUNA_INFORMER_BATCH);
    if (luna_delta_fifo_len(inf->fifo) == 0) {
        ev_check_stop(loop, &inf->drain_check);
        ev_idle_stop(loop, &inf->drain_idle);
        /* A (re)list leaves its queue's memory free between cached objects,
         * where malloc keeps it: hand the free pages back to the system so
         * the RSS follows the cache, not the list's peak. */
        if (inf->burst >= LUNA_INFORMER_TRIM_BURST)
            luna_heap_trim();
        inf->burst = 0;
    }
}

struct replay_ctx {
    struct luna_informer_handler *h;
};

static int replay_add(struct luna_object *obj, void *ud)
{
    struct replay_ctx *ctx = ud;
    /* client-go marks these as in the initial list too: for this handler
     * they are its first list, not live events */
    ctx->h->on_add(ctx->h->ud, obj, true);
    return 0;
}

static void schedule_resync(struct luna_informer *inf);

int luna_informer_add_handler(struct luna_informer *inf, const struct luna_informer_handler *h)
{
    if (inf->nhandlers == inf->cap) {
        size_t cap = inf->cap ? inf->cap * 2 : 4;
        struct handler_slot *v = realloc(inf->handlers, cap * sizeof *v);
        if (!v)
            return LUNA_ENOMEM;
        inf->handlers = v;
        inf->cap = cap;
    }
    int id = ++inf->next_id;
    struct handler_slot *slot = &inf->handlers[inf->nhandlers];
    slot->id = id;
    slot->h = *h;
    slot->resync_round = 0;
    slot->next_resync = h->resync > 0 ? ev_now(luna_loop()) + h->resync : 0;
    inf->nhandlers++;
    if (h->resync > 0)
        schedule_resync(inf);
    if (h->on_add) {
        struct luna_informer_handler copy = *h;
        struct replay_ctx ctx = { &copy };
        luna_indexer_each(inf->indexer, replay_add, &ctx);
    }
    return id;
}

void luna_informer_remove_handler(struct luna_informer *inf, int id)
{
    for (size_t i = 0; i < inf->nhandlers; i++) {
        if (inf->handlers[i].id == id) {
            memmove(&inf->handlers[i], &inf->handlers[i + 1],
                    (inf->nhandlers - i - 1) * sizeof *inf->handlers);
            inf->nhandlers--;
            schedule_resync(inf);
            return;
        }
    }
}

/* Arms the timer for the earliest handler's next resync, or stops it when
 * no handler has a period. */
static void schedule_resync(struct luna_informer *inf)
{
    struct ev_loop *loop = luna_loop();
    ev_timer_stop(loop, &inf->resync);
    double due = 0;
    for (size_t i = 0; i < inf->nhandlers; i++) {
        const struct handler_slot *s = &inf->handlers[i];
        if (s->h.resync > 0 && (due == 0 || s->next_resync < due))
            due = s->next_resync;
    }
    if (due == 0)
        return;
    double in = due - ev_now(loop);
    ev_timer_set(&inf->resync, in > 0 ? in : 0., 0.);
    ev_timer_start(loop, &inf->resync);
}

/* A handler counts as due this close to its time: the timer fires at or
 * after the earliest one, and another may be due a hair later. */
#define RESYNC_SLACK 0.001

static void resync_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct luna_informer *inf = (struct luna_informer *)((char *)w -
                                                         offsetof(struct luna_informer, resync));
    double now = ev_now(loop);
    bool due = false;
    uint64_t round = inf->round + 1;
    for (size_t i = 0; i < inf->nhandlers; i++) {
        struct handler_slot *s = &inf->handlers[i];
        if (s->h.resync <= 0 || s->next_resync > now + RESYNC_SLACK)
            continue;
        s->next_resync = now + s->h.resync;
        /* before the first list there is nothing to re-deliver: the
         * handler's next period starts now (client-go does the same) */
        if (inf->synced) {
            s->resync_round = round;
            due = true;
        }
    }
    if (due) {
        inf->round = round;
        if (luna_delta_fifo_resync(inf->fifo, round) < 0)
            luna_error("informer resync failed", "informer", inf->name, "error", "out of memory");
        luna_informer_wake(inf);
    }
    schedule_resync(inf);
}
