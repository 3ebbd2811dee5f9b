/*
 * event_memory.h — what the Event recorders remember, kept outside every
 * Lua state so it survives reloads as the informers' caches do.
 *
 * luna.event deduplicates Events per controller (lua/luna/events.lua): the
 * same occurrence again within the window patches the Event it recorded
 * (its series count grows) instead of creating another.  A reload makes a
 * new Lua state, so that memory lives here, one per controller name, and
 * the new state's recorder picks it up: a repeated Event stays one Event
 * with a growing count across any number of reloads (client-go's recorder
 * keeps its cache for the life of the process too).
 *
 * A memory maps a recorder's deduplication key (stored as its SHA-256) to
 * the Event recorded for it: name, namespace, count, last occurrence (µs
 * since the epoch); it also keeps the hex nanoseconds of the last Event
 * name handed out, so names stay unique across recorders.  It is a least
 * recently used map of at most LUNA_EVENT_MEMORY_MAX entries.
 *
 * Uses: libcrypto (SHA-256), uthash/utlist.  Runs on the loop thread.
 *
 * Invariants:
 *   - an entry is in a memory's hash if and only if it is on its list,
 *     and the list (most recently used first) has `count` <= MAX entries;
 *   - at most one memory per controller name in a set.
 *
 * Ownership: the runtime owns the set (luna_event_memories_free frees
 * every memory in it); memories belong to the set and are freed by
 * luna_event_memories_drop or the set's free.  Strings passed in are
 * copied; entries read out are copies.
 */
#ifndef LUNA_EVENT_MEMORY_H
#define LUNA_EVENT_MEMORY_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

#define LUNA_EVENT_MEMORY_MAX 4096      /* entries per controller: the recorder's default */
#define LUNA_EVENT_NAME_MAX 253         /* an Event name (a DNS subdomain) */
#define LUNA_EVENT_NAMESPACE_MAX 63     /* a namespace (a DNS label) */

struct luna_event_memories;
struct luna_event_memory;

struct luna_event_entry {
    double count;                       /* occurrences recorded so far */
    double last_us;                     /* last occurrence, µs since the epoch */
    char name[LUNA_EVENT_NAME_MAX + 1];
    char namespace_[LUNA_EVENT_NAMESPACE_MAX + 1];
};

int luna_event_memories_new(struct luna_event_memories **out, luna_error *err);
void luna_event_memories_free(struct luna_event_memories *set); /* NULL: no-op */

/* The memory of a controller, made empty on first use; NULL when out of
 * memory.  Borrowed until dropped or the set is freed. */
struct luna_event_memory *luna_event_memories_get(struct luna_event_memories *set,
                                                  const char *controller);
/* Forgets a controller's memory (it is gone after a reload). */
void luna_event_memories_drop(struct luna_event_memories *set, const char *controller);
/* Calls keep(ud, controller) for every memory and drops those it says
 * false for. */
void luna_event_memories_retain(struct luna_event_memories *set,
                                bool (*keep)(void *ud, const char *controller), void *ud);
size_t luna_event_memories_count(const struct luna_event_memories *set);

/* The entry of key, copied to *out; it becomes the most recently used.
 * false if there is none. */
bool luna_event_memory_get(struct luna_event_memory *m, const char *key, size_t len,
                           struct luna_event_entry *out);
/* Adds or replaces key's entry as the most recently used, dropping the
 * least recently used beyond LUNA_EVENT_MEMORY_MAX.  LUNA_EINVAL if the
 * name or namespace is too long (nothing is stored), LUNA_ENOMEM. */
int luna_event_memory_put(struct luna_event_memory *m, const char *key, size_t len,
                          const struct luna_event_entry *e, luna_error *err);
bool luna_event_memory_forget(struct luna_event_memory *m, const char *key, size_t len);
size_t luna_event_memory_size(const struct luna_event_memory *m);
/* The hex nanoseconds of the last Event name handed out, or NULL. */
const char *luna_event_memory_last_ns(const struct luna_event_memory *m);
/* hex: at most 16 hex digits; LUNA_EINVAL otherwise. */
int luna_event_memory_set_last_ns(struct luna_event_memory *m, const char *hex, luna_error *err);

#endif
