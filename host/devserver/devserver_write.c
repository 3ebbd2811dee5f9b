/* devserver_write.c — see devserver_write.h. */
#include "devserver/devserver_write.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "devserver/devserver_apply.h"
#include "devserver/devserver_doc.h"
#include "devserver/devserver_schema.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_validate.h"
#include "base/log.h"

static void after_write(luna_ds *ds, luna_ds_type *t, enum luna_ds_event_type type, const json_t *doc);

/* Secrets: stringData folds into data (base64), type defaults to Opaque.
 * 0, or LUNA_ENOMEM with st set. */
static int secret_defaults(luna_ds_type *t, json_t *doc, luna_ds_status *st)
{
    if (t->custom || strcmp(t->resource, "secrets") != 0 || *t->group)
        return 0;
    json_t *sd = json_object_get(doc, "stringData");
    if (json_is_object(sd)) {
        json_t *data = json_object_get(doc, "data");
        if (!json_is_object(data)) {
            data = json_object();
            json_object_set_new(doc, "data", data);
        }
        const char *k;
        json_t *v;
        json_object_foreach(sd, k, v) {
            const char *s = json_string_value(v);
            if (!s)
                continue;
            size_t n = strlen(s);
            unsigned char *out = malloc(4 * ((n + 2) / 3) + 1);
            if (!out)
                return luna_ds_status_oom(st);
            EVP_EncodeBlock(out, (const unsigned char *)s, (int)n);
            json_object_set_new(data, k, json_string((char *)out));
            free(out);
        }
    }
    json_object_del(doc, "stringData");
    if (!luna_ds_doc_str(doc, "type"))
        json_object_set_new(doc, "type", json_string("Opaque"));
    return 0;
}

luna_ds_obj *luna_ds_write_store(luna_ds *ds, luna_ds_type *t, enum luna_ds_event_type type,
                                 json_t *doc)
{
    if (!doc)
        return NULL;
    luna_ds_type *s = luna_ds_types_storage_of(ds->types, t);
    if (s != t && luna_ds_convert(ds, &doc, t, s) < 0) {
        json_decref(doc);
        return NULL;
    }
    /* what this write answers, in the request's version, is converted
     * before anything is stored; while a conversion webhook's answer is
     * awaited, nothing is (the request is handled again with it) */
    luna_ds_convert_before_store(ds, doc, s);
    if (luna_ds_conversion_pending(ds)) {
        json_decref(doc);
        return NULL;
    }
    if (ds->dry_run) {
        /* dryRun=All: the state the write would store, stored nowhere,
         * seen by no watch, running no hook */
        uint64_t now_rv = luna_ds_store_rv(ds->store);
        luna_ds_doc_set_rv(doc, now_rv);
        luna_ds_doc_normalize(doc);
        luna_ds_obj *o = luna_ds_obj_new(doc, now_rv);
        json_decref(doc);
        return o;
    }
    uint64_t rv = luna_ds_store_next_rv(ds->store);
    luna_ds_doc_set_rv(doc, rv);
    luna_ds_doc_normalize(doc);
    luna_ds_obj *o = luna_ds_obj_new(doc, rv);
    if (!o || luna_ds_store_put(s->coll, type, luna_ds_obj_ref(o)) < 0) {
        luna_ds_obj_unref(o);
        json_decref(doc);
        return NULL;
    }
    after_write(ds, s, type, doc);
    json_decref(doc);
    if (type != LUNA_DS_DELETED) {
        luna_ds_obj *cur = luna_ds_store_get(s->coll, o->key);
        if (cur && cur != o) {
            luna_ds_obj_ref(cur);
            luna_ds_obj_unref(o);
            return cur;
        }
    }
    return o;
}

luna_ds_obj *luna_ds_write_remove(luna_ds *ds, luna_ds_type *t, luna_ds_obj *cur)
{
    luna_ds_type *s = luna_ds_types_storage_of(ds->types, t);
    luna_ds_obj *o = luna_ds_write_store(ds, s, LUNA_DS_DELETED, luna_ds_obj_doc(cur));
    if (!o || ds->dry_run)
        return o;
    /* o is the deleted state: its uid and namespace are cur's */
    if (ds->write_hooks)
        ds->write_hooks->removed(ds, o->uid, o->ns);
    return o; /* caller unrefs */
}

