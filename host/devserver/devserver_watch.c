/* devserver_watch.c — see devserver_watch.h. */
#include "devserver/devserver_watch.h"

#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver/devserver_convert.h"
#include "devserver/devserver_faults.h"
#include "devserver/devserver_negotiate.h"
#include "devserver/devserver_store.h"
#include "base/log.h"
#include "base/loop.h"

/* Bytes queued over every watch of a server past which a watcher that is
 * behind at all (LAGGING) is ended too, whatever its own bound: so many
 * watchers that each stay under their bound still hold at most this. */
#define MAX_QUEUED_TOTAL ((size_t)256 << 20)
#define LAGGING ((size_t)64 << 10)
/* Bytes of the initial state queued at a time, as the transport reads. */
#define STATE_CHUNK (256u << 10)

/* Queued bytes buf[off..len). */
struct qbuf {
    char *buf;
    size_t off, len, cap;
};

struct luna_ds_watch {
    luna_ds_listener listener;      /* first: cast back in the callback */
    ev_timer timeout_timer;
    ev_timer bookmark_timer;
    luna_ds_watches *reg;
    luna_ds_faults *faults;
    const luna_ds_store *store;
    luna_ds_type *type;
    luna_ds_type *storage;
    luna_ds_filter filter;
    bool bookmarks;
    /* A watch from a version the store has not reached (kube-apiserver
     * waits for it in silence): nothing at or before it is sent, not even
     * a bookmark.  0: from the start. */
    uint64_t wait_rv;
    const char *partial;            /* meta.k8s.io version of PartialObjectMetadata, or NULL */
    bool end_on_object;             /* as=PartialObjectMetadataList: end before any object */
    struct qbuf q;                  /* the bytes the transport reads next */
    /* The initial state not queued yet, sent STATE_CHUNK at a time as the
     * transport reads (a 100,000-object state is never all in memory
     * twice), then the initial-events-end bookmark if asked for.  While
     * it lasts, live events wait in `live`, queued behind it. */
    luna_ds_obj **state;            /* one reference each, [state_i..state_n) unsent */
    size_t state_i, state_n;
    bool state_bookmark;
    bool filling;                   /* queue() is writing the state, not a live event */
    struct qbuf live;
    bool ended;                     /* no more bytes will be queued */
    bool drop;                      /* drop the connection after the queue */
    size_t counted;                 /* q and live bytes counted in reg->queued */
    int events_sent;
    void (*wake)(void *ctx);
    void *wake_ctx;
    struct luna_ds_watch *prev_open, *next_open;
    /* conversion webhooks: the events waiting for an answer, in order */
    struct luna_ds *ds;             /* borrowed, or NULL */
    json_t *answers;                /* answered conversions (owned) or NULL */
    luna_ds_convert_job *job;       /* the call for the first waiting event (owned) */
    struct waiting *waiting, *waiting_tail;
};

/* An event waiting for a conversion webhook (obj NULL: the
 * initial-events-end bookmark). */
struct waiting {
    const char *type;               /* static */
    luna_ds_obj *obj;               /* one reference */
    uint64_t rv_override;
    struct waiting *next;
};

static void end_stream(luna_ds_watch *w);
static void drop_state(luna_ds_watch *w);

/* Ends the stream and has the transport drop the connection. */
static void drop(luna_ds_watch *w)
{
    w->drop = true;
    end_stream(w);
}

