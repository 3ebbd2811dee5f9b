/* devserver_convert.c — see devserver_convert.h. */
#include "devserver/devserver_convert.h"

#include <ev.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/loop.h"
#include "devserver/devserver_admission.h"
#include "devserver/devserver_doc.h"
#include "devserver/devserver_hook_client.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_write.h"

/* One ConversionReview to make: objects of one CRD to one version. */
struct review {
    char *crd;               /* the CRD's name (owned) */
    char *to;                /* desiredAPIVersion (owned) */
    json_t *objects;         /* the objects sent (owned array) */
    json_t *keys;            /* their answer keys, in order (owned array of strings) */
};

struct luna_ds_convert_job {
    luna_ds *ds;             /* borrowed */
    struct review *reviews;  /* owned */
    size_t n, cur;
    json_t *answers;         /* where answers go (borrowed while running) */
    luna_ds_hook_call *call; /* the call in flight (owned by the client) or NULL */
    char uid[37];            /* its request.uid */
    char url[1200];          /* its URL, for messages */
    char gvk[600];           /* its first object's "GROUP/VERSION, Kind=KIND", for messages */
    json_t *failure;         /* the Status to answer (owned) or NULL */
    char read_key[720];      /* a GET's stored object (luna_ds_conversion) or "" */
    unsigned long long read_rv;
    void (*done)(void *ud, luna_ds_convert_job *job);
    void *ud;
    ev_timer later;          /* delivers done from the loop */
};

/* ---- which CRDs convert with a webhook ---- */

/* The CRD's spec.conversion when its strategy is Webhook (new reference),
 * else NULL. */
static json_t *webhook_of(luna_ds *ds, const luna_ds_type *t)
{
    if (!t->custom || !t->crd_name)
        return NULL;
    luna_ds_type *ct = luna_ds_types_find(ds->types, "apiextensions.k8s.io", "v1",
                                          "customresourcedefinitions");
    luna_ds_obj *o = ct ? luna_ds_store_get(ct->coll, t->crd_name) : NULL;
    json_t *crd = o ? luna_ds_obj_doc(o) : NULL;
    json_t *conv = json_object_get(json_object_get(crd, "spec"), "conversion");
    const char *strategy = json_string_value(json_object_get(conv, "strategy"));
    json_t *out = strategy && strcmp(strategy, "Webhook") == 0 ? json_incref(conv) : NULL;
    json_decref(crd);
    return out;
}

/* The answer key of doc converted to `to`: the object but for the
 * metadata a replay changes (uid, resourceVersion, timestamps: kube
 * restores the original's), so that a replay finds its answer; the name
 * and namespace stay in it, so two objects equal but for their names
 * never share an answer (a converter may derive fields from the name),
 * but for a name made from generateName, which a replay makes anew. */
static char *answer_key(const char *crd, const char *to, const json_t *doc)
{
    json_t *c = json_copy((json_t *)doc);
    if (!c)
        return NULL;
    json_t *md = json_object_get(doc, "metadata");
    json_t *kept = json_object();
    if (!kept) {
        json_decref(c);
        return NULL;
    }
    json_t *l = json_object_get(md, "labels"), *a = json_object_get(md, "annotations");
    if (l)
        json_object_set(kept, "labels", l);
    if (a)
        json_object_set(kept, "annotations", a);
    json_t *ns = json_object_get(md, "namespace");
    if (json_is_string(ns))
        json_object_set(kept, "namespace", ns);
    json_t *gen = json_object_get(md, "generateName");
    json_t *name = json_object_get(md, "name");
    if (json_is_string(name) && !(json_is_string(gen) && json_string_length(gen) > 0))
        json_object_set(kept, "name", name);
    json_object_set_new(c, "metadata", kept);
    char *body = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(c);
    if (!body)
        return NULL;
    size_t n = strlen(crd) + strlen(to) + strlen(body) + 3;
    char *key = malloc(n);
    if (key)
        snprintf(key, n, "%s\n%s\n%s", crd, to, body);
    free(body);
    return key;
}

/* kube's restoreObjectMeta: the original's metadata, with the converted
 * object's labels and annotations.  A new document, or NULL. */
