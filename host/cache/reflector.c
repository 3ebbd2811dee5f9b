/* reflector.c — see reflector.h. */
#include "cache/reflector.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/backoff.h"
#include "base/json.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/selector.h"
#include "cache/event_latency.h"
#include "cache/object_stream.h"
#include "cache/objset.h"

#define DEFAULT_PAGE 500
#define DEFAULT_MIN_WATCH 300.0
#define DEFAULT_IDLE 180.0
#define MAX_ERROR_BODY (64u << 10)
#define PATH_MAX_LEN 8192
/* Watch lists in a row that may end without their initial-events-end
 * bookmark before a round falls back to LIST (a server that always cuts
 * the stream short must not stall the informer). */
#define WATCH_LIST_ATTEMPTS 3
/* How long a resourceVersion check may take: kube-apiserver waits up to
 * 3 s for its watch cache to reach a version before answering 504. */
#define RV_CHECK_TIMEOUT 30.0

/* WATCH_LISTING: a watch list before its initial-events-end bookmark;
 * the same request goes on as WATCHING after it.  CHECKING: a silent
 * watch ended and the version it resumes from is being checked. */
enum phase { IDLE, LISTING, WATCH_LISTING, WATCHING, CHECKING, WAITING };

/* What a request asks for: REQ_RV_CHECK is a LIST of at most one item at
 * least as fresh as the last version seen. */
enum request_kind { REQ_LIST, REQ_WATCH, REQ_WATCH_LIST, REQ_RV_CHECK };

struct luna_reflector {
    struct luna_kube_client *kc;
    struct luna_informer *inf;
    struct luna_resource resource;
    char *namespace_, *label_selector, *field_selector;
    struct luna_selector *labels;   /* label_selector parsed (owned); NULL: none */
    struct luna_shard_selector *shard;  /* owned; NULL: not sharded */
    char *shard_text;               /* its canonical text (owned) */
    enum luna_reflector_shard_mode shard_mode;
    /* The mode last logged (NONE: none yet).  Unlike shard_mode it is not
     * reset by set_shard: a new claim relists, but the server that
     * answers is the same, so the mode is logged again only if it differs. */
    enum luna_reflector_shard_mode logged_mode;
    bool list_server_filtered;      /* every page of this list echoed shardInfo */
    bool warned_foreign;            /* warned once: server mode, a foreign item */
    bool metadata_only;             /* PartialObjectMetadata lists and watches */
    size_t page_size;
    bool page_size_set;             /* the informer asked for pages */
    bool rv_unavailable;            /* a list got 410: list from etcd, in pages */
    bool paginated;                 /* a list from the cache came in pages */
    double min_watch, max_watch, idle_timeout;
    double watch_timeout;           /* timeoutSeconds of the watch in flight */
    struct luna_backoff backoff;
    enum luna_watch_list_mode watch_list;
    bool list_this_round;           /* a watch list failed: this sync lists */
    int watch_list_attempts;        /* incomplete watch lists in a row */
    bool warned_fallback;           /* the first fallback was logged at warn */

    enum phase phase;
    bool relist_next;               /* the wait ends in a list, not a watch */
    struct luna_kube_request *req;  /* the request in flight, if any */
    struct luna_object_stream *list_stream, *watch_stream;
    long status;                    /* HTTP status of the request in flight */
    double retry_after;             /* from the failed response, seconds */
    char *error_body;               /* non-2xx body, for its Status */
    size_t error_len;
    bool stream_failed;             /* a decode error ended the request */
    /* The stream was stopped for an item the reflector refused (another
     * namespace, off the label selector), not for bytes that did not
     * decode; refusal says why, and replaces the stream's generic
     * "item handler stopped the stream" in the request's error. */
    bool item_refused;
    char refusal[512];
    int error_event;                /* code of an ERROR event that ended it, 0 if none */
    bool error_too_large;           /* ... and it said "Too large resource version" */

    /* Objects of the list (or the watch list's initial events) in
     * progress, in arrival order, one reference each.  A server sends a
     * watch list's state as ADDED events of distinct keys, appended like a
     * LIST's items; only if a MODIFIED or DELETED comes before the
     * bookmark is `initial` built, indexing them by key (no references):
     * from then on an entry of `listed` is current if and only if
     * `initial` maps its key to it; the others were replaced or deleted
     * and are dropped when the initial events end. */
    struct luna_object **listed;
    size_t nlisted, listed_cap;
    struct luna_objset initial;
    bool initial_indexed;
    char *continue_token;

    char rv[64];
    double watch_started;           /* ev_now when the watch in flight began */
    unsigned long watch_seen;       /* events + bookmarks when it began */
    char last_error[512];
    struct luna_reflector_stats stats;
    ev_timer wait;
};

static void start_list(struct luna_reflector *r);
static void start_watch(struct luna_reflector *r);
static void start_watch_list(struct luna_reflector *r);
static void start_rv_check(struct luna_reflector *r);

/* A sync (the first, or a relist) streams the state as a watch list unless
 * the informer lists, this round fell back, or the informer is sharded
 * (only a LIST echoes shardInfo, which says whether the server filtered). */
static bool use_watch_list(const struct luna_reflector *r)
{
    return r->watch_list != LUNA_WATCH_LIST_OFF && !r->shard && !r->list_this_round;
}

static void start_sync(struct luna_reflector *r)
{
    if (use_watch_list(r))
        start_watch_list(r);
    else
        start_list(r);
}

static void set_error(struct luna_reflector *r, const char *what, const char *msg)
{
    snprintf(r->last_error, sizeof r->last_error, "%s: %s", what, msg);
    luna_warn("reflector request failed", "informer", luna_informer_name(r->inf), "what", what,
              "error", msg);
}

