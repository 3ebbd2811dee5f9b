/* reflector_watch.c — the WATCH after a sync, the resourceVersion check of a
 * silent watch, and the watch list (KEP-3157) that syncs as a stream (reflector.h). */
#include "cache/reflector_impl.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "cache/event_latency.h"

static void start_rv_check(struct luna_reflector *r);

/* ---- WATCH ----------------------------------------------------------- */

void luna_reflector_advance_rv(struct luna_reflector *r, const char *rv)
{
    if (rv && *rv)
        snprintf(r->rv, sizeof r->rv, "%s", rv);
}

/* An event before the initial-events-end bookmark goes to the state being
 * built, not to the FIFO (client-go's temporary store): the informer sees
 * the whole state at once, as after a LIST.  A server sends only ADDED
 * there; MODIFIED and DELETED are applied to the state all the same. */
static int on_initial_item(struct luna_reflector *r, enum luna_stream_event ev,
                           struct luna_object *obj)
{
    r->stats.watch_list_items++;
    if (ev == LUNA_STREAM_ADDED && !r->initial_indexed)
        return luna_reflector_keep_listed(r, obj, NULL);
    if (!r->initial_indexed) {
        /* The first change to the state being built: index it (a later
         * duplicate key wins, as it would in the cache). */
        r->initial_indexed = true;
        for (size_t i = 0; i < r->nlisted; i++) {
            struct luna_object *replaced;
            if (luna_objset_put(&r->initial, r->listed[i], &replaced) < 0) {
                luna_object_unref(obj);
                return LUNA_ENOMEM;
            }
        }
    }
    if (ev == LUNA_STREAM_DELETED) {
        luna_objset_remove(&r->initial, luna_object_key(obj), obj->key_len);
        luna_object_unref(obj);
        return 0;
    }
    struct luna_object *kept, *replaced;
    int rc = luna_reflector_keep_listed(r, obj, &kept);
    if (rc == 0)
        rc = luna_objset_put(&r->initial, kept, &replaced);
    return rc;
}

int luna_reflector_on_watch_item(void *ud, enum luna_stream_event ev, struct luna_object *obj)
{
    struct luna_reflector *r = ud;
    const char *what = r->phase == WATCH_LISTING ? "watch list" : "watch";
    if (luna_reflector_foreign(r, what, obj) || luna_reflector_off_selector(r, what, ev, obj)) {
        luna_object_unref(obj);
        return LUNA_EPROTO;
    }
    if (r->phase == WATCH_LISTING)
        return on_initial_item(r, ev, obj);
    struct luna_delta_fifo *fifo = luna_informer_fifo(r->inf);
    luna_event_latency_event(luna_object_key(obj));
    int rc;
    switch (ev) {
    case LUNA_STREAM_ADDED:    rc = luna_delta_fifo_add(fifo, obj); break;
    case LUNA_STREAM_MODIFIED: rc = luna_delta_fifo_update(fifo, obj); break;
    case LUNA_STREAM_DELETED:  rc = luna_delta_fifo_delete(fifo, obj); break;
    default:                   rc = LUNA_EPROTO; break;
    }
    if (rc == 0) {
        luna_reflector_advance_rv(r, luna_object_resource_version(obj));
        r->stats.watch_events++;
        luna_informer_wake(r->inf);
    }
    luna_object_unref(obj);
    return rc;
}

/* The initial-events-end bookmark: the state streamed so far replaces the
 * FIFO's contents, as a complete LIST does, and the same watch goes on
 * from the bookmark's resourceVersion. */
static int finish_watch_list(struct luna_reflector *r, const char *rv)
{
    /* Only the current entry of each key: the FIFO's replace sees each key
     * once (ADDED events may name a key again, not one after the other). */
    if (luna_reflector_compact_listed(r) < 0) {
        luna_reflector_set_error(r, "watch list", "out of memory applying the initial events");
        return LUNA_ENOMEM;
    }
    luna_objset_clear(&r->initial);
    r->initial_indexed = false;
    if (luna_delta_fifo_replace(luna_informer_fifo(r->inf), r->listed, r->nlisted) < 0) {
        luna_reflector_set_error(r, "watch list", "out of memory applying the initial events");
        return LUNA_ENOMEM;
    }
    char count[24];
    snprintf(count, sizeof count, "%zu", r->nlisted);
    luna_debug("reflector listed", "informer", luna_informer_name(r->inf), LUNA_LOG_NUM("objects"),
               count, "resourceVersion", rv, "via", "watch list");
    snprintf(r->rv, sizeof r->rv, "%s", rv);
    luna_reflector_drop_listed(r);
    r->phase = WATCHING;
    /* the watch goes on: silent from here on unless something comes */
    r->watch_seen = r->stats.watch_events + r->stats.bookmarks;
    r->rv_unavailable = false;
    r->list_this_round = false;
    r->watch_list_attempts = 0;
    r->stats.lists++;
    r->stats.watch_lists++;
    luna_informer_wake(r->inf);
    return 0;
}