static json_t *restored(const json_t *converted, const json_t *original)
{
    json_t *out = json_deep_copy(converted);
    json_t *md = json_deep_copy(json_object_get(original, "metadata"));
    if (!out || !md) {
        json_decref(out);
        json_decref(md);
        return NULL;
    }
    json_t *cmd = json_object_get(converted, "metadata");
    static const char *const fields[] = { "labels", "annotations" };
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(cmd, fields[i]);
        if (json_is_object(v))
            json_object_set(md, fields[i], v);
        else
            json_object_del(md, fields[i]);
    }
    json_object_set_new(out, "metadata", md);
    return out;
}

static int record(json_t **wanted, const char *crd, const char *to, const char *key,
                  const json_t *doc)
{
    if (!*wanted && !(*wanted = json_array()))
        return LUNA_ENOMEM;
    size_t i;
    json_t *w;
    json_array_foreach(*wanted, i, w)
        if (strcmp(json_string_value(json_object_get(w, "key")), key) == 0)
            return 0; /* a list may hold the same content twice: one review item */
    /* a copy: the caller goes on converting doc apiVersion-only */
    return json_array_append_new(*wanted, json_pack("{s:s,s:s,s:s,s:o}", "crd", crd, "to", to,
                                                    "key", key, "object", json_deep_copy(doc))) == 0
               ? 0 : LUNA_ENOMEM;
}

/* The lookup both entry points share: 0 with *out set (owned), 1 with
 * the need recorded into *wanted, or LUNA_ENOMEM. */
static int lookup(luna_ds *ds, json_t *answers, json_t **wanted, const json_t *doc,
                  const luna_ds_type *from, const luna_ds_type *to, json_t **out)
{
    *out = NULL;
    json_t *conv = from != to ? webhook_of(ds, to) : NULL;
    if (!conv) {
        json_t *c = json_deep_copy(doc);
        if (!c)
            return LUNA_ENOMEM;
        if (from != to)
            luna_ds_types_convert(c, from, to);
        *out = c;
        return 0;
    }
    json_decref(conv);
    /* an object already in the desired version is not sent (kube's
     * getObjectsToConvert) */
    const char *av = json_string_value(json_object_get(doc, "apiVersion"));
    if (av && strcmp(av, to->api_version) == 0) {
        *out = json_deep_copy(doc);
        return *out ? 0 : LUNA_ENOMEM;
    }
    char *key = answer_key(to->crd_name, to->api_version, doc);
    if (!key)
        return LUNA_ENOMEM;
    json_t *hit = answers ? json_object_get(answers, key) : NULL;
    int rc;
    if (hit) {
        *out = restored(hit, doc);
        rc = *out ? 0 : LUNA_ENOMEM;
    } else {
        rc = record(wanted, to->crd_name, to->api_version, key, doc);
        rc = rc < 0 ? rc : 1;
    }
    free(key);
    return rc;
}

int luna_ds_convert(luna_ds *ds, json_t **doc, const luna_ds_type *from, const luna_ds_type *to)
{
    luna_ds_conversion *c = &ds->conversion;
    if (!c->active || from == to || !to->custom) {
        if (from != to)
            luna_ds_types_convert(*doc, from, to);
        return 0;
    }
    json_t *out;
    int rc = lookup(ds, c->answers, &c->wanted, *doc, from, to, &out);
    if (rc == 0) {
        json_decref(*doc);
        *doc = out;
    } else if (rc == 1) {
        luna_ds_types_convert(*doc, from, to);
    }
    return rc;
}

void luna_ds_convert_before_store(luna_ds *ds, const json_t *doc, const luna_ds_type *s)
{
    luna_ds_conversion *c = &ds->conversion;
    const luna_ds_type *want = c->want;
    if (!c->active || !want || want == s || want->coll != s->coll || !want->custom)
        return;
    json_t *copy = json_deep_copy(doc);
    if (copy && luna_ds_convert(ds, &copy, s, want) < 0 && !c->wanted)
        c->wanted = json_array(); /* out of memory: nothing is stored */
    json_decref(copy);
}

bool luna_ds_conversion_pending(const luna_ds *ds)
{
    return ds->conversion.wanted != NULL;
}

/* ---- jobs ---- */

