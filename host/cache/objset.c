/* objset.c — see objset.h. */
#include "cache/objset.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#define MIN_CAP 8

/* 64-bit multiply-xorshift over 8-byte words: keys are short, and this runs
 * on every lookup. */
static uint64_t hash_key(const char *key, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, key, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        key += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, key, len);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static bool same_key(const struct luna_object *o, const char *key, size_t len)
{
    return o->key_len == len && memcmp(luna_object_key(o), key, len) == 0;
}

/* The slot holding key, or the empty slot where it would go. */
static size_t find_slot(const struct luna_objset *s, const char *key, size_t len)
{
    size_t mask = s->cap - 1, i = (size_t)hash_key(key, len) & mask;
    while (s->slots[i] && !same_key(s->slots[i], key, len))
        i = (i + 1) & mask;
    return i;
}

static int resize(struct luna_objset *s, size_t cap)
{
    struct luna_object **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return LUNA_ENOMEM;
    struct luna_objset bigger = { slots, cap, s->count };
    for (size_t i = 0; i < s->cap; i++) {
        struct luna_object *o = s->slots[i];
        if (o)
            slots[find_slot(&bigger, luna_object_key(o), o->key_len)] = o;
    }
    free(s->slots);
    *s = bigger;
    return 0;
}

void luna_objset_clear(struct luna_objset *s)
{
    free(s->slots);
    s->slots = NULL;
    s->cap = s->count = 0;
}

struct luna_object *luna_objset_get(const struct luna_objset *s, const char *key, size_t len)
{
    if (!s->count)
        return NULL;
    return s->slots[find_slot(s, key, len)];
}

int luna_objset_put(struct luna_objset *s, struct luna_object *obj,
                    struct luna_object **replaced)
{
    *replaced = NULL;
    if ((s->count + 1) * 4 > s->cap * 3 && resize(s, s->cap ? s->cap * 2 : MIN_CAP) < 0)
        return LUNA_ENOMEM;
    size_t i = find_slot(s, luna_object_key(obj), obj->key_len);
    if (s->slots[i])
        *replaced = s->slots[i];
    else
        s->count++;
    s->slots[i] = obj;
    return 0;
}

struct luna_object *luna_objset_remove(struct luna_objset *s, const char *key, size_t len)
{
    if (!s->count)
        return NULL;
    size_t mask = s->cap - 1, i = find_slot(s, key, len);
    struct luna_object *found = s->slots[i];
    if (!found)
        return NULL;
    /* Backward-shift: move later members of the probe run into the hole
     * when the hole lies between their home slot and where they sit. */
    for (size_t j = (i + 1) & mask; s->slots[j]; j = (j + 1) & mask) {
        const struct luna_object *o = s->slots[j];
        size_t home = (size_t)hash_key(luna_object_key(o), o->key_len) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            s->slots[i] = s->slots[j];
            i = j;
        }
    }
    s->slots[i] = NULL;
    s->count--;
    /* Give memory back after mass deletions (never below MIN_CAP). */
    if (s->cap > MIN_CAP && s->count * 8 < s->cap)
        resize(s, s->cap / 2); /* on failure the larger table stays valid */
    return found;
}

int luna_objset_snapshot(const struct luna_objset *s, struct luna_object ***out, size_t *n)
{
    *out = malloc((s->count ? s->count : 1) * sizeof **out);
    if (!*out)
        return LUNA_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i])
            (*out)[k++] = luna_object_ref(s->slots[i]);
    *n = k;
    return 0;
}