static void drop_listed(struct luna_reflector *r)
{
    for (size_t i = 0; i < r->nlisted; i++)
        luna_object_unref(r->listed[i]);
    r->nlisted = 0;
    luna_objset_clear(&r->initial);
    r->initial_indexed = false;
    free(r->continue_token);
    r->continue_token = NULL;
}

static void wait_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct luna_reflector *r = (struct luna_reflector *)((char *)w -
                                                         offsetof(struct luna_reflector, wait));
    if (r->relist_next || !r->rv[0])
        start_sync(r);
    else
        start_watch(r);
}

/* Schedules the next attempt: a relist or a resumed watch. */
static void retry_later(struct luna_reflector *r, bool relist, bool with_backoff)
{
    r->phase = WAITING;
    r->relist_next = relist;
    double delay = 0;
    if (with_backoff) {
        delay = luna_backoff_next(&r->backoff, ev_now(luna_loop()));
        if (r->retry_after > delay)
            delay = r->retry_after;
    }
    r->retry_after = 0;
    ev_timer_set(&r->wait, delay, 0.);
    ev_timer_start(luna_loop(), &r->wait);
}

/* ---- paths ----------------------------------------------------------- */

static int append_query(char *buf, size_t size, size_t *len, const char *name, const char *value)
{
    if (!value || !*value)
        return 0;
    size_t need = luna_resource_url_escape(value, NULL, 0);
    int n = snprintf(buf + *len, size - *len, "%c%s=", strchr(buf, '?') ? '&' : '?', name);
    if (n < 0 || (size_t)n + need >= size - *len)
        return LUNA_ETOOBIG;
    *len += (size_t)n;
    *len += luna_resource_url_escape(value, buf + *len, size - *len);
    return 0;
}

static int build_path(struct luna_reflector *r, enum request_kind kind, char *buf, size_t size)
{
    int n = luna_resource_path(&r->resource, r->namespace_, NULL, NULL, buf, size);
    if (n < 0)
        return n;
    size_t len = (size_t)n;
    char num[32];
    int rc = 0;
    if (kind == REQ_RV_CHECK) {
        rc |= append_query(buf, size, &len, "limit", "1");
        rc |= append_query(buf, size, &len, "resourceVersion", r->rv);
        rc |= append_query(buf, size, &len, "resourceVersionMatch", "NotOlderThan");
    } else if (kind != REQ_LIST) {
        double span = r->max_watch - r->min_watch;
        long timeout = (long)(r->min_watch + span * luna_backoff_random(&r->backoff));
        r->watch_timeout = (double)timeout;
        snprintf(num, sizeof num, "%ld", timeout);
        rc |= append_query(buf, size, &len, "watch", "1");
        rc |= append_query(buf, size, &len, "allowWatchBookmarks", "true");
        if (kind == REQ_WATCH_LIST) {
            /* client-go's watchList: the state at least as fresh as the
             * last version seen, or (first sync, or after 410 / too large)
             * a consistent read: resourceVersion left out. */
            rc |= append_query(buf, size, &len, "sendInitialEvents", "true");
            rc |= append_query(buf, size, &len, "resourceVersionMatch", "NotOlderThan");
            rc |= append_query(buf, size, &len, "resourceVersion", r->rv_unavailable ? "" : r->rv);
        } else {
            rc |= append_query(buf, size, &len, "resourceVersion", r->rv);
        }
        rc |= append_query(buf, size, &len, "timeoutSeconds", num);
    } else if (r->continue_token) {
        snprintf(num, sizeof num, "%zu", r->page_size);
        rc |= append_query(buf, size, &len, "limit", num);
        rc |= append_query(buf, size, &len, "continue", r->continue_token);
    } else {
        /* client-go's relistResourceVersion: the first list asks for "0"
         * (any version, served whole from the API server's watch cache,
         * which ignores limit); a relist asks for the last version seen
         * (at least that fresh, also from the cache, so no pages unless
         * asked for or the server paged before); after a 410 on a list,
         * "" (a consistent read from etcd, in pages). */
        const char *rv = r->rv_unavailable ? "" : r->rv[0] ? r->rv : "0";
        bool paged = !*rv || strcmp(rv, "0") == 0 || r->page_size_set || r->paginated;
        snprintf(num, sizeof num, "%zu", r->page_size);
        rc |= append_query(buf, size, &len, "resourceVersion", rv);
        if (paged)
            rc |= append_query(buf, size, &len, "limit", num);
    }
    rc |= append_query(buf, size, &len, "labelSelector", r->label_selector);
    rc |= append_query(buf, size, &len, "fieldSelector", r->field_selector);
    rc |= append_query(buf, size, &len, "shardSelector", r->shard_text);
    return rc < 0 ? LUNA_ETOOBIG : 0;
}

/* ---- responses shared by list and watch ------------------------------- */

/* Retry-After in seconds, bounded by the larger of the backoff's maximum
 * and RETRY_AFTER_MAX: a server (or something posing as one) asking for
 * 1e18 s must not park the informer for longer than its backoff would. */
#define RETRY_AFTER_MAX 30.0
static double parse_retry_after(const luna_http_response *resp, double max)
{
    for (size_t i = 0; i < resp->nheaders; i++) {
        if (strcmp(resp->headers[i].name, "retry-after") == 0) {
            char *end;
            double s = strtod(resp->headers[i].value, &end);
            if (end != resp->headers[i].value && isfinite(s) && s >= 0)
                return s > max ? max : s;
        }
    }
    return 0;
}

