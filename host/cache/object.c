/* object.c — see object.h. */
#include "cache/object.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct label_ref {
    const char *key;
    const char *value;
    size_t order;  /* position in the input: ties sort in input order */
};

static int compare_labels(const void *a, const void *b)
{
    const struct label_ref *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* ---- labels read from the JSON ----------------------------------------- */

static size_t skip_space(const char *j, size_t len, size_t i)
{
    while (i < len && (j[i] == ' ' || j[i] == '\t' || j[i] == '\n' || j[i] == '\r'))
        i++;
    return i;
}

/* A plain string at j[i] ('"', then no escape up to the closing quote):
 * sets its text span and returns the index after it, or 0 if not plain. */
static size_t plain_string(const char *j, size_t len, size_t i, size_t *start, size_t *n)
{
    if (i >= len || j[i] != '"')
        return 0;
    size_t k = i + 1;
    while (k < len && j[k] != '"') {
        if (j[k] == '\\')
            return 0;
        k++;
    }
    if (k >= len)
        return 0;
    *start = i + 1;
    *n = k - i - 1;
    return k + 1;
}

/* Reads the pair at *pos inside the labels object ('{' or ',' at *pos).
 * Returns 1 with the spans set, 0 at the closing '}', -1 if not plain. */
static int next_plain_pair(const char *j, size_t len, size_t *pos, size_t *k, size_t *kn,
                           size_t *v, size_t *vn)
{
    size_t i = skip_space(j, len, *pos);
    if (i >= len || (j[i] != '{' && j[i] != ','))
        return -1;
    i = skip_space(j, len, i + 1);
    if (i < len && j[i] == '}' && j[*pos] == '{')
        return 0;
    if (!(i = plain_string(j, len, i, k, kn)))
        return -1;
    i = skip_space(j, len, i);
    if (i >= len || j[i] != ':')
        return -1;
    i = skip_space(j, len, i + 1);
    if (!(i = plain_string(j, len, i, v, vn)))
        return -1;
    i = skip_space(j, len, i);
    if (i >= len || (j[i] != ',' && j[i] != '}'))
        return -1;
    *pos = i;
    return 1;
}

static int compare_spans(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

/* Counts the labels of the object at json[at] if they are plain, keys
 * strictly increasing (and no NUL in them); -1 otherwise. */
static long plain_labels(const char *j, size_t len, size_t at)
{
    size_t pos = at, k, kn, v, vn, pk = 0, pkn = 0;
    long n = 0;
    int rc;
    while ((rc = next_plain_pair(j, len, &pos, &k, &kn, &v, &vn)) == 1) {
        if ((n && compare_spans(j + pk, pkn, j + k, kn) >= 0) || memchr(j + k, 0, kn) ||
            memchr(j + v, 0, vn))
            return -1;
        pk = k;
        pkn = kn;
        n++;
        if (j[pos] == '}')
            return n;
    }
    return rc == 0 ? 0 : -1;
}

/* The buffer labels read from JSON are copied into (loop thread only). */
static char *label_buf;
static size_t label_cap;

static const char *copy_out(const char *a, size_t an, const char *b, size_t bn)
{
    if (an + bn + 2 > label_cap) {
        size_t cap = label_cap ? label_cap : 256;
        while (cap < an + bn + 2)
            cap *= 2;
        char *p = realloc(label_buf, cap);
        if (!p)
            return NULL;
        label_buf = p;
        label_cap = cap;
    }
    memcpy(label_buf, a, an);
    label_buf[an] = '\0';
    if (b) {
        memcpy(label_buf + an + 1, b, bn);
        label_buf[an + 1 + bn] = '\0';
    }
    return label_buf;
}

int luna_object_make_key(char *buf, size_t size, const char *namespace_, const char *name)
{
    int n = (namespace_ && *namespace_) ? snprintf(buf, size, "%s/%s", namespace_, name)
                                        : snprintf(buf, size, "%s", name);
    return (n < 0 || (size_t)n >= size) ? -1 : n;
}

int luna_object_new(const struct luna_object_fields *f, struct luna_object **out,
                    luna_error *err)
{
    *out = NULL;
    if (!f->name || !*f->name)
        return luna_error_set(err, LUNA_EINVAL, "object has no metadata.name");
    const char *ns = f->namespace_ ? f->namespace_ : "";
    const char *uid = f->uid ? f->uid : "";
    const char *rv = f->resource_version ? f->resource_version : "";
    size_t ns_len = strlen(ns), name_len = strlen(f->name);
    size_t key_len = ns_len ? ns_len + 1 + name_len : name_len;
    size_t uid_len = strlen(uid), rv_len = strlen(rv);
    if (key_len > UINT16_MAX || uid_len > UINT16_MAX || rv_len > UINT16_MAX ||
        f->nlabels > UINT16_MAX || f->json_len >= UINT32_MAX)
        return luna_error_set(err, LUNA_EINVAL, "object %s/%s: field too long to cache",
                              ns, f->name);

    struct label_ref *sorted = NULL;
    size_t labels_len = 0, nlabels = 0, labels_at = 0;
    if (f->labels_json_at && f->labels_json_at <= f->json_len) {
        long n = plain_labels(f->json, f->json_len, f->labels_json_at - 1);
        if (n >= 0 && n <= UINT16_MAX) {
            labels_at = f->labels_json_at;
            nlabels = (size_t)n;
        }
    }
    if (f->nlabels && !labels_at) {
        sorted = malloc(f->nlabels * sizeof *sorted);
        if (!sorted)
            return luna_error_set(err, LUNA_ENOMEM, "out of memory");
        for (size_t i = 0; i < f->nlabels; i++) {
            sorted[i].key = f->labels[2 * i];
            sorted[i].value = f->labels[2 * i + 1];
            sorted[i].order = i;
        }
        qsort(sorted, f->nlabels, sizeof *sorted, compare_labels);
        /* A repeated key keeps its last value, as Go's decoder does; a
         * last value of null leaves the key out, as it always did. */
        for (size_t i = 0; i < f->nlabels; i++) {
            if ((i + 1 < f->nlabels && strcmp(sorted[i].key, sorted[i + 1].key) == 0) ||
                !sorted[i].value)
                continue;
            sorted[nlabels++] = sorted[i];
            labels_len += strlen(sorted[i].key) + 1 + strlen(sorted[i].value) + 1;
        }
        if (labels_len > UINT16_MAX) {
            free(sorted);
            return luna_error_set(err, LUNA_EINVAL, "object %s/%s: labels too long to cache",
                                  ns, f->name);
        }
    }

    size_t total = sizeof(struct luna_object) + key_len + 1 + uid_len + 1 + rv_len + 1 +
                   labels_len + f->json_len + 1;
    struct luna_object *o = malloc(total);
    if (!o) {
        free(sorted);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory caching %s/%s", ns, f->name);
    }
    o->refs = 1;
    o->json_len = (uint32_t)f->json_len;
    o->key_len = (uint16_t)key_len;
    o->ns_len = (uint16_t)ns_len;
    o->uid_len = (uint16_t)uid_len;
    o->rv_len = (uint16_t)rv_len;
    o->nlabels = (uint16_t)nlabels;
    o->labels_len = (uint16_t)labels_len;
    o->labels_at = (uint32_t)labels_at;

    char *p = o->data;
    if (ns_len) {
        memcpy(p, ns, ns_len);
        p[ns_len] = '/';
        p += ns_len + 1;
    }
    memcpy(p, f->name, name_len + 1);
    p += name_len + 1;
    memcpy(p, uid, uid_len + 1);
    p += uid_len + 1;
    memcpy(p, rv, rv_len + 1);
    p += rv_len + 1;
    for (size_t i = 0; sorted && i < nlabels; i++) {
        size_t kl = strlen(sorted[i].key) + 1, vl = strlen(sorted[i].value) + 1;
        memcpy(p, sorted[i].key, kl);
        p += kl;
        memcpy(p, sorted[i].value, vl);
        p += vl;
    }
    free(sorted);
    if (f->json_len)
        memcpy(p, f->json, f->json_len);
    p[f->json_len] = '\0';
    *out = o;
    return 0;
}

void luna_object_unref(struct luna_object *o)
{
    if (o && --o->refs == 0)
        free(o);
}

const char *luna_object_name(const struct luna_object *o)
{
    return o->ns_len ? o->data + o->ns_len + 1 : o->data;
}

size_t luna_object_namespace(const struct luna_object *o, char *buf, size_t size)
{
    size_t n = o->ns_len < size ? o->ns_len : size - 1;
    memcpy(buf, o->data, n);
    buf[n] = '\0';
    return n;
}

const char *luna_object_uid(const struct luna_object *o)
{
    return o->data + o->key_len + 1;
}

const char *luna_object_resource_version(const struct luna_object *o)
{
    return luna_object_uid(o) + o->uid_len + 1;
}

static const char *labels_start(const struct luna_object *o)
{
    return luna_object_resource_version(o) + o->rv_len + 1;
}

const char *luna_object_json(const struct luna_object *o)
{
    return labels_start(o) + o->labels_len;
}

int luna_object_next_label(const struct luna_object *o, size_t *cursor,
                           const char **key, const char **value)
{
    if (o->labels_at) {
        const char *j = luna_object_json(o);
        size_t pos = *cursor ? *cursor : o->labels_at - 1, k, kn, v, vn;
        if (j[pos] == '}' || next_plain_pair(j, o->json_len, &pos, &k, &kn, &v, &vn) != 1)
            return -1;
        const char *buf = copy_out(j + k, kn, j + v, vn);
        if (!buf)
            return -1;
        *key = buf;
        *value = buf + kn + 1;
        *cursor = pos;
        return 0;
    }
    if (*cursor >= o->labels_len)
        return -1;
    const char *p = labels_start(o) + *cursor;
    size_t kl = strlen(p) + 1;
    size_t vl = strlen(p + kl) + 1;
    *key = p;
    *value = p + kl;
    *cursor += kl + vl;
    return 0;
}

const char *luna_object_label(const struct luna_object *o, const char *key)
{
    if (o->labels_at) {
        const char *j = luna_object_json(o);
        size_t pos = o->labels_at - 1, k, kn, v, vn, want = strlen(key);
        while (j[pos] != '}' && next_plain_pair(j, o->json_len, &pos, &k, &kn, &v, &vn) == 1) {
            int c = compare_spans(j + k, kn, key, want);
            if (c == 0)
                return copy_out(j + v, vn, NULL, 0);
            if (c > 0)
                break;
        }
        return NULL;
    }
    size_t cursor = 0;
    const char *k, *v;
    while (luna_object_next_label(o, &cursor, &k, &v) == 0) {
        int c = strcmp(k, key);
        if (c == 0)
            return v;
        if (c > 0)
            break;
    }
    return NULL;
}

size_t luna_object_size(const struct luna_object *o)
{
    return sizeof *o + o->key_len + 1 + o->uid_len + 1 + o->rv_len + 1 + o->labels_len +
           o->json_len + 1;
}
