/* devserver_admission.c — see devserver_admission.h. */
#include "devserver/devserver_admission.h"

#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/loop.h"
#include "devserver/devserver_auth.h"
#include "devserver/devserver_doc.h"
#include "devserver/devserver_patch.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_store.h"

#define ADMISSION_GROUP "admissionregistration.k8s.io"
#define DEFAULT_TIMEOUT 10

/* One webhook a record calls. */
struct hook {
    char *config;            /* its configuration's name (owned) */
    json_t *w;               /* the webhook (owned reference) */
    bool mutating;
    char *version;           /* the version it gets the object in (owned; matchPolicy
                                Equivalent) or NULL: the request's */
    bool prev_invoked;       /* IfNeeded and called since the object last changed */
    bool reinvoke;           /* called again in the reinvocation round */
};

/* One admission: a verb's write and the webhooks that match it. */
struct record {
    enum luna_ds_admit_op op;
    char *group, *version, *resource, *sub; /* the request's resource (owned) */
    char *kind_group, *kind_version, *kind; /* the object's kind (owned) */
    char *ns, *name;         /* as the AdmissionRequest names them (owned) */
    char *old_rv;            /* the stored object's resourceVersion, "" on create (owned) */
    json_t *object;          /* the object as the webhooks leave it (owned; NULL: delete) */
    json_t *old;             /* owned; NULL on create */
    json_t *options;         /* the request's *Options (owned) */
    json_t *user;            /* the requester's UserInfo (owned) */
    bool dry_run;
    struct hook *hooks;      /* mutating first, each group in kube's order (owned) */
    size_t nhooks;
    int phase;               /* 0 mutating, 1 reinvocation, 2 validating, 3 done */
    size_t next;             /* the next hook of the phase to look at */
    bool changed;            /* a mutating webhook of round 0 changed the object */
};

struct luna_ds_admit_job {
    luna_ds *ds;             /* borrowed */
    struct record *recs;     /* owned */
    size_t nrecs, cap;
    size_t cur;              /* the record being admitted */
    luna_ds_hook_call *call; /* the call in flight (owned by the client) or NULL */
    struct hook *calling;    /* its hook */
    char uid[37];            /* its AdmissionRequest uid */
    char url[1200];          /* its URL, for messages */
    json_t *denial;          /* the Status to answer (owned) or NULL */
    int denial_code;
    json_t *warnings;        /* array of strings (owned) */
    void (*done)(void *ud, luna_ds_admit_job *job);
    void *ud;
    bool starting;           /* inside luna_ds_admit_job_run: done must wait for the loop */
    bool finished;
    ev_timer later;          /* delivers done from the loop */
};

/* ---- small helpers ---- */

static char *sdup(const char *s) { return strdup(s ? s : ""); }

static bool listed(const json_t *arr, const char *v)
{
    size_t i;
    json_t *x;
    json_array_foreach(arr, i, x) {
        const char *s = json_string_value(x);
        if (s && (strcmp(s, "*") == 0 || strcmp(s, v) == 0))
            return true;
    }
    return false;
}

static const char *op_name(enum luna_ds_admit_op op)
{
    return op == LUNA_DS_ADMIT_CREATE ? "CREATE" : op == LUNA_DS_ADMIT_UPDATE ? "UPDATE" : "DELETE";
}

/* A metav1.LabelSelector (NULL or not an object: everything) against a
 * labels object (NULL: none). */
static bool selector_matches(const json_t *sel, const json_t *labels)
{
    if (!json_is_object(sel))
        return true;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(sel, "matchLabels"), k, v) {
        const char *have = json_string_value(json_object_get(labels, k));
        if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)) != 0)
            return false;
    }
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, e) {
        const char *key = json_string_value(json_object_get(e, "key"));
        const char *op = json_string_value(json_object_get(e, "operator"));
        if (!key || !op)
            return false;
        const char *have = json_string_value(json_object_get(labels, key));
        json_t *vals = json_object_get(e, "values");
        bool in = false;
        size_t j;
        json_t *x;
        json_array_foreach(vals, j, x)
            if (have && json_is_string(x) && strcmp(json_string_value(x), have) == 0)
                in = true;
        if ((strcmp(op, "In") == 0 && !in) || (strcmp(op, "NotIn") == 0 && in) ||
            (strcmp(op, "Exists") == 0 && !have) || (strcmp(op, "DoesNotExist") == 0 && have))
            return false;
        if (strcmp(op, "In") != 0 && strcmp(op, "NotIn") != 0 && strcmp(op, "Exists") != 0 &&
            strcmp(op, "DoesNotExist") != 0)
            return false;
    }
    return true;
}

static const json_t *labels_of(const json_t *doc)
{
    return json_object_get(json_object_get(doc, "metadata"), "labels");
}

/* kube's rules.Matcher: operations, groups, versions, resources (with
 * "res/sub", "*" for the main resources only, "* / *" for all), scope. */
static bool rule_matches(const json_t *rule, enum luna_ds_admit_op op, const char *group,
                         const char *version, const char *resource, const char *sub,
                         bool cluster_scope)
{
    if (!listed(json_object_get(rule, "operations"), op_name(op)) ||
        !listed(json_object_get(rule, "apiGroups"), group) ||
        !listed(json_object_get(rule, "apiVersions"), version))
        return false;
    bool res_ok = false;
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(rule, "resources"), i, x) {
        const char *r = json_string_value(x);
        if (!r)
            continue;
        const char *slash = strchr(r, '/');
        size_t rl = slash ? (size_t)(slash - r) : strlen(r);
        const char *rs = slash ? slash + 1 : "";
        bool rm = (rl == 1 && r[0] == '*') || (strlen(resource) == rl && strncmp(r, resource, rl) == 0);
        bool sm = strcmp(rs, "*") == 0 || strcmp(rs, sub ? sub : "") == 0;
        if (rm && sm)
            res_ok = true;
    }
    if (!res_ok)
        return false;
    const char *scope = json_string_value(json_object_get(rule, "scope"));
    if (!scope || strcmp(scope, "*") == 0)
        return true;
    if (strcmp(scope, "Namespaced") == 0)
        return !cluster_scope;
    if (strcmp(scope, "Cluster") == 0)
        return cluster_scope;
    return false;
}