static int on_headers(void *ud, const luna_http_response *resp, luna_error *err)
{
    struct luna_reflector *r = ud;
    r->status = resp->status;
    r->retry_after = resp->status == 429 || resp->status >= 500 ? parse_retry_after(resp, r->backoff.max > RETRY_AFTER_MAX ? r->backoff.max : RETRY_AFTER_MAX) : 0;
    return 0;
}

static int collect_error_body(struct luna_reflector *r, const char *data, size_t len)
{
    if (r->error_len + len > MAX_ERROR_BODY)
        return 0; /* enough to report; drop the rest */
    char *b = realloc(r->error_body, r->error_len + len + 1);
    if (!b)
        return LUNA_ENOMEM;
    memcpy(b + r->error_len, data, len);
    r->error_len += len;
    b[r->error_len] = '\0';
    r->error_body = b;
    return 0;
}

/* The Status message of a failed response, or the HTTP status. */
static void describe_status(struct luna_reflector *r, char *buf, size_t size)
{
    luna_json_value v;
    char text[384];
    if (r->error_body &&
        luna_json_lookup(r->error_body, r->error_len, "message", &v, text, sizeof text, NULL) == 0 &&
        v.type == LUNA_JSON_STRING)
        snprintf(buf, size, "HTTP %ld: %s", r->status, text);
    else
        snprintf(buf, size, "HTTP %ld", r->status);
}

/* A 504 "Too large resource version": the server is behind the version
 * asked for (a lagging watch cache, or a server restored from an older
 * etcd).  client-go then lists consistently instead; so does the
 * reflector, or it would ask for that version for ever. */
static bool too_large_rv(const struct luna_reflector *r)
{
    return r->status == 504 && r->error_body &&
           (strstr(r->error_body, "ResourceVersionTooLarge") ||
            strstr(r->error_body, "Too large resource version"));
}

/* The server refuses the version asked for: too large (it has not reached
 * it), or not a version at all (the dev server answers 400,
 * kube-apiserver 500 "resourceVersion: Invalid value"). */
static bool rv_refused(const struct luna_reflector *r)
{
    return too_large_rv(r) || r->status == 400 ||
           (r->error_body && strstr(r->error_body, "resourceVersion: Invalid value"));
}

static void end_request(struct luna_reflector *r)
{
    r->req = NULL;
    free(r->error_body);
    r->error_body = NULL;
    r->error_len = 0;
}

/* Seconds after which a watch is given up: its timeoutSeconds plus a grace
 * for the network and a loaded server. */
static double watch_deadline(const struct luna_reflector *r)
{
    return r->watch_timeout + r->watch_timeout / 10 + 5;
}

/* Starts the LIST (watch false) or WATCH request with its stream callbacks.
 * Returns 0 if it runs; 1 if the path was too long (last_error set and a
 * relist scheduled); -1 if it could not start (counted as a failure and
 * last_error set: the caller schedules the retry). */
static int start_request(struct luna_reflector *r, enum request_kind kind,
                         luna_kube_data_fn on_chunk, luna_kube_done_fn on_done)
{
    char path[PATH_MAX_LEN];
    luna_error err = { 0 };
    const char *what = kind == REQ_LIST        ? "list"
                       : kind == REQ_WATCH     ? "watch"
                       : kind == REQ_RV_CHECK ? "resourceVersion check"
                                               : "watch list";
    if (build_path(r, kind, path, sizeof path) < 0) {
        set_error(r, what, "request path too long");
        retry_later(r, true, true);
        return 1;
    }
    struct luna_kube_request_options o = {
        .path = path,
        /* The server ends a watch at its timeoutSeconds; one that does not
         * (a watch list that never sends its initial-events-end bookmark,
         * a stream of bookmarks or blank lines that keeps the idle timeout
         * away) is given up a grace later, as client-go's typed clients
         * time the request out at timeoutSeconds.  A version check is a
         * LIST the server answers within seconds. */
        .timeout = kind == REQ_LIST       ? 0
                   : kind == REQ_RV_CHECK ? RV_CHECK_TIMEOUT
                                          : watch_deadline(r),
        /* a watch list's events are a watch's */
        .accept = !r->metadata_only                         ? NULL
                  : kind == REQ_LIST || kind == REQ_RV_CHECK ? LUNA_ACCEPT_METADATA_LIST
                                                             : LUNA_ACCEPT_METADATA_WATCH,
        /* kube-apiserver takes up to 3 s to answer a check it cannot */
        .idle_timeout = kind == REQ_RV_CHECK ? 0 : r->idle_timeout,
        .on_headers = on_headers,
        .on_chunk = on_chunk,
        .on_done = on_done,
        .ud = r,
    };
    r->req = luna_kube_request_start(r->kc, &o, &err);
    if (!r->req) {
        r->stats.failures++;
        set_error(r, what, err.msg);
        return -1;
    }
    return 0;
}

/* ---- LIST ------------------------------------------------------------ */

/* A LIST (or one of its pages) failed: the pages collected so far are
 * dropped and the list starts again from the first page. */
static void list_failed(struct luna_reflector *r, const char *msg, bool with_backoff)
{
    set_error(r, "list", msg);
    drop_listed(r);
    retry_later(r, true, with_backoff);
}

static void advance_rv(struct luna_reflector *r, const char *rv);

/* Runs on every item before its object is built (object_stream's on_filter):
 * keeps the items of the shard, whoever filtered. */