/* Content of doc without metadata (and status when it is a subresource). */
/* etcd's default --max-request-bytes: the largest transaction it takes.
 * kube-apiserver stores a custom resource as its JSON (with a newline),
 * in a transaction that names its key (/registry/GROUP/RESOURCE/NS/NAME)
 * in a compare, a put and, for an update, a read-back; the rest of the
 * request is a few dozen bytes.  REQUEST_OVERHEAD rounds that up, so the
 * bound below agrees with etcd's to within a few hundred bytes. */
#define ETCD_MAX_REQUEST ((size_t)1536 * 1024)
#define REQUEST_OVERHEAD 128u

/* Whether doc (a custom resource about to be stored) fits in one etcd
 * request.  Built-in kinds are stored as protobuf, smaller than their JSON
 * and bounded first by their own validation (ConfigMap and Secret data at
 * 1 MiB, annotations at 256 KiB), so they are not measured here.  Past the
 * bound kube-apiserver tries once more without managedFields (which may be
 * large and are safe to lose), then answers etcd's error as a 500
 * (k8s.io/apiserver handlers, isTooLargeError); so does this, dropping
 * managedFields from doc.  0: fits; < 0 with st set: does not. */
static int storage_fits(const luna_ds *ds, const luna_ds_type *t, json_t *doc, const char *ns,
                        const char *name, luna_ds_status *st)
{
    if (!t->custom || ds->dry_run)
        return 0; /* a dry run reaches no storage */
    size_t key = strlen("/registry///") + strlen(t->group) + strlen(t->resource) +
                 (ns && *ns ? strlen(ns) + 1 : 0) + strlen(name);
    for (int attempt = 0; attempt < 2; attempt++) {
        size_t value = json_dumpb(doc, NULL, 0, JSON_COMPACT) + 1;
        if (value + 3 * key + REQUEST_OVERHEAD <= ETCD_MAX_REQUEST)
            return 0;
        json_t *md = luna_ds_doc_meta(doc);
        if (attempt == 1 || !json_object_get(md, "managedFields"))
            break;
        json_object_del(md, "managedFields");
    }
    return luna_ds_status_set(st, 500, "", "etcdserver: request is too large");
}

static json_t *spec_part(const json_t *doc, bool drop_status)
{
    json_t *c = json_deep_copy(doc);
    json_object_del(c, "metadata");
    if (drop_status)
        json_object_del(c, "status");
    return c;
}

/* The object's key in kube-apiserver's etcd (default --etcd-prefix), as
 * its storage layer's errors quote it: the resource, or the special
 * prefixes kube compiles in; a custom resource's group first. */
void luna_ds_storage_key(char *out, size_t n, const luna_ds_type *t, const char *ns,
                         const char *name)
{
    static const char *const special[][2] = {
        { "replicationcontrollers", "controllers" }, { "endpoints", "services/endpoints" },
        { "nodes", "minions" }, { "services", "services/specs" },
    };
    const char *prefix = t->resource;
    for (size_t i = 0; !*t->group && i < sizeof special / sizeof *special; i++)
        if (strcmp(t->resource, special[i][0]) == 0)
            prefix = special[i][1];
    bool grouped = t->custom || strcmp(t->resource, "customresourcedefinitions") == 0 ||
                   strcmp(t->group, "apiregistration.k8s.io") == 0;
    if (strcmp(t->group, "networking.k8s.io") == 0 && strcmp(t->resource, "ingresses") == 0)
        prefix = "ingress";
    snprintf(out, n, "/registry/%s%s%s%s%s/%s", grouped ? t->group : "", grouped ? "/" : "",
             prefix, t->namespaced ? "/" : "", t->namespaced ? ns : "", name);
}

/* 409 for a uid precondition that the stored object (uid "" when there
 * is none) does not meet, in kube's storage layer's words. */
static int uid_precondition_failed(luna_ds_status *st, const luna_ds_type *t, const char *ns,
                                   const char *name, const char *want, const char *have)
{
    char key[700];
    luna_ds_storage_key(key, sizeof key, t, ns, name);
    luna_ds_status_conflict(st, t->group, t->resource, name, "");
    snprintf(st->message + strlen(st->message), sizeof st->message - strlen(st->message),
             "StorageError: invalid object, Code: 4, Key: %s, ResourceVersion: 0, "
             "AdditionalErrorMsg: Precondition failed: UID in precondition: %s, UID in object "
             "meta: %s", key, want, have);
    return LUNA_EINVAL;
}