static void review_clear(struct review *r)
{
    free(r->crd);
    free(r->to);
    json_decref(r->objects);
    json_decref(r->keys);
}

/* A job of the needs in wanted (consumed), one review per CRD and
 * desired version, in the order first needed. */
static luna_ds_convert_job *job_of(luna_ds *ds, json_t *wanted)
{
    luna_ds_convert_job *job = calloc(1, sizeof *job);
    if (!job) {
        json_decref(wanted);
        return NULL;
    }
    job->ds = ds;
    ev_timer_init(&job->later, NULL, 0, 0);
    size_t i;
    json_t *w;
    bool ok = true;
    json_array_foreach(wanted, i, w) {
        const char *crd = json_string_value(json_object_get(w, "crd"));
        const char *to = json_string_value(json_object_get(w, "to"));
        struct review *r = NULL;
        for (size_t k = 0; k < job->n; k++)
            if (strcmp(job->reviews[k].crd, crd) == 0 && strcmp(job->reviews[k].to, to) == 0)
                r = &job->reviews[k];
        if (!r) {
            struct review *grown = realloc(job->reviews, (job->n + 1) * sizeof *grown);
            if (!grown) {
                ok = false;
                break;
            }
            job->reviews = grown;
            r = &job->reviews[job->n++];
            r->crd = strdup(crd);
            r->to = strdup(to);
            r->objects = json_array();
            r->keys = json_array();
            if (!r->crd || !r->to || !r->objects || !r->keys)
                ok = false;
        }
        if (ok && (json_array_append(r->objects, json_object_get(w, "object")) < 0 ||
                   json_array_append(r->keys, json_object_get(w, "key")) < 0))
            ok = false;
    }
    json_decref(wanted);
    if (!ok) {
        luna_ds_convert_job_free(job);
        return NULL;
    }
    return job;
}

void luna_ds_convert_reading(luna_ds *ds, const luna_ds_type *t, const luna_ds_obj *o)
{
    char key[720];
    luna_ds_storage_key(key, sizeof key, t, o->ns, o->name);
    /* kube's storage names its keys without the /registry prefix */
    const char *k = strncmp(key, "/registry/", 10) == 0 ? key + 9 : key;
    snprintf(ds->conversion.read_key, sizeof ds->conversion.read_key, "%s", k);
    ds->conversion.read_rv = (unsigned long long)o->rv;
}

luna_ds_convert_job *luna_ds_conversion_take(luna_ds *ds)
{
    json_t *wanted = ds->conversion.wanted;
    ds->conversion.wanted = NULL;
    char read_key[sizeof ds->conversion.read_key];
    memcpy(read_key, ds->conversion.read_key, sizeof read_key);
    unsigned long long read_rv = ds->conversion.read_rv;
    ds->conversion.read_key[0] = '\0';
    if (!wanted)
        return NULL;
    luna_ds_convert_job *job = job_of(ds, wanted);
    if (job) {
        memcpy(job->read_key, read_key, sizeof job->read_key);
        job->read_rv = read_rv;
    }
    if (!job) {
        /* out of memory: a job with no review fails at once */
        job = calloc(1, sizeof *job);
        if (job) {
            job->ds = ds;
            ev_timer_init(&job->later, NULL, 0, 0);
            job->failure = json_pack("{s:s,s:s,s:{},s:s,s:s,s:i}", "kind", "Status", "apiVersion",
                                     "v1", "metadata", "status", "Failure", "message",
                                     "out of memory", "code", 500);
        }
    }
    return job;
}

int luna_ds_convert_with(luna_ds *ds, json_t *answers, const json_t *doc, const luna_ds_type *from,
                         const luna_ds_type *to, json_t **out, luna_ds_convert_job **job)
{
    *job = NULL;
    json_t *wanted = NULL;
    int rc = lookup(ds, answers, &wanted, doc, from, to, out);
    if (rc == 1) {
        *job = job_of(ds, wanted);
        return *job ? 1 : LUNA_ENOMEM;
    }
    json_decref(wanted);
    return rc;
}

