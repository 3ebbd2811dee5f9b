/* event_memory.c — see event_memory.h. */
#include "api/event_memory.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <utlist.h>

#define DIGEST_LEN 32

struct entry {
    unsigned char digest[DIGEST_LEN];
    struct luna_event_entry e;
    struct entry *prev, *next;        /* the LRU list, most recently used first */
    UT_hash_handle hh;
};

struct luna_event_memory {
    char *controller;
    struct entry *entries;            /* hash by digest */
    struct entry *lru;                /* list head */
    size_t count;
    char last_ns[17];                 /* "" until set */
    UT_hash_handle hh;
};

struct luna_event_memories {
    struct luna_event_memory *by_name;
};

int luna_event_memories_new(struct luna_event_memories **out, luna_error *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : luna_error_set(err, LUNA_ENOMEM, "event memory: out of memory");
}

static void memory_free(struct luna_event_memory *m)
{
    struct entry *e, *tmp;
    HASH_ITER(hh, m->entries, e, tmp) {
        HASH_DEL(m->entries, e);
        free(e);
    }
    free(m->controller);
    free(m);
}

void luna_event_memories_free(struct luna_event_memories *set)
{
    if (!set)
        return;
    struct luna_event_memory *m, *tmp;
    HASH_ITER(hh, set->by_name, m, tmp) {
        HASH_DEL(set->by_name, m);
        memory_free(m);
    }
    free(set);
}

struct luna_event_memory *luna_event_memories_get(struct luna_event_memories *set,
                                                  const char *controller)
{
    struct luna_event_memory *m;
    HASH_FIND_STR(set->by_name, controller, m);
    if (m)
        return m;
    m = calloc(1, sizeof *m);
    if (!m || !(m->controller = strdup(controller))) {
        free(m);
        return NULL;
    }
    HASH_ADD_KEYPTR(hh, set->by_name, m->controller, strlen(m->controller), m);
    return m;
}

void luna_event_memories_drop(struct luna_event_memories *set, const char *controller)
{
    struct luna_event_memory *m;
    HASH_FIND_STR(set->by_name, controller, m);
    if (!m)
        return;
    HASH_DEL(set->by_name, m);
    memory_free(m);
}

void luna_event_memories_retain(struct luna_event_memories *set,
                                bool (*keep)(void *ud, const char *controller), void *ud)
{
    struct luna_event_memory *m, *tmp;
    HASH_ITER(hh, set->by_name, m, tmp) {
        if (!keep(ud, m->controller)) {
            HASH_DEL(set->by_name, m);
            memory_free(m);
        }
    }
}

size_t luna_event_memories_count(const struct luna_event_memories *set)
{
    return HASH_COUNT(set->by_name);
}

static bool digest(const char *key, size_t len, unsigned char out[DIGEST_LEN])
{
    unsigned int n = 0;
    return EVP_Digest(key, len, out, &n, EVP_sha256(), NULL) == 1 && n == DIGEST_LEN;
}

static struct entry *find(struct luna_event_memory *m, const char *key, size_t len)
{
    unsigned char d[DIGEST_LEN];
    if (!digest(key, len, d))
        return NULL;
    struct entry *e;
    HASH_FIND(hh, m->entries, d, DIGEST_LEN, e);
    return e;
}

static void remove_entry(struct luna_event_memory *m, struct entry *e)
{
    HASH_DEL(m->entries, e);
    DL_DELETE(m->lru, e);
    m->count--;
    free(e);
}

bool luna_event_memory_get(struct luna_event_memory *m, const char *key, size_t len,
                           struct luna_event_entry *out)
{
    struct entry *e = find(m, key, len);
    if (!e)
        return false;
    DL_DELETE(m->lru, e);
    DL_PREPEND(m->lru, e);
    *out = e->e;
    return true;
}

int luna_event_memory_put(struct luna_event_memory *m, const char *key, size_t len,
                          const struct luna_event_entry *in, luna_error *err)
{
    if (strnlen(in->name, sizeof in->name) > LUNA_EVENT_NAME_MAX ||
        strnlen(in->namespace_, sizeof in->namespace_) > LUNA_EVENT_NAMESPACE_MAX)
        return luna_error_set(err, LUNA_EINVAL, "event memory: name or namespace too long");
    unsigned char d[DIGEST_LEN];
    if (!digest(key, len, d))
        return luna_error_set(err, LUNA_ENOMEM, "event memory: SHA-256 failed");
    struct entry *e;
    HASH_FIND(hh, m->entries, d, DIGEST_LEN, e);
    if (e) {
        DL_DELETE(m->lru, e);
    } else {
        e = calloc(1, sizeof *e);
        if (!e)
            return luna_error_set(err, LUNA_ENOMEM, "event memory: out of memory");
        memcpy(e->digest, d, DIGEST_LEN);
        HASH_ADD(hh, m->entries, digest, DIGEST_LEN, e);
        m->count++;
    }
    e->e = *in;
    DL_PREPEND(m->lru, e);
    while (m->count > LUNA_EVENT_MEMORY_MAX)
        remove_entry(m, m->lru->prev); /* utlist: head->prev is the tail */
    return 0;
}

bool luna_event_memory_forget(struct luna_event_memory *m, const char *key, size_t len)
{
    struct entry *e = find(m, key, len);
    if (!e)
        return false;
    remove_entry(m, e);
    return true;
}

size_t luna_event_memory_size(const struct luna_event_memory *m) { return m->count; }

const char *luna_event_memory_last_ns(const struct luna_event_memory *m)
{
    return m->last_ns[0] ? m->last_ns : NULL;
}

int luna_event_memory_set_last_ns(struct luna_event_memory *m, const char *hex, luna_error *err)
{
    size_t n = strlen(hex);
    if (n == 0 || n > 16 || strspn(hex, "0123456789abcdef") != n)
        return luna_error_set(err, LUNA_EINVAL, "event memory: last name nanoseconds must be "
                              "1 to 16 lowercase hex digits");
    memcpy(m->last_ns, hex, n + 1);
    return 0;
}