/* ---- capture: which webhooks a write calls ---- */

static void hook_clear(struct hook *h)
{
    free(h->config);
    json_decref(h->w);
    free(h->version);
}

static void record_clear(struct record *r)
{
    free(r->group);
    free(r->version);
    free(r->resource);
    free(r->sub);
    free(r->kind_group);
    free(r->kind_version);
    free(r->kind);
    free(r->ns);
    free(r->name);
    free(r->old_rv);
    json_decref(r->object);
    json_decref(r->old);
    json_decref(r->options);
    json_decref(r->user);
    for (size_t i = 0; i < r->nhooks; i++)
        hook_clear(&r->hooks[i]);
    free(r->hooks);
}

/* The webhooks of one kind of configuration (mutating or validating) that
 * match the write, appended to r->hooks in kube's order: configurations
 * by name, then each one's webhooks in order.  0 or LUNA_ENOMEM. */
static int collect(luna_ds *ds, bool mutating, const luna_ds_admit_attrs *a, const json_t *object,
                   const json_t *ns_labels, bool use_ns_selector, struct record *r)
{
    luna_ds_type *ct = luna_ds_types_find(ds->types, ADMISSION_GROUP, "v1",
                                          mutating ? "mutatingwebhookconfigurations"
                                                   : "validatingwebhookconfigurations");
    if (!ct)
        return 0;
    luna_ds_obj **items;
    size_t n;
    if (luna_ds_store_snapshot(ct->coll, 0, &items, &n) < 0)
        return LUNA_ENOMEM;
    bool cluster_scope = strcmp(a->t->resource, "namespaces") == 0 && !*a->t->group
                             ? true : !a->t->namespaced;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *cfg = luna_ds_doc_as(ds, ct, items[i]);
        if (!cfg) {
            rc = LUNA_ENOMEM;
            break;
        }
        size_t j;
        json_t *w;
        json_array_foreach(json_object_get(cfg, "webhooks"), j, w) {
            /* rules, with matchPolicy Equivalent trying the other versions
             * the server serves of the same group and resource */
            const char *version = NULL;
            bool exact = false;
            size_t k;
            json_t *rule;
            json_array_foreach(json_object_get(w, "rules"), k, rule)
                if (rule_matches(rule, a->op, a->t->group, a->t->version, a->t->resource, a->sub,
                                 cluster_scope))
                    exact = true;
            const char *policy = json_string_value(json_object_get(w, "matchPolicy"));
            if (!exact && (!policy || strcmp(policy, "Equivalent") == 0)) {
                json_array_foreach(json_object_get(w, "rules"), k, rule) {
                    size_t m;
                    json_t *v;
                    json_array_foreach(json_object_get(rule, "apiVersions"), m, v) {
                        const char *vs = json_string_value(v);
                        if (!version && vs && strcmp(vs, "*") != 0 &&
                            strcmp(vs, a->t->version) != 0 &&
                            luna_ds_types_find(ds->types, a->t->group, vs, a->t->resource) &&
                            rule_matches(rule, a->op, a->t->group, vs, a->t->resource, a->sub,
                                         cluster_scope))
                            version = vs;
                    }
                }
            }
            if (!exact && !version)
                continue;
            if (use_ns_selector && !selector_matches(json_object_get(w, "namespaceSelector"),
                                                     ns_labels))
                continue;
            const json_t *osel = json_object_get(w, "objectSelector");
            if (!selector_matches(osel, labels_of(object)) &&
                !selector_matches(osel, labels_of(a->old)))
                continue;
            struct hook *grown = realloc(r->hooks, (r->nhooks + 1) * sizeof *grown);
            if (!grown) {
                rc = LUNA_ENOMEM;
                break;
            }
            r->hooks = grown;
            struct hook *h = &r->hooks[r->nhooks++];
            memset(h, 0, sizeof *h);
            h->config = sdup(luna_ds_doc_str(luna_ds_doc_meta(cfg), "name"));
            h->w = json_deep_copy(w);
            h->mutating = mutating;
            h->version = version ? strdup(version) : NULL;
            if (!h->config || !h->w || (version && !h->version))
                rc = LUNA_ENOMEM;
        }
        json_decref(cfg);
    }
    free(items);
    return rc;
}

/* kube never sends its own admission configuration through webhooks
 * (IsExemptAdmissionConfigurationResource), so no webhook can lock
 * itself in. */
static bool exempt(const luna_ds_type *t)
{
    return strcmp(t->group, ADMISSION_GROUP) == 0 &&
           (strcmp(t->resource, "validatingwebhookconfigurations") == 0 ||
            strcmp(t->resource, "mutatingwebhookconfigurations") == 0 ||
            strncmp(t->resource, "validatingadmissionpolic", 24) == 0 ||
            strncmp(t->resource, "mutatingadmissionpolic", 22) == 0);
}