int luna_reflector_on_bookmark(void *ud, const char *rv, bool initial_events_end)
{
    struct luna_reflector *r = ud;
    r->stats.bookmarks++;
    if (r->phase == WATCH_LISTING) {
        /* A bookmark inside the initial events says nothing the state can
         * be resumed from: only the end marker moves the version. */
        return initial_events_end ? finish_watch_list(r, rv) : 0;
    }
    luna_reflector_advance_rv(r, rv);
    return 0;
}

int luna_reflector_on_watch_error(void *ud, int code, const char *reason, const char *message)
{
    struct luna_reflector *r = ud;
    char msg[512];
    snprintf(msg, sizeof msg, "watch ERROR event %d %s: %s", code, reason, message);
    luna_reflector_set_error(r, r->phase == WATCH_LISTING ? "watch list" : "watch", msg);
    r->error_event = code ? code : 500;
    r->error_too_large = code == 504 && strstr(message, "Too large resource version");
    if (code == 410) {
        r->stats.gone++;
        r->relist_next = true;
    }
    /* Stop this watch: on_watch_done decides what comes next. */
    return LUNA_ECANCELED;
}

static int on_watch_chunk(void *ud, const char *data, size_t len, luna_error *err)
{
    struct luna_reflector *r = ud;
    if (r->status != 200)
        return luna_reflector_collect_error_body(r, data, len);
    luna_event_latency_chunk();
    int rc = luna_object_stream_feed(r->watch_stream, data, len, err);
    if (rc < 0 && rc != LUNA_ECANCELED)
        r->stream_failed = true;
    luna_reflector_name_refusal(r, rc, err);
    return rc;
}

static void watch_list_done(struct luna_reflector *r, const luna_http_failure *fail);