static bool on_filter(void *ud, enum luna_stream_event ev, const char *ns, const char *uid,
                      const char *rv)
{
    struct luna_reflector *r = ud;
    if (luna_shard_matches(r->shard, ns, uid))
        return true;
    r->stats.shard_dropped++;
    if (r->shard_mode == LUNA_SHARD_MODE_SERVER && !r->warned_foreign) {
        r->warned_foreign = true;
        luna_warn("sharded informer got an object outside its shard from a server that "
                  "filters (dropped; another API server without the feature gate?)",
                  "informer", luna_informer_name(r->inf), "uid", uid ? uid : "",
                  "namespace", ns ? ns : "", "shard", r->shard_text);
    }
    /* A watch event outside the shard is applied as nothing: the watch
     * resumes after it. */
    if (ev != LUNA_STREAM_LISTED)
        advance_rv(r, rv);
    return false;
}

/* An item refused by the checks below stops its stream: logged now, and
 * its reason kept for the request's error (see item_refused). */
static void refuse_item(struct luna_reflector *r, const char *what, const char *msg)
{
    set_error(r, what, msg);
    r->item_refused = true;
    snprintf(r->refusal, sizeof r->refusal, "%s", msg);
}

/* The stream's error, when an item the reflector refused stopped it: the
 * refusal's reason instead of the generic "item handler stopped the
 * stream". */
static void name_refusal(struct luna_reflector *r, int rc, luna_error *err)
{
    if (rc < 0 && r->item_refused)
        luna_error_set(err, rc, "%s", r->refusal);
}

/* An object a namespaced informer's server sent from another namespace (or
 * from none): cached, it would be filed under a key no request of this
 * informer can reach, and a controller would act on it in the wrong place.
 * Logs the problem and returns true. */
static bool foreign(struct luna_reflector *r, const char *what, const struct luna_object *obj)
{
    if (!r->namespace_)
        return false;
    size_t nl = strlen(r->namespace_);
    if (obj->ns_len == nl && strncmp(luna_object_key(obj), r->namespace_, nl) == 0)
        return false;
    char msg[400];
    snprintf(msg, sizeof msg, "the server sent %.200s, which is outside the namespace %.100s",
             luna_object_key(obj), r->namespace_);
    refuse_item(r, what, msg);
    return true;
}

static const char *object_label(const char *key, void *ud)
{
    return luna_object_label(ud, key);
}

/* An object the server sent although its labels do not match the
 * informer's label selector: cached, a controller would act on an object it
 * never asked for.  (A DELETED event is not checked: the server sends the
 * last state that matched, and removing a key the cache lacks is nothing.)
 * Logs the problem and returns true. */
static bool off_selector(struct luna_reflector *r, const char *what, enum luna_stream_event ev,
                         const struct luna_object *obj)
{
    if (!r->labels || ev == LUNA_STREAM_DELETED ||
        luna_selector_matches(r->labels, object_label, (void *)obj))
        return false;
    char msg[512];
    snprintf(msg, sizeof msg, "the server sent %.200s, whose labels do not match the selector %.150s",
             luna_object_key(obj), r->label_selector);
    refuse_item(r, what, msg);
    return true;
}

/* Compacts the list in progress in place when it fills: a server that
 * repeats keys (a LIST or a watch list's initial events naming objects
 * again, a MODIFIED storm before the bookmark) costs the distinct keys,
 * not every copy.  Entries no longer current are dropped: with the state
 * indexed, those `initial` does not map to; otherwise all but the last of
 * each key.  Returns 0 or LUNA_ENOMEM. */
static int dedupe_listed(struct luna_reflector *r);
static int compact_listed(struct luna_reflector *r)
{
    if (!r->initial_indexed)
        return dedupe_listed(r);
    size_t n = 0;
    for (size_t i = 0; i < r->nlisted; i++) {
        struct luna_object *o = r->listed[i];
        if (luna_objset_get(&r->initial, luna_object_key(o), o->key_len) == o)
            r->listed[n++] = o;
        else
            luna_object_unref(o);
    }
    r->nlisted = n;
    return 0;
}

/* Appends obj (its reference taken over) to the list in progress.  An
 * unchanged object (same key, same resourceVersion) is the cached one:
 * the cached one is kept instead of a second copy.  *kept is what was
 * stored. */
static int keep_listed(struct luna_reflector *r, struct luna_object *obj,
                       struct luna_object **kept)
{
    struct luna_object *cached = luna_indexer_get(luna_informer_indexer(r->inf),
                                                  luna_object_key(obj));
    if (cached && cached->rv_len && obj->rv_len == cached->rv_len &&
        strcmp(luna_object_resource_version(cached), luna_object_resource_version(obj)) == 0) {
        luna_object_unref(obj);
        obj = luna_object_ref(cached);
    }
    /* The same object again right after itself (a server repeating an
     * item): the later copy replaces the earlier, so a list of a million
     * copies of one item costs one. */
    /* (Not once a watch list's state is indexed: the index borrows prev.) */
    if (r->nlisted > 0 && !r->initial_indexed) {
        struct luna_object *prev = r->listed[r->nlisted - 1];
        if (prev->key_len == obj->key_len && strcmp(luna_object_key(prev), luna_object_key(obj)) == 0) {
            luna_object_unref(prev);
            r->listed[r->nlisted - 1] = obj;
            if (kept)
                *kept = obj;
            return 0;
        }
    }
    /* Full: first drop what repeats made stale (past 4096 entries); grow
     * only if that leaves it more than half full, so compacting stays
     * linear overall and the list holds at most twice the distinct keys. */
    if (r->nlisted == r->listed_cap) {
        bool grow = true;
        if (r->listed_cap >= 4096) {
            if (compact_listed(r) < 0) {
                luna_object_unref(obj);
                return LUNA_ENOMEM;
            }
            grow = r->nlisted > r->listed_cap / 2;
        }
        size_t cap = r->listed_cap ? r->listed_cap * 2 : 1024;
        struct luna_object **v = grow ? realloc(r->listed, cap * sizeof *v) : r->listed;
        if (!v) {
            luna_object_unref(obj);
            return LUNA_ENOMEM;
        }
        r->listed = v;
        if (grow)
            r->listed_cap = cap;
    }
    r->listed[r->nlisted++] = obj;
    if (kept)
        *kept = obj;
    return 0;
}

