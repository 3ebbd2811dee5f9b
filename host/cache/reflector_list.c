/* reflector_list.c — the paged LIST of a sync (reflector.h). */
#include "cache/reflector_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

/* ---- LIST ------------------------------------------------------------ */

/* A LIST (or one of its pages) failed: the pages collected so far are
 * dropped and the list starts again from the first page. */
static void list_failed(struct luna_reflector *r, const char *msg, bool with_backoff)
{
    luna_reflector_set_error(r, "list", msg);
    luna_reflector_drop_listed(r);
    luna_reflector_retry_later(r, true, with_backoff);
}

int luna_reflector_on_list_item(void *ud, enum luna_stream_event ev, struct luna_object *obj)
{
    struct luna_reflector *r = ud;
    if (luna_reflector_foreign(r, "list", obj) || luna_reflector_off_selector(r, "list", ev, obj)) {
        luna_object_unref(obj);
        return LUNA_EPROTO;
    }
    return luna_reflector_keep_listed(r, obj, NULL);
}

static int on_list_chunk(void *ud, const char *data, size_t len, luna_error *err)
{
    struct luna_reflector *r = ud;
    if (r->status != 200)
        return luna_reflector_collect_error_body(r, data, len);
    int rc = luna_object_stream_feed(r->list_stream, data, len, err);
    if (rc < 0)
        r->stream_failed = true;
    luna_reflector_name_refusal(r, rc, err);
    return rc;
}

/* The list has completed: who filtered it decides the mode, logged once per
 * reflector when first known and again only when it differs from the mode
 * last logged (a shard change relists, and is no change of mode). */
static void note_shard_mode(struct luna_reflector *r)
{
    if (!r->shard)
        return;
    enum luna_reflector_shard_mode m = r->list_server_filtered ? LUNA_SHARD_MODE_SERVER
                                                               : LUNA_SHARD_MODE_CLIENT;
    r->shard_mode = m;
    if (m == r->logged_mode)
        return;
    r->logged_mode = m;
    if (m == LUNA_SHARD_MODE_SERVER)
        luna_info("sharded informer: the API server filters (it echoed shardInfo)",
                  "informer", luna_informer_name(r->inf), "shard", r->shard_text);
    else
        luna_info("sharded informer: filtering on arrival (the API server ignored "
                  "shardSelector: older than v1.36 or the ShardedListAndWatch gate is off)",
                  "informer", luna_informer_name(r->inf), "shard", r->shard_text);
}

static void finish_list(struct luna_reflector *r)
{
    const char *rv = luna_object_stream_list_rv(r->list_stream);
    if (luna_reflector_dedupe_listed(r) < 0 ||
        luna_delta_fifo_replace(luna_informer_fifo(r->inf), r->listed, r->nlisted) < 0) {
        luna_reflector_set_error(r, "list", "out of memory applying the list");
        luna_reflector_drop_listed(r);
        r->stats.failures++;
        luna_reflector_retry_later(r, true, true);
        return;
    }
    char count[24];
    snprintf(count, sizeof count, "%zu", r->nlisted);
    luna_debug("reflector listed", "informer", luna_informer_name(r->inf), LUNA_LOG_NUM("objects"),
               count, "resourceVersion", rv, "via", "list");
    snprintf(r->rv, sizeof r->rv, "%s", rv);
    luna_reflector_drop_listed(r);
    r->rv_unavailable = false;
    r->list_this_round = false;   /* the next sync tries a watch list again */
    r->watch_list_attempts = 0;
    r->stats.lists++;
    note_shard_mode(r);
    luna_informer_wake(r->inf);
    luna_reflector_start_watch(r);
}