static json_t *request_options(luna_ds *ds, const luna_ds_request *req)
{
    const char *m = req->method;
    const char *kind = strcmp(m, "POST") == 0    ? "CreateOptions"
                       : strcmp(m, "PUT") == 0   ? "UpdateOptions"
                       : strcmp(m, "PATCH") == 0 ? "PatchOptions"
                                                 : "DeleteOptions";
    json_t *o = json_pack("{s:s,s:s}", "kind", kind, "apiVersion", "meta.k8s.io/v1");
    if (!o)
        return NULL;
    if (ds->dry_run)
        json_object_set_new(o, "dryRun", json_pack("[s]", "All"));
    const char *fm = luna_ds_request_arg(req, "fieldManager");
    if (fm && *fm && strcmp(kind, "DeleteOptions") != 0)
        json_object_set_new(o, "fieldManager", json_string(fm));
    if (strcmp(kind, "PatchOptions") == 0 && luna_ds_request_flag(req, "force"))
        json_object_set_new(o, "force", json_true());
    return o;
}

static bool same_record(const struct record *r, const luna_ds_admit_attrs *a, const char *ns,
                        const char *old_rv)
{
    return r->op == a->op && strcmp(r->group, a->t->group) == 0 &&
           strcmp(r->resource, a->t->resource) == 0 && strcmp(r->sub, a->sub ? a->sub : "") == 0 &&
           strcmp(r->ns, ns) == 0 && strcmp(r->name, a->name ? a->name : "") == 0 &&
           strcmp(r->old_rv, old_rv) == 0;
}

static luna_ds_admit_job *job_new(luna_ds *ds)
{
    luna_ds_admit_job *job = calloc(1, sizeof *job);
    if (!job || !(job->warnings = json_array())) {
        free(job);
        return NULL;
    }
    job->ds = ds;
    ev_timer_init(&job->later, NULL, 0, 0);
    return job;
}

int luna_ds_admit(luna_ds *ds, const luna_ds_admit_attrs *a, json_t **doc, luna_ds_status *st)
{
    luna_ds_admission *ad = &ds->admission;
    if (!ad->req || exempt(a->t))
        return 0;
    const json_t *object = doc ? *doc : NULL;
    /* kube names a Namespace's own namespace after it */
    bool is_ns = strcmp(a->t->resource, "namespaces") == 0 && !*a->t->group;
    const char *ns = is_ns ? (a->name ? a->name : "") : a->ns ? a->ns : "";
    const char *old_rv = a->old ? luna_ds_doc_str(json_object_get(a->old, "metadata"),
                                                  "resourceVersion") : "";
    /* the replay of an answered admission: its object, if nothing moved */
    if (ad->verdict) {
        for (size_t i = 0; i < ad->verdict->nrecs; i++) {
            struct record *r = &ad->verdict->recs[i];
            if (!same_record(r, a, ns, old_rv ? old_rv : ""))
                continue;
            if (doc && r->object) {
                json_t *copy = json_deep_copy(r->object);
                if (!copy)
                    return luna_ds_status_oom(st);
                json_decref(*doc);
                *doc = copy;
            }
            return 0;
        }
    }
    /* namespaceSelector: the namespace's labels; a Namespace's own; none
     * for other cluster-scoped objects (kube skips the selector there) */
    json_t *ns_doc = NULL;
    const json_t *ns_labels = NULL;
    bool use_ns_selector = true;
    if (is_ns) {
        ns_labels = labels_of(object ? object : a->old);
    } else if (a->t->namespaced) {
        luna_ds_type *nt = luna_ds_types_find(ds->types, "", "v1", "namespaces");
        char key[600];
        if (nt) {
            luna_ds_doc_key(key, sizeof key, nt, "", ns);
            luna_ds_obj *o = luna_ds_store_get(nt->coll, key);
            ns_doc = o ? luna_ds_doc_as(ds, nt, o) : NULL;
        }
        ns_labels = labels_of(ns_doc);
    } else {
        use_ns_selector = false;
    }
    struct record r = { 0 };
    int rc = collect(ds, true, a, object, ns_labels, use_ns_selector, &r);
    if (rc == 0)
        rc = collect(ds, false, a, object, ns_labels, use_ns_selector, &r);
    json_decref(ns_doc);
    if (rc < 0 || r.nhooks == 0) {
        record_clear(&r);
        return rc < 0 ? luna_ds_status_oom(st) : 0;
    }
    /* capture it: the transport calls the webhooks, then replays */
    if (!ad->capture && !(ad->capture = job_new(ds))) {
        record_clear(&r);
        return luna_ds_status_oom(st);
    }
    luna_ds_admit_job *job = ad->capture;
    const char *kav = a->kind_api_version ? a->kind_api_version : a->t->api_version;
    const char *slash = strchr(kav, '/');
    r.op = a->op;
    r.group = sdup(a->t->group);
    r.version = sdup(a->t->version);
    r.resource = sdup(a->t->resource);
    r.sub = sdup(a->sub);
    r.kind_group = slash ? strndup(kav, (size_t)(slash - kav)) : sdup("");
    r.kind_version = sdup(slash ? slash + 1 : kav);
    r.kind = sdup(a->kind ? a->kind : a->t->kind);
    r.ns = sdup(ns);
    r.name = sdup(a->name);
    r.old_rv = sdup(old_rv);
    r.object = object ? json_deep_copy(object) : NULL;
    r.old = a->old ? json_deep_copy(a->old) : NULL;
    r.options = request_options(ds, ad->req);
    r.user = ad->req->user ? json_incref(ad->req->user)
                           : luna_ds_auth_user_info(ds, ad->req->authorization);
    r.dry_run = ds->dry_run;
    bool oom = !r.group || !r.version || !r.resource || !r.sub || !r.kind_group ||
               !r.kind_version || !r.kind || !r.ns || !r.name || !r.old_rv ||
               (object && !r.object) || (a->old && !r.old) || !r.options || !r.user;
    if (!oom && job->nrecs == job->cap) {
        size_t cap = job->cap ? job->cap * 2 : 2;
        struct record *grown = realloc(job->recs, cap * sizeof *grown);
        if (grown) {
            job->recs = grown;
            job->cap = cap;
        } else {
            oom = true;
        }
    }
    if (oom) {
        record_clear(&r);
        return luna_ds_status_oom(st);
    }
    job->recs[job->nrecs++] = r;
    return luna_ds_status_set(st, 500, "InternalError", "admission webhooks pending");
}

