/* devserver_store.c — see devserver_store.h. */
#include "devserver/devserver_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* A failed hash-table allocation leaves the element out (hh.tbl NULL)
 * instead of exiting the process. */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

struct entry {
    char *key;            /* == obj->key of the first object stored (owned) */
    luna_ds_obj *obj;
    UT_hash_handle hh;
};

/* The current objects in key order, in one array so a snapshot reads it
 * sequentially (a LIST page of 100,000 objects must not chase 100,000
 * pointers). */
struct sorted_entry {
    const char *key;          /* the entry's key */
    luna_ds_obj *obj;         /* the entry's current object */
};

struct luna_ds_store {
    size_t history;           /* events kept per collection */
    uint64_t rv;              /* the RV of the last write */
};

struct luna_ds_coll {
    luna_ds_store *store;
    struct entry *map;
    struct sorted_entry *sorted; /* valid if and only if !dirty */
    size_t nsorted;
    bool dirty;
    luna_ds_event *ring;      /* circular: ring[(head + i) % cap], i < count */
    size_t cap, head, count;
    uint64_t floor;
    luna_ds_listener *listeners;
};

luna_ds_store *luna_ds_store_new(size_t history)
{
    luna_ds_store *s = calloc(1, sizeof *s);
    if (s)
        s->history = history ? history : LUNA_DS_HISTORY_DEFAULT;
    return s;
}

void luna_ds_store_free(luna_ds_store *s) { free(s); }

uint64_t luna_ds_store_rv(const luna_ds_store *s) { return s->rv; }
uint64_t luna_ds_store_next_rv(luna_ds_store *s) { return ++s->rv; }

luna_ds_coll *luna_ds_store_coll_new(luna_ds_store *s)
{
    luna_ds_coll *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->store = s;
    c->cap = s->history;
    c->ring = calloc(c->cap, sizeof *c->ring);
    if (!c->ring) {
        free(c);
        return NULL;
    }
    c->floor = s->rv;
    c->dirty = true;
    return c;
}

void luna_ds_store_coll_free(luna_ds_coll *c)
{
    if (!c)
        return;
    struct entry *e, *tmp;
    HASH_ITER(hh, c->map, e, tmp) {
        HASH_DEL(c->map, e);
        luna_ds_obj_unref(e->obj);
        free(e->key);
        free(e);
    }
    for (size_t i = 0; i < c->count; i++) {
        luna_ds_event *ev = &c->ring[(c->head + i) % c->cap];
        luna_ds_obj_unref(ev->obj);
        if (ev->prev)
            luna_ds_obj_unref(ev->prev);
    }
    free(c->ring);
    free(c->sorted);
    free(c);
}

/* ---- objects ---- */

/* A copy of s ("" for NULL); *ok becomes false when out of memory. */
static char *dup_str(const char *s, bool *ok)
{
    char *d = strdup(s ? s : "");
    if (!d)
        *ok = false;
    return d;
}

