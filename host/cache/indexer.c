/* indexer.c — see indexer.h. */
#include "cache/indexer.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "base/log.h"
#include "cache/objset.h"

struct bucket {
    char *value;
    struct luna_objset members;  /* borrowed from the store */
    UT_hash_handle hh;
};

/* Remembered values of an impure index for one object. */
struct remembered {
    char *key;
    struct luna_index_values vals;
    size_t charged;                 /* granted by the index's charge fn */
    UT_hash_handle hh;
};

struct index {
    char *name;
    luna_index_fn fn;
    void *ud;
    void (*ud_free)(void *);
    bool pure;
    luna_index_charge_fn charge;    /* NULL: not charged (pure indexes never) */
    struct bucket *buckets;
    struct remembered *remembered;  /* only when !pure */
    UT_hash_handle hh;
};

struct luna_indexer {
    struct luna_objset store;    /* one reference per member */
    struct index *indexes;
};

int luna_index_values_add(struct luna_index_values *vals, const char *value)
{
    if (vals->n >= LUNA_INDEX_MAX_VALUES || strlen(value) > LUNA_INDEX_MAX_VALUE_LEN)
        return LUNA_ETOOBIG;
    if (vals->n == vals->cap) {
        size_t cap = vals->cap ? vals->cap * 2 : 2;
        char **v = realloc(vals->v, cap * sizeof *v);
        if (!v)
            return LUNA_ENOMEM;
        vals->v = v;
        vals->cap = cap;
    }
    char *copy = strdup(value);
    if (!copy)
        return LUNA_ENOMEM;
    vals->v[vals->n++] = copy;
    return 0;
}

static int compare_values(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Drops repeated values: sorted, then each kept once (n log n, n at most
 * LUNA_INDEX_MAX_VALUES). */
static void values_dedupe(struct luna_index_values *vals)
{
    if (vals->n < 2)
        return;
    qsort(vals->v, vals->n, sizeof *vals->v, compare_values);
    size_t kept = 1;
    for (size_t i = 1; i < vals->n; i++) {
        if (strcmp(vals->v[i], vals->v[kept - 1]) == 0)
            free(vals->v[i]);
        else
            vals->v[kept++] = vals->v[i];
    }
    vals->n = kept;
}

static void values_clear(struct luna_index_values *vals)
{
    for (size_t i = 0; i < vals->n; i++)
        free(vals->v[i]);
    free(vals->v);
    memset(vals, 0, sizeof *vals);
}

static int namespace_index_fn(const struct luna_object *obj, struct luna_index_values *out,
                              void *ud, luna_error *err)
{
    char ns[256];
    luna_object_namespace(obj, ns, sizeof ns);
    return luna_index_values_add(out, ns);
}

struct luna_indexer *luna_indexer_new(void)
{
    struct luna_indexer *idx = calloc(1, sizeof *idx);
    if (idx && luna_indexer_add_index(idx, LUNA_INDEX_NAMESPACE, namespace_index_fn, NULL,
                                      NULL, true, NULL, NULL) < 0) {
        free(idx);
        return NULL;
    }
    return idx;
}

static void bucket_remove(struct index *ix, const char *value, struct luna_object *obj)
{
    struct bucket *b;
    HASH_FIND_STR(ix->buckets, value, b);
    if (!b)
        return;
    if (luna_objset_get(&b->members, luna_object_key(obj), obj->key_len) != obj)
        return;
    luna_objset_remove(&b->members, luna_object_key(obj), obj->key_len);
    if (b->members.count == 0) {
        HASH_DEL(ix->buckets, b);
        luna_objset_clear(&b->members);
        free(b->value);
        free(b);
    }
}

static int bucket_add(struct index *ix, const char *value, struct luna_object *obj)
{
    struct bucket *b;
    HASH_FIND_STR(ix->buckets, value, b);
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b || !(b->value = strdup(value))) {
            free(b);
            return LUNA_ENOMEM;
        }
        HASH_ADD_KEYPTR(hh, ix->buckets, b->value, strlen(b->value), b);
    }
    /* An older object of the same key is replaced by this one. */
    struct luna_object *older;
    if (luna_objset_put(&b->members, obj, &older) < 0) {
        if (b->members.count == 0) {
            HASH_DEL(ix->buckets, b);
            free(b->value);
            free(b);
        }
        return LUNA_ENOMEM;
    }
    return 0;
}

/* Forgets r (its buckets are the caller's): gives its charge back. */
static void remembered_drop(struct index *ix, struct remembered *r)
{
    HASH_DEL(ix->remembered, r);
    if (r->charged)
        ix->charge(ix->ud, -(long long)r->charged);
    values_clear(&r->vals);
    free(r->key);
    free(r);
}