luna_ds_admit_job *luna_ds_admission_take(luna_ds *ds)
{
    luna_ds_admit_job *job = ds->admission.capture;
    ds->admission.capture = NULL;
    return job;
}

void luna_ds_admission_replay(luna_ds *ds, luna_ds_admit_job *job)
{
    ds->admission.verdict = job;
}

/* ---- running a job ---- */

static void step(luna_ds_admit_job *job);

static void finish(luna_ds_admit_job *job);

static void on_later(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    luna_ds_admit_job *job = (luna_ds_admit_job *)((char *)w - offsetof(luna_ds_admit_job, later));
    job->done(job->ud, job);
}

static void finish(luna_ds_admit_job *job)
{
    job->finished = true;
    if (job->starting) {
        ev_timer_init(&job->later, on_later, 0, 0);
        ev_timer_start(luna_loop(), &job->later);
        return;
    }
    job->done(job->ud, job);
}

/* apierrors.NewInternalError(err): what a webhook failing closed answers. */
static void deny_internal(luna_ds_admit_job *job, const char *msg)
{
    char full[2048];
    snprintf(full, sizeof full, "Internal error occurred: %s", msg);
    json_decref(job->denial);
    job->denial = json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:{s:[{s:s}]},s:i}", "kind", "Status",
                            "apiVersion", "v1", "metadata", "status", "Failure", "message", full,
                            "reason", "InternalError", "details", "causes", "message", msg,
                            "code", 500);
    job->denial_code = 500;
}

/* A webhook that could not be called, or answered nonsense: failing open
 * (failurePolicy Ignore) goes on to the next one, failing closed (the
 * default, Fail) ends the request 500. */
static void call_failed(luna_ds_admit_job *job, struct hook *h, const char *why)
{
    const char *name = json_string_value(json_object_get(h->w, "name"));
    char msg[1800];
    snprintf(msg, sizeof msg, "failed calling webhook \"%s\": %s", name ? name : "", why);
    const char *fp = json_string_value(json_object_get(h->w, "failurePolicy"));
    if (fp && strcmp(fp, "Ignore") == 0) {
        luna_warn("dev server: webhook failed, failing open", "webhook", name ? name : "",
                  "error", why);
        return;
    }
    luna_warn("dev server: webhook failed, failing closed", "webhook", name ? name : "",
              "error", why);
    deny_internal(job, msg);
}

/* webhookerrors.ToStatusErr: the webhook's own Status, its message
 * prefixed with who denied, its code at least 400. */
static void deny_rejected(luna_ds_admit_job *job, struct hook *h, const json_t *result)
{
    const char *name = json_string_value(json_object_get(h->w, "name"));
    json_t *st = json_is_object(result) ? json_deep_copy(result) : json_object();
    if (!st) {
        deny_internal(job, "out of memory");
        return;
    }
    json_int_t code = json_integer_value(json_object_get(st, "code"));
    if (code < 400)
        code = 400;
    const char *status = json_string_value(json_object_get(st, "status"));
    if (!status || !*status || strcmp(status, "Success") == 0)
        json_object_set_new(st, "status", json_string("Failure"));
    const char *message = json_string_value(json_object_get(st, "message"));
    const char *reason = json_string_value(json_object_get(st, "reason"));
    char msg[2048];
    if (message && *message)
        snprintf(msg, sizeof msg, "admission webhook \"%s\" denied the request: %s", name, message);
    else if (reason && *reason)
        snprintf(msg, sizeof msg, "admission webhook \"%s\" denied the request: %s", name, reason);
    else
        snprintf(msg, sizeof msg, "admission webhook \"%s\" denied the request without explanation",
                 name);
    json_object_set_new(st, "message", json_string(msg));
    json_object_set_new(st, "code", json_integer(code));
    json_object_set_new(st, "kind", json_string("Status"));
    json_object_set_new(st, "apiVersion", json_string("v1"));
    if (!json_is_object(json_object_get(st, "metadata")))
        json_object_set_new(st, "metadata", json_object());
    json_decref(job->denial);
    job->denial = st;
    job->denial_code = (int)code;
}

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

/* Standard base64 (padding optional); a malloc'd buffer with a NUL after
 * its *len bytes, or NULL when s is not base64 or memory is out. */