static int qbuf_put(struct qbuf *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        if (b->off > 0) {
            memmove(b->buf, b->buf + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
        if (b->len + n > b->cap) {
            size_t cap = b->cap ? b->cap : 4096;
            while (cap < b->len + n)
                cap *= 2;
            char *nb = realloc(b->buf, cap);
            if (!nb)
                return LUNA_ENOMEM;
            b->buf = nb;
            b->cap = cap;
        }
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    return 0;
}

static size_t qbuf_used(const struct qbuf *b) { return b->len - b->off; }

static size_t backlog(const luna_ds_watch *w) { return qbuf_used(&w->q) + qbuf_used(&w->live); }

/* Brings the registry's total up to date with this watch's queues. */
static void recount(luna_ds_watch *w)
{
    size_t now = backlog(w);
    w->reg->queued = w->reg->queued - w->counted + now;
    w->counted = now;
}

static void queue(luna_ds_watch *w, const char *s, size_t n)
{
    if (w->ended)
        return;
    bool behind_state = w->state && !w->filling;
    if (qbuf_put(behind_state ? &w->live : &w->q, s, n) < 0)
        drop(w);
}

static void end_stream(luna_ds_watch *w)
{
    if (w->ended)
        return;
    w->ended = true;
    luna_ds_store_unsubscribe(&w->listener);
    ev_timer_stop(luna_loop(), &w->timeout_timer);
    ev_timer_stop(luna_loop(), &w->bookmark_timer);
}

static void wake(luna_ds_watch *w)
{
    if (w->wake)
        w->wake(w->wake_ctx);
}

static const char *type_name(enum luna_ds_event_type t)
{
    switch (t) {
    case LUNA_DS_ADDED: return "ADDED";
    case LUNA_DS_MODIFIED: return "MODIFIED";
    case LUNA_DS_DELETED: return "DELETED";
    }
    return "ERROR";
}

static void send_bookmark(luna_ds_watch *w, bool initial_end);

/* Queues one event line for obj; rv_override != 0 rewrites the object's
 * resourceVersion (a DELETED made from a previous state).  1 when its
 * object waits for a conversion webhook (*job, owned, is the call):
 * nothing was queued. */
static int emit(luna_ds_watch *w, const char *type, const luna_ds_obj *obj,
                uint64_t rv_override, luna_ds_convert_job **job)
{
    if (w->ended)
        return 0;
    if (w->end_on_object) {
        end_stream(w);
        return 0;
    }
    luna_ds_faults *f = w->faults;
    char *converted = NULL;
    const char *bytes = obj->bytes;
    size_t len = obj->len;
    struct luna_textbuf tb = LUNA_TEXTBUF_INIT;
    if (w->partial && !rv_override && w->type == w->storage &&
        luna_ds_partial_bytes(obj->bytes, obj->len, w->partial, &tb)) {
        if (tb.failed) {
            luna_textbuf_free(&tb);
            drop(w);
            return 0;
        }
        converted = luna_textbuf_steal(&tb, &len);
        bytes = converted;
    } else if (rv_override || w->type != w->storage || w->partial) {
        json_t *doc = luna_ds_obj_doc(obj);
        if (!doc) {
            drop(w);
            return 0;
        }
        if (w->type != w->storage && w->ds) {
            if (!w->answers && !(w->answers = json_object())) {
                json_decref(doc);
                drop(w);
                return 0;
            }
            json_t *out = NULL;
            int rc = luna_ds_convert_with(w->ds, w->answers, doc, w->storage, w->type, &out, job);
            json_decref(doc);
            if (rc == 1)
                return 1;
            if (rc < 0) {
                drop(w);
                return 0;
            }
            doc = out;
        } else if (w->type != w->storage) {
            luna_ds_types_convert(doc, w->storage, w->type);
        }
        if (rv_override) {
            char rv[32];
            snprintf(rv, sizeof rv, "%llu", (unsigned long long)rv_override);
            json_object_set_new(json_object_get(doc, "metadata"), "resourceVersion",
                                json_string(rv));
        }
        if (w->partial && !(doc = luna_ds_partial_object(doc, w->partial))) {
            drop(w);
            return 0;
        }
        converted = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        if (!converted) {
            drop(w);
            return 0;
        }
        bytes = converted;
        len = strlen(converted);
    }
    char head[64];
    int hn = snprintf(head, sizeof head, "{\"type\":\"%s\",\"object\":", type);
    if (luna_ds_faults_take(&f->truncate_event)) {
        queue(w, head, (size_t)hn);
        queue(w, bytes, len / 2);
        drop(w);
    } else if (luna_ds_faults_take(&f->malformed_event)) {
        queue(w, head, (size_t)hn);
        queue(w, "{\"kind\":", 8);
        queue(w, bytes, len / 3);
        /* A third of the object may end between two tokens, and the next
         * event would then read on as its nested value, waiting for
         * closers that never come: "\n!" is wrong anywhere (a raw
         * newline in a string, or no JSON token), so the event is refused
         * at once, whatever the object's bytes. */
        queue(w, "\n!\n", 3);
    } else {
        queue(w, head, (size_t)hn);
        queue(w, bytes, len);
        queue(w, "}\n", 2);
    }
    free(converted);
    w->events_sent++;
    if ((f->watch_close_after > 0 && w->events_sent >= f->watch_close_after) ||
        luna_ds_faults_chance(f, f->watch_close_random))
        end_stream(w);
    return 0;
}

static void on_converted(void *ud, luna_ds_convert_job *job);

static void wait_event(luna_ds_watch *w, const char *type, const luna_ds_obj *obj,
                       uint64_t rv_override)
{
    struct waiting *e = calloc(1, sizeof *e);
    if (!e) {
        drop(w);
        return;
    }
    e->type = type;
    e->obj = obj ? luna_ds_obj_ref((luna_ds_obj *)obj) : NULL;
    e->rv_override = rv_override;
    if (w->waiting_tail)
        w->waiting_tail->next = e;
    else
        w->waiting = e;
    w->waiting_tail = e;
}

/* Sends the waiting events until one waits for a call (started). */
static void pump(luna_ds_watch *w)
{
    while (w->waiting && !w->job) {
        struct waiting *e = w->waiting;
        luna_ds_convert_job *job = NULL;
        if (!e->obj) {
            w->waiting = e->next;
            if (!w->waiting)
                w->waiting_tail = NULL;
            free(e);
            send_bookmark(w, true);
            continue;
        }
        if (emit(w, e->type, e->obj, e->rv_override, &job) == 1) {
            w->job = job;
            luna_ds_convert_job_run(w->ds, job, w->answers, on_converted, w);
            return;
        }
        w->waiting = e->next;
        if (!w->waiting)
            w->waiting_tail = NULL;
        luna_ds_obj_unref(e->obj);
        free(e);
    }
}

static void drop_waiting(luna_ds_watch *w)
{
    luna_ds_convert_job_free(w->job);
    w->job = NULL;
    while (w->waiting) {
        struct waiting *e = w->waiting;
        w->waiting = e->next;
        luna_ds_obj_unref(e->obj);
        free(e);
    }
    w->waiting_tail = NULL;
}

static void queue_line(luna_ds_watch *w, json_t *doc);

static void on_converted(void *ud, luna_ds_convert_job *job)
{
    luna_ds_watch *w = ud;
    w->job = NULL;
    const json_t *failure = luna_ds_convert_job_failure(job);
    if (failure) {
        /* as kube's watch of a version it cannot decode into: an ERROR
         * event, and the stream ends; the client watches again */
        queue_line(w, json_pack("{s:s,s:O}", "type", "ERROR", "object", failure));
        luna_ds_convert_job_free(job);
        drop_waiting(w);
        end_stream(w);
    } else {
        luna_ds_convert_job_free(job);
        pump(w);
    }
    recount(w);
    wake(w);
}

/* Queues one event line for obj, behind the events waiting for a
 * conversion webhook. */
static void send_event(luna_ds_watch *w, const char *type, const luna_ds_obj *obj,
                       uint64_t rv_override)
{
    if (w->ended)
        return;
    if (w->waiting) {
        wait_event(w, type, obj, rv_override);
        return;
    }
    luna_ds_convert_job *job = NULL;
    if (emit(w, type, obj, rv_override, &job) == 1) {
        luna_ds_convert_job_free(job);
        wait_event(w, type, obj, rv_override);
        pump(w);
    }
}

/* Queues doc (consumed) as one line. */
static void queue_line(luna_ds_watch *w, json_t *doc)
{
    char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!s) {
        drop(w);
        return;
    }
    queue(w, s, strlen(s));
    queue(w, "\n", 1);
    free(s);
}

static void send_bookmark(luna_ds_watch *w, bool initial_end)
{
    if (w->waiting) {
        /* behind events waiting for a conversion webhook: the initial
         * state's end waits with them; a periodic one is skipped */
        if (initial_end)
            wait_event(w, "BOOKMARK", NULL, 0);
        return;
    }
    if (w->end_on_object) {
        end_stream(w);
        return;
    }
    json_t *md = json_object();
    char rv[32];
    snprintf(rv, sizeof rv, "%llu", (unsigned long long)luna_ds_store_rv(w->store));
    json_object_set_new(md, "resourceVersion", json_string(rv));
    if (initial_end)
        json_object_set_new(md, "annotations",
                            json_pack("{s:s}", "k8s.io/initial-events-end", "true"));
    char partial_version[32];
    if (w->partial)
        snprintf(partial_version, sizeof partial_version, "meta.k8s.io/%s", w->partial);
    json_t *o = json_pack("{s:s,s:{s:s,s:s,s:o}}", "type", "BOOKMARK", "object",
                          "kind", w->partial ? "PartialObjectMetadata" : w->type->kind,
                          "apiVersion", w->partial ? partial_version : w->type->api_version,
                          "metadata", md);
    queue_line(w, o);
}

static void send_expired(luna_ds_watch *w, uint64_t rv, uint64_t floor)
{
    char msg[128];
    snprintf(msg, sizeof msg, "too old resource version: %llu (%llu)",
             (unsigned long long)rv, (unsigned long long)floor);
    json_t *o = json_pack("{s:s,s:{s:s,s:s,s:{},s:s,s:s,s:s,s:i}}", "type", "ERROR", "object",
                          "kind", "Status", "apiVersion", "v1", "metadata", "status",
                          "Failure", "message", msg, "reason", "Expired", "code", 410);
    queue_line(w, o);
    end_stream(w);
}

/* kube-apiserver's answer to a watch list from a version it has not
 * reached (after waiting 3 s for it): one ERROR event, then the end. */
static void send_too_large(luna_ds_watch *w, uint64_t rv, uint64_t now)
{
    char msg[128];
    snprintf(msg, sizeof msg, "Timeout: Too large resource version: %llu, current: %llu",
             (unsigned long long)rv, (unsigned long long)now);
    json_t *o = json_pack("{s:s,s:{s:s,s:s,s:{},s:s,s:s,s:s,s:{s:[{s:s,s:s}],s:i},s:i}}",
                          "type", "ERROR", "object", "kind", "Status", "apiVersion", "v1",
                          "metadata", "status", "Failure", "message", msg, "reason", "Timeout",
                          "details", "causes", "reason", "ResourceVersionTooLarge", "message",
                          "Too large resource version", "retryAfterSeconds", 1, "code", 504);
    queue_line(w, o);
    end_stream(w);
}

static void on_store_event(luna_ds_watch *w, const luna_ds_event *ev)
{
    bool now = ev->type != LUNA_DS_DELETED && luna_ds_filter_match(&w->filter, ev->obj);
    bool before;
    if (ev->type == LUNA_DS_DELETED)
        before = luna_ds_filter_match(&w->filter, ev->obj);
    else
        before = ev->prev && luna_ds_filter_match(&w->filter, ev->prev);
    if (ev->type == LUNA_DS_DELETED) {
        if (before)
            send_event(w, "DELETED", ev->obj, 0);
    } else if (now && before) {
        send_event(w, "MODIFIED", ev->obj, 0);
    } else if (now) {
        send_event(w, "ADDED", ev->obj, 0);
    } else if (before) {
        send_event(w, "DELETED", ev->prev, ev->rv);
    }
    (void)type_name;
}

/* The watcher has not read what it was sent: it is ended, as
 * kube-apiserver's watch cache ends a watcher whose channel is full
 * ("Forcing watcher close due to unresponsiveness").  The client sees its
 * stream end after the last whole event it was given, and watches again
 * from the resourceVersion it saw, losing nothing.  What it had not read
 * is freed at once: only the rest of the line being sent is kept, so the
 * stream ends on a whole line. */
static void cut_off(luna_ds_watch *w, size_t pending)
{
    luna_ds_watches *reg = w->reg;
    end_stream(w);
    reg->cut_off++;
    char *nl = qbuf_used(&w->q) ? memchr(w->q.buf + w->q.off, '\n', qbuf_used(&w->q)) : NULL;
    size_t keep = nl ? (size_t)(nl - (w->q.buf + w->q.off)) + 1 : 0;
    char *rest = keep ? malloc(keep) : NULL;
    if (rest)
        memcpy(rest, w->q.buf + w->q.off, keep);
    else
        w->drop = keep > 0; /* cannot keep the line whole: drop the connection instead */
    free(w->q.buf);
    w->q = (struct qbuf){ .buf = rest, .len = rest ? keep : 0, .cap = rest ? keep : 0 };
    free(w->live.buf);
    memset(&w->live, 0, sizeof w->live);
    drop_state(w);
    recount(w);
    char a[32], b[32], c[32], d[32];
    snprintf(a, sizeof a, "%zu", pending);
    snprintf(b, sizeof b, "%zu", reg->max_queued ? reg->max_queued : LUNA_DS_WATCH_BUFFER_DEFAULT);
    snprintf(c, sizeof c, "%zu", reg->queued);
    snprintf(d, sizeof d, "%llu", (unsigned long long)reg->cut_off);
    luna_warn("slow watcher cut off: it fell too far behind", "resource", w->type->resource,
              "unread_bytes", a, "limit_bytes", b, "all_watches_bytes", c, "cut_off_total", d);
}

static void on_listener(luna_ds_listener *l, const luna_ds_event *ev)
{
    luna_ds_watch *w = (luna_ds_watch *)l;
    if (ev->rv <= w->wait_rv)
        return;
    /* Bounded before the event is queued: one event larger than the bound
     * still reaches a watcher that keeps up. */
    size_t pending = backlog(w);
    size_t max = w->reg->max_queued ? w->reg->max_queued : LUNA_DS_WATCH_BUFFER_DEFAULT;
    if (pending > max || (w->reg->queued > MAX_QUEUED_TOTAL && pending > LAGGING)) {
        cut_off(w, pending);
        wake(w);
        return;
    }
    size_t before = qbuf_used(&w->q);
    bool was_ended = w->ended;
    on_store_event(w, ev);
    recount(w);
    if (qbuf_used(&w->q) != before || w->ended != was_ended)
        wake(w);
}

static void drop_state(luna_ds_watch *w)
{
    for (size_t i = w->state_i; i < w->state_n; i++)
        luna_ds_obj_unref(w->state[i]);
    free(w->state);
    w->state = NULL;
    w->state_i = w->state_n = 0;
}

/* Queues the next part of the initial state; after its last object, the
 * bookmark and what came live meanwhile. */
static void fill_state(luna_ds_watch *w)
{
    w->filling = true;
    while (!w->ended && w->state_i < w->state_n && qbuf_used(&w->q) < STATE_CHUNK) {
        luna_ds_obj *o = w->state[w->state_i++];
        send_event(w, "ADDED", o, 0);
        luna_ds_obj_unref(o);
    }
    if (!w->ended && w->state_i == w->state_n) {
        if (w->state_bookmark)
            send_bookmark(w, true);
        drop_state(w);
        if (qbuf_used(&w->live) && qbuf_put(&w->q, w->live.buf + w->live.off,
                                            qbuf_used(&w->live)) < 0)
            drop(w);
        free(w->live.buf);
        memset(&w->live, 0, sizeof w->live);
    }
    w->filling = false;
}

static void replay_one(void *ctx, const luna_ds_event *ev)
{
    on_store_event(ctx, ev);
}

static void on_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    luna_ds_watch *w = (luna_ds_watch *)((char *)t - offsetof(luna_ds_watch, timeout_timer));
    (void)loop;
    (void)revents;
    end_stream(w);
    wake(w);
}

