/* devserver_doc.c — see devserver_doc.h. */
#include "devserver/devserver_doc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "devserver/devserver_state.h"

void luna_ds_doc_now(char out[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void luna_ds_doc_new_uid(char out[37])
{
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = (unsigned char)rand();
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
             b[12], b[13], b[14], b[15]);
}

const char *luna_ds_doc_str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

json_t *luna_ds_doc_meta(json_t *doc)
{
    json_t *md = json_object_get(doc, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        if (json_object_set_new(doc, "metadata", md) < 0)
            return NULL; /* out of memory (or doc NULL): md was released */
    }
    return md;
}

void luna_ds_doc_set_rv(json_t *doc, uint64_t rv)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)rv);
    json_object_set_new(luna_ds_doc_meta(doc), "resourceVersion", json_string(buf));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A copy of a JSON object with its keys in sorted order (Go writes map
 * keys sorted), or a new reference to it when it is not an object. */
static json_t *sorted_map(json_t *obj)
{
    size_t n = json_is_object(obj) ? json_object_size(obj) : 0;
    if (n < 2)
        return json_incref(obj);
    const char **keys = malloc(n * sizeof *keys);
    json_t *out = keys ? json_object() : NULL;
    if (!out) {
        free(keys);
        return json_incref(obj); /* out of memory: left in its order */
    }
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
        keys[i++] = k;
    qsort(keys, n, sizeof *keys, cmp_str);
    for (i = 0; i < n; i++)
        json_object_set(out, keys[i], json_object_get(obj, keys[i]));
    free(keys);
    return out;
}

/* Puts kind, apiVersion, metadata first, metadata's keys in kube's order
 * and the label and annotation maps in key order, as kube writes them. */
void luna_ds_doc_normalize(json_t *doc)
{
    static const char *const top[] = { "kind", "apiVersion", "metadata" };
    static const char *const md_order[] = { "name", "generateName", "namespace", "selfLink",
        "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
        "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
        "finalizers", "managedFields" };
    /* Out of memory part-way: the document is left as it was (its key order
     * is cosmetic; its content must not change). */
    json_t *md = json_object_get(doc, "metadata");
    if (json_is_object(md)) {
        json_t *nm = json_object();
        bool ok = nm != NULL;
        for (size_t i = 0; ok && i < sizeof md_order / sizeof *md_order; i++) {
            json_t *v = json_object_get(md, md_order[i]);
            if (v && (strcmp(md_order[i], "labels") == 0 || strcmp(md_order[i], "annotations") == 0))
                ok = json_object_set_new(nm, md_order[i], sorted_map(v)) == 0;
            else if (v)
                ok = json_object_set(nm, md_order[i], v) == 0;
        }
        const char *k;
        json_t *v;
        json_object_foreach(md, k, v)
            if (ok && !json_object_get(nm, k))
                ok = json_object_set(nm, k, v) == 0;
        if (ok)
            json_object_set_new(doc, "metadata", nm);
        else
            json_decref(nm);
    }
    json_t *copy = json_object();
    bool ok = copy != NULL;
    for (size_t i = 0; ok && i < 3; i++) {
        json_t *v = json_object_get(doc, top[i]);
        if (v)
            ok = json_object_set(copy, top[i], v) == 0;
    }
    const char *k;
    json_t *v;
    json_object_foreach(doc, k, v)
        if (ok && !json_object_get(copy, k))
            ok = json_object_set(copy, k, v) == 0;
    if (ok) {
        json_object_clear(doc);
        ok = json_object_update(doc, copy) == 0;
    }
    json_decref(copy);
}

/* The object as a document of type t's version (caller owns). */
json_t *luna_ds_doc_as(luna_ds *ds, luna_ds_type *t, const luna_ds_obj *o)
{
    json_t *doc = luna_ds_obj_doc(o);
    luna_ds_type *s = luna_ds_types_storage_of(ds->types, t);
    /* a conversion webhook's answer still awaited (1) leaves doc converted
     * apiVersion-only: the pass's answer is dropped (devserver_convert.h) */
    if (doc && s != t && luna_ds_convert(ds, &doc, s, t) < 0) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

void luna_ds_doc_key(char *out, size_t n, const luna_ds_type *t, const char *ns, const char *name)
{
    if (t->namespaced)
        snprintf(out, n, "%s/%s", ns, name);
    else
        snprintf(out, n, "%s", name);
}

bool luna_ds_doc_has_string(const json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
        if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
            return true;
    return false;
}