static int on_list_item(void *ud, enum luna_stream_event ev, struct luna_object *obj)
{
    struct luna_reflector *r = ud;
    if (foreign(r, "list", obj) || off_selector(r, "list", ev, obj)) {
        luna_object_unref(obj);
        return LUNA_EPROTO;
    }
    return keep_listed(r, obj, NULL);
}

static int on_list_chunk(void *ud, const char *data, size_t len, luna_error *err)
{
    struct luna_reflector *r = ud;
    if (r->status != 200)
        return collect_error_body(r, data, len);
    int rc = luna_object_stream_feed(r->list_stream, data, len, err);
    if (rc < 0)
        r->stream_failed = true;
    name_refusal(r, rc, err);
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

/* Keeps the last of the listed objects that share a key (a server that
 * lists an object twice): the FIFO's replace sees each key once.  Returns
 * 0 or LUNA_ENOMEM. */
static int dedupe_listed(struct luna_reflector *r)
{
    if (r->nlisted < 2)
        return 0;
    struct luna_objset seen = LUNA_OBJSET_INIT;
    size_t keep = r->nlisted;
    for (size_t i = r->nlisted; i-- > 0;) {
        struct luna_object *obj = r->listed[i];
        if (luna_objset_get(&seen, luna_object_key(obj), obj->key_len)) {
            luna_object_unref(obj);
            continue;
        }
        struct luna_object *replaced;
        if (luna_objset_put(&seen, obj, &replaced) < 0) {
            /* the unreferenced duplicates are gone: close the gap first */
            memmove(r->listed + i + 1, r->listed + keep, (r->nlisted - keep) * sizeof *r->listed);
            r->nlisted = i + 1 + (r->nlisted - keep);
            luna_objset_clear(&seen);
            return LUNA_ENOMEM;
        }
        r->listed[--keep] = obj;
    }
    luna_objset_clear(&seen);
    memmove(r->listed, r->listed + keep, (r->nlisted - keep) * sizeof *r->listed);
    r->nlisted -= keep;
    return 0;
}

static void finish_list(struct luna_reflector *r)
{
    const char *rv = luna_object_stream_list_rv(r->list_stream);
    if (dedupe_listed(r) < 0 || luna_delta_fifo_replace(luna_informer_fifo(r->inf), r->listed, r->nlisted) < 0) {
        set_error(r, "list", "out of memory applying the list");
        drop_listed(r);
        r->stats.failures++;
        retry_later(r, true, true);
        return;
    }
    char count[24];
    snprintf(count, sizeof count, "%zu", r->nlisted);
    luna_debug("reflector listed", "informer", luna_informer_name(r->inf), "objects", count,
               "resourceVersion", rv, "via", "list");
    snprintf(r->rv, sizeof r->rv, "%s", rv);
    drop_listed(r);
    r->rv_unavailable = false;
    r->list_this_round = false;   /* the next sync tries a watch list again */
    r->watch_list_attempts = 0;
    r->stats.lists++;
    note_shard_mode(r);
    luna_informer_wake(r->inf);
    start_watch(r);
}

/* The status of a response whose head never reached on_headers (a
 * redirect's, which is not followed): without it a 302 read as "HTTP 0"
 * and a watch redirected away as a clean end. */
static void take_status(struct luna_reflector *r, const luna_http_response *resp)
{
    if (r->status == 0 && resp && resp->status)
        r->status = resp->status;
}

static void on_list_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct luna_reflector *r = ud;
    char msg[512];
    take_status(r, resp);
    if (fail) {
        r->stats.failures++;
        if (r->stream_failed)
            r->stats.decode_errors++;
        end_request(r);
        list_failed(r, fail->err.msg, true);
        return;
    }
    if (r->status != 200) {
        describe_status(r, msg, sizeof msg);
        if (too_large_rv(r))
            r->rv_unavailable = true;
        end_request(r);
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
        end_request(r);
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
        end_request(r);
        list_failed(r, msg, true);
        return;
    }
    /* A list without a resourceVersion string cannot start a watch (one
     * from "" starts at the present and misses what changed meanwhile). */
    if (!*luna_object_stream_list_rv(r->list_stream)) {
        r->stats.failures++;
        end_request(r);
        list_failed(r, "the list has no metadata.resourceVersion string", true);
        return;
    }
    /* A page that hands back the continue token it was asked with would
     * page for ever (and keep every page's items). */
    const char *next = luna_object_stream_continue(r->list_stream);
    if (*next && r->continue_token && strcmp(next, r->continue_token) == 0) {
        r->stats.failures++;
        end_request(r);
        list_failed(r, "the server handed back the continue token it was asked with "
                       "(paging would never end)", true);
        return;
    }
    end_request(r);
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
        start_list(r);
        return;
    }
    finish_list(r);
}

static void start_list(struct luna_reflector *r)
{
    r->phase = LISTING;
    r->status = 0;
    r->stream_failed = false;
    r->item_refused = false;
    if (!r->continue_token) {
        drop_listed(r);
        r->list_server_filtered = true; /* until a page says otherwise */
    }
    luna_object_stream_reset(r->list_stream);
    if (start_request(r, REQ_LIST, on_list_chunk, on_list_done) < 0) {
        drop_listed(r);
        retry_later(r, true, true);
    }
}

