/* delta_fifo.c — see delta_fifo.h. */
#include "delta_fifo.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

struct item {
    char *key;
    struct luna_delta *deltas;
    size_t n, cap;
    UT_hash_handle hh;
};

struct luna_delta_fifo {
    const struct luna_indexer *known;
    struct item *items;
    /* Ring buffer of queued items, oldest at head. */
    struct item **ring;
    size_t head, count, cap;
    bool populated;
    size_t initial_population;
};

const char *luna_delta_type_name(enum luna_delta_type type)
{
    switch (type) {
    case LUNA_DELTA_ADDED:    return "Added";
    case LUNA_DELTA_UPDATED:  return "Updated";
    case LUNA_DELTA_DELETED:  return "Deleted";
    case LUNA_DELTA_REPLACED: return "Replaced";
    case LUNA_DELTA_SYNC:     return "Sync";
    }
    return "?";
}

struct luna_delta_fifo *luna_delta_fifo_new(const struct luna_indexer *known)
{
    struct luna_delta_fifo *f = calloc(1, sizeof *f);
    if (f)
        f->known = known;
    return f;
}

static void item_free(struct item *it)
{
    for (size_t i = 0; i < it->n; i++)
        luna_object_unref(it->deltas[i].obj);
    free(it->deltas);
    free(it->key);
    free(it);
}

void luna_delta_fifo_free(struct luna_delta_fifo *f)
{
    if (!f)
        return;
    struct item *it, *tmp;
    HASH_ITER(hh, f->items, it, tmp) {
        HASH_DEL(f->items, it);
        item_free(it);
    }
    free(f->ring);
    free(f);
}

static int ring_push(struct luna_delta_fifo *f, struct item *it)
{
    if (f->count == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 64;
        struct item **ring = malloc(cap * sizeof *ring);
        if (!ring)
            return LUNA_ENOMEM;
        for (size_t i = 0; i < f->count; i++)
            ring[i] = f->ring[(f->head + i) % f->cap];
        free(f->ring);
        f->ring = ring;
        f->cap = cap;
        f->head = 0;
    }
    f->ring[(f->head + f->count) % f->cap] = it;
    f->count++;
    return 0;
}

static bool is_deletion(const struct luna_delta *d) { return d->type == LUNA_DELTA_DELETED; }

/* Appends a delta for key (taking a new reference to obj, which may be
 * NULL only for final-state-unknown deletions) and collapses a repeated
 * deletion. */
static int queue_action(struct luna_delta_fifo *f, const char *key, enum luna_delta_type type,
                        struct luna_object *obj, bool final_state_unknown)
{
    struct item *it;
    HASH_FIND_STR(f->items, key, it);
    bool fresh = !it;
    if (fresh) {
        it = calloc(1, sizeof *it);
        if (!it || !(it->key = strdup(key))) {
            free(it);
            return LUNA_ENOMEM;
        }
    }
    struct luna_delta d = { type, final_state_unknown, obj ? luna_object_ref(obj) : NULL };
    if (it->n && is_deletion(&d) && is_deletion(&it->deltas[it->n - 1])) {
        /* Keep the older deletion unless it is the less informed one. */
        struct luna_delta *prev = &it->deltas[it->n - 1];
        if (prev->final_state_unknown) {
            luna_object_unref(prev->obj);
            *prev = d;
        } else {
            luna_object_unref(d.obj);
        }
        return 0;
    }
    if (it->n == it->cap) {
        size_t cap = it->cap ? it->cap * 2 : 2;
        struct luna_delta *v = realloc(it->deltas, cap * sizeof *v);
        if (!v) {
            luna_object_unref(d.obj);
            if (fresh)
                item_free(it);
            return LUNA_ENOMEM;
        }
        it->deltas = v;
        it->cap = cap;
    }
    it->deltas[it->n++] = d;
    if (fresh) {
        if (ring_push(f, it) < 0) {
            item_free(it);
            return LUNA_ENOMEM;
        }
        HASH_ADD_KEYPTR(hh, f->items, it->key, strlen(it->key), it);
    }
    return 0;
}

int luna_delta_fifo_add(struct luna_delta_fifo *f, struct luna_object *obj)
{
    f->populated = true;
    return queue_action(f, luna_object_key(obj), LUNA_DELTA_ADDED, obj, false);
}

int luna_delta_fifo_update(struct luna_delta_fifo *f, struct luna_object *obj)
{
    f->populated = true;
    return queue_action(f, luna_object_key(obj), LUNA_DELTA_UPDATED, obj, false);
}