static void on_watch_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct luna_reflector *r = ud;
    luna_reflector_take_status(r, resp);
    if (r->phase == WATCH_LISTING) {
        watch_list_done(r, fail);
        return;
    }
    bool relist = r->relist_next;
    r->relist_next = false;
    char msg[512];
    if (relist) {
        r->stats.watch_gone++;
        luna_reflector_end_request(r);
        luna_reflector_retry_later(r, true, false);
        return;
    }
    if (r->status != 200 && r->status != 0) {
        luna_reflector_describe_status(r, msg, sizeof msg);
        bool refused = luna_reflector_rv_refused(r);
        luna_reflector_end_request(r);
        r->stats.failures++;
        luna_reflector_set_error(r, "watch", msg);
        if (r->status == 410) {
            r->stats.watch_gone++;
            r->stats.gone++;
            luna_reflector_retry_later(r, true, false);
        } else if (refused) {
            /* The server refuses the version asked for (one it never made,
             * from a lying server or a corrupted event): the dev server
             * answers 400, kube-apiserver 500 "resourceVersion: Invalid
             * value".  Resuming from it would fail for ever: relist
             * consistently. */
            r->rv_unavailable = true;
            luna_reflector_retry_later(r, true, true);
        } else {
            r->stats.watch_errors++;
            luna_reflector_retry_later(r, false, true);
        }
        return;
    }
    if (fail) {
        r->stats.failures++;
        /* A connection that broke inside an event delivered a truncated
         * event: a decode error as much as a malformed one. */
        luna_error partial = { 0 };
        bool truncated = !r->stream_failed && r->status == 200 &&
                         luna_object_stream_finish(r->watch_stream, &partial) < 0;
        if (r->stream_failed || truncated)
            r->stats.watch_decode++;
        else if (fail->reason == LUNA_HTTP_IDLE_TIMEOUT || fail->reason == LUNA_HTTP_TIMEOUT)
            r->stats.watch_timeouts++;
        else
            r->stats.watch_errors++;
        if (r->stream_failed || truncated) {
            r->stats.decode_errors++;
            luna_warn(truncated ? "watch stream truncated inside an event"
                      : r->item_refused ? "watch stream refused"
                                        : "watch stream decode failed",
                      "informer", luna_informer_name(r->inf), "error", fail->err.msg,
                      "resourceVersion", r->rv);
        }
        if (truncated) {
            snprintf(msg, sizeof msg, "event truncated: %.400s", fail->err.msg);
            luna_reflector_set_error(r, "watch", msg);
        } else {
            luna_reflector_set_error(r, "watch", fail->err.msg);
        }
        bool silent = fail->reason == LUNA_HTTP_IDLE_TIMEOUT && !r->stream_failed && !truncated &&
                      r->stats.watch_events + r->stats.bookmarks == r->watch_seen;
        luna_reflector_end_request(r);
        if (silent)
            start_rv_check(r);
        else
            luna_reflector_retry_later(r, false, true);
        return;
    }
    luna_error err = { 0 };
    if (luna_object_stream_finish(r->watch_stream, &err) < 0) {
        /* The stream ended inside an event: resume from the last applied. */
        r->stats.failures++;
        r->stats.decode_errors++;
        r->stats.watch_decode++;
        luna_reflector_set_error(r, "watch", err.msg);
        luna_reflector_end_request(r);
        luna_reflector_retry_later(r, false, true);
        return;
    }
    luna_reflector_end_request(r);
    r->stats.watch_closed++;
    /* A watch that ended within a second with nothing in it (client-go's
     * "very short watch"): a server that ends every watch at once would
     * otherwise be asked again in a hot loop.  Resume after a backoff. */
    if (ev_now(luna_loop()) - r->watch_started < 1.0 &&
        r->stats.watch_events + r->stats.bookmarks == r->watch_seen) {
        r->stats.failures++;
        luna_reflector_set_error(r, "watch", "very short watch: the server ended it within a "
                                             "second with no events");
        luna_reflector_retry_later(r, false, true);
        return;
    }
    /* The server closed the watch (its timeout): resume at once, unless
     * it brought nothing at all (see start_rv_check). */
    if (r->stats.watch_events + r->stats.bookmarks == r->watch_seen)
        start_rv_check(r);
    else
        luna_reflector_retry_later(r, false, false);
}

/* ---- resourceVersion check ------------------------------------------------ */

/* A watch from a version the server has not reached (one a lying server
 * sent, or every version after the server was restored from an older etcd
 * backup) is not refused by kube-apiserver: it waits, silently, for that
 * version, sending no event and no bookmark, until the watch times out;
 * resumed from the same version, the informer would wait for ever.  So
 * when a watch ends having brought nothing at all, the version is checked
 * before the watch resumes from it: a LIST of one item with
 * resourceVersionMatch=NotOlderThan, which kube-apiserver answers at once
 * when it has reached the version, and with 504 "Too large resource
 * version" (after waiting up to 3 s) when it has not; then the informer
 * relists consistently, as after a 504 to a LIST.  A quiet collection
 * costs one such request per watch round, the versions are never compared
 * (they are opaque), and a server that cannot answer the check is
 * watched from the version as before. */
static int on_check_data(void *ud, const char *data, size_t len, luna_error *err)
{
    (void)err;
    struct luna_reflector *r = ud;
    /* a 200's one item is not needed: dropped as it comes */
    return r->status != 200 ? luna_reflector_collect_error_body(r, data, len) : 0;
}

static void on_check_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct luna_reflector *r = ud;
    luna_reflector_take_status(r, resp);
    char msg[512];
    if (fail) {
        r->stats.failures++;
        luna_reflector_set_error(r, "resourceVersion check", fail->err.msg);
        luna_reflector_end_request(r);
        luna_reflector_retry_later(r, false, true);
        return;
    }
    if (r->status == 200) {
        /* The server has the version: the collection was just quiet (and
         * the server sends no bookmarks).  Resume at once; the idle timeout
         * and this check bound how often. */
        r->stats.rv_current++;
        luna_reflector_end_request(r);
        luna_reflector_retry_later(r, false, false);
        return;
    }
    luna_reflector_describe_status(r, msg, sizeof msg);
    bool refused = luna_reflector_rv_refused(r);
    luna_reflector_end_request(r);
    r->stats.failures++;
    if (refused || r->status == 410) {
        char why[700];
        snprintf(why, sizeof why, "the server has not reached resourceVersion %s, the version the "
                 "watch resumes from (%s): relisting consistently", r->rv, msg);
        luna_reflector_set_error(r, "watch", why);
        r->stats.rv_stale++;
        r->rv_unavailable = true;
        luna_reflector_retry_later(r, true, true);
        return;
    }
    luna_reflector_set_error(r, "resourceVersion check", msg);
    luna_reflector_retry_later(r, false, true);
}