luna_ds_obj *luna_ds_obj_new(const json_t *doc, uint64_t rv)
{
    luna_ds_obj *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->refs = 1;
    o->rv = rv;
    o->bytes = json_dumps(doc, JSON_COMPACT);
    bool ok = o->bytes != NULL;
    o->len = ok ? strlen(o->bytes) : 0;
    json_t *md = json_object_get(doc, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    o->ns = dup_str(ns, &ok);
    o->name = dup_str(name, &ok);
    if (ns && *ns && o->name) {
        size_t n = strlen(ns) + strlen(o->name) + 2;
        o->key = malloc(n);
        if (o->key)
            snprintf(o->key, n, "%s/%s", ns, o->name);
        else
            ok = false;
    } else {
        o->key = dup_str(o->name, &ok);
    }
    o->uid = dup_str(json_string_value(json_object_get(md, "uid")), &ok);
    json_t *labels = json_object_get(md, "labels");
    if (json_is_object(labels) && json_object_size(labels)) {
        o->labels = json_deep_copy(labels);
        ok = ok && o->labels;
    }
    json_t *refs = json_object_get(md, "ownerReferences");
    if (json_is_array(refs) && json_array_size(refs)) {
        o->owner_uids = calloc(json_array_size(refs), sizeof *o->owner_uids);
        ok = ok && o->owner_uids;
        size_t i;
        json_t *r;
        json_array_foreach(refs, i, r) {
            const char *uid = json_string_value(json_object_get(r, "uid"));
            if (uid && o->owner_uids && (o->owner_uids[o->nowners] = dup_str(uid, &ok)))
                o->nowners++;
        }
    }
    o->deleting = json_object_get(md, "deletionTimestamp") != NULL &&
                  !json_is_null(json_object_get(md, "deletionTimestamp"));
    json_t *fin = json_object_get(md, "finalizers");
    o->nfinalizers = json_is_array(fin) ? (int)json_array_size(fin) : 0;
    if (!ok) {
        luna_ds_obj_unref(o);
        return NULL;
    }
    return o;
}

luna_ds_obj *luna_ds_obj_ref(luna_ds_obj *o)
{
    o->refs++;
    return o;
}

void luna_ds_obj_unref(luna_ds_obj *o)
{
    if (!o || --o->refs > 0)
        return;
    free(o->bytes);
    free(o->key);
    free(o->ns);
    free(o->name);
    free(o->uid);
    if (o->labels)
        json_decref(o->labels);
    for (int i = 0; i < o->nowners; i++)
        free(o->owner_uids[i]);
    free(o->owner_uids);
    free(o);
}

json_t *luna_ds_obj_doc(const luna_ds_obj *o)
{
    /* the bytes were produced by json_dumps: only memory can fail */
    return json_loadb(o->bytes, o->len, 0, NULL);
}

/* ---- collection ---- */

luna_ds_obj *luna_ds_store_get(luna_ds_coll *c, const char *key)
{
    struct entry *e;
    HASH_FIND_STR(c->map, key, e);
    return e ? e->obj : NULL;
}

size_t luna_ds_store_count(const luna_ds_coll *c) { return HASH_COUNT(c->map); }
uint64_t luna_ds_store_floor(const luna_ds_coll *c) { return c->floor; }

static void record(luna_ds_coll *c, enum luna_ds_event_type type, luna_ds_obj *obj,
                   luna_ds_obj *prev)
{
    if (c->count == c->cap) {
        luna_ds_event *old = &c->ring[c->head];
        c->floor = old->rv;
        luna_ds_obj_unref(old->obj);
        if (old->prev)
            luna_ds_obj_unref(old->prev);
        c->head = (c->head + 1) % c->cap;
        c->count--;
    }
    luna_ds_event *ev = &c->ring[(c->head + c->count) % c->cap];
    ev->type = type;
    ev->rv = obj->rv;
    ev->obj = luna_ds_obj_ref(obj);
    ev->prev = prev ? luna_ds_obj_ref(prev) : NULL;
    c->count++;
    for (luna_ds_listener *l = c->listeners, *next; l; l = next) {
        next = l->next;
        l->fn(l, ev);
    }
}

static struct sorted_entry *find_sorted(luna_ds_coll *c, const char *key)
{
    size_t lo = 0, hi = c->nsorted;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(c->sorted[mid].key, key);
        if (d == 0)
            return &c->sorted[mid];
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int luna_ds_store_put(luna_ds_coll *c, enum luna_ds_event_type type, luna_ds_obj *obj)
{
    struct entry *e;
    HASH_FIND_STR(c->map, obj->key, e);
    struct entry *added = NULL;
    if (type != LUNA_DS_DELETED && !e) {
        /* everything that can fail, before anything changes */
        added = calloc(1, sizeof *added);
        if (added && !(added->key = strdup(obj->key))) {
            free(added);
            added = NULL;
        }
        if (!added) {
            luna_ds_obj_unref(obj);
            return LUNA_ENOMEM;
        }
    }
    luna_ds_obj *prev = e ? e->obj : NULL;
    if (type == LUNA_DS_DELETED) {
        if (e) {
            HASH_DEL(c->map, e);
            free(e->key);
            free(e);
            c->dirty = true;
        }
    } else if (e) {
        e->obj = obj;
        obj = luna_ds_obj_ref(obj);
        if (!c->dirty) {
            struct sorted_entry *se = find_sorted(c, e->key);
            if (se)
                se->obj = e->obj;
            else
                c->dirty = true;
        }
    } else {
        e = added;
        HASH_ADD_KEYPTR(hh, c->map, e->key, strlen(e->key), e);
        if (!e->hh.tbl) {
            free(e->key);
            free(e);
            luna_ds_obj_unref(obj);
            return LUNA_ENOMEM;
        }
        e->obj = luna_ds_obj_ref(obj);
        c->dirty = true;
    }
    record(c, type, obj, prev);
    if (prev)
        luna_ds_obj_unref(prev);
    luna_ds_obj_unref(obj);
    return 0;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const struct sorted_entry *)a)->key, ((const struct sorted_entry *)b)->key);
}