/* ---- WATCH ----------------------------------------------------------- */

static void advance_rv(struct luna_reflector *r, const char *rv)
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
        return keep_listed(r, obj, NULL);
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
    int rc = keep_listed(r, obj, &kept);
    if (rc == 0)
        rc = luna_objset_put(&r->initial, kept, &replaced);
    return rc;
}

static int on_watch_item(void *ud, enum luna_stream_event ev, struct luna_object *obj)
{
    struct luna_reflector *r = ud;
    const char *what = r->phase == WATCH_LISTING ? "watch list" : "watch";
    if (foreign(r, what, obj) || off_selector(r, what, ev, obj)) {
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
        advance_rv(r, luna_object_resource_version(obj));
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
    if (compact_listed(r) < 0) {
        set_error(r, "watch list", "out of memory applying the initial events");
        return LUNA_ENOMEM;
    }
    luna_objset_clear(&r->initial);
    r->initial_indexed = false;
    if (luna_delta_fifo_replace(luna_informer_fifo(r->inf), r->listed, r->nlisted) < 0) {
        set_error(r, "watch list", "out of memory applying the initial events");
        return LUNA_ENOMEM;
    }
    char count[24];
    snprintf(count, sizeof count, "%zu", r->nlisted);
    luna_debug("reflector listed", "informer", luna_informer_name(r->inf), "objects", count,
               "resourceVersion", rv, "via", "watch list");
    snprintf(r->rv, sizeof r->rv, "%s", rv);
    drop_listed(r);
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

static int on_bookmark(void *ud, const char *rv, bool initial_events_end)
{
    struct luna_reflector *r = ud;
    r->stats.bookmarks++;
    if (r->phase == WATCH_LISTING) {
        /* A bookmark inside the initial events says nothing the state can
         * be resumed from: only the end marker moves the version. */
        return initial_events_end ? finish_watch_list(r, rv) : 0;
    }
    advance_rv(r, rv);
    return 0;
}

static int on_watch_error(void *ud, int code, const char *reason, const char *message)
{
    struct luna_reflector *r = ud;
    char msg[512];
    snprintf(msg, sizeof msg, "watch ERROR event %d %s: %s", code, reason, message);
    set_error(r, r->phase == WATCH_LISTING ? "watch list" : "watch", msg);
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
        return collect_error_body(r, data, len);
    luna_event_latency_chunk();
    int rc = luna_object_stream_feed(r->watch_stream, data, len, err);
    if (rc < 0 && rc != LUNA_ECANCELED)
        r->stream_failed = true;
    name_refusal(r, rc, err);
    return rc;
}

static void watch_list_done(struct luna_reflector *r, const luna_http_failure *fail);

static void on_watch_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct luna_reflector *r = ud;
    take_status(r, resp);
    if (r->phase == WATCH_LISTING) {
        watch_list_done(r, fail);
        return;
    }
    bool relist = r->relist_next;
    r->relist_next = false;
    char msg[512];
    if (relist) {
        r->stats.watch_gone++;
        end_request(r);
        retry_later(r, true, false);
        return;
    }
    if (r->status != 200 && r->status != 0) {
        describe_status(r, msg, sizeof msg);
        bool refused = rv_refused(r);
        end_request(r);
        r->stats.failures++;
        set_error(r, "watch", msg);
        if (r->status == 410) {
            r->stats.watch_gone++;
            r->stats.gone++;
            retry_later(r, true, false);
        } else if (refused) {
            /* The server refuses the version asked for (one it never made,
             * from a lying server or a corrupted event): the dev server
             * answers 400, kube-apiserver 500 "resourceVersion: Invalid
             * value".  Resuming from it would fail for ever: relist
             * consistently. */
            r->rv_unavailable = true;
            retry_later(r, true, true);
        } else {
            r->stats.watch_errors++;
            retry_later(r, false, true);
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
            set_error(r, "watch", msg);
        } else {
            set_error(r, "watch", fail->err.msg);
        }
        bool silent = fail->reason == LUNA_HTTP_IDLE_TIMEOUT && !r->stream_failed && !truncated &&
                      r->stats.watch_events + r->stats.bookmarks == r->watch_seen;
        end_request(r);
        if (silent)
            start_rv_check(r);
        else
            retry_later(r, false, true);
        return;
    }
    luna_error err = { 0 };
    if (luna_object_stream_finish(r->watch_stream, &err) < 0) {
        /* The stream ended inside an event: resume from the last applied. */
        r->stats.failures++;
        r->stats.decode_errors++;
        r->stats.watch_decode++;
        set_error(r, "watch", err.msg);
        end_request(r);
        retry_later(r, false, true);
        return;
    }
    end_request(r);
    r->stats.watch_closed++;
    /* A watch that ended within a second with nothing in it (client-go's
     * "very short watch"): a server that ends every watch at once would
     * otherwise be asked again in a hot loop.  Resume after a backoff. */
    if (ev_now(luna_loop()) - r->watch_started < 1.0 &&
        r->stats.watch_events + r->stats.bookmarks == r->watch_seen) {
        r->stats.failures++;
        set_error(r, "watch", "very short watch: the server ended it within a second with no events");
        retry_later(r, false, true);
        return;
    }
    /* The server closed the watch (its timeout): resume at once, unless
     * it brought nothing at all (see start_rv_check). */
    if (r->stats.watch_events + r->stats.bookmarks == r->watch_seen)
        start_rv_check(r);
    else
        retry_later(r, false, false);
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
    return r->status != 200 ? collect_error_body(r, data, len) : 0;
}

static void on_check_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct luna_reflector *r = ud;
    take_status(r, resp);
    char msg[512];
    if (fail) {
        r->stats.failures++;
        set_error(r, "resourceVersion check", fail->err.msg);
        end_request(r);
        retry_later(r, false, true);
        return;
    }
    if (r->status == 200) {
        /* The server has the version: the collection was just quiet (and
         * the server sends no bookmarks).  Resume at once; the idle timeout
         * and this check bound how often. */
        r->stats.rv_current++;
        end_request(r);
        retry_later(r, false, false);
        return;
    }
    describe_status(r, msg, sizeof msg);
    bool refused = rv_refused(r);
    end_request(r);
    r->stats.failures++;
    if (refused || r->status == 410) {
        char why[700];
        snprintf(why, sizeof why, "the server has not reached resourceVersion %s, the version the "
                 "watch resumes from (%s): relisting consistently", r->rv, msg);
        set_error(r, "watch", why);
        r->stats.rv_stale++;
        r->rv_unavailable = true;
        retry_later(r, true, true);
        return;
    }
    set_error(r, "resourceVersion check", msg);
    retry_later(r, false, true);
}