static void start_rv_check(struct luna_reflector *r)
{
    r->phase = CHECKING;
    r->status = 0;
    r->stats.rv_checks++;
    int rc = luna_reflector_start_request(r, REQ_RV_CHECK, on_check_data, on_check_done);
    if (rc < 0)
        luna_reflector_retry_later(r, false, true);
}

void luna_reflector_start_watch(struct luna_reflector *r)
{
    r->phase = WATCHING;
    r->status = 0;
    r->stream_failed = false;
    r->item_refused = false;
    r->relist_next = false;
    r->error_event = 0;
    r->watch_started = ev_now(luna_loop());
    r->watch_seen = r->stats.watch_events + r->stats.bookmarks;
    luna_object_stream_reset(r->watch_stream);
    int rc = luna_reflector_start_request(r, REQ_WATCH, on_watch_chunk, on_watch_done);
    if (rc < 0)
        luna_reflector_retry_later(r, false, true);
    else if (rc == 0)
        r->stats.watches++;
}

/* ---- WATCH LIST (KEP-3157) ---------------------------------------------- */

/* This round lists instead (client-go falls back to LIST on any watch-list
 * error it does not retry; the next relist tries a watch list again).  With
 * the watch list forced on, it is tried again after a backoff instead.
 * why_fallback says what the warning may guess from:
 *   FALLBACK_SERVER: the server answered with an error (a status or an
 *     ERROR event), or ended its streams, or let them run past their
 *     deadline, without the initial-events-end bookmark: how a server
 *     without the WatchList feature answers, which the warning names;
 *   FALLBACK_STREAM: the stream itself was refused (it did not decode, or
 *     carried an object of another kind or outside the selector);
 *   FALLBACK_NETWORK: the connections broke (cut inside an event, idle);
 * the last two say nothing about the server's support, so the warning
 * does not guess. */
enum fallback_why { FALLBACK_SERVER, FALLBACK_STREAM, FALLBACK_NETWORK };

static void fall_back_to_list(struct luna_reflector *r, const char *why,
                              enum fallback_why why_fallback)
{
    r->watch_list_attempts = 0;
    if (r->watch_list == LUNA_WATCH_LIST_ON) {
        luna_reflector_retry_later(r, true, true);
        return;
    }
    r->list_this_round = true;
    r->stats.watch_list_fallbacks++;
    if (!r->warned_fallback && why_fallback == FALLBACK_SERVER)
        luna_warn("watch list failed, listing instead (the API server may not serve "
                  "sendInitialEvents: older than v1.27, or the WatchList gate is off)",
                  "informer", luna_informer_name(r->inf), "error", why);
    else if (!r->warned_fallback && why_fallback == FALLBACK_STREAM)
        luna_warn("watch list stream refused, listing instead", "informer",
                  luna_informer_name(r->inf), "error", why);
    else if (!r->warned_fallback)
        luna_warn("watch list failed, listing instead", "informer", luna_informer_name(r->inf),
                  "error", why);
    else
        luna_info("watch list failed, listing instead", "informer", luna_informer_name(r->inf),
                  "error", why);
    r->warned_fallback = true;
    luna_reflector_retry_later(r, true, false);
}

/* Tries the watch list again: at once from "" after 410 or a too large
 * version, else after a backoff; after WATCH_LIST_ATTEMPTS incomplete ones
 * in a row, this round lists, for the reason of the last. */
static void watch_list_again(struct luna_reflector *r, bool at_once, enum fallback_why why)
{
    if (++r->watch_list_attempts >= WATCH_LIST_ATTEMPTS) {
        fall_back_to_list(r, r->last_error, why);
        return;
    }
    luna_reflector_retry_later(r, true, !at_once);
}