static int sort_current(luna_ds_coll *c)
{
    if (!c->dirty)
        return 0;
    size_t n = HASH_COUNT(c->map);
    struct sorted_entry *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return LUNA_ENOMEM;
    free(c->sorted);
    c->sorted = sorted;
    size_t i = 0;
    for (struct entry *e = c->map; e; e = e->hh.next)
        c->sorted[i++] = (struct sorted_entry){ e->key, e->obj };
    qsort(c->sorted, n, sizeof *c->sorted, by_key);
    c->nsorted = n;
    c->dirty = false;
    return 0;
}

struct past {
    const char *key;
    luna_ds_obj *obj;     /* state at the snapshot RV, NULL if absent */
    size_t order;         /* position in history: the earliest event wins */
};

/* (key, order) is a total order, so qsort keeps each key's events in order. */
static int past_cmp(const void *a, const void *b)
{
    const struct past *x = a, *y = b;
    int d = strcmp(x->key, y->key);
    if (d)
        return d;
    return x->order < y->order ? -1 : x->order > y->order;
}

int luna_ds_store_snapshot(luna_ds_coll *c, uint64_t rv, luna_ds_obj ***items, size_t *n)
{
    if (rv && rv < c->floor)
        return LUNA_ENOTFOUND;
    if (sort_current(c) < 0)
        return LUNA_ENOMEM;
    /* Keys written after rv: their state at rv is the prev of their first
     * later event (NULL when that event created them). */
    size_t first = c->count;
    if (rv) {
        for (size_t i = c->count; i-- > 0;) {
            if (c->ring[(c->head + i) % c->cap].rv <= rv)
                break;
            first = i;
        }
    }
    size_t npast = 0;
    struct past *past = NULL;
    if (first < c->count) {
        past = malloc((c->count - first) * sizeof *past);
        if (!past)
            return LUNA_ENOMEM;
        for (size_t i = first; i < c->count; i++) {
            luna_ds_event *ev = &c->ring[(c->head + i) % c->cap];
            past[npast].key = ev->obj->key;
            past[npast].obj = ev->prev;
            past[npast].order = i;
            npast++;
        }
        qsort(past, npast, sizeof *past, past_cmp);
        size_t u = 0;
        for (size_t i = 0; i < npast; i++)
            if (u == 0 || strcmp(past[u - 1].key, past[i].key) != 0)
                past[u++] = past[i];
        npast = u;
    }
    luna_ds_obj **out = malloc((c->nsorted + npast + 1) * sizeof *out);
    if (!out) {
        free(past);
        return LUNA_ENOMEM;
    }
    size_t k = 0, i = 0, j = 0;
    while (i < c->nsorted || j < npast) {
        int d;
        if (i == c->nsorted)
            d = 1;
        else if (j == npast)
            d = -1;
        else
            d = strcmp(c->sorted[i].key, past[j].key);
        if (d < 0) {
            out[k++] = c->sorted[i++].obj;
        } else {
            if (past[j].obj)
                out[k++] = past[j].obj;
            if (d == 0)
                i++;
            j++;
        }
    }
    free(past);
    *items = out;
    *n = k;
    return 0;
}

int luna_ds_store_replay(luna_ds_coll *c, uint64_t since,
                         void (*fn)(void *ctx, const luna_ds_event *ev), void *ctx)
{
    if (since < c->floor)
        return LUNA_ENOTFOUND;
    for (size_t i = 0; i < c->count; i++) {
        luna_ds_event *ev = &c->ring[(c->head + i) % c->cap];
        if (ev->rv > since)
            fn(ctx, ev);
    }
    return 0;
}

void luna_ds_store_subscribe(luna_ds_coll *c, luna_ds_listener *l)
{
    l->coll = c;
    l->prev = NULL;
    l->next = c->listeners;
    if (c->listeners)
        c->listeners->prev = l;
    c->listeners = l;
}

void luna_ds_store_unsubscribe(luna_ds_listener *l)
{
    if (!l->coll)
        return;
    if (l->prev)
        l->prev->next = l->next;
    else
        l->coll->listeners = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->coll = NULL;
    l->prev = l->next = NULL;
}

void luna_ds_store_each(luna_ds_coll *c, bool (*fn)(void *ctx, luna_ds_obj *o), void *ctx)
{
    struct entry *e, *tmp;
    HASH_ITER(hh, c->map, e, tmp)
        if (!fn(ctx, e->obj))
            return;
}