static void on_bookmark(struct ev_loop *loop, ev_timer *t, int revents)
{
    luna_ds_watch *w = (luna_ds_watch *)((char *)t - offsetof(luna_ds_watch, bookmark_timer));
    (void)loop;
    (void)revents;
    if (luna_ds_store_rv(w->store) <= w->wait_rv)
        return;
    send_bookmark(w, false);
    wake(w);
}

luna_ds_watch *luna_ds_watch_start(luna_ds_watch_opts *opts)
{
    luna_ds_watch *w = calloc(1, sizeof *w);
    if (!w) {
        luna_ds_filter_clear(&opts->filter);
        return NULL;
    }
    w->reg = opts->watches;
    w->faults = opts->faults;
    w->store = opts->store;
    w->type = opts->type;
    w->storage = opts->storage ? opts->storage : opts->type;
    w->filter = opts->filter;
    memset(&opts->filter, 0, sizeof opts->filter);
    w->bookmarks = opts->bookmarks;
    w->partial = opts->partial;
    w->ds = opts->ds;
    w->end_on_object = opts->end_on_object;
    w->listener.fn = on_listener;
    ev_timer_init(&w->timeout_timer, on_timeout, opts->timeout, 0);
    double bi = opts->bookmark_interval > 0 ? opts->bookmark_interval : 60;
    ev_timer_init(&w->bookmark_timer, on_bookmark, bi, bi);
    w->next_open = w->reg->open;
    if (w->reg->open)
        w->reg->open->prev_open = w;
    w->reg->open = w;

    luna_ds_coll *c = opts->type->coll;
    luna_ds_faults *f = w->faults;
    uint64_t now = luna_ds_store_rv(w->store);
    if (opts->too_large) {
        send_too_large(w, opts->rv, now);
        return w;
    }
    if (luna_ds_faults_take(&f->gone)) {
        send_expired(w, opts->start == LUNA_DS_WATCH_FROM_RV ? opts->rv : now, now);
        return w;
    }
    if (opts->start == LUNA_DS_WATCH_FROM_RV && !opts->send_initial_events && opts->rv > now) {
        w->wait_rv = opts->rv;
    } else if (opts->start == LUNA_DS_WATCH_FROM_RV && !opts->send_initial_events) {
        if (luna_ds_store_replay(c, opts->rv, replay_one, w) < 0) {
            send_expired(w, opts->rv, luna_ds_store_floor(c));
            return w;
        }
    } else {
        luna_ds_obj **items;
        size_t n;
        if (luna_ds_store_snapshot(c, 0, &items, &n) < 0) {
            drop(w);
            return w;
        }
        /* Kept (matching objects only) and sent as the transport reads. */
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            if (luna_ds_filter_match(&w->filter, items[i]))
                items[kept++] = luna_ds_obj_ref(items[i]);
        w->state = items;
        w->state_n = kept;
        w->state_bookmark = opts->send_initial_events && opts->bookmarks;
        fill_state(w);
    }
    recount(w);
    if (w->ended)
        return w;
    luna_ds_store_subscribe(c, &w->listener);
    if (opts->timeout > 0)
        ev_timer_start(luna_loop(), &w->timeout_timer);
    if (w->bookmarks)
        ev_timer_start(luna_loop(), &w->bookmark_timer);
    return w;
}

