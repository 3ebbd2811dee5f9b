/*
 * object.h — a cached Kubernetes object: immutable, reference-counted, compact.
 *
 * An object is one allocation: a small header, then its key ("ns/name", or
 * "name" when cluster-scoped), uid, resourceVersion, labels and its JSON
 * bytes (metadata.managedFields already dropped unless the informer keeps
 * them).  Nothing in it changes after luna_object_new returns, so the same
 * object can sit in the cache, in DeltaFIFO deltas and in Lua at once; each
 * holder owns one reference.
 *
 * Labels that are plain in the JSON (string values, no escapes, keys sorted
 * and distinct, as every API server writes them) are not copied: the object
 * remembers where metadata.labels starts in its JSON and reads them there
 * on demand.  Five recommended labels would otherwise add ~170 bytes, an
 * eighth of a typical ConfigMap.  Other labels are copied in, sorted.
 *
 * Invariants:
 *   - refs > 0 if and only if someone may still read the object;
 *   - json is NUL-terminated (json[json_len] == '\0') so it can be handed
 *     to parsers that want C strings;
 *   - labels are read in key order, each key at most once.
 *
 * Runs on the loop thread only (the count is not atomic).
 */
#ifndef LUNA_OBJECT_H
#define LUNA_OBJECT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct luna_object {
    uint32_t refs;
    uint32_t json_len;
    uint16_t key_len;     /* strlen(key) */
    uint16_t ns_len;      /* 0 when cluster-scoped */
    uint16_t uid_len;
    uint16_t rv_len;
    uint16_t nlabels;
    uint16_t labels_len;  /* bytes of the packed label block (0 when read from JSON) */
    uint32_t labels_at;   /* offset + 1 of metadata.labels' '{' in json; 0: the block */
    /* key\0 uid\0 rv\0 [label-key\0 label-value\0]* json\0 */
    char data[];
};

/* What luna_object_new copies in.  All borrowed for the call. */
struct luna_object_fields {
    const char *namespace_;  /* NULL or "" when cluster-scoped */
    const char *name;
    const char *uid;
    const char *resource_version;
    /* nlabels pairs: key, value, key, value...  A repeated key keeps its
     * last value; a NULL value (the JSON's null) leaves the key out when it
     * is the last. */
    const char *const *labels;
    size_t nlabels;
    const char *json;
    size_t json_len;
    /* Offset + 1 of metadata.labels' '{' in json, or 0.  When set and the
     * labels there are plain (see above), they are read from the JSON and
     * `labels` is ignored; otherwise `labels` is copied. */
    size_t labels_json_at;
};

/* A new object with one reference, owned by the caller (drop it with
 * luna_object_unref).  Fails with LUNA_EINVAL on a missing name or a field
 * too long for the compact header (64 KiB strings, 4 GiB JSON). */
int luna_object_new(const struct luna_object_fields *f, struct luna_object **out,
                    luna_error *err);

static inline struct luna_object *luna_object_ref(struct luna_object *o)
{
    o->refs++;
    return o;
}

void luna_object_unref(struct luna_object *o);

static inline const char *luna_object_key(const struct luna_object *o) { return o->data; }
const char *luna_object_name(const struct luna_object *o);
/* Writes the namespace (or "") into buf; returns its length. */
size_t luna_object_namespace(const struct luna_object *o, char *buf, size_t size);
const char *luna_object_uid(const struct luna_object *o);
const char *luna_object_resource_version(const struct luna_object *o);
const char *luna_object_json(const struct luna_object *o);

/* The value of label `key`, or NULL.  Borrowed until the next call of
 * luna_object_label or luna_object_next_label (labels read from the JSON
 * are copied out into one buffer for the loop thread). */
const char *luna_object_label(const struct luna_object *o, const char *key);
/* Iterates labels in key order: *cursor starts at 0; returns 0 and sets
 * key/value while labels remain, -1 at the end.  key and value are
 * borrowed as luna_object_label's result is. */
int luna_object_next_label(const struct luna_object *o, size_t *cursor,
                           const char **key, const char **value);

/* Bytes held by the object including its header (for memory accounting). */
size_t luna_object_size(const struct luna_object *o);

/* Builds the cache key of (namespace, name) into buf: "ns/name" or "name".
 * Returns the length, or -1 if it does not fit. */
int luna_object_make_key(char *buf, size_t size, const char *namespace_, const char *name);

#endif