static void on_list_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct luna_reflector *r = ud;
    char msg[512];
    luna_reflector_take_status(r, resp);
    if (fail) {
        r->stats.failures++;
        if (r->stream_failed)
            r->stats.decode_errors++;
        luna_reflector_end_request(r);
        list_failed(r, fail->err.msg, true);
        return;
    }
    if (r->status != 200) {
        luna_reflector_describe_status(r, msg, sizeof msg);
        if (luna_reflector_too_large_rv(r))
            r->rv_unavailable = true;
        luna_reflector_end_request(r);
        r->stats.failures++;
        if (r->status == 410) {
            /* The version asked for (or the snapshot behind a continue
             * token) is gone: list again, consistently, from etcd, at once
             * after an expired page, else after a backoff (a server that
             * keeps answering 410 must not be hammered). */
            bool page = r->continue_token != NULL;
            r->stats.gone++;
            r->rv_unavailable = true;
            list_failed(r, msg, !page);
            return;
        }
        list_failed(r, msg, true);
        return;
    }
    luna_error err = { 0 };
    if (luna_object_stream_finish(r->list_stream, &err) < 0) {
        r->stats.failures++;
        r->stats.decode_errors++;
        luna_reflector_end_request(r);
        list_failed(r, err.msg, true);
        return;
    }
    /* A list of another kind (a PodList for ConfigMaps) would fill the
     * cache with objects of the wrong kind. */
    const char *kind = luna_object_stream_list_kind(r->list_stream);
    size_t kl = r->resource.kind ? strlen(r->resource.kind) : 0;
    bool as_metadata = r->metadata_only && strcmp(kind, "PartialObjectMetadataList") == 0;
    if (*kind && kl && !as_metadata &&
        (strncmp(kind, r->resource.kind, kl) != 0 || strcmp(kind + kl, "List") != 0)) {
        snprintf(msg, sizeof msg, "the server answered a list of %s with a %.64s", r->resource.kind, kind);
        r->stats.failures++;
        luna_reflector_end_request(r);
        list_failed(r, msg, true);
        return;
    }
    /* A list without a resourceVersion string cannot start a watch (one
     * from "" starts at the present and misses what changed meanwhile). */
    if (!*luna_object_stream_list_rv(r->list_stream)) {
        r->stats.failures++;
        luna_reflector_end_request(r);
        list_failed(r, "the list has no metadata.resourceVersion string", true);
        return;
    }
    /* A page that hands back the continue token it was asked with would
     * page for ever (and keep every page's items). */
    const char *next = luna_object_stream_continue(r->list_stream);
    if (*next && r->continue_token && strcmp(next, r->continue_token) == 0) {
        r->stats.failures++;
        luna_reflector_end_request(r);
        list_failed(r, "the server handed back the continue token it was asked with "
                       "(paging would never end)", true);
        return;
    }
    luna_reflector_end_request(r);
    r->stats.list_pages++;
    if (r->shard) {
        const char *echo = luna_object_stream_shard_info(r->list_stream);
        if (!echo || strcmp(echo, r->shard_text) != 0)
            r->list_server_filtered = false;
    }
    const char *cont = luna_object_stream_continue(r->list_stream);
    /* A first page from the cache that still came in pages: the server
     * pages (no watch cache), so later relists page too. */
    if (*cont && !r->continue_token && !r->rv_unavailable && r->rv[0] == '\0')
        r->paginated = true;
    free(r->continue_token);
    r->continue_token = *cont ? strdup(cont) : NULL;
    if (r->continue_token) {
        luna_reflector_start_list(r);
        return;
    }
    finish_list(r);
}

void luna_reflector_start_list(struct luna_reflector *r)
{
    r->phase = LISTING;
    r->status = 0;
    r->stream_failed = false;
    r->item_refused = false;
    if (!r->continue_token) {
        luna_reflector_drop_listed(r);
        r->list_server_filtered = true; /* until a page says otherwise */
    }
    luna_object_stream_reset(r->list_stream);
    if (luna_reflector_start_request(r, REQ_LIST, on_list_chunk, on_list_done) < 0) {
        luna_reflector_drop_listed(r);
        luna_reflector_retry_later(r, true, true);
    }
}
