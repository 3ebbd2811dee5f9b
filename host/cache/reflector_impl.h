/*
 * reflector_impl.h — what the reflector's three files share, private to
 * them: reflector.c (the state, requests and responses common to every
 * request, the items a list or watch may keep, the lifecycle),
 * reflector_list.c (paged LIST) and reflector_watch.c (WATCH, the
 * resourceVersion check, and the watch list of KEP-3157).  Nothing else
 * includes it; the contract is reflector.h's.
 */
#ifndef LUNA_REFLECTOR_IMPL_H
#define LUNA_REFLECTOR_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/backoff.h"
#include "base/loop.h"
#include "base/selector.h"
#include "cache/object_stream.h"
#include "cache/objset.h"
#include "cache/reflector.h"

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
    /* The last object refused by the stream decoder (past its bounds):
     * "namespace/name: reason", "" if none. */
    char last_bad[384];
    struct luna_reflector_stats stats;
    ev_timer wait;
};

/* ---- reflector.c: state, requests, responses, items ---- */
void luna_reflector_set_error(struct luna_reflector *r, const char *what, const char *msg);
void luna_reflector_drop_listed(struct luna_reflector *r);
void luna_reflector_retry_later(struct luna_reflector *r, bool relist, bool with_backoff);
int luna_reflector_collect_error_body(struct luna_reflector *r, const char *data, size_t len);
void luna_reflector_describe_status(struct luna_reflector *r, char *buf, size_t size);
bool luna_reflector_too_large_rv(const struct luna_reflector *r);
bool luna_reflector_rv_refused(const struct luna_reflector *r);
void luna_reflector_end_request(struct luna_reflector *r);
double luna_reflector_watch_deadline(const struct luna_reflector *r);
int luna_reflector_start_request(struct luna_reflector *r, enum request_kind kind,
                                 luna_kube_data_fn on_chunk, luna_kube_done_fn on_done);
void luna_reflector_name_refusal(struct luna_reflector *r, int rc, luna_error *err);
bool luna_reflector_foreign(struct luna_reflector *r, const char *what, const struct luna_object *obj);
bool luna_reflector_off_selector(struct luna_reflector *r, const char *what, enum luna_stream_event ev,
                                 const struct luna_object *obj);
int luna_reflector_compact_listed(struct luna_reflector *r);
int luna_reflector_keep_listed(struct luna_reflector *r, struct luna_object *obj,
                               struct luna_object **kept);
int luna_reflector_dedupe_listed(struct luna_reflector *r);
void luna_reflector_take_status(struct luna_reflector *r, const luna_http_response *resp);

/* ---- reflector_list.c ---- */
int luna_reflector_on_list_item(void *ud, enum luna_stream_event ev, struct luna_object *obj);
void luna_reflector_start_list(struct luna_reflector *r);

/* ---- reflector_watch.c ---- */
void luna_reflector_advance_rv(struct luna_reflector *r, const char *rv);
int luna_reflector_on_watch_item(void *ud, enum luna_stream_event ev, struct luna_object *obj);
int luna_reflector_on_bookmark(void *ud, const char *rv, bool initial_events_end);
int luna_reflector_on_watch_error(void *ud, int code, const char *reason, const char *message);
int luna_reflector_on_bad(void *ud, enum luna_stream_event ev, const char *namespace_,
                          const char *name, const char *reason);
void luna_reflector_start_watch(struct luna_reflector *r);
void luna_reflector_start_watch_list(struct luna_reflector *r);

#endif