/* The watch list ended before its initial-events-end bookmark: the state
 * streamed so far is dropped (the next attempt starts over, as client-go's
 * temporary store does).  What comes next, after client-go:
 *   - 410 Gone, 504 Too large (status or ERROR event): again at once,
 *     from a consistent read ("");
 *   - 429: again after a backoff (Retry-After honoured);
 *   - any other status or ERROR event (an older server's 422 "Invalid",
 *     403, 5xx), or a stream that does not decode: LIST this round;
 *   - a broken connection, an idle timeout, a truncated stream, or an end
 *     without the bookmark: again after a backoff (a network fault says
 *     nothing about the server's support). */
static void watch_list_done(struct luna_reflector *r, const luna_http_failure *fail)
{
    bool gone = r->relist_next;
    r->relist_next = false;
    char msg[512];
    luna_reflector_drop_listed(r);
    if (r->status != 200 && r->status != 0) {
        luna_reflector_describe_status(r, msg, sizeof msg);
        bool too_large = luna_reflector_too_large_rv(r);
        long status = r->status;
        luna_reflector_end_request(r);
        r->stats.failures++;
        luna_reflector_set_error(r, "watch list", msg);
        if (status == 410 || too_large) {
            if (status == 410)
                r->stats.gone++;
            r->rv_unavailable = true;
            watch_list_again(r, true, FALLBACK_SERVER);
        } else if (status == 429) {
            luna_reflector_retry_later(r, true, true);
        } else {
            fall_back_to_list(r, msg, FALLBACK_SERVER);
        }
        return;
    }
    if (gone || r->error_too_large) {
        luna_reflector_end_request(r);
        r->stats.failures++;
        r->rv_unavailable = true;
        watch_list_again(r, true, FALLBACK_SERVER);
        return;
    }
    if (r->error_event) {
        luna_reflector_end_request(r);
        r->stats.failures++;
        fall_back_to_list(r, r->last_error, FALLBACK_SERVER);
        return;
    }
    luna_error partial = { 0 };
    bool truncated = !r->stream_failed && r->status == 200 &&
                     luna_object_stream_finish(r->watch_stream, &partial) < 0;
    r->stats.failures++;
    if (r->stream_failed && fail) {
        r->stats.decode_errors++;
        snprintf(msg, sizeof msg, "%s: %.400s",
                 r->item_refused ? "stream refused" : "stream did not decode", fail->err.msg);
        luna_reflector_set_error(r, "watch list", msg);
        luna_reflector_end_request(r);
        fall_back_to_list(r, msg, FALLBACK_STREAM);
        return;
    }
    /* Only a server's own end of its streams, or streams past their
     * deadline, without the bookmark hint at a server that ignored
     * sendInitialEvents; a cut connection or an idle one does not. */
    enum fallback_why why = truncated || (fail && fail->reason != LUNA_HTTP_TIMEOUT)
                            ? FALLBACK_NETWORK : FALLBACK_SERVER;
    if (truncated) {
        r->stats.decode_errors++;
        snprintf(msg, sizeof msg, "event truncated: %.400s", fail ? fail->err.msg : partial.msg);
        luna_reflector_set_error(r, "watch list", msg);
    } else if (fail && fail->reason == LUNA_HTTP_TIMEOUT) {
        snprintf(msg, sizeof msg, "no initial-events-end bookmark within %.0f s (the watch's "
                 "timeoutSeconds %.0f plus a grace): giving up on this stream (%.200s)",
                 luna_reflector_watch_deadline(r), r->watch_timeout, fail->err.msg);
        luna_reflector_set_error(r, "watch list", msg);
    } else if (fail) {
        luna_reflector_set_error(r, "watch list", fail->err.msg);
    } else {
        luna_reflector_set_error(r, "watch list",
                                 "the stream ended before the initial-events-end bookmark");
    }
    luna_reflector_end_request(r);
    watch_list_again(r, false, why);
}

void luna_reflector_start_watch_list(struct luna_reflector *r)
{
    r->phase = WATCH_LISTING;
    r->status = 0;
    r->stream_failed = false;
    r->item_refused = false;
    r->relist_next = false;
    r->error_event = 0;
    r->error_too_large = false;
    luna_reflector_drop_listed(r);
    luna_object_stream_reset(r->watch_stream);
    int rc = luna_reflector_start_request(r, REQ_WATCH_LIST, on_watch_chunk, on_watch_done);
    if (rc < 0)
        luna_reflector_retry_later(r, true, true);
    else if (rc == 0)
        r->stats.watches++;
}