/* Removes obj (the stored object for its key) from index ix. */
static void index_remove(struct index *ix, struct luna_object *obj)
{
    const char *key = luna_object_key(obj);
    if (ix->pure) {
        struct luna_index_values vals = { 0 };
        luna_error err = { 0 };
        if (ix->fn(obj, &vals, ix->ud, &err) == 0) {
            values_dedupe(&vals);
            for (size_t i = 0; i < vals.n; i++)
                bucket_remove(ix, vals.v[i], obj);
        }
        values_clear(&vals);
        return;
    }
    struct remembered *r;
    HASH_FIND_STR(ix->remembered, key, r);
    if (!r)
        return;
    for (size_t i = 0; i < r->vals.n; i++)
        bucket_remove(ix, r->vals.v[i], obj);
    remembered_drop(ix, r);
}

/* What an object's values hold in a remembered index: their copy, their
 * bucket's copy, and the bookkeeping of both (an estimate that errs high). */
#define VALUE_OVERHEAD 96

static size_t values_cost(const struct luna_index_values *vals)
{
    size_t cost = 0;
    for (size_t i = 0; i < vals->n; i++)
        cost += 2 * strlen(vals->v[i]) + VALUE_OVERHEAD;
    return cost;
}

static void index_add(struct index *ix, struct luna_object *obj)
{
    struct luna_index_values vals = { 0 };
    luna_error err = { 0 };
    if (ix->fn(obj, &vals, ix->ud, &err) < 0) {
        luna_warn("index function failed", "index", ix->name, "key", luna_object_key(obj),
                  "error", err.msg);
        values_clear(&vals);
        return;
    }
    values_dedupe(&vals);
    size_t cost = !ix->pure && ix->charge && vals.n ? values_cost(&vals) : 0;
    if (cost && ix->charge(ix->ud, (long long)cost) < 0) {
        luna_warn("index values refused", "index", ix->name, "key", luna_object_key(obj),
                  "error", "they would pass the Lua memory limit of the index's controller; "
                  "the object is left out of this index");
        values_clear(&vals);
        return;
    }
    for (size_t i = 0; i < vals.n; i++) {
        if (bucket_add(ix, vals.v[i], obj) < 0) {
            luna_error("index update failed", "index", ix->name, "key", luna_object_key(obj),
                       "error", "out of memory");
            for (size_t j = 0; j < i; j++)
                bucket_remove(ix, vals.v[j], obj);
            if (cost)
                ix->charge(ix->ud, -(long long)cost);
            values_clear(&vals);
            return;
        }
    }
    if (ix->pure) {
        values_clear(&vals);
        return;
    }
    struct remembered *r = calloc(1, sizeof *r);
    if (!r || !(r->key = strdup(luna_object_key(obj)))) {
        free(r);
        for (size_t i = 0; i < vals.n; i++)
            bucket_remove(ix, vals.v[i], obj);
        if (cost)
            ix->charge(ix->ud, -(long long)cost);
        values_clear(&vals);
        luna_error("index update failed", "index", ix->name, "key", luna_object_key(obj),
                   "error", "out of memory");
        return;
    }
    r->vals = vals;
    r->charged = cost;
    HASH_ADD_KEYPTR(hh, ix->remembered, r->key, strlen(r->key), r);
}

