/* informer_factory.c — see informer_factory.h. */
#include "cache/informer_factory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "base/backoff.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/selector.h"
#include "base/shard.h"

struct luna_shared_informer {
    char *key;
    int refs;
    struct luna_informer_factory *f;
    char *group, *version, *kind, *namespace_, *labels, *fields;
    struct luna_shard_selector *shard;  /* owned copy, or NULL */
    struct luna_informer_spec spec;  /* strings point at the copies above */
    struct luna_informer *inf;
    struct luna_resource resource;   /* valid once resolved */
    bool resolved;
    bool answered;                   /* discovery has answered at least once */
    bool not_served;                 /* its last answer: no such kind */
    char why[sizeof(((luna_error *)0)->msg)]; /* the last resolve failure */
    struct luna_reflector *reflector;
    struct luna_discovery_wait *wait;
    struct luna_backoff backoff;     /* retries after discovery failures */
    struct luna_backoff poll;        /* re-asks while the kind is not served */
    ev_timer retry;
    UT_hash_handle hh;
};

struct luna_informer_factory {
    struct luna_kube_client *kc;
    struct luna_discovery *disc;
    struct luna_shared_informer *informers;
    enum luna_watch_list_mode watch_list;  /* for specs that leave it DEFAULT */
    double idle_timeout;                   /* for specs that leave it 0 */
    double min_watch_timeout;              /* for specs that leave it 0 */
};

void luna_informer_factory_set_min_watch_timeout(struct luna_informer_factory *f, double secs)
{
    f->min_watch_timeout = secs;
}

void luna_informer_factory_set_watch_list(struct luna_informer_factory *f,
                                          enum luna_watch_list_mode mode)
{
    f->watch_list = mode;
}

void luna_informer_factory_set_idle_timeout(struct luna_informer_factory *f, double seconds)
{
    f->idle_timeout = seconds;
}

int luna_informer_factory_new(struct luna_kube_client *kc, struct luna_discovery *disc,
                              struct luna_informer_factory **out, luna_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    (*out)->kc = kc;
    (*out)->disc = disc;
    return 0;
}

static void shared_free(struct luna_shared_informer *si)
{
    ev_timer_stop(luna_loop(), &si->retry);
    luna_discovery_cancel(si->wait);
    luna_reflector_free(si->reflector);
    luna_informer_free(si->inf);
    if (si->resolved)
        luna_resource_clear(&si->resource);
    free(si->key);
    free(si->group);
    free(si->version);
    free(si->kind);
    free(si->namespace_);
    free(si->labels);
    free(si->fields);
    luna_shard_free(si->shard);
    free(si);
}

void luna_informer_factory_free(struct luna_informer_factory *f)
{
    if (!f)
        return;
    struct luna_shared_informer *si, *tmp;
    HASH_ITER(hh, f->informers, si, tmp) {
        HASH_DEL(f->informers, si);
        shared_free(si);
    }
    free(f);
}

/* Canonical selector text (NULL for none) as a new string. */
static int canonical(const char *text, enum luna_selector_kind kind, char **out, luna_error *err)
{
    *out = NULL;
    if (!text || !*text)
        return 0;
    struct luna_selector *sel;
    int rc = luna_selector_parse(text, kind, &sel, err);
    if (rc < 0)
        return rc;
    size_t need = luna_selector_format(sel, NULL, 0);
    if (need) {
        *out = malloc(need + 1);
        if (*out)
            luna_selector_format(sel, *out, need + 1);
    }
    luna_selector_free(sel);
    return (need && !*out) ? luna_error_set(err, LUNA_ENOMEM, "out of memory") : 0;
}

static void start_resolve(struct luna_shared_informer *si);

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct luna_shared_informer *si = (struct luna_shared_informer *)(
        (char *)w - offsetof(struct luna_shared_informer, retry));
    start_resolve(si);
}

/* Schedules the next resolve after a failure: a kind the server does not
 * serve is asked for again on its own, slower-growing schedule (a CRD may
 * be installed at any time; the controllers using it report it), a failed
 * discovery is retried with the reflector's backoff and logged. */