/* A resourceVersion as kube's versioner parses it (strconv.ParseUint,
 * base 10): true with *v, or false for anything else. */
static bool parse_rv(const char *s, uint64_t *v)
{
    uint64_t n = 0;
    if (!*s)
        return false;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || n > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return false;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    *v = n;
    return true;
}

/* 500 for a resourceVersion kube's versioner cannot parse: Go's
 * strconv.ParseUint error reaches the client as it is (a Status without
 * a reason). */
static int rv_unparsable(luna_ds_status *st, const char *rv)
{
    bool digits = *rv != '\0';
    for (const char *p = rv; *p; p++)
        digits = digits && *p >= '0' && *p <= '9';
    return luna_ds_status_set(st, 500, "", "strconv.ParseUint: parsing \"%.100s\": %s", rv,
                              digits ? "value out of range" : "invalid syntax");
}

int luna_ds_write_preconditions(const luna_ds_type *t, const luna_ds_obj *cur, const json_t *newdoc,
                                bool put, luna_ds_status *st)
{
    json_t *md = json_object_get(newdoc, "metadata");
    const char *uid = luna_ds_doc_str(md, "uid");
    if (put && uid && *uid && strcmp(uid, cur->uid) != 0)
        return uid_precondition_failed(st, t, cur->ns, cur->name, uid, cur->uid);
    const char *rv = luna_ds_doc_str(md, "resourceVersion");
    uint64_t v = 0;
    if (rv && *rv && !parse_rv(rv, &v))
        return rv_unparsable(st, rv);
    if (v == 0 && !t->unconditional_update) {
        /* kube names the resource where the kind belongs (its own TODO) */
        return luna_ds_status_invalid(st, t->group, t->resource, cur->name, "FieldValueInvalid",
                                      "metadata.resourceVersion",
                                      "Invalid value: 0: must be specified for an update");
    }
    if (v != 0 && v != cur->rv)
        return luna_ds_status_conflict(st, t->group, t->resource, cur->name,
                                       "the object has been modified; please apply your changes "
                                       "to the latest version and try again");
    if (uid && *uid && strcmp(uid, cur->uid) != 0) {
        char q[200];
        snprintf(q, sizeof q, "\"%s\"", uid);
        return luna_ds_status_invalid(st, t->group, t->kind, cur->name, "FieldValueInvalid",
                                      "metadata.uid", "Invalid value: %s: field is immutable", q);
    }
    return 0;
}

int luna_ds_write_create_rv(const luna_ds *ds, const json_t *doc, luna_ds_status *st)
{
    const char *rv = luna_ds_doc_str(json_object_get(doc, "metadata"), "resourceVersion");
    uint64_t v;
    /* kube's storage refuses a version it can read as non-zero, and
     * clears any other; a dry run never reaches that check */
    if (!ds->dry_run && rv && parse_rv(rv, &v) && v != 0)
        return luna_ds_status_set(st, 500, "", /* a plain error in kube: no reason */
                                  "resourceVersion should not be set on objects to be created");
    return 0;
}

int luna_ds_write_create_on_update(const luna_ds_type *t, const char *ns, const char *name,
                                   const json_t *newdoc, luna_ds_status *st)
{
    if (!t->create_on_update)
        return luna_ds_status_not_found(st, t->group, t->resource, name);
    const char *uid = luna_ds_doc_str(json_object_get(newdoc, "metadata"), "uid");
    if (uid && *uid)
        return uid_precondition_failed(st, t, ns, name, uid, "");
    return 0;
}

/* The update pipeline shared by PUT, PATCH, apply and the server's own
 * writes.  newdoc (t's version, consumed) replaces cur.  subresource NULL
 * or "status".  manager NULL: managedFields already computed (apply) or
 * not tracked (server writes).  *out gets the stored state (or cur for a
 * no-op), as a new document in t's version; NULL if the write removed the
 * object. */