static void fail(luna_ds_convert_job *job, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The job's failure, as kube answers a conversion error: a plain error
 * the apiserver turns into a 500 Status without a reason. */
static void fail(luna_ds_convert_job *job, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_decref(job->failure);
    if (job->read_key[0]) {
        /* read from storage: its decoder's error, which the apiserver
         * answers as an InternalError (apierrors.NewInternalError) */
        char inner[3072];
        snprintf(inner, sizeof inner,
                 "StorageError: corrupt object, Code: 7, Key: %s, ResourceVersion: 0, "
                 "AdditionalErrorMsg: object not decodable revision=%llu: %s",
                 job->read_key, job->read_rv, msg);
        char outer[3200];
        snprintf(outer, sizeof outer, "Internal error occurred: %s", inner);
        job->failure = json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:{s:[{s:s}]},s:i}", "kind", "Status",
                                 "apiVersion", "v1", "metadata", "status", "Failure", "message",
                                 outer, "reason", "InternalError", "details", "causes",
                                 "message", inner, "code", 500);
    } else {
        job->failure = json_pack("{s:s,s:s,s:{},s:s,s:s,s:i}", "kind", "Status", "apiVersion",
                                 "v1", "metadata", "status", "Failure", "message", msg, "code",
                                 500);
    }
    luna_warn("dev server: conversion webhook failed", "uid", job->uid, "error", msg);
}

static void deliver(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    luna_ds_convert_job *job = (luna_ds_convert_job *)((char *)w -
                                                       offsetof(luna_ds_convert_job, later));
    job->done(job->ud, job);
}

static void finish(luna_ds_convert_job *job)
{
    ev_init(&job->later, deliver);
    ev_timer_set(&job->later, 0, 0);
    ev_timer_start(luna_loop(), &job->later);
}

static void step(luna_ds_convert_job *job);

/* kube's validateConvertedObject and the checks around it, for the
 * object at index i: NULL when it holds, else what is wrong (in buf). */
static const char *invalid_object(const json_t *in, const json_t *out, const char *to, char *buf,
                                  size_t n)
{
    const char *av = json_string_value(json_object_get(out, "apiVersion"));
    const char *k_in = json_string_value(json_object_get(in, "kind"));
    const char *k_out = json_string_value(json_object_get(out, "kind"));
    if (!json_is_object(out)) {
        snprintf(buf, n, "Object 'Kind' is missing in '%s'", "converted object");
        return buf;
    }
    if (!av || strcmp(av, to) != 0) {
        snprintf(buf, n, "invalid groupVersion (expected %s, received %s)", to, av ? av : "");
        return buf;
    }
    if (!k_out || !k_in || strcmp(k_in, k_out) != 0) {
        snprintf(buf, n, "invalid kind (expected %s, received %s)", k_in ? k_in : "",
                 k_out ? k_out : "");
        return buf;
    }
    static const char *const same[][2] = { { "name", "name" }, { "namespace", "namespace" },
                                           { "uid", "UID" } };
    json_t *mi = json_object_get(in, "metadata"), *mo = json_object_get(out, "metadata");
    for (int f = 0; f < 3; f++) {
        const char *a = json_string_value(json_object_get(mi, same[f][0]));
        const char *b = json_string_value(json_object_get(mo, same[f][0]));
        if (strcmp(a ? a : "", b ? b : "") != 0) {
            snprintf(buf, n, "must have the same %s: %s != %s", same[f][1], a ? a : "", b ? b : "");
            return buf;
        }
    }
    if (!json_is_object(mo)) {
        snprintf(buf, n, "missing metadata in converted object");
        return buf;
    }
    static const char *const maps[] = { "labels", "annotations" };
    for (int f = 0; f < 2; f++) {
        json_t *m = json_object_get(mo, maps[f]);
        if (!m || json_is_null(m))
            continue;
        if (!json_is_object(m)) {
            snprintf(buf, n, "invalid metadata.%s of type %s in converted object", maps[f],
                     json_is_array(m) ? "[]interface {}" : "string");
            return buf;
        }
        const char *k;
        json_t *v;
        json_object_foreach(m, k, v)
            if (!json_is_string(v)) {
                snprintf(buf, n, "metadata.%s[%s] must be a string, but is %s in converted object",
                         maps[f], k, json_is_integer(v) || json_is_real(v) ? "float64" : "map");
                return buf;
            }
    }
    return NULL;
}