int luna_indexer_add_index(struct luna_indexer *idx, const char *name, luna_index_fn fn,
                           void *ud, void (*ud_free)(void *), bool pure,
                           luna_index_charge_fn charge, luna_error *err)
{
    struct index *ix;
    HASH_FIND_STR(idx->indexes, name, ix);
    if (ix) {
        if (ud_free)
            ud_free(ud);
        return luna_error_set(err, LUNA_EINVAL, "index '%s' already exists", name);
    }
    ix = calloc(1, sizeof *ix);
    if (!ix || !(ix->name = strdup(name))) {
        free(ix);
        if (ud_free)
            ud_free(ud);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    ix->fn = fn;
    ix->ud = ud;
    ix->ud_free = ud_free;
    ix->pure = pure;
    ix->charge = pure ? NULL : charge;
    HASH_ADD_KEYPTR(hh, idx->indexes, ix->name, strlen(ix->name), ix);
    for (size_t i = 0; i < idx->store.cap; i++)
        if (idx->store.slots[i])
            index_add(ix, idx->store.slots[i]);
    return 0;
}

bool luna_indexer_has_index(const struct luna_indexer *idx, const char *name)
{
    struct index *ix;
    HASH_FIND_STR(idx->indexes, name, ix);
    return ix != NULL;
}

static void index_free(struct index *ix)
{
    struct bucket *b, *btmp;
    HASH_ITER(hh, ix->buckets, b, btmp) {
        luna_objset_clear(&b->members);
        HASH_DEL(ix->buckets, b);
        free(b->value);
        free(b);
    }
    struct remembered *r, *rtmp;
    HASH_ITER(hh, ix->remembered, r, rtmp)
        remembered_drop(ix, r);
    if (ix->ud_free)
        ix->ud_free(ix->ud);
    free(ix->name);
    free(ix);
}

int luna_indexer_remove_index(struct luna_indexer *idx, const char *name)
{
    struct index *ix;
    HASH_FIND_STR(idx->indexes, name, ix);
    if (!ix || strcmp(name, LUNA_INDEX_NAMESPACE) == 0)
        return LUNA_ENOTFOUND;
    HASH_DEL(idx->indexes, ix);
    index_free(ix);
    return 0;
}

void luna_indexer_free(struct luna_indexer *idx)
{
    if (!idx)
        return;
    struct index *ix, *itmp;
    HASH_ITER(hh, idx->indexes, ix, itmp) {
        HASH_DEL(idx->indexes, ix);
        index_free(ix);
    }
    for (size_t i = 0; i < idx->store.cap; i++)
        luna_object_unref(idx->store.slots[i]);
    luna_objset_clear(&idx->store);
    free(idx);
}

int luna_indexer_put(struct luna_indexer *idx, struct luna_object *obj,
                     struct luna_object **old)
{
    *old = NULL;
    struct luna_object *prev = luna_objset_get(&idx->store, luna_object_key(obj), obj->key_len);
    if (prev)
        for (struct index *ix = idx->indexes; ix; ix = ix->hh.next)
            index_remove(ix, prev);
    if (luna_objset_put(&idx->store, obj, old) < 0) {
        if (prev)
            for (struct index *ix = idx->indexes; ix; ix = ix->hh.next)
                index_add(ix, prev);
        return LUNA_ENOMEM;
    }
    luna_object_ref(obj);
    for (struct index *ix = idx->indexes; ix; ix = ix->hh.next)
        index_add(ix, obj);
    return 0;
}

int luna_indexer_delete(struct luna_indexer *idx, const char *key, struct luna_object **old)
{
    *old = NULL;
    struct luna_object *prev = luna_objset_get(&idx->store, key, strlen(key));
    if (!prev)
        return LUNA_ENOTFOUND;
    for (struct index *ix = idx->indexes; ix; ix = ix->hh.next)
        index_remove(ix, prev);
    *old = luna_objset_remove(&idx->store, key, strlen(key));
    return 0;
}

struct luna_object *luna_indexer_get(const struct luna_indexer *idx, const char *key)
{
    return luna_objset_get(&idx->store, key, strlen(key));
}

size_t luna_indexer_len(const struct luna_indexer *idx)
{
    return idx->store.count;
}

/* Visits a snapshot (with references), so a visitor may change the indexer. */
static int visit_set(const struct luna_objset *set, luna_object_visit visit, void *ud)
{
    struct luna_object **objs;
    size_t n;
    if (luna_objset_snapshot(set, &objs, &n) < 0)
        return LUNA_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rc)
            rc = visit(objs[i], ud);
        luna_object_unref(objs[i]);
    }
    free(objs);
    return rc;
}

int luna_indexer_each(const struct luna_indexer *idx, luna_object_visit visit, void *ud)
{
    return visit_set(&idx->store, visit, ud);
}

static struct bucket *find_bucket(const struct luna_indexer *idx, const char *index,
                                  const char *value, int *rc)
{
    struct index *ix;
    HASH_FIND_STR(idx->indexes, index, ix);
    *rc = ix ? 0 : LUNA_ENOTFOUND;
    if (!ix)
        return NULL;
    struct bucket *b;
    HASH_FIND_STR(ix->buckets, value, b);
    return b;
}

int luna_indexer_each_indexed(const struct luna_indexer *idx, const char *index,
                              const char *value, luna_object_visit visit, void *ud)
{
    int rc;
    struct bucket *b = find_bucket(idx, index, value, &rc);
    if (!b)
        return rc;
    return visit_set(&b->members, visit, ud);
}

int luna_indexer_each_value(const struct luna_indexer *idx, const char *index,
                            int (*visit)(const char *value, size_t count, void *ud), void *ud)
{
    struct index *ix;
    HASH_FIND_STR(idx->indexes, index, ix);
    if (!ix)
        return LUNA_ENOTFOUND;
    struct bucket *b, *tmp;
    HASH_ITER(hh, ix->buckets, b, tmp) {
        int rc = visit(b->value, b->members.count, ud);
        if (rc)
            return rc;
    }
    return 0;
}