char *luna_ds_b64decode(const char *s, size_t *len)
{
    size_t n = strlen(s);
    char *out = malloc(n / 4 * 3 + 4);
    if (!out)
        return NULL;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=' || s[i] == '\n' || s[i] == '\r')
            continue;
        int v = b64val((unsigned char)s[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
    *len = o;
    return out;
}

/* The object as hook h gets it: in its version under matchPolicy
 * Equivalent (the versions of one resource differ only in apiVersion
 * here: the dev server converts custom resources with strategy None). */
static json_t *versioned(const struct record *r, const struct hook *h, const json_t *obj)
{
    if (!obj)
        return json_null();
    json_t *c = json_deep_copy(obj);
    if (c && h->version) {
        char av[300];
        snprintf(av, sizeof av, "%s%s%s", r->group, *r->group ? "/" : "", h->version);
        json_object_set_new(c, "apiVersion", json_string(av));
    }
    return c;
}

int luna_ds_hook_target(luna_ds *ds, const json_t *cc, char *base, size_t base_size,
                        char *connect_to, size_t connect_size, char *why, size_t why_size)
{
    connect_to[0] = '\0';
    const char *url = json_string_value(json_object_get(cc, "url"));
    json_t *svc = json_object_get(cc, "service");
    if (url) {
        snprintf(base, base_size, "%s", url);
        return LUNA_DS_HOOK_TARGET_OK;
    }
    if (!json_is_object(svc))
        return LUNA_DS_HOOK_TARGET_NONE;
    const char *sn = json_string_value(json_object_get(svc, "name"));
    const char *sns = json_string_value(json_object_get(svc, "namespace"));
    const char *path = json_string_value(json_object_get(svc, "path"));
    json_int_t port = json_integer_value(json_object_get(svc, "port"));
    if (port <= 0)
        port = 443;
    char key[600];
    snprintf(key, sizeof key, "%s/%s", sns ? sns : "", sn ? sn : "");
    const char *to = json_string_value(json_object_get(ds->admission.services, key));
    snprintf(base, base_size, "https://%s.%s.svc:%lld%s", sn ? sn : "", sns ? sns : "",
             (long long)port, path ? path : "/");
    if (!to) {
        snprintf(why, why_size, "service %s: the dev server has no cluster network (map it "
                 "with --webhook-service %s=HOST:PORT)", key, key);
        return LUNA_DS_HOOK_TARGET_UNMAPPED;
    }
    snprintf(connect_to, connect_size, "%s.%s.svc:%lld:%s", sn ? sn : "", sns ? sns : "",
             (long long)port, to);
    return LUNA_DS_HOOK_TARGET_OK;
}

static void on_answer(void *ud, long status, const char *body, size_t len, const char *error);

/* Calls hook h for record r.  true when a call is in flight; false when
 * the job has a denial (or the hook was refused before any call). */
static bool call(luna_ds_admit_job *job, struct record *r, struct hook *h)
{
    const char *name = json_string_value(json_object_get(h->w, "name"));
    if (r->dry_run) {
        const char *se = json_string_value(json_object_get(h->w, "sideEffects"));
        if (!se || (strcmp(se, "None") != 0 && strcmp(se, "NoneOnDryRun") != 0)) {
            char msg[600];
            snprintf(msg, sizeof msg, "admission webhook \"%s\" does not support dry run", name);
            json_decref(job->denial);
            job->denial = json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status",
                                    "apiVersion", "v1", "metadata", "status", "Failure",
                                    "message", msg, "reason", "BadRequest", "code", 400);
            job->denial_code = 400;
            return false;
        }
    }
    json_t *cc = json_object_get(h->w, "clientConfig");
    json_int_t timeout = json_integer_value(json_object_get(h->w, "timeoutSeconds"));
    if (timeout <= 0)
        timeout = DEFAULT_TIMEOUT;
    char base[1000], connect_to[700] = "", why[1400];
    switch (luna_ds_hook_target(job->ds, cc, base, sizeof base, connect_to, sizeof connect_to,
                                why, sizeof why)) {
    case LUNA_DS_HOOK_TARGET_OK:
        break;
    case LUNA_DS_HOOK_TARGET_UNMAPPED: {
        char msg[1500];
        snprintf(msg, sizeof msg, "failed to call webhook: %s", why);
        call_failed(job, h, msg);
        return false;
    }
    default:
        call_failed(job, h, "could not get REST client: no clientConfig.url or clientConfig.service");
        return false;
    }
    /* kube's client tells the webhook its deadline in the query */
    snprintf(job->url, sizeof job->url, "%s%stimeout=%llds", base, strchr(base, '?') ? "&" : "?",
             (long long)timeout);
    luna_ds_doc_new_uid(job->uid);
    char av[300];
    snprintf(av, sizeof av, "%s%s%s", r->group, *r->group ? "/" : "", h->version ? h->version : r->version);
    const char *ver = h->version ? h->version : r->version;
    const char *kver = h->version ? h->version : r->kind_version;
    json_t *req = json_pack("{s:s,s:{s:s,s:s,s:s},s:{s:s,s:s,s:s},s:{s:s,s:s,s:s},s:{s:s,s:s,s:s},"
                            "s:s,s:O,s:o,s:o,s:b,s:O}",
                            "uid", job->uid,
                            "kind", "group", r->kind_group, "version", kver, "kind", r->kind,
                            "resource", "group", r->group, "version", ver, "resource", r->resource,
                            "requestKind", "group", r->kind_group, "version", r->kind_version,
                            "kind", r->kind,
                            "requestResource", "group", r->group, "version", r->version,
                            "resource", r->resource,
                            "operation", op_name(r->op), "userInfo", r->user,
                            "object", versioned(r, h, r->object),
                            "oldObject", versioned(r, h, r->old),
                            "dryRun", r->dry_run, "options", r->options);
    if (req) {
        if (*r->sub) {
            json_object_set_new(req, "subResource", json_string(r->sub));
            json_object_set_new(req, "requestSubResource", json_string(r->sub));
        }
        if (*r->name)
            json_object_set_new(req, "name", json_string(r->name));
        if (*r->ns)
            json_object_set_new(req, "namespace", json_string(r->ns));
    }
    json_t *review = req ? json_pack("{s:s,s:s,s:o}", "apiVersion", "admission.k8s.io/v1", "kind",
                                     "AdmissionReview", "request", req) : NULL;
    char *body = review ? json_dumps(review, JSON_COMPACT) : NULL;
    json_decref(review);
    if (!body) {
        deny_internal(job, "out of memory");
        return false;
    }
    size_t ca_len = 0;
    char *ca = NULL;
    const char *bundle = json_string_value(json_object_get(cc, "caBundle"));
    if (bundle && *bundle && !(ca = luna_ds_b64decode(bundle, &ca_len))) {
        free(body);
        call_failed(job, h, "could not get REST client: caBundle is not base64");
        return false;
    }
    if (!job->ds->admission.client && !(job->ds->admission.client = luna_ds_hook_client_new())) {
        free(body);
        free(ca);
        deny_internal(job, "out of memory");
        return false;
    }
    luna_ds_hook_opts o = {
        .url = job->url, .connect_to = *connect_to ? connect_to : NULL,
        .ca_pem = ca, .ca_len = ca_len, .body = body, .body_len = strlen(body),
        .timeout = (double)timeout, .done = on_answer, .ud = job,
    };
    char err[256];
    job->calling = h;
    job->call = luna_ds_hook_call_start(job->ds->admission.client, &o, err, sizeof err);
    free(body);
    free(ca);
    if (!job->call) {
        char msg[1500];
        snprintf(msg, sizeof msg, "failed to call webhook: Post \"%s\": %s", job->url, err);
        call_failed(job, h, msg);
        return false;
    }
    luna_debug("dev server: calling webhook", "webhook", name ? name : "", "uid", job->uid,
               "url", job->url);
    return true;
}

/* kube's VerifyAdmissionResponse and the mutating dispatcher's handling of
 * an answer: 0 with the record updated, or the job's denial set (or a
 * failure ignored: 0 too). */
static void answered(luna_ds_admit_job *job, struct record *r, struct hook *h, const char *body,
                     size_t len)
{
    json_error_t je;
    json_t *review = json_loadb(body, len, 0, &je);
    const char *why = NULL;
    char buf[1200];
    json_t *resp = json_object_get(review, "response");
    const char *uid = json_string_value(json_object_get(resp, "uid"));
    const char *av = json_string_value(json_object_get(review, "apiVersion"));
    const char *kind = json_string_value(json_object_get(review, "kind"));
    const char *patch = json_string_value(json_object_get(resp, "patch"));
    const char *pt = json_string_value(json_object_get(resp, "patchType"));
    if (!review) {
        snprintf(buf, sizeof buf, "received invalid webhook response: %s", je.text);
        why = buf;
    } else if (!json_is_object(resp)) {
        why = "received invalid webhook response: webhook response was absent";
    } else if (!uid || strcmp(uid, job->uid) != 0) {
        snprintf(buf, sizeof buf, "received invalid webhook response: expected response.uid=\"%s\", "
                 "got \"%s\"", job->uid, uid ? uid : "");
        why = buf;
    } else if (!av || !kind || strcmp(av, "admission.k8s.io/v1") != 0 ||
               strcmp(kind, "AdmissionReview") != 0) {
        snprintf(buf, sizeof buf, "received invalid webhook response: expected webhook response of "
                 "admission.k8s.io/v1, Kind=AdmissionReview, got %s, Kind=%s", av ? av : "",
                 kind ? kind : "");
        why = buf;
    } else if (h->mutating && patch && *patch && !pt) {
        why = "received invalid webhook response: webhook returned response.patch but not "
              "response.patchType";
    } else if (h->mutating && pt && (!patch || !*patch)) {
        why = "received invalid webhook response: webhook returned response.patchType but not "
              "response.patch";
    } else if (h->mutating && pt && strcmp(pt, "JSONPatch") != 0) {
        snprintf(buf, sizeof buf, "received invalid webhook response: webhook returned invalid "
                 "response.patchType of \"%s\"", pt);
        why = buf;
    } else if (!h->mutating && patch && *patch) {
        why = "received invalid webhook response: validating webhook may not return response.patch";
    } else if (!h->mutating && pt) {
        why = "received invalid webhook response: validating webhook may not return "
              "response.patchType";
    }
    if (why) {
        call_failed(job, h, why);
        json_decref(review);
        return;
    }
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(resp, "warnings"), i, w)
        if (json_is_string(w))
            json_array_append(job->warnings, w);
    if (!json_is_true(json_object_get(resp, "allowed"))) {
        deny_rejected(job, h, json_object_get(resp, "status"));
        json_decref(review);
        return;
    }
    if (!h->mutating || !patch || !*patch) {
        json_decref(review);
        return;
    }
    size_t plen = 0;
    char *raw = luna_ds_b64decode(patch, &plen);
    json_t *ops = raw ? json_loadb(raw, plen, 0, &je) : NULL;
    free(raw);
    json_decref(review);
    if (!json_is_array(ops)) {
        json_decref(ops);
        call_failed(job, h, "received undecodable patch in webhook response: not a JSON patch");
        return;
    }
    if (json_array_size(ops) == 0) {
        json_decref(ops);
        return;
    }
    const char *name = json_string_value(json_object_get(h->w, "name"));
    if (!r->object) {
        json_decref(ops);
        snprintf(buf, sizeof buf, "admission webhook \"%s\" attempted to modify the object, which "
                 "is not supported for this operation", name);
        deny_internal(job, buf);
        return;
    }
    json_t *obj = versioned(r, h, r->object);
    luna_ds_status st = { 0 };
    int rc = obj ? luna_ds_patch_json(&obj, ops, &st) : luna_ds_status_oom(&st);
    json_decref(ops);
    if (rc < 0 || !json_is_object(obj)) {
        json_decref(obj);
        deny_internal(job, st.message[0] ? st.message : "the patched object is not an object");
        luna_ds_status_clear(&st);
        return;
    }
    if (h->version) {
        const char *orig = json_string_value(json_object_get(r->object, "apiVersion"));
        if (orig)
            json_object_set_new(obj, "apiVersion", json_string(orig));
    }
    if (!json_equal(obj, r->object)) {
        /* kube: every IfNeeded webhook called before is called again */
        for (size_t k = 0; k < r->nhooks; k++)
            if (r->hooks[k].prev_invoked) {
                r->hooks[k].reinvoke = true;
                r->hooks[k].prev_invoked = false;
            }
        if (r->phase == 0)
            r->changed = true;
    }
    json_decref(r->object);
    r->object = obj;
}