int luna_delta_fifo_delete(struct luna_delta_fifo *f, struct luna_object *obj)
{
    const char *key = luna_object_key(obj);
    f->populated = true;
    struct item *it;
    HASH_FIND_STR(f->items, key, it);
    if (!it && !(f->known && luna_indexer_get(f->known, key)))
        return 0;
    return queue_action(f, key, LUNA_DELTA_DELETED, obj, false);
}

struct key_set {
    const char *key;  /* borrowed from a listed object */
    UT_hash_handle hh;
};

struct replace_ctx {
    struct luna_delta_fifo *f;
    struct key_set *listed;
    size_t queued_deletions;
    int rc;
};

static int delete_unlisted_known(struct luna_object *obj, void *ud)
{
    struct replace_ctx *ctx = ud;
    const char *key = luna_object_key(obj);
    struct key_set *k;
    HASH_FIND_STR(ctx->listed, key, k);
    if (k)
        return 0;
    ctx->queued_deletions++;
    ctx->rc = queue_action(ctx->f, key, LUNA_DELTA_DELETED, obj, true);
    return ctx->rc;
}

int luna_delta_fifo_replace(struct luna_delta_fifo *f, struct luna_object *const *objs,
                            size_t n)
{
    struct replace_ctx ctx = { .f = f };
    struct key_set *entries = calloc(n ? n : 1, sizeof *entries);
    if (!entries)
        return LUNA_ENOMEM;
    size_t distinct = 0;
    for (size_t i = 0; i < n && ctx.rc == 0; i++) {
        const char *key = luna_object_key(objs[i]);
        struct key_set *k;
        HASH_FIND_STR(ctx.listed, key, k);
        if (!k) {
            entries[distinct].key = key;
            HASH_ADD_KEYPTR(hh, ctx.listed, key, strlen(key), &entries[distinct]);
            distinct++;
        }
        ctx.rc = queue_action(f, key, LUNA_DELTA_REPLACED, objs[i], false);
    }
    /* Known objects the list no longer has were deleted while we were not
     * watching. */
    if (ctx.rc == 0 && f->known)
        luna_indexer_each(f->known, delete_unlisted_known, &ctx);
    /* So were queued keys that never reached the cache.  Their deltas were
     * pushed before this Replace; the newest holds the last state seen. */
    for (size_t i = 0; ctx.rc == 0 && i < f->count; i++) {
        struct item *it = f->ring[(f->head + i) % f->cap];
        struct key_set *k;
        HASH_FIND_STR(ctx.listed, it->key, k);
        if (k || (f->known && luna_indexer_get(f->known, it->key)))
            continue;
        struct luna_delta *newest = &it->deltas[it->n - 1];
        if (is_deletion(newest))
            continue;
        ctx.queued_deletions++;
        ctx.rc = queue_action(f, it->key, LUNA_DELTA_DELETED, newest->obj, true);
    }
    HASH_CLEAR(hh, ctx.listed);
    free(entries);
    if (!f->populated) {
        f->populated = true;
        f->initial_population = distinct + ctx.queued_deletions;
    }
    return ctx.rc;
}

static int sync_known(struct luna_object *obj, void *ud)
{
    struct luna_delta_fifo *f = ud;
    struct item *it;
    HASH_FIND_STR(f->items, luna_object_key(obj), it);
    if (it)
        return 0; /* pending deltas will deliver a newer state anyway */
    return queue_action(f, luna_object_key(obj), LUNA_DELTA_SYNC, obj, false);
}

int luna_delta_fifo_resync(struct luna_delta_fifo *f)
{
    return f->known ? luna_indexer_each(f->known, sync_known, f) : 0;
}

int luna_delta_fifo_pop(struct luna_delta_fifo *f, luna_delta_process process, void *ud)
{
    if (f->count == 0)
        return LUNA_ENOTFOUND;
    struct item *it = f->ring[f->head];
    f->head = (f->head + 1) % f->cap;
    f->count--;
    HASH_DEL(f->items, it);
    if (f->initial_population > 0)
        f->initial_population--;
    int rc = process(it->key, it->deltas, it->n, ud);
    item_free(it);
    return rc;
}

size_t luna_delta_fifo_len(const struct luna_delta_fifo *f) { return f->count; }

bool luna_delta_fifo_has_synced(const struct luna_delta_fifo *f)
{
    return f->populated && f->initial_population == 0;
}

size_t luna_delta_fifo_pending(const struct luna_delta_fifo *f, const char *key)
{
    struct item *it;
    HASH_FIND_STR(f->items, key, it);
    return it ? it->n : 0;
}