static void resolve_later(struct luna_shared_informer *si, int code, const char *why)
{
    bool was_not_served = si->not_served;
    si->answered = true;
    si->not_served = code == LUNA_ENOMATCH;
    snprintf(si->why, sizeof si->why, "%s", why);
    double now = ev_now(luna_loop());
    double delay = si->not_served ? luna_backoff_next(&si->poll, now)
                                  : luna_backoff_next(&si->backoff, now);
    char secs[32];
    snprintf(secs, sizeof secs, "%.1f", delay);
    if (!si->not_served)
        luna_warn("informer kind not resolved", "informer", si->key, "error", why,
                  LUNA_LOG_NUM("retry_in"), secs);
    else
        luna_log(was_not_served ? LUNA_LOG_DEBUG : LUNA_LOG_WARN, "informer kind not served",
                 "informer", si->key, "error", why, LUNA_LOG_NUM("retry_in"), secs, NULL);
    ev_timer_set(&si->retry, delay, 0.);
    ev_timer_start(luna_loop(), &si->retry);
}

static void on_resolved(void *ud, const struct luna_resource *res, const luna_error *err)
{
    struct luna_shared_informer *si = ud;
    si->wait = NULL;
    if (!res) {
        resolve_later(si, err ? err->code : LUNA_EIO, err ? err->msg : "unknown error");
        return;
    }
    if (si->answered)
        luna_info("informer kind resolved", "informer", si->key, "resource", res->resource);
    si->answered = true;
    si->not_served = false;
    si->why[0] = '\0';
    luna_error e = { 0 };
    if (luna_resource_copy(&si->resource, res) < 0) {
        resolve_later(si, LUNA_ENOMEM, "out of memory");
        return;
    }
    si->resolved = true;
    struct luna_reflector_options ro = {
        .resource = &si->resource,
        .namespace_ = si->namespace_,
        .label_selector = si->labels,
        .field_selector = si->fields,
        .shard = si->shard,
        .page_size = si->spec.page_size,
        .keep_managed_fields = si->spec.keep_managed_fields,
        .metadata_only = si->spec.metadata_only,
        .watch_list = si->spec.watch_list != LUNA_WATCH_LIST_DEFAULT ? si->spec.watch_list
                                                                     : si->f->watch_list,
        .min_watch_timeout = si->spec.min_watch_timeout > 0 ? si->spec.min_watch_timeout
                                                            : si->f->min_watch_timeout,
        .max_watch_timeout = si->spec.max_watch_timeout,
        .idle_timeout = si->spec.idle_timeout > 0 ? si->spec.idle_timeout : si->f->idle_timeout,
        .backoff_base = si->spec.backoff_base,
        .backoff_max = si->spec.backoff_max,
    };
    if (luna_reflector_new(si->f->kc, si->inf, &ro, &si->reflector, &e) < 0) {
        luna_error("informer start failed", "informer", si->key, "error", e.msg);
        luna_resource_clear(&si->resource);
        si->resolved = false;
        resolve_later(si, e.code, e.msg);
        return;
    }
    luna_reflector_start(si->reflector);
}

static void start_resolve(struct luna_shared_informer *si)
{
    luna_error err = { 0 };
    struct luna_discovery_wait *w = luna_discovery_resolve(si->f->disc, si->group, si->version,
                                                           si->kind, on_resolved, si, &err);
    /* A cache hit has already called on_resolved and returned NULL. */
    if (w)
        si->wait = w;
    else if (!si->resolved && !ev_is_active(&si->retry) && err.msg[0])
        resolve_later(si, err.code, err.msg);
}

/* The shared informer's key (malloc'd; NULL on ENOMEM): kind, namespace
 * ("" → "*"), canonical selectors, the shard's canonical text,
 * " metadata-only" for an informer of PartialObjectMetadata and
 * " managed-fields" for one that keeps metadata.managedFields. */