int luna_ds_write_update(luna_ds *ds, luna_ds_type *t, luna_ds_obj *cur, json_t *newdoc, const char *sub,
                         const char *manager, json_t **out, luna_ds_status *st)
{
    json_t *old = luna_ds_doc_as(ds, t, cur);
    if (!old) {
        json_decref(newdoc);
        return luna_ds_status_oom(st);
    }
    json_t *omd = luna_ds_doc_meta(old);
    json_t *nmd = luna_ds_doc_meta(newdoc);
    const char *name = cur->name;
    /* the client's preconditions were checked (luna_ds_write_preconditions);
     * a server write replaces what is there */
    const char *orv = luna_ds_doc_str(omd, "resourceVersion");
    if (!sub && luna_ds_validate_fields(t, newdoc, old, name, st) < 0) {
        json_decref(old);
        json_decref(newdoc);
        return -st->code;
    }
    json_t *result;
    if (sub) {
        /* status: only status (and managedFields) change */
        result = json_deep_copy(old);
        if (!result) {
            json_decref(old);
            json_decref(newdoc);
            return luna_ds_status_oom(st);
        }
        json_t *status = json_object_get(newdoc, "status");
        if (status)
            json_object_set(result, "status", status);
        else
            json_object_del(result, "status");
        json_t *mf = json_object_get(nmd, "managedFields");
        if (!manager && mf)
            json_object_set(luna_ds_doc_meta(result), "managedFields", mf);
        json_decref(newdoc);
    } else {
        result = newdoc;
        json_t *rmd = luna_ds_doc_meta(result);
        static const char *const system[] = { "uid", "creationTimestamp", "deletionTimestamp",
                                              "deletionGracePeriodSeconds", "generation" };
        for (size_t i = 0; i < sizeof system / sizeof *system; i++) {
            json_t *v = json_object_get(omd, system[i]);
            if (v)
                json_object_set(rmd, system[i], v);
            else
                json_object_del(rmd, system[i]);
        }
        json_object_set_new(rmd, "name", json_string(name));
        if (t->namespaced)
            json_object_set_new(rmd, "namespace", json_string(cur->ns));
        if (manager || !json_object_get(rmd, "managedFields")) {
            json_t *mf = json_object_get(omd, "managedFields");
            if (mf)
                json_object_set(rmd, "managedFields", mf);
        }
        if (t->has_status) {
            json_t *status = json_object_get(old, "status");
            if (status)
                json_object_set(result, "status", status);
            else
                json_object_del(result, "status");
        }
        if (secret_defaults(t, result, st) < 0) {
            json_decref(old);
            json_decref(result);
            return LUNA_ENOMEM;
        }
        /* no new finalizers while being deleted */
        if (cur->deleting) {
            json_t *nf = json_object_get(rmd, "finalizers");
            json_t *of = json_object_get(omd, "finalizers");
            size_t i;
            json_t *v;
            json_array_foreach(nf, i, v)
                if (json_is_string(v) && !luna_ds_doc_has_string(of, json_string_value(v))) {
                    int rc = luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueForbidden",
                        "metadata.finalizers", "Forbidden: no new finalizers can be added if the "
                        "object is being deleted, found new finalizers []string{\"%s\"}",
                        json_string_value(v));
                    json_decref(old);
                    json_decref(result);
                    return rc;
                }
        }
        if (luna_ds_admission_validate_config(t, result, st) < 0) {
            json_decref(old);
            json_decref(result);
            return -st->code;
        }
        if (strcmp(t->resource, "customresourcedefinitions") == 0 && !t->custom) {
            int rc = luna_ds_types_crd_validate(ds->types, result, st);
            if (rc == 0)
                rc = luna_ds_conversion_validate_crd(result, st);
            if (rc < 0) {
                json_decref(old);
                json_decref(result);
                return rc;
            }
        }
        /* generation: bumped when anything but metadata (and status) changed */
        if (t->has_generation) {
            json_t *a = spec_part(old, t->has_status), *b = spec_part(result, t->has_status);
            json_int_t gen = json_integer_value(json_object_get(omd, "generation"));
            if (!json_equal(a, b))
                gen++;
            json_object_set_new(rmd, "generation", json_integer(gen ? gen : 1));
            json_decref(a);
            json_decref(b);
        }
    }
    json_t *rmd = luna_ds_doc_meta(result);
    json_object_set_new(rmd, "resourceVersion", json_string(orv));
    if (manager) {
        char now[32];
        luna_ds_doc_now(now);
        if (luna_ds_apply_track_update(result, old, t, manager, sub, now) < 0) {
            json_decref(old);
            json_decref(result);
            return luna_ds_status_oom(st);
        }
    }
    /* no-op: nothing stored, no event, same resourceVersion */
    json_t *a = json_deep_copy(old), *b = json_deep_copy(result);
    json_object_del(luna_ds_doc_meta(a), "managedFields");
    json_object_del(luna_ds_doc_meta(b), "managedFields");
    bool same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    if (same) {
        json_decref(result);
        *out = old;
        return 0;
    }
    json_decref(old);
    json_t *fin = json_object_get(rmd, "finalizers");
    if (json_is_array(fin) && json_array_size(fin) == 0)
        json_object_del(rmd, "finalizers");
    bool deleting = json_object_get(rmd, "deletionTimestamp") != NULL;
    int fits = storage_fits(ds, t, result, cur->ns, name, st);
    if (fits < 0) {
        json_decref(result);
        return fits;
    }
    luna_ds_obj *o = luna_ds_write_store(ds, t, LUNA_DS_MODIFIED, result);
    if (!o)
        return luna_ds_status_oom(st);
    if (deleting && json_array_size(json_object_get(rmd, "finalizers")) == 0) {
        /* the last finalizer is gone: the object goes now */
        luna_ds_obj *gone = luna_ds_write_remove(ds, t, o);
        luna_ds_obj_unref(o);
        if (!gone)
            return luna_ds_status_oom(st);
        luna_ds_obj_unref(gone);
        *out = NULL;
        return 0;
    }
    *out = luna_ds_doc_as(ds, t, o);
    luna_ds_obj_unref(o);
    return *out ? 0 : luna_ds_status_oom(st);
}

