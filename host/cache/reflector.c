/* reflector.c — see reflector.h (and reflector_impl.h for how the
 * reflector's files divide it). */
#include "cache/reflector.h"
#include "cache/reflector_impl.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"

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
        luna_reflector_start_watch_list(r);
    else
        luna_reflector_start_list(r);
}

void luna_reflector_set_error(struct luna_reflector *r, const char *what, const char *msg)
{
    snprintf(r->last_error, sizeof r->last_error, "%s: %s", what, msg);
    luna_warn("reflector request failed", "informer", luna_informer_name(r->inf), "what", what,
              "error", msg);
}

void luna_reflector_drop_listed(struct luna_reflector *r)
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
        luna_reflector_start_watch(r);
}

/* Schedules the next attempt: a relist or a resumed watch. */
void luna_reflector_retry_later(struct luna_reflector *r, bool relist, bool with_backoff)
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

int luna_reflector_collect_error_body(struct luna_reflector *r, const char *data, size_t len)
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
void luna_reflector_describe_status(struct luna_reflector *r, char *buf, size_t size)
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
bool luna_reflector_too_large_rv(const struct luna_reflector *r)
{
    return r->status == 504 && r->error_body &&
           (strstr(r->error_body, "ResourceVersionTooLarge") ||
            strstr(r->error_body, "Too large resource version"));
}

/* The server refuses the version asked for: too large (it has not reached
 * it), or not a version at all (the dev server answers 400,
 * kube-apiserver 500 "resourceVersion: Invalid value"). */
bool luna_reflector_rv_refused(const struct luna_reflector *r)
{
    return luna_reflector_too_large_rv(r) || r->status == 400 ||
           (r->error_body && strstr(r->error_body, "resourceVersion: Invalid value"));
}

void luna_reflector_end_request(struct luna_reflector *r)
{
    r->req = NULL;
    free(r->error_body);
    r->error_body = NULL;
    r->error_len = 0;
}

/* Seconds after which a watch is given up: its timeoutSeconds plus a grace
 * for the network and a loaded server. */
double luna_reflector_watch_deadline(const struct luna_reflector *r)
{
    return r->watch_timeout + r->watch_timeout / 10 + 5;
}

/* Starts the LIST (watch false) or WATCH request with its stream callbacks.
 * Returns 0 if it runs; 1 if the path was too long (last_error set and a
 * relist scheduled); -1 if it could not start (counted as a failure and
 * last_error set: the caller schedules the retry). */
int luna_reflector_start_request(struct luna_reflector *r, enum request_kind kind,
                         luna_kube_data_fn on_chunk, luna_kube_done_fn on_done)
{
    char path[PATH_MAX_LEN];
    luna_error err = { 0 };
    const char *what = kind == REQ_LIST        ? "list"
                       : kind == REQ_WATCH     ? "watch"
                       : kind == REQ_RV_CHECK ? "resourceVersion check"
                                               : "watch list";
    if (build_path(r, kind, path, sizeof path) < 0) {
        luna_reflector_set_error(r, what, "request path too long");
        luna_reflector_retry_later(r, true, true);
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
                                          : luna_reflector_watch_deadline(r),
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
        luna_reflector_set_error(r, what, err.msg);
        return -1;
    }
    return 0;
}

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
        luna_reflector_advance_rv(r, rv);
    return false;
}

/* An item refused by the checks below stops its stream: logged now, and
 * its reason kept for the request's error (see item_refused). */
static void refuse_item(struct luna_reflector *r, const char *what, const char *msg)
{
    luna_reflector_set_error(r, what, msg);
    r->item_refused = true;
    snprintf(r->refusal, sizeof r->refusal, "%s", msg);
}

/* The stream's error, when an item the reflector refused stopped it: the
 * refusal's reason instead of the generic "item handler stopped the
 * stream". */
void luna_reflector_name_refusal(struct luna_reflector *r, int rc, luna_error *err)
{
    if (rc < 0 && r->item_refused)
        luna_error_set(err, rc, "%s", r->refusal);
}

/* An object a namespaced informer's server sent from another namespace (or
 * from none): cached, it would be filed under a key no request of this
 * informer can reach, and a controller would act on it in the wrong place.
 * Logs the problem and returns true. */
bool luna_reflector_foreign(struct luna_reflector *r, const char *what, const struct luna_object *obj)
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
bool luna_reflector_off_selector(struct luna_reflector *r, const char *what, enum luna_stream_event ev,
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
int luna_reflector_dedupe_listed(struct luna_reflector *r);
int luna_reflector_compact_listed(struct luna_reflector *r)
{
    if (!r->initial_indexed)
        return luna_reflector_dedupe_listed(r);
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
int luna_reflector_keep_listed(struct luna_reflector *r, struct luna_object *obj,
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
            if (luna_reflector_compact_listed(r) < 0) {
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

/* Keeps the last of the listed objects that share a key (a server that
 * lists an object twice): the FIFO's replace sees each key once.  Returns
 * 0 or LUNA_ENOMEM. */
int luna_reflector_dedupe_listed(struct luna_reflector *r)
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

/* The status of a response whose head never reached on_headers (a
 * redirect's, which is not followed): without it a 302 read as "HTTP 0"
 * and a watch redirected away as a clean end. */
void luna_reflector_take_status(struct luna_reflector *r, const luna_http_response *resp)
{
    if (r->status == 0 && resp && resp->status)
        r->status = resp->status;
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
        .on_item = luna_reflector_on_list_item, .on_bookmark = luna_reflector_on_bookmark,
        .on_error = luna_reflector_on_watch_error, .on_filter = on_filter,
        .on_bad = luna_reflector_on_bad, .ud = r,
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
    h.on_item = luna_reflector_on_watch_item;
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
        luna_reflector_end_request(r);
    }
    luna_reflector_drop_listed(r);
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
        luna_reflector_start_watch(r);
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
const char *luna_reflector_last_bad(const struct luna_reflector *r) { return r->last_bad; }

/* An object past the decoder's bounds: one log line and a count; the
 * stream goes on without it.  A LIST that leaves it out drops an older
 * copy from the cache (it is not on the server in a form luna can read);
 * a watch event is skipped, as client-go skips an event it cannot
 * decode. */
int luna_reflector_on_bad(void *ud, enum luna_stream_event ev, const char *namespace_,
                          const char *name, const char *reason)
{
    struct luna_reflector *r = ud;
    static const char *const events[] = { "LIST", "ADDED", "MODIFIED", "DELETED" };
    r->stats.bad_objects++;
    snprintf(r->last_bad, sizeof r->last_bad, "%.100s%s%.200s: %s", namespace_ ? namespace_ : "",
             namespace_ && *namespace_ ? "/" : "", name ? name : "?", reason);
    luna_warn("object not decodable, left out of the cache", "kind", r->resource.kind,
              "namespace", namespace_ ? namespace_ : "", "name", name ? name : "", "event",
              events[ev], "error", reason);
    return 0;
}

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
        luna_reflector_start_list(r);
    }
    return 0;
}