void luna_ds_watch_set_wake(luna_ds_watch *w, void (*fn)(void *ctx), void *ctx)
{
    w->wake = fn;
    w->wake_ctx = ctx;
}

ssize_t luna_ds_watch_read(luna_ds_watch *w, char *buf, size_t max)
{
    if (!qbuf_used(&w->q) && w->state && !w->ended)
        fill_state(w);
    size_t avail = qbuf_used(&w->q);
    if (avail) {
        size_t n = avail < max ? avail : max;
        memcpy(buf, w->q.buf + w->q.off, n);
        w->q.off += n;
        if (w->q.off == w->q.len)
            w->q.off = w->q.len = 0;
        recount(w);
        return (ssize_t)n;
    }
    if (w->ended)
        return w->drop ? LUNA_DS_WATCH_DROP : LUNA_DS_WATCH_END;
    return 0;
}

void luna_ds_watch_end_all(luna_ds_watches *reg)
{
    for (luna_ds_watch *w = reg->open; w; w = w->next_open) {
        end_stream(w);
        wake(w);
    }
}

void luna_ds_watch_free(luna_ds_watch *w)
{
    if (!w)
        return;
    end_stream(w);
    if (w->prev_open)
        w->prev_open->next_open = w->next_open;
    else
        w->reg->open = w->next_open;
    if (w->next_open)
        w->next_open->prev_open = w->prev_open;
    luna_ds_filter_clear(&w->filter);
    drop_waiting(w);
    json_decref(w->answers);
    drop_state(w);
    free(w->q.buf);
    free(w->live.buf);
    memset(&w->q, 0, sizeof w->q);
    memset(&w->live, 0, sizeof w->live);
    recount(w);
    free(w);
}