static void on_answer(void *ud, long status, const char *body, size_t len, const char *error)
{
    luna_ds_convert_job *job = ud;
    struct review *r = &job->reviews[job->cur];
    job->call = NULL;
    const char *g = job->gvk;
    if (error) {
        fail(job, "conversion webhook for %s failed: Post \"%s\": %s", g, job->url, error);
        finish(job);
        return;
    }
    if (status < 200 || status > 299) {
        fail(job, "conversion webhook for %s failed: the server responded with the status code "
             "%ld but did not return more information", g, status);
        finish(job);
        return;
    }
    json_error_t je;
    json_t *review = json_loadb(body, len, 0, &je);
    json_t *resp = json_object_get(review, "response");
    const char *av = json_string_value(json_object_get(review, "apiVersion"));
    const char *kind = json_string_value(json_object_get(review, "kind"));
    const char *uid = json_string_value(json_object_get(resp, "uid"));
    json_t *result = json_object_get(resp, "result");
    const char *rs = json_string_value(json_object_get(result, "status"));
    const char *rm = json_string_value(json_object_get(result, "message"));
    json_t *objs = json_object_get(resp, "convertedObjects");
    if (!review) {
        fail(job, "conversion webhook for %s failed: %s", g, je.text);
    } else if (!av || !kind || strcmp(av, "apiextensions.k8s.io/v1") != 0 ||
               strcmp(kind, "ConversionReview") != 0) {
        fail(job, "conversion webhook for %s failed: expected webhook response of "
             "apiextensions.k8s.io/v1, Kind=ConversionReview, got %s, Kind=%s", g, av ? av : "",
             kind ? kind : "");
    } else if (!json_is_object(resp)) {
        fail(job, "conversion webhook for %s failed: no response provided", g);
    } else if (!uid || strcmp(uid, job->uid) != 0) {
        fail(job, "conversion webhook for %s failed: expected response.uid=\"%s\", got \"%s\"", g,
             job->uid, uid ? uid : "");
    } else if (!rs || strcmp(rs, "Success") != 0) {
        if (rm && *rm)
            fail(job, "conversion webhook for %s failed: %s", g, rm);
        else
            fail(job, "conversion webhook for %s failed: response.result.status was '%s', not "
                 "'Success'", g, rs ? rs : "");
    } else if (json_array_size(objs) != json_array_size(r->objects)) {
        fail(job, "conversion webhook for %s returned %zu objects, expected %zu", g,
             json_array_size(objs), json_array_size(r->objects));
    } else {
        size_t i;
        json_t *o;
        bool one = json_array_size(r->objects) == 1;
        json_array_foreach(objs, i, o) {
            json_t *in = json_array_get(r->objects, i);
            char buf[1200];
            const char *why = invalid_object(in, o, r->to, buf, sizeof buf);
            if (why) {
                /* kube words a single object's failure and a list's apart */
                if (one)
                    fail(job, "conversion webhook for %s returned invalid object: %s", g, why);
                else
                    fail(job, "conversion webhook for %s returned invalid converted object at "
                         "index %zu: %s", g, i, why);
                break;
            }
            if (json_object_set(job->answers, json_string_value(json_array_get(r->keys, i)), o) < 0) {
                fail(job, "out of memory");
                break;
            }
        }
    }
    json_decref(review);
    if (job->failure) {
        finish(job);
        return;
    }
    job->cur++;
    step(job);
}

/* Starts the current review's call; when none is left, or one cannot
 * start, the job finishes. */