static void on_answer(void *ud, long status, const char *body, size_t len, const char *error)
{
    luna_ds_admit_job *job = ud;
    struct hook *h = job->calling;
    struct record *r = &job->recs[job->cur];
    job->call = NULL;
    job->calling = NULL;
    if (error) {
        char why[1800];
        snprintf(why, sizeof why, "failed to call webhook: Post \"%s\": %s", job->url, error);
        call_failed(job, h, why);
    } else if (status < 200 || status > 299) {
        char why[1800];
        snprintf(why, sizeof why, "failed to call webhook: the server responded with the status "
                 "code %ld but did not return more information", status);
        call_failed(job, h, why);
    } else {
        answered(job, r, h, body, len);
    }
    /* after its own change: a webhook is not reinvoked for what it did */
    const char *rp = json_string_value(json_object_get(h->w, "reinvocationPolicy"));
    if (r->phase == 0 && h->mutating && rp && strcmp(rp, "IfNeeded") == 0)
        h->prev_invoked = true;
    if (job->denial) {
        finish(job);
        return;
    }
    step(job);
}

/* The next hook record r calls, advancing its phases, or NULL when done. */
static struct hook *next_hook(struct record *r)
{
    while (r->phase < 3) {
        while (r->next < r->nhooks) {
            struct hook *h = &r->hooks[r->next++];
            if (r->phase == 0 && h->mutating)
                return h;
            if (r->phase == 1 && h->mutating && h->reinvoke) {
                h->reinvoke = false;
                return h;
            }
            if (r->phase == 2 && !h->mutating)
                return h;
        }
        r->phase++;
        r->next = 0;
        if (r->phase == 1 && !r->changed)
            r->phase = 2;
    }
    return NULL;
}