/* Creates doc (t's version, consumed; kind/namespace already checked).
 * manager NULL: managedFields already set (apply).  *out: the stored
 * document in t's version. */
int luna_ds_write_create(luna_ds *ds, luna_ds_type *t, json_t *doc, const char *manager, json_t **out,
                         luna_ds_status *st)
{
    json_t *md = luna_ds_doc_meta(doc);
    const char *ns = t->namespaced ? luna_ds_doc_str(md, "namespace") : "";
    /* a POST's resourceVersion was checked (luna_ds_write_create_rv) */
    json_object_del(md, "resourceVersion");
    const char *name = luna_ds_doc_str(md, "name");
    const char *gen = luna_ds_doc_str(md, "generateName");
    char genbuf[300];
    if ((!name || !*name) && gen && *gen) {
        static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
        unsigned char r[5];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            memset(r, 0, sizeof r);
        snprintf(genbuf, sizeof genbuf, "%.*s%c%c%c%c%c", 58, gen,
                 alphabet[r[0] % 27], alphabet[r[1] % 27], alphabet[r[2] % 27],
                 alphabet[r[3] % 27], alphabet[r[4] % 27]);
        json_object_set_new(md, "name", json_string(genbuf));
        name = luna_ds_doc_str(md, "name");
    }
    if (!name || !*name) {
        json_decref(doc);
        return luna_ds_status_invalid(st, t->group, t->kind, "", "FieldValueRequired",
                                      "metadata.name", "Required value: name or generateName is required");
    }
    if (t->namespaced && (!ns || !*ns)) {
        /* callers set it from the URL or the seed's default */
        json_decref(doc);
        return luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueRequired",
                                      "metadata.namespace", "Required value");
    }
    int rc = luna_ds_validate_name(t, name, doc, st);
    if (rc == 0)
        rc = luna_ds_validate_fields(t, doc, NULL, name, st);
    if (rc == 0)
        rc = luna_ds_validate_namespace_usable(ds, t, ns, name, true, st);
    if (rc == 0 && strcmp(t->resource, "customresourcedefinitions") == 0 && !t->custom)
        rc = luna_ds_types_crd_validate(ds->types, doc, st);
    if (rc == 0 && strcmp(t->resource, "customresourcedefinitions") == 0 && !t->custom)
        rc = luna_ds_conversion_validate_crd(doc, st);
    if (rc == 0)
        rc = luna_ds_admission_validate_config(t, doc, st);
    char key[600];
    luna_ds_doc_key(key, sizeof key, t, ns ? ns : "", name);
    if (rc == 0 && luna_ds_store_get(t->coll, key))
        rc = luna_ds_status_already_exists(st, t->group, t->resource, name);
    if (rc < 0) {
        json_decref(doc);
        return rc;
    }
    char uid[37], now[32];
    luna_ds_doc_new_uid(uid);
    luna_ds_doc_now(now);
    json_object_set_new(md, "uid", json_string(uid));
    json_object_set_new(md, "creationTimestamp", json_string(now));
    json_object_del(md, "deletionTimestamp");
    json_object_del(md, "deletionGracePeriodSeconds");
    json_object_del(md, "selfLink");
    if (t->has_generation)
        json_object_set_new(md, "generation", json_integer(1));
    else
        json_object_del(md, "generation");
    json_t *fin = json_object_get(md, "finalizers");
    if (json_is_array(fin) && json_array_size(fin) == 0)
        json_object_del(md, "finalizers");
    if (t->has_status) {
        /* kube's strategies reset status on create to its zero value */
        json_t *zero = NULL;
        if (!t->custom && luna_ds_schema_zero_status(t, &zero) < 0) {
            json_decref(doc);
            return luna_ds_status_oom(st);
        }
        if (zero)
            json_object_set_new(doc, "status", zero);
        else
            json_object_del(doc, "status");
    }
    if (!t->custom && !*t->group) {
        if (strcmp(t->resource, "pods") == 0)
            json_object_set_new(doc, "status", json_pack("{s:s}", "phase", "Pending"));
        else if (strcmp(t->resource, "namespaces") == 0) {
            json_t *spec = json_object_get(doc, "spec");
            if (!json_is_object(spec)) {
                spec = json_object();
                json_object_set_new(doc, "spec", spec);
            }
            json_object_set_new(spec, "finalizers", json_pack("[s]", "kubernetes"));
            json_object_set_new(doc, "status", json_pack("{s:s}", "phase", "Active"));
            json_t *labels = json_object_get(md, "labels");
            if (!json_is_object(labels)) {
                labels = json_object();
                json_object_set_new(md, "labels", labels);
            }
            json_object_set_new(labels, "kubernetes.io/metadata.name", json_string(name));
        }
        /* a Service's {"loadBalancer":{}} is its zero status, set above */
    }
    if (secret_defaults(t, doc, st) < 0) {
        json_decref(doc);
        return LUNA_ENOMEM;
    }
    if (manager) {
        json_object_del(md, "managedFields");
        if (luna_ds_apply_track_update(doc, NULL, t, manager, NULL, now) < 0) {
            json_decref(doc);
            return luna_ds_status_oom(st);
        }
    }
    rc = storage_fits(ds, t, doc, ns, name, st);
    if (rc < 0) {
        json_decref(doc);
        return rc;
    }
    luna_ds_obj *o = luna_ds_write_store(ds, t, LUNA_DS_ADDED, doc);
    if (!o)
        return luna_ds_status_oom(st);
    *out = luna_ds_doc_as(ds, t, o);
    luna_ds_obj_unref(o);
    return *out ? 0 : luna_ds_status_oom(st);
}