static void step(luna_ds_convert_job *job)
{
    if (job->failure || job->cur >= job->n) {
        finish(job);
        return;
    }
    struct review *r = &job->reviews[job->cur];
    json_t *first = json_array_get(r->objects, 0);
    const char *fav = json_string_value(json_object_get(first, "apiVersion"));
    const char *fk = json_string_value(json_object_get(first, "kind"));
    const char *slash = fav ? strrchr(fav, '/') : NULL;
    if (slash)
        snprintf(job->gvk, sizeof job->gvk, "%.*s/%s, Kind=%s", (int)(slash - fav), fav, slash + 1,
                 fk ? fk : "");
    else
        snprintf(job->gvk, sizeof job->gvk, "/%s, Kind=%s", fav ? fav : "", fk ? fk : "");
    luna_ds_type *ct = luna_ds_types_find(job->ds->types, "apiextensions.k8s.io", "v1",
                                          "customresourcedefinitions");
    luna_ds_obj *co = ct ? luna_ds_store_get(ct->coll, r->crd) : NULL;
    json_t *crd = co ? luna_ds_obj_doc(co) : NULL;
    json_t *hook = json_object_get(json_object_get(json_object_get(crd, "spec"), "conversion"),
                                   "webhook");
    json_t *cc = json_object_get(hook, "clientConfig");
    char base[1000], connect_to[700] = "", why[1400];
    int target = luna_ds_hook_target(job->ds, cc, base, sizeof base, connect_to,
                                     sizeof connect_to, why, sizeof why);
    if (target != LUNA_DS_HOOK_TARGET_OK) {
        if (target == LUNA_DS_HOOK_TARGET_UNMAPPED)
            fail(job, "conversion webhook for %s failed: %s", job->gvk, why);
        else
            fail(job, "conversion webhook for %s failed: the CRD %s has no conversion webhook",
                 job->gvk, r->crd);
        json_decref(crd);
        finish(job);
        return;
    }
    /* kube's client tells the webhook its deadline in the query */
    snprintf(job->url, sizeof job->url, "%s%stimeout=%ds", base, strchr(base, '?') ? "&" : "?",
             LUNA_DS_CONVERSION_TIMEOUT);
    size_t ca_len = 0;
    char *ca = NULL;
    const char *bundle = json_string_value(json_object_get(cc, "caBundle"));
    if (bundle && *bundle && !(ca = luna_ds_b64decode(bundle, &ca_len))) {
        fail(job, "conversion webhook for %s failed: caBundle is not base64", job->gvk);
        json_decref(crd);
        finish(job);
        return;
    }
    json_decref(crd);
    luna_ds_doc_new_uid(job->uid);
    json_t *review = json_pack("{s:s,s:s,s:{s:s,s:s,s:O}}", "kind", "ConversionReview",
                               "apiVersion", "apiextensions.k8s.io/v1", "request", "uid", job->uid,
                               "desiredAPIVersion", r->to, "objects", r->objects);
    char *body = review ? json_dumps(review, JSON_COMPACT) : NULL;
    json_decref(review);
    if (!job->ds->admission.client && !(job->ds->admission.client = luna_ds_hook_client_new())) {
        free(body);
        body = NULL;
    }
    if (!body) {
        free(ca);
        fail(job, "out of memory");
        finish(job);
        return;
    }
    luna_ds_hook_opts o = {
        .url = job->url, .connect_to = *connect_to ? connect_to : NULL,
        .ca_pem = ca, .ca_len = ca_len, .body = body, .body_len = strlen(body),
        .timeout = LUNA_DS_CONVERSION_TIMEOUT, .done = on_answer, .ud = job,
    };
    char err[256];
    job->call = luna_ds_hook_call_start(job->ds->admission.client, &o, err, sizeof err);
    free(body);
    free(ca);
    if (!job->call) {
        fail(job, "conversion webhook for %s failed: Post \"%s\": %s", job->gvk, job->url, err);
        finish(job);
        return;
    }
    char count[24];
    snprintf(count, sizeof count, "%zu", json_array_size(r->objects));
    luna_debug("dev server: calling conversion webhook", "crd", r->crd, "uid", job->uid,
               "desiredAPIVersion", r->to, "objects", count);
}

void luna_ds_convert_job_run(luna_ds *ds, luna_ds_convert_job *job, json_t *answers,
                             void (*done)(void *ud, luna_ds_convert_job *job), void *ud)
{
    (void)ds;
    job->answers = answers;
    job->done = done;
    job->ud = ud;
    step(job);
}

const json_t *luna_ds_convert_job_failure(const luna_ds_convert_job *job) { return job->failure; }

void luna_ds_convert_job_free(luna_ds_convert_job *job)
{
    if (!job)
        return;
    luna_ds_hook_call_cancel(job->call);
    ev_timer_stop(luna_loop(), &job->later);
    for (size_t i = 0; i < job->n; i++)
        review_clear(&job->reviews[i]);
    free(job->reviews);
    json_decref(job->failure);
    free(job);
}