static void start_rv_check(struct luna_reflector *r)
{
    r->phase = CHECKING;
    r->status = 0;
    r->stats.rv_checks++;
    int rc = start_request(r, REQ_RV_CHECK, on_check_data, on_check_done);
    if (rc < 0)
        retry_later(r, false, true);
}

static void start_watch(struct luna_reflector *r)
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
    int rc = start_request(r, REQ_WATCH, on_watch_chunk, on_watch_done);
    if (rc < 0)
        retry_later(r, false, true);
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
        retry_later(r, true, true);
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
    retry_later(r, true, false);
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
    retry_later(r, true, !at_once);
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
    drop_listed(r);
    if (r->status != 200 && r->status != 0) {
        describe_status(r, msg, sizeof msg);
        bool too_large = too_large_rv(r);
        long status = r->status;
        end_request(r);
        r->stats.failures++;
        set_error(r, "watch list", msg);
        if (status == 410 || too_large) {
            if (status == 410)
                r->stats.gone++;
            r->rv_unavailable = true;
            watch_list_again(r, true, FALLBACK_SERVER);
        } else if (status == 429) {
            retry_later(r, true, true);
        } else {
            fall_back_to_list(r, msg, FALLBACK_SERVER);
        }
        return;
    }
    if (gone || r->error_too_large) {
        end_request(r);
        r->stats.failures++;
        r->rv_unavailable = true;
        watch_list_again(r, true, FALLBACK_SERVER);
        return;
    }
    if (r->error_event) {
        end_request(r);
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
        set_error(r, "watch list", msg);
        end_request(r);
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
        set_error(r, "watch list", msg);
    } else if (fail && fail->reason == LUNA_HTTP_TIMEOUT) {
        snprintf(msg, sizeof msg, "no initial-events-end bookmark within %.0f s (the watch's "
                 "timeoutSeconds %.0f plus a grace): giving up on this stream (%.200s)",
                 watch_deadline(r), r->watch_timeout, fail->err.msg);
        set_error(r, "watch list", msg);
    } else if (fail) {
        set_error(r, "watch list", fail->err.msg);
    } else {
        set_error(r, "watch list", "the stream ended before the initial-events-end bookmark");
    }
    end_request(r);
    watch_list_again(r, false, why);
}

static void start_watch_list(struct luna_reflector *r)
{
    r->phase = WATCH_LISTING;
    r->status = 0;
    r->stream_failed = false;
    r->item_refused = false;
    r->relist_next = false;
    r->error_event = 0;
    r->error_too_large = false;
    drop_listed(r);
    luna_object_stream_reset(r->watch_stream);
    int rc = start_request(r, REQ_WATCH_LIST, on_watch_chunk, on_watch_done);
    if (rc < 0)
        retry_later(r, true, true);
    else if (rc == 0)
        r->stats.watches++;
}

/* ---- lifecycle ------------------------------------------------------- */

static char *dup_opt(const char *s)
{
    return (s && *s) ? strdup(s) : NULL;
}

