/* delta_fifo.c — see delta_fifo.h. */
#include "cache/delta_fifo.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "cache/objset.h"

/* One allocation per queued key: the key and the first delta live inside
 * it (most keys collect one delta between pops). */
struct item {
    UT_hash_handle hh;
    struct luna_delta *deltas;  /* &first, or a malloc'd array once n > 1 */
    size_t n, cap;
    struct luna_delta first;
    char key[];
};

struct luna_delta_fifo {
    const struct luna_indexer *known;
    struct item *items;
    /* Ring buffer of queued items, oldest at head. */
    struct item **ring;
    size_t head, count, cap;
    bool populated;
    size_t initial_population;
    uint64_t sync_round;        /* the round of the resync in progress */
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
    if (it->deltas != &it->first)
        free(it->deltas);
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
static int queue_action(struct luna_delta_fifo *f, const char *key, size_t key_len,
                        enum luna_delta_type type, struct luna_object *obj,
                        bool final_state_unknown)
{
    struct item *it;
    HASH_FIND(hh, f->items, key, key_len, it);
    bool fresh = !it;
    if (fresh) {
        it = malloc(sizeof *it + key_len + 1);
        if (!it)
            return LUNA_ENOMEM;
        memset(it, 0, sizeof *it);
        memcpy(it->key, key, key_len);
        it->key[key_len] = '\0';
        it->deltas = &it->first;
        it->cap = 1;
    }
    struct luna_delta d = { type, final_state_unknown, obj ? luna_object_ref(obj) : NULL,
                            type == LUNA_DELTA_SYNC ? f->sync_round : 0 };
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
        size_t cap = it->cap * 4;
        struct luna_delta *v = malloc(cap * sizeof *v);
        if (!v) {
            luna_object_unref(d.obj);
            if (fresh)
                item_free(it);
            return LUNA_ENOMEM;
        }
        memcpy(v, it->deltas, it->n * sizeof *v);
        if (it->deltas != &it->first)
            free(it->deltas);
        it->deltas = v;
        it->cap = cap;
    }
    it->deltas[it->n++] = d;
    if (fresh) {
        if (ring_push(f, it) < 0) {
            item_free(it);
            return LUNA_ENOMEM;
        }
        HASH_ADD_KEYPTR(hh, f->items, it->key, key_len, it);
    }
    return 0;
}

int luna_delta_fifo_add(struct luna_delta_fifo *f, struct luna_object *obj)
{
    f->populated = true;
    return queue_action(f, luna_object_key(obj), obj->key_len, LUNA_DELTA_ADDED, obj, false);
}

int luna_delta_fifo_update(struct luna_delta_fifo *f, struct luna_object *obj)
{
    f->populated = true;
    return queue_action(f, luna_object_key(obj), obj->key_len, LUNA_DELTA_UPDATED, obj, false);
}

int luna_delta_fifo_delete(struct luna_delta_fifo *f, struct luna_object *obj)
{
    const char *key = luna_object_key(obj);
    f->populated = true;
    struct item *it;
    HASH_FIND(hh, f->items, key, obj->key_len, it);
    if (!it && !(f->known && luna_indexer_get(f->known, key)))
        return 0;
    return queue_action(f, key, obj->key_len, LUNA_DELTA_DELETED, obj, false);
}

struct replace_ctx {
    struct luna_delta_fifo *f;
    struct luna_objset listed;  /* the listed objects, by key */
    size_t queued_deletions;
    int rc;
};

static int delete_unlisted_known(struct luna_object *obj, void *ud)
{
    struct replace_ctx *ctx = ud;
    if (luna_objset_get(&ctx->listed, luna_object_key(obj), obj->key_len))
        return 0;
    ctx->queued_deletions++;
    ctx->rc = queue_action(ctx->f, luna_object_key(obj), obj->key_len, LUNA_DELTA_DELETED, obj,
                           true);
    return ctx->rc;
}

int luna_delta_fifo_replace(struct luna_delta_fifo *f, struct luna_object *const *objs,
                            size_t n)
{
    struct replace_ctx ctx = { .f = f, .listed = LUNA_OBJSET_INIT };
    size_t distinct = 0;
    for (size_t i = 0; i < n && ctx.rc == 0; i++) {
        struct luna_object *dup;
        ctx.rc = luna_objset_put(&ctx.listed, objs[i], &dup);
        if (ctx.rc == 0 && !dup)
            distinct++;
        if (ctx.rc == 0)
            ctx.rc = queue_action(f, luna_object_key(objs[i]), objs[i]->key_len,
                                  LUNA_DELTA_REPLACED, objs[i], false);
    }
    /* Known objects the list no longer has were deleted while we were not
     * watching. */
    if (ctx.rc == 0 && f->known)
        luna_indexer_each(f->known, delete_unlisted_known, &ctx);
    /* So were queued keys that never reached the cache.  Their deltas were
     * pushed before this Replace; the newest holds the last state seen. */
    for (size_t i = 0; ctx.rc == 0 && i < f->count; i++) {
        struct item *it = f->ring[(f->head + i) % f->cap];
        size_t key_len = strlen(it->key);
        if (luna_objset_get(&ctx.listed, it->key, key_len) ||
            (f->known && luna_indexer_get(f->known, it->key)))
            continue;
        struct luna_delta *newest = &it->deltas[it->n - 1];
        if (is_deletion(newest))
            continue;
        ctx.queued_deletions++;
        ctx.rc = queue_action(f, it->key, key_len, LUNA_DELTA_DELETED, newest->obj, true);
    }
    luna_objset_clear(&ctx.listed);
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
    HASH_FIND(hh, f->items, luna_object_key(obj), obj->key_len, it);
    if (it)
        return 0; /* pending deltas will deliver a newer state anyway */
    return queue_action(f, luna_object_key(obj), obj->key_len, LUNA_DELTA_SYNC, obj, false);
}

int luna_delta_fifo_resync(struct luna_delta_fifo *f, uint64_t round)
{
    f->sync_round = round;
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