/* What the apiextensions controller writes once a CRD's names are
 * accepted: conditions NamesAccepted and Established, acceptedNames,
 * storedVersions.  Written (a MODIFIED) only when it differs. */
static void crd_set_status(luna_ds *ds, luna_ds_type *t, const json_t *doc)
{
    json_t *spec = json_object_get(doc, "spec");
    json_t *names = json_deep_copy(json_object_get(spec, "names"));
    if (!json_is_object(names))
        return;
    const char *kind = luna_ds_doc_str(names, "kind");
    if (!luna_ds_doc_str(names, "listKind") && kind) {
        char lk[300];
        snprintf(lk, sizeof lk, "%sList", kind);
        json_object_set_new(names, "listKind", json_string(lk));
    }
    if (!luna_ds_doc_str(names, "singular") && kind) {
        char lower[256];
        size_t n = strlen(kind) < 255 ? strlen(kind) : 255;
        for (size_t i = 0; i < n; i++)
            lower[i] = (char)tolower((unsigned char)kind[i]);
        lower[n] = '\0';
        json_object_set_new(names, "singular", json_string(lower));
    }
    json_t *stored = json_array();
    json_t *old = json_object_get(doc, "status");
    json_t *old_stored = json_object_get(old, "storedVersions");
    size_t i;
    json_t *v;
    json_array_foreach(old_stored, i, v)
        json_array_append(stored, v);
    json_array_foreach(json_object_get(spec, "versions"), i, v)
        if (json_is_true(json_object_get(v, "storage")) && !luna_ds_doc_has_string(stored, luna_ds_doc_str(v, "name")))
            json_array_append_new(stored, json_string(luna_ds_doc_str(v, "name")));
    json_t *old_conds = json_object_get(old, "conditions");
    if (json_equal(json_object_get(old, "acceptedNames"), names) &&
        json_equal(old_stored, stored) && json_array_size(old_conds) >= 2) {
        json_decref(names);
        json_decref(stored);
        return;
    }
    char now[32];
    luna_ds_doc_now(now);
    json_t *conds = json_pack("[{s:s,s:s,s:s,s:s,s:s},{s:s,s:s,s:s,s:s,s:s}]",
                              "type", "NamesAccepted", "status", "True", "lastTransitionTime", now,
                              "reason", "NoConflicts", "message", "no conflicts found",
                              "type", "Established", "status", "True", "lastTransitionTime", now,
                              "reason", "InitialNamesAccepted",
                              "message", "the initial names have been accepted");
    json_t *copy = json_deep_copy(doc);
    json_t *status = json_pack("{s:o,s:o,s:o}", "conditions", conds, "acceptedNames", names,
                               "storedVersions", stored);
    if (!copy || json_object_set_new(copy, "status", status) < 0) {
        json_decref(copy);
        luna_warn("CRD status not written: out of memory", "crd",
                  luna_ds_doc_str(json_object_get(doc, "metadata"), "name"));
        return;
    }
    luna_ds_obj *o = luna_ds_write_store(ds, t, LUNA_DS_MODIFIED, copy);
    if (!o)
        luna_warn("CRD status not written: out of memory", "crd",
                  luna_ds_doc_str(json_object_get(doc, "metadata"), "name"));
    luna_ds_obj_unref(o);
}