int luna_reflector_new(struct luna_kube_client *kc, struct luna_informer *inf,
                       const struct luna_reflector_options *o, struct luna_reflector **out,
                       luna_error *err)
{
    *out = NULL;
    struct luna_reflector *r = calloc(1, sizeof *r);
    if (!r)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    r->kc = kc;
    r->inf = inf;
    if (luna_resource_copy(&r->resource, o->resource) < 0) {
        free(r);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    r->namespace_ = dup_opt(o->namespace_);
    r->label_selector = dup_opt(o->label_selector);
    r->field_selector = dup_opt(o->field_selector);
    if (r->label_selector &&
        luna_selector_parse(r->label_selector, LUNA_SELECTOR_LABELS, &r->labels, err) < 0) {
        luna_reflector_free(r);
        return err && err->code ? err->code : LUNA_EINVAL;
    }
    if (o->shard) {
        r->shard = luna_shard_copy(o->shard);
        r->shard_text = luna_shard_text(o->shard);
        if (!r->shard || !r->shard_text) {
            luna_reflector_free(r);
            return luna_error_set(err, LUNA_ENOMEM, "out of memory");
        }
        r->shard_mode = LUNA_SHARD_MODE_PENDING;
    }
    r->metadata_only = o->metadata_only;
    r->page_size = o->page_size ? o->page_size : DEFAULT_PAGE;
    r->page_size_set = o->page_size != 0;
    r->min_watch = o->min_watch_timeout > 0 ? o->min_watch_timeout : DEFAULT_MIN_WATCH;
    r->max_watch = o->max_watch_timeout > r->min_watch ? o->max_watch_timeout : 2 * r->min_watch;
    r->idle_timeout = o->idle_timeout > 0 ? o->idle_timeout : DEFAULT_IDLE;
    r->watch_list = o->watch_list == LUNA_WATCH_LIST_DEFAULT ? LUNA_WATCH_LIST_AUTO : o->watch_list;
    luna_backoff_init_default(&r->backoff);
    if (o->backoff_base > 0) {
        r->backoff.base = o->backoff_base;
        r->backoff.max = o->backoff_max > o->backoff_base ? o->backoff_max : o->backoff_base;
    }
    ev_timer_init(&r->wait, wait_cb, 0., 0.);

    struct luna_object_stream_handler h = {
        .on_item = on_list_item, .on_bookmark = on_bookmark, .on_error = on_watch_error,
        .on_filter = on_filter, .ud = r,
    };
    char api_version[512];
    if (o->resource->group && *o->resource->group)
        snprintf(api_version, sizeof api_version, "%s/%s", o->resource->group,
                 o->resource->version);
    else
        snprintf(api_version, sizeof api_version, "%s", o->resource->version);
    struct luna_object_stream_options so = { .mode = LUNA_STREAM_LIST,
                                             .keep_managed_fields = o->keep_managed_fields,
                                             .metadata_only = o->metadata_only,
                                             .api_version = api_version,
                                             .kind = o->resource->kind };
    r->list_stream = luna_object_stream_new(&so, &h, err);
    h.on_item = on_watch_item;
    so.mode = LUNA_STREAM_WATCH;
    r->watch_stream = r->list_stream ? luna_object_stream_new(&so, &h, err) : NULL;
    if (!r->watch_stream || (o->namespace_ && *o->namespace_ && !r->namespace_)) {
        luna_reflector_free(r);
        return err ? err->code ? err->code : LUNA_ENOMEM : LUNA_ENOMEM;
    }
    *out = r;
    return 0;
}

void luna_reflector_stop(struct luna_reflector *r)
{
    ev_timer_stop(luna_loop(), &r->wait);
    if (r->req) {
        luna_kube_request_cancel(r->req);
        end_request(r);
    }
    drop_listed(r);
    r->phase = IDLE;
}

void luna_reflector_free(struct luna_reflector *r)
{
    if (!r)
        return;
    luna_reflector_stop(r);
    luna_object_stream_free(r->list_stream);
    luna_object_stream_free(r->watch_stream);
    luna_resource_clear(&r->resource);
    free(r->listed);
    free(r->namespace_);
    free(r->label_selector);
    luna_selector_free(r->labels);
    free(r->field_selector);
    luna_shard_free(r->shard);
    free(r->shard_text);
    free(r);
}

void luna_reflector_start(struct luna_reflector *r)
{
    if (r->phase != IDLE)
        return;
    if (r->rv[0])
        start_watch(r);
    else
        start_sync(r);
}

int luna_watch_list_mode_parse(const char *text, enum luna_watch_list_mode *out)
{
    static const struct { const char *name; enum luna_watch_list_mode m; } modes[] = {
        { "auto", LUNA_WATCH_LIST_AUTO }, { "on", LUNA_WATCH_LIST_ON },
        { "off", LUNA_WATCH_LIST_OFF },
    };
    for (size_t i = 0; text && i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(text, modes[i].name) == 0) {
            *out = modes[i].m;
            return 0;
        }
    return LUNA_EINVAL;
}

const char *luna_watch_list_mode_name(enum luna_watch_list_mode m)
{
    static const char *const names[] = { "default", "auto", "on", "off" };
    return (unsigned)m < 4 ? names[m] : "default";
}

const char *luna_reflector_resource_version(const struct luna_reflector *r) { return r->rv; }
struct luna_reflector_stats luna_reflector_stats(const struct luna_reflector *r) { return r->stats; }
const char *luna_reflector_last_error(const struct luna_reflector *r) { return r->last_error; }

enum luna_reflector_shard_mode luna_reflector_shard_mode(const struct luna_reflector *r)
{
    return r->shard_mode;
}

const char *luna_reflector_shard_mode_name(enum luna_reflector_shard_mode m)
{
    static const char *const names[] = { "none", "pending", "server", "client" };
    return names[m];
}

const char *luna_reflector_shard_text(const struct luna_reflector *r) { return r->shard_text; }

int luna_reflector_set_shard(struct luna_reflector *r, const struct luna_shard_selector *shard,
                             luna_error *err)
{
    if (luna_shard_equal(r->shard, shard))
        return 0;
    struct luna_shard_selector *copy = shard ? luna_shard_copy(shard) : NULL;
    char *text = shard ? luna_shard_text(shard) : NULL;
    if (shard && (!copy || !text)) {
        luna_shard_free(copy);
        free(text);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    luna_shard_free(r->shard);
    free(r->shard_text);
    r->shard = copy;
    r->shard_text = text;
    r->shard_mode = shard ? LUNA_SHARD_MODE_PENDING : LUNA_SHARD_MODE_NONE;
    r->warned_foreign = false;
    luna_info("sharded informer: shard changed, relisting", "informer",
              luna_informer_name(r->inf), "shard", text ? text : "(whole collection)");
    if (r->phase != IDLE) {
        /* What is in flight was asked for the old shard: list again.  The
         * list replaces the cache, so objects that left the shard go. */
        luna_reflector_stop(r);
        start_list(r);
    }
    return 0;
}