static char *make_key(const char *group, const char *version, const char *kind, const char *ns,
                      const char *labels, const char *fields,
                      const struct luna_shard_selector *shard, bool metadata_only,
                      bool managed_fields)
{
    char *shard_text = shard ? luna_shard_text(shard) : NULL;
    if (shard && !shard_text)
        return NULL;
    /* + "/", "/", " ns=", "*", " labels=", " fields=", " shard=", " metadata-only",
     * " managed-fields" and the NUL: 60 bytes */
    size_t klen = strlen(group) + strlen(version) + strlen(kind) + strlen(ns) +
                  (labels ? strlen(labels) : 0) + (fields ? strlen(fields) : 0) +
                  (shard_text ? strlen(shard_text) : 0) + 60;
    char *key = malloc(klen);
    if (key)
        snprintf(key, klen, "%s%s%s/%s ns=%s labels=%s fields=%s%s%s%s%s", group,
                 *group ? "/" : "", version, kind, *ns ? ns : "*", labels ? labels : "",
                 fields ? fields : "", shard_text ? " shard=" : "", shard_text ? shard_text : "",
                 metadata_only ? " metadata-only" : "", managed_fields ? " managed-fields" : "");
    free(shard_text);
    return key;
}

int luna_informer_factory_set_shard(struct luna_informer_factory *f,
                                    struct luna_shared_informer *si,
                                    const struct luna_shard_selector *shard, luna_error *err)
{
    if (luna_shard_equal(si->shard, shard))
        return 0;
    char *key = make_key(si->group, si->version, si->kind, si->namespace_ ? si->namespace_ : "",
                         si->labels, si->fields, shard, si->spec.metadata_only,
                         si->spec.keep_managed_fields);
    struct luna_shard_selector *copy = shard ? luna_shard_copy(shard) : NULL;
    if (!key || (shard && !copy)) {
        free(key);
        luna_shard_free(copy);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    struct luna_shared_informer *other;
    HASH_FIND_STR(f->informers, key, other);
    if (other) {
        free(key);
        luna_shard_free(copy);
        return luna_error_set(err, LUNA_EINVAL, "an informer for that shard exists: %s",
                              other->key);
    }
    if (si->reflector && luna_reflector_set_shard(si->reflector, copy, err) < 0) {
        free(key);
        luna_shard_free(copy);
        return err ? err->code : LUNA_ENOMEM;
    }
    HASH_DEL(f->informers, si);
    free(si->key);
    si->key = key;
    HASH_ADD_KEYPTR(hh, f->informers, si->key, strlen(si->key), si);
    luna_shard_free(si->shard);
    si->shard = copy;
    si->spec.shard = copy;
    return 0;
}

struct luna_shared_informer *luna_informer_factory_acquire(struct luna_informer_factory *f,
                                                           const struct luna_informer_spec *spec,
                                                           luna_error *err)
{
    char *labels = NULL, *fields = NULL;
    if (!spec->version || !*spec->version || !spec->kind || !*spec->kind) {
        luna_error_set(err, LUNA_EINVAL, "an informer needs a version and a kind");
        return NULL;
    }
    if (canonical(spec->label_selector, LUNA_SELECTOR_LABELS, &labels, err) < 0 ||
        canonical(spec->field_selector, LUNA_SELECTOR_FIELDS, &fields, err) < 0) {
        free(labels);
        return NULL;
    }
    const char *group = spec->group ? spec->group : "";
    const char *ns = spec->namespace_ ? spec->namespace_ : "";
    char *key = make_key(group, spec->version, spec->kind, ns, labels, fields, spec->shard,
                         spec->metadata_only, spec->keep_managed_fields);
    if (!key) {
        free(labels);
        free(fields);
        luna_error_set(err, LUNA_ENOMEM, "out of memory");
        return NULL;
    }
    struct luna_shared_informer *si;
    HASH_FIND_STR(f->informers, key, si);
    if (si) {
        free(key);
        free(labels);
        free(fields);
        si->refs++;
        return si;
    }
    si = calloc(1, sizeof *si);
    if (!si)
        goto oom;
    si->key = key;
    si->labels = labels;
    si->fields = fields;
    key = labels = fields = NULL;
    si->f = f;
    si->refs = 1;
    si->group = strdup(group);
    si->version = strdup(spec->version);
    si->kind = strdup(spec->kind);
    si->namespace_ = *ns ? strdup(ns) : NULL;
    si->spec = *spec;
    si->shard = spec->shard ? luna_shard_copy(spec->shard) : NULL;
    si->spec.shard = si->shard;
    if (!si->group || !si->version || !si->kind || (*ns && !si->namespace_) ||
        (spec->shard && !si->shard))
        goto oom;
    si->inf = luna_informer_new(si->key, err);
    if (!si->inf) {
        shared_free(si);
        return NULL;
    }
    luna_backoff_init_default(&si->backoff);
    /* The reflector's backoff tuning also paces discovery retries. */
    if (spec->backoff_base > 0) {
        si->backoff.base = spec->backoff_base;
        si->backoff.max = spec->backoff_max > spec->backoff_base ? spec->backoff_max
                                                                 : spec->backoff_base;
    }
    /* A kind that is not served is asked for again at most every
     * LUNA_NOT_SERVED_POLL_MAX seconds (controller-runtime polls every 10
     * s), with a little jitter so many informers do not ask at once. */
    double poll_max = si->backoff.max < LUNA_NOT_SERVED_POLL_MAX ? si->backoff.max
                                                                 : LUNA_NOT_SERVED_POLL_MAX;
    luna_backoff_init(&si->poll, si->backoff.base,
                      poll_max > si->backoff.base ? poll_max : si->backoff.base, 2.0, 0.1,
                      si->backoff.reset_after, si->backoff.rng ^ 0x9e3779b97f4a7c15ull);
    ev_timer_init(&si->retry, retry_cb, 0., 0.);
    HASH_ADD_KEYPTR(hh, f->informers, si->key, strlen(si->key), si);
    start_resolve(si);
    return si;
oom:
    free(key);
    free(labels);
    free(fields);
    if (si)
        shared_free(si);
    luna_error_set(err, LUNA_ENOMEM, "out of memory");
    return NULL;
}

void luna_informer_factory_release(struct luna_informer_factory *f,
                                   struct luna_shared_informer *si)
{
    if (!si || --si->refs > 0)
        return;
    HASH_DEL(f->informers, si);
    shared_free(si);
}

size_t luna_informer_factory_count(const struct luna_informer_factory *f)
{
    return HASH_COUNT(f->informers);
}

void luna_informer_factory_foreach(struct luna_informer_factory *f,
                                   void (*fn)(void *ud, struct luna_shared_informer *si),
                                   void *ud)
{
    for (struct luna_shared_informer *si = f->informers; si; si = si->hh.next)
        fn(ud, si);
}

struct luna_informer *luna_shared_informer_informer(struct luna_shared_informer *si)
{
    return si->inf;
}

struct luna_reflector *luna_shared_informer_reflector(struct luna_shared_informer *si)
{
    return si->reflector;
}

const struct luna_resource *luna_shared_informer_resource(const struct luna_shared_informer *si)
{
    return si->resolved ? &si->resource : NULL;
}

enum luna_shared_informer_state luna_shared_informer_state(const struct luna_shared_informer *si,
                                                           const char **why)
{
    if (why)
        *why = si->why[0] ? si->why : NULL;
    if (si->resolved)
        return luna_informer_has_synced(si->inf) ? LUNA_SI_SYNCED : LUNA_SI_LISTING;
    if (!si->answered)
        return LUNA_SI_RESOLVING;
    return si->not_served ? LUNA_SI_NOT_SERVED : LUNA_SI_UNRESOLVED;
}

const char *luna_shared_informer_state_name(enum luna_shared_informer_state state)
{
    switch (state) {
    case LUNA_SI_RESOLVING:  return "resolving";
    case LUNA_SI_UNRESOLVED: return "unresolved";
    case LUNA_SI_NOT_SERVED: return "not_served";
    case LUNA_SI_LISTING:    return "listing";
    case LUNA_SI_SYNCED:     return "synced";
    }
    return "?";
}

const char *luna_shared_informer_key(const struct luna_shared_informer *si) { return si->key; }
int luna_shared_informer_refs(const struct luna_shared_informer *si) { return si->refs; }