static void step(luna_ds_admit_job *job)
{
    while (job->cur < job->nrecs) {
        struct record *r = &job->recs[job->cur];
        struct hook *h = next_hook(r);
        if (!h) {
            job->cur++;
            continue;
        }
        if (call(job, r, h))
            return;
        if (job->denial)
            break;
    }
    finish(job);
}

int luna_ds_admit_job_run(luna_ds *ds, luna_ds_admit_job *job,
                          void (*done)(void *ud, luna_ds_admit_job *job), void *ud)
{
    (void)ds;
    job->done = done;
    job->ud = ud;
    job->starting = true;
    step(job);
    job->starting = false;
    return 0;
}

const json_t *luna_ds_admit_job_denial(const luna_ds_admit_job *job, int *code)
{
    *code = job->denial_code;
    return job->denial;
}

const json_t *luna_ds_admit_job_warnings(const luna_ds_admit_job *job) { return job->warnings; }

void luna_ds_admit_job_free(luna_ds_admit_job *job)
{
    if (!job)
        return;
    luna_ds_hook_call_cancel(job->call);
    ev_timer_stop(luna_loop(), &job->later);
    for (size_t i = 0; i < job->nrecs; i++)
        record_clear(&job->recs[i]);
    free(job->recs);
    json_decref(job->denial);
    json_decref(job->warnings);
    free(job);
}

int luna_ds_admission_map_service(luna_ds *ds, const char *spec, char *err, size_t errn)
{
    const char *eq = strchr(spec, '=');
    const char *slash = strchr(spec, '/');
    if (!eq || !slash || slash > eq || slash == spec || eq == slash + 1 || !strchr(eq + 1, ':')) {
        snprintf(err, errn, "--webhook-service: '%s' is not NAMESPACE/NAME=HOST:PORT", spec);
        return LUNA_EINVAL;
    }
    if (!ds->admission.services && !(ds->admission.services = json_object())) {
        snprintf(err, errn, "out of memory");
        return LUNA_ENOMEM;
    }
    char key[600];
    snprintf(key, sizeof key, "%.*s", (int)(eq - spec), spec);
    if (json_object_set_new(ds->admission.services, key, json_string(eq + 1)) < 0) {
        snprintf(err, errn, "out of memory");
        return LUNA_ENOMEM;
    }
    return 0;
}

static bool one_of(const char *v, const char *const *allowed)
{
    for (; *allowed; allowed++)
        if (strcmp(v, *allowed) == 0)
            return true;
    return false;
}

/* A field's value must be one of allowed: 422 with kube's wording. */
static int check_enum(const luna_ds_type *t, const char *name, const json_t *w, size_t i,
                      const char *field, bool required, const char *const *allowed,
                      const char *shown, luna_ds_status *st)
{
    const json_t *v = json_object_get(w, field);
    char path[128];
    snprintf(path, sizeof path, "webhooks[%zu].%s", i, field);
    if (!v || json_is_null(v)) {
        if (!required)
            return 0;
        return luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueRequired", path,
                                      "Required value: must specify one of %s", shown);
    }
    if (json_is_string(v) && one_of(json_string_value(v), allowed))
        return 0;
    return luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueNotSupported", path,
                                  "Unsupported value: \"%s\": supported values: %s",
                                  json_is_string(v) ? json_string_value(v) : "?", shown);
}