/* Store callback: the first object it is shown. */
static bool first_object(void *ctx, luna_ds_obj *o)
{
    *(luna_ds_obj **)ctx = o;
    return false;
}

/* Removes every object of a deleted CRD's collection (u: its storage
 * type), in key order as kube-apiserver does, or when the keys cannot be
 * listed (out of memory), one by one in any order. */
static void remove_all(luna_ds *ds, luna_ds_type *u)
{
    luna_ds_obj **items;
    size_t n;
    char **keys = NULL;
    if (luna_ds_store_snapshot(u->coll, 0, &items, &n) == 0) {
        keys = calloc(n + 1, sizeof *keys);
        for (size_t i = 0; keys && i < n; i++)
            if (!(keys[i] = strdup(items[i]->key)))
                break;
        free(items);
    }
    for (size_t i = 0; keys && keys[i]; i++) {
        luna_ds_obj *o = luna_ds_store_get(u->coll, keys[i]);
        if (o)
            luna_ds_obj_unref(luna_ds_write_remove(ds, u, o));
        free(keys[i]);
    }
    free(keys);
    for (;;) {
        luna_ds_obj *o = NULL;
        luna_ds_store_each(u->coll, first_object, &o);
        luna_ds_obj *gone = o ? luna_ds_write_remove(ds, u, o) : NULL;
        if (!gone)
            break;
        luna_ds_obj_unref(gone);
    }
}

/* Hooks after every write (storage type). */
static void after_write(luna_ds *ds, luna_ds_type *t, enum luna_ds_event_type type, const json_t *doc)
{
    if (ds->write_hooks && type != LUNA_DS_DELETED)
        ds->write_hooks->written(ds, t, type, doc);
    if (!t->custom && strcmp(t->resource, "customresourcedefinitions") == 0) {
        const char *name = luna_ds_doc_str(json_object_get(doc, "metadata"), "name");
        if (type == LUNA_DS_DELETED) {
            /* the CRD's objects go with it */
            for (luna_ds_type *u = luna_ds_types_all(ds->types); u; u = u->next)
                if (u->custom && u->storage && u->served && strcmp(u->crd_name, name) == 0)
                    remove_all(ds, u);
            luna_ds_types_crd_remove(ds->types, name);
        } else {
            if (luna_ds_types_crd_sync(ds->types, doc) < 0)
                luna_warn("CRD version not served: out of memory", "crd", name);
            crd_set_status(ds, t, doc);
        }
    }
    if (ds->write_hooks && type == LUNA_DS_DELETED)
        ds->write_hooks->written(ds, t, type, doc);
}