/* ---- the CRD's conversion stanza ---- */

static json_t *cause(const char *reason, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static json_t *cause(const char *reason, const char *field, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return json_pack("{s:s,s:s,s:s}", "reason", reason, "message", msg, "field", field);
}

/* A []string as kube-apiserver v1.37's field.Invalid shows one: JSON
 * (["v2","v3"]). */
static void go_strings(const json_t *arr, char *out, size_t n)
{
    char *text = json_dumps(arr, JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(out, n, "%s", text ? text : "[]");
    free(text);
}

int luna_ds_conversion_validate_crd(const json_t *crd, luna_ds_status *st)
{
    json_t *conv = json_object_get(json_object_get(crd, "spec"), "conversion");
    if (!json_is_object(conv))
        return 0;
    const char *name = luna_ds_doc_str(json_object_get(crd, "metadata"), "name");
    const char *strategy = json_string_value(json_object_get(conv, "strategy"));
    json_t *hook = json_object_get(conv, "webhook");
    json_t *cc = json_object_get(hook, "clientConfig");
    json_t *crv = json_object_get(hook, "conversionReviewVersions");
    json_t *causes = json_array();
    if (!causes)
        return luna_ds_status_oom(st);
    if (!strategy || (strcmp(strategy, "None") != 0 && strcmp(strategy, "Webhook") != 0)) {
        json_array_append_new(causes, strategy
            ? cause("FieldValueNotSupported", "spec.conversion.strategy",
                    "Unsupported value: \"%s\": supported values: \"None\", \"Webhook\"", strategy)
            : cause("FieldValueRequired", "spec.conversion.strategy", "Required value"));
    } else if (strcmp(strategy, "Webhook") == 0) {
        json_t *url = json_object_get(cc, "url"), *svc = json_object_get(cc, "service");
        if (!json_is_object(cc))
            json_array_append_new(causes, cause("FieldValueRequired",
                "spec.conversion.webhookClientConfig", "Required value: required when strategy "
                "is set to Webhook"));
        else if ((url == NULL) == (svc == NULL))
            json_array_append_new(causes, cause("FieldValueRequired",
                "spec.conversion.webhookClientConfig", "Required value: exactly one of url or "
                "service is required"));
        else if (url && strncmp(json_string_value(url) ? json_string_value(url) : "", "https://", 8) != 0)
            json_array_append_new(causes, cause("FieldValueInvalid",
                "spec.conversion.webhookClientConfig.url", "Invalid value: \"%.*s\": 'https' is "
                "the only allowed URL scheme; desired format: https://host[/path]",
                (int)strcspn(json_string_value(url) ? json_string_value(url) : "", ":"),
                json_string_value(url) ? json_string_value(url) : ""));
        if (json_array_size(crv) == 0) {
            json_array_append_new(causes, cause("FieldValueRequired",
                "spec.conversion.conversionReviewVersions", "Required value"));
        } else if (!luna_ds_doc_has_string(crv, "v1") && !luna_ds_doc_has_string(crv, "v1beta1")) {
            char shown[512];
            go_strings(crv, shown, sizeof shown);
            json_array_append_new(causes, cause("FieldValueInvalid",
                "spec.conversion.conversionReviewVersions", "Invalid value: %s: must include at "
                "least one of v1, v1beta1", shown));
        }
    } else {
        if (json_is_object(cc))
            json_array_append_new(causes, cause("FieldValueForbidden",
                "spec.conversion.webhookClientConfig", "Forbidden: should not be set when "
                "strategy is not set to Webhook"));
        if (json_array_size(crv) > 0)
            json_array_append_new(causes, cause("FieldValueForbidden",
                "spec.conversion.conversionReviewVersions", "Forbidden: should not be set when "
                "strategy is not set to Webhook"));
    }
    if (json_array_size(causes) == 0) {
        json_decref(causes);
        return 0;
    }
    return luna_ds_status_invalid_causes(st, "apiextensions.k8s.io", "CustomResourceDefinition",
                                         name ? name : "", causes);
}

void luna_ds_conversion_free(luna_ds_conversion *c)
{
    json_decref(c->wanted);
    c->wanted = NULL;
}