/* kube's ValidateWebhookURL: https, a host, no user information, no
 * fragment, no query (kube adds its own ?timeout=).  true with st set. */
static bool url_invalid(const luna_ds_type *t, const char *name, size_t i, const char *u,
                        luna_ds_status *st)
{
    static const char form[] = "; desired format: https://host[/path]";
    char path[128];
    snprintf(path, sizeof path, "webhooks[%zu].clientConfig.url", i);
    u = u ? u : "";
    const char *sep = strstr(u, "://");
    if (!sep || (size_t)(sep - u) != 5 || strncasecmp(u, "https", 5) != 0) {
        luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid", path,
                               "Invalid value: \"%.*s\": 'https' is the only allowed URL scheme%s",
                               sep ? (int)(sep - u) : 0, u, form);
        return true;
    }
    const char *auth = sep + 3;
    size_t alen = strcspn(auth, "/?#");
    const char *at = memchr(auth, '@', alen);
    const char *frag = strchr(u, '#');
    const char *query = strchr(u, '?');
    if (query && frag && frag < query)
        query = NULL;
    if (alen == 0 || (at && at + 1 == auth + alen)) {
        luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid", path,
                               "Invalid value: \"\": host must be specified%s", form);
    } else if (at) {
        luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid", path,
                               "Invalid value: \"%.*s\": user information is not permitted in "
                               "the URL", (int)(at - auth), auth);
    } else if (frag && frag[1]) {
        luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid", path,
                               "Invalid value: \"%s\": fragments are not permitted in the URL",
                               frag + 1);
    } else if (query && query[1]) {
        size_t qlen = frag ? (size_t)(frag - query - 1) : strlen(query + 1);
        luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid", path,
                               "Invalid value: \"%.*s\": query parameters are not permitted in "
                               "the URL", (int)qlen, query + 1);
    } else {
        return false;
    }
    return true;
}

int luna_ds_admission_validate_config(const luna_ds_type *t, const json_t *doc, luna_ds_status *st)
{
    if (strcmp(t->group, ADMISSION_GROUP) != 0)
        return 0;
    bool mutating = strcmp(t->resource, "mutatingwebhookconfigurations") == 0;
    if (!mutating && strcmp(t->resource, "validatingwebhookconfigurations") != 0)
        return 0;
    const char *name = luna_ds_doc_str(json_object_get(doc, "metadata"), "name");
    name = name ? name : "";
    static const char *const side[] = { "None", "NoneOnDryRun", NULL };
    static const char *const fail[] = { "Ignore", "Fail", NULL };
    static const char *const match[] = { "Exact", "Equivalent", NULL };
    static const char *const reinv[] = { "Never", "IfNeeded", NULL };
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(doc, "webhooks"), i, w) {
        char path[128];
        int rc = check_enum(t, name, w, i, "sideEffects", true, side,
                            "\"None\", \"NoneOnDryRun\"", st);
        if (rc == 0)
            rc = check_enum(t, name, w, i, "failurePolicy", false, fail, "\"Fail\", \"Ignore\"", st);
        if (rc == 0)
            rc = check_enum(t, name, w, i, "matchPolicy", false, match,
                            "\"Equivalent\", \"Exact\"", st);
        if (rc == 0 && mutating)
            rc = check_enum(t, name, w, i, "reinvocationPolicy", false, reinv,
                            "\"IfNeeded\", \"Never\"", st);
        if (rc < 0)
            return rc;
        const json_t *arv = json_object_get(w, "admissionReviewVersions");
        if (!listed(arv, "v1") || listed(arv, "*")) {
            snprintf(path, sizeof path, "webhooks[%zu].admissionReviewVersions", i);
            return luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid", path,
                                          "Invalid value: %s: must include at least one of v1, "
                                          "v1beta1", json_array_size(arv) ? "[...]" : "[]string{}");
        }
        const char *wname = json_string_value(json_object_get(w, "name"));
        const char *d1 = wname ? strchr(wname, '.') : NULL;
        if (!d1 || !strchr(d1 + 1, '.')) {
            snprintf(path, sizeof path, "webhooks[%zu].name", i);
            return luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid", path,
                                          "Invalid value: \"%s\": should be a domain with at "
                                          "least three segments separated by dots",
                                          wname ? wname : "");
        }
        const json_t *cc = json_object_get(w, "clientConfig");
        bool url = json_object_get(cc, "url") != NULL, svc = json_object_get(cc, "service") != NULL;
        if (url && !svc && url_invalid(t, name, i, json_string_value(json_object_get(cc, "url")), st))
            return -st->code;
        if (url == svc) {
            snprintf(path, sizeof path, "webhooks[%zu].clientConfig", i);
            return luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueRequired", path,
                                          "Required value: exactly one of url or service is "
                                          "required");
        }
        if (json_array_size(json_object_get(w, "matchConditions")) > 0) {
            snprintf(path, sizeof path, "webhooks[%zu].matchConditions", i);
            return luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueForbidden", path,
                                          "Forbidden: the dev server does not evaluate CEL match "
                                          "conditions (kube-apiserver does; see docs/dev-server.md)");
        }
    }
    return 0;
}

void luna_ds_admission_free(luna_ds_admission *a)
{
    luna_ds_admit_job_free(a->capture);
    a->capture = NULL;
    luna_ds_hook_client_free(a->client);
    a->client = NULL;
    json_decref(a->services);
    a->services = NULL;
}
