/* devserver_patch.c — see devserver_patch.h. */
#include "devserver/devserver_patch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define MAX_PATH 64
/* kube-apiserver's bound on the operations of one JSON patch
 * (maxJSONPatchOperations); the copy bound is in the header. */
#define MAX_PATCH_OPS 10000u

/* Results of the internal steps; the public functions turn them into a
 * Status (400 BadRequest, 422 Invalid, 500 out of memory). */
enum {
    PATCH_OK = 0,
    PATCH_MALFORMED = -1,      /* the patch itself is wrong: 400 */
    PATCH_UNPROCESSABLE = -2,  /* it does not apply to the object: 422 */
    PATCH_NOMEM = -3,
    PATCH_TOO_LARGE = -4,      /* too many operations: 413 */
};

/* ---- list schema ---- */

static bool is_container_list(const char *f)
{
    return strcmp(f, "containers") == 0 || strcmp(f, "initContainers") == 0 ||
           strcmp(f, "ephemeralContainers") == 0;
}

/* Whether dotted ("spec.template.spec.containers") names path[0..depth). */
static bool path_is(const char *dotted, const char *const *path, int depth)
{
    const char *p = dotted;
    for (int i = 0; i < depth; i++) {
        size_t n = strlen(path[i]);
        if (strncmp(p, path[i], n) != 0)
            return false;
        p += n;
        if (i + 1 < depth) {
            if (*p != '.')
                return false;
            p++;
        }
    }
    return *p == '\0';
}

enum luna_ds_list_kind luna_ds_patch_list_key(const luna_ds_type *t, const char *const *path,
                                              int depth, const char **key)
{
    *key = NULL;
    if (depth <= 0)
        return LUNA_DS_LIST_ATOMIC;
    const char *f = path[depth - 1];
    const char *parent = depth >= 2 ? path[depth - 2] : "";
    if (depth == 2 && strcmp(parent, "metadata") == 0) {
        if (strcmp(f, "finalizers") == 0)
            return LUNA_DS_LIST_SET;
        if (strcmp(f, "ownerReferences") == 0) {
            *key = "uid";
            return LUNA_DS_LIST_MAP;
        }
        return LUNA_DS_LIST_ATOMIC;
    }
    if (t && t->custom)
        return LUNA_DS_LIST_ATOMIC;
    /* a built-in kind: the lists kube's OpenAPI marks as maps (generated,
     * devserver_resources.c); the name rules below for the rest (lists
     * kube's OpenAPI calls atomic but strategic merge patch merges by a
     * key, such as a Job's conditions) */
    for (int i = 0; t && i < t->n_list_keys; i++)
        if (path_is(t->list_keys[i].path, path, depth)) {
            *key = t->list_keys[i].key;
            return LUNA_DS_LIST_MAP;
        }
    if (is_container_list(f))
        *key = "name";
    else if (strcmp(f, "ports") == 0 && is_container_list(parent))
        *key = "containerPort";
    else if (strcmp(f, "ports") == 0 && t && strcmp(t->resource, "services") == 0 && depth == 2)
        *key = "port";
    else if (strcmp(f, "env") == 0 || strcmp(f, "volumes") == 0 ||
             strcmp(f, "imagePullSecrets") == 0 || strcmp(f, "resourceClaims") == 0)
        *key = "name";
    else if (strcmp(f, "volumeMounts") == 0)
        *key = "mountPath";
    else if (strcmp(f, "volumeDevices") == 0)
        *key = "devicePath";
    else if (strcmp(f, "conditions") == 0)
        *key = "type";
    else if (strcmp(f, "hostAliases") == 0)
        *key = "ip";
    else if (strcmp(f, "topologySpreadConstraints") == 0)
        *key = "topologyKey";
    else if (strcmp(f, "secrets") == 0 && t && strcmp(t->resource, "serviceaccounts") == 0)
        *key = "name";
    return *key ? LUNA_DS_LIST_MAP : LUNA_DS_LIST_ATOMIC;
}

/* ---- RFC 7386 ---- */

json_t *luna_ds_patch_merge(json_t *target, const json_t *patch)
{
    if (!json_is_object(patch)) {
        json_decref(target);
        return json_deep_copy(patch);
    }
    if (!json_is_object(target)) {
        json_decref(target);
        target = json_object();
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v) {
        if (json_is_null(v)) {
            json_object_del(target, k);
        } else {
            json_t *cur = json_object_get(target, k);
            json_t *merged = luna_ds_patch_merge(cur ? json_incref(cur) : json_null(), v);
            json_object_set_new(target, k, merged);
        }
    }
    return target;
}

bool luna_ds_patch_set_has(const json_t *arr, const json_t *v)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
        if (json_equal(e, v))
            return true;
    return false;
}

void luna_ds_patch_set_union(json_t *target, const json_t *items)
{
    size_t i;
    json_t *v;
    json_array_foreach(items, i, v)
        if (!luna_ds_patch_set_has(target, v))
            json_array_append(target, v);
}

/* ---- RFC 6902 ---- */

/* Decodes one reference token (~1 → /, ~0 → ~) into out. */
static void unescape_token(const char *s, size_t n, char *out)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '~' && i + 1 < n && (s[i + 1] == '0' || s[i + 1] == '1')) {
            out[j++] = s[i + 1] == '0' ? '~' : '/';
            i++;
        } else {
            out[j++] = s[i];
        }
    }
    out[j] = '\0';
}

static bool parse_index(const char *tok, size_t max, size_t *idx)
{
    if (!*tok || (tok[0] == '0' && tok[1]) || strspn(tok, "0123456789") != strlen(tok))
        return false;
    unsigned long long v = strtoull(tok, NULL, 10);
    if (v > max)
        return false;
    *idx = (size_t)v;
    return true;
}

/* Resolves the parent of pointer's last token.  *last gets the unescaped
 * token (malloc'd).  Returns the parent container, or NULL when the path
 * does not exist or (with *oom set) memory ran out. */
static json_t *resolve_parent(json_t *doc, const char *ptr, char **last, bool *oom)
{
    *last = NULL;
    if (*ptr != '/')
        return NULL;
    json_t *cur = doc;
    const char *p = ptr + 1;
    for (;;) {
        size_t n = strcspn(p, "/");
        char *tok = malloc(n + 1);
        if (!tok) {
            *oom = true;
            return NULL;
        }
        unescape_token(p, n, tok);
        if (p[n] == '\0') {
            *last = tok;
            return cur;
        }
        json_t *next = NULL;
        if (json_is_object(cur)) {
            next = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            size_t idx;
            if (parse_index(tok, json_array_size(cur) - 1, &idx) && json_array_size(cur))
                next = json_array_get(cur, idx);
        }
        free(tok);
        if (!next)
            return NULL;
        cur = next;
        p += n + 1;
    }
}

static json_t *get_ptr(json_t *doc, const char *ptr, bool *oom)
{
    if (*ptr == '\0')
        return doc;
    char *last;
    json_t *parent = resolve_parent(doc, ptr, &last, oom);
    json_t *v = NULL;
    if (parent && json_is_object(parent))
        v = json_object_get(parent, last);
    else if (parent && json_is_array(parent)) {
        size_t idx;
        if (json_array_size(parent) && parse_index(last, json_array_size(parent) - 1, &idx))
            v = json_array_get(parent, idx);
    }
    free(last);
    return v;
}

/* add: value is stolen. */
static int ptr_add(json_t **doc, const char *ptr, json_t *value, char *msg, size_t n)
{
    if (!value)
        return PATCH_NOMEM; /* a copy that failed */
    if (*ptr == '\0') {
        json_decref(*doc);
        *doc = value;
        return 0;
    }
    char *last;
    bool oom = false;
    json_t *parent = resolve_parent(*doc, ptr, &last, &oom);
    int rc = 0;
    if (oom) {
        json_decref(value);
        rc = PATCH_NOMEM;
    } else if (!parent) {
        snprintf(msg, n, "add operation does not apply: doc is missing path: \"%s\": missing value", ptr);
        json_decref(value);
        rc = PATCH_UNPROCESSABLE;
    } else if (json_is_object(parent)) {
        json_object_set_new(parent, last, value);
    } else if (json_is_array(parent)) {
        size_t idx;
        if (strcmp(last, "-") == 0)
            json_array_append_new(parent, value);
        else if (parse_index(last, json_array_size(parent), &idx))
            json_array_insert_new(parent, idx, value);
        else {
            snprintf(msg, n, "add operation does not apply: doc is missing path: \"%s\": invalid index", ptr);
            json_decref(value);
            rc = PATCH_UNPROCESSABLE;
        }
    } else {
        snprintf(msg, n, "add operation does not apply: doc is missing path: \"%s\"", ptr);
        json_decref(value);
        rc = PATCH_UNPROCESSABLE;
    }
    free(last);
    return rc;
}

/* remove: *removed gets the removed value (new reference) if non-NULL. */
static int ptr_remove(json_t *doc, const char *ptr, json_t **removed, const char *op,
                      char *msg, size_t n)
{
    char *last;
    bool oom = false;
    json_t *parent = resolve_parent(doc, ptr, &last, &oom);
    int rc = oom ? PATCH_NOMEM : PATCH_UNPROCESSABLE;
    if (parent && json_is_object(parent) && json_object_get(parent, last)) {
        if (removed)
            *removed = json_incref(json_object_get(parent, last));
        json_object_del(parent, last);
        rc = 0;
    } else if (parent && json_is_array(parent) && json_array_size(parent)) {
        size_t idx;
        if (parse_index(last, json_array_size(parent) - 1, &idx)) {
            if (removed)
                *removed = json_incref(json_array_get(parent, idx));
            json_array_remove(parent, idx);
            rc = 0;
        }
    }
    if (rc == PATCH_UNPROCESSABLE)
        snprintf(msg, n, "%s operation does not apply: doc is missing path: \"%s\": missing value",
                 op, ptr);
    free(last);
    return rc;
}

static int json_patch(json_t **doc, const json_t *ops, size_t max_copy, char *msg, size_t msgsize)
{
    if (!json_is_array(ops)) {
        snprintf(msg, msgsize, "json: cannot unmarshal %s into Go value of type jsonpatch.Patch",
                 json_is_object(ops) ? "object" : "value");
        return PATCH_MALFORMED;
    }
    if (json_array_size(ops) > MAX_PATCH_OPS) {
        snprintf(msg, msgsize, "The allowed maximum operations in a JSON patch is %u, got %zu",
                 MAX_PATCH_OPS, json_array_size(ops));
        return PATCH_TOO_LARGE;
    }
    size_t copied = 0; /* bytes the copies so far added (<= max_copy) */
    size_t i;
    json_t *op;
    json_array_foreach(ops, i, op) {
        const char *name = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        json_t *value = json_object_get(op, "value");
        const char *from = json_string_value(json_object_get(op, "from"));
        if (!json_is_object(op) || !name) {
            snprintf(msg, msgsize, "Unexpected kind: %s", name ? name : "unknown");
            return PATCH_MALFORMED;
        }
        if (!path) {
            snprintf(msg, msgsize, "%s operation missing path", name);
            return PATCH_UNPROCESSABLE;
        }
        int rc = 0;
        if (strcmp(name, "add") == 0) {
            if (!value) {
                snprintf(msg, msgsize, "add operation missing value");
                return PATCH_UNPROCESSABLE;
            }
            rc = ptr_add(doc, path, json_deep_copy(value), msg, msgsize);
        } else if (strcmp(name, "remove") == 0) {
            rc = ptr_remove(*doc, path, NULL, "remove", msg, msgsize);
        } else if (strcmp(name, "replace") == 0) {
            if (!value) {
                snprintf(msg, msgsize, "replace operation missing value");
                return PATCH_UNPROCESSABLE;
            }
            if (*path == '\0') {
                json_t *copy = json_deep_copy(value);
                if (!copy)
                    return PATCH_NOMEM;
                json_decref(*doc);
                *doc = copy;
            } else if ((rc = ptr_remove(*doc, path, NULL, "replace", msg, msgsize)) == 0) {
                rc = ptr_add(doc, path, json_deep_copy(value), msg, msgsize);
            }
        } else if (strcmp(name, "move") == 0 || strcmp(name, "copy") == 0) {
            if (!from) {
                snprintf(msg, msgsize, "%s operation missing from", name);
                return PATCH_UNPROCESSABLE;
            }
            json_t *v = NULL;
            if (strcmp(name, "move") == 0) {
                rc = ptr_remove(*doc, from, &v, "move", msg, msgsize);
            } else {
                bool oom = false;
                json_t *src = get_ptr(*doc, from, &oom);
                if (oom)
                    rc = PATCH_NOMEM;
                else if (src) {
                    /* measured before copying, so the refused copy is never made */
                    copied += json_dumpb(src, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
                    if (copied > max_copy) {
                        snprintf(msg, msgsize, "Unable to complete the copy, the accumulated "
                                 "size increase of copy is %zu, exceeding the limit %zu",
                                 copied, max_copy);
                        return PATCH_UNPROCESSABLE;
                    }
                    v = json_deep_copy(src);
                } else {
                    snprintf(msg, msgsize, "copy operation does not apply: doc is missing from path: \"%s\"", from);
                    rc = PATCH_UNPROCESSABLE;
                }
            }
            if (rc == 0)
                rc = ptr_add(doc, path, v, msg, msgsize);
        } else if (strcmp(name, "test") == 0) {
            bool oom = false;
            json_t *cur = get_ptr(*doc, path, &oom);
            if (oom)
                return PATCH_NOMEM;
            if (!value)
                value = json_null();
            if (!(cur ? json_equal(cur, value) : json_is_null(value))) {
                snprintf(msg, msgsize, "testing value %s failed: test failed", path);
                rc = PATCH_UNPROCESSABLE;
            }
        } else {
            snprintf(msg, msgsize, "Unexpected kind: %s", name);
            return PATCH_MALFORMED;
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- strategic merge patch ---- */

struct smp {
    const luna_ds_type *type;
    const char *path[MAX_PATH];
    int depth;
    char *msg;
    size_t msgsize;
};

static int smp_map(struct smp *s, json_t *target, const json_t *patch);

static bool is_directive(const char *k)
{
    return k[0] == '$';
}

/* A copy of patch without $-directives, recursively. */
static json_t *strip(const json_t *v)
{
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
            if (!is_directive(k))
                json_object_set_new(o, k, strip(x));
        return o;
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
            json_array_append_new(a, strip(x));
        return a;
    }
    return json_deep_copy(v);
}

static int smp_list(struct smp *s, json_t *parent, const char *field, json_t *target,
                    const json_t *patch)
{
    const char *key;
    enum luna_ds_list_kind kind = luna_ds_patch_list_key(s->type, s->path, s->depth, &key);
    if (kind == LUNA_DS_LIST_ATOMIC || !json_is_array(target)) {
        json_object_set_new(parent, field, strip(patch));
        return 0;
    }
    if (kind == LUNA_DS_LIST_SET) {
        luna_ds_patch_set_union(target, patch);
        return 0;
    }
    /* A map list: {"$patch":"replace"} in the patch list replaces it. */
    size_t i;
    json_t *item;
    json_array_foreach(patch, i, item) {
        const char *d = json_string_value(json_object_get(item, "$patch"));
        if (d && strcmp(d, "replace") == 0) {
            json_t *rest = json_array();
            size_t j;
            json_t *x;
            json_array_foreach(patch, j, x)
                if (j != i)
                    json_array_append_new(rest, strip(x));
            json_object_set_new(parent, field, rest);
            return 0;
        }
    }
    json_array_foreach(patch, i, item) {
        if (!json_is_object(item)) {
            snprintf(s->msg, s->msgsize, "unable to find api field in struct for the list %s", field);
            return PATCH_MALFORMED;
        }
        json_t *kv = json_object_get(item, key);
        if (!kv) {
            snprintf(s->msg, s->msgsize, "map does not contain declared merge key: %s", key);
            return PATCH_MALFORMED;
        }
        size_t found = (size_t)-1;
        size_t j;
        json_t *t;
        json_array_foreach(target, j, t)
            if (json_is_object(t) && json_equal(json_object_get(t, key), kv)) {
                found = j;
                break;
            }
        const char *d = json_string_value(json_object_get(item, "$patch"));
        if (d && strcmp(d, "delete") == 0) {
            if (found != (size_t)-1)
                json_array_remove(target, found);
            continue;
        }
        if (found == (size_t)-1) {
            json_array_append_new(target, strip(item));
        } else {
            int rc = smp_map(s, json_array_get(target, found), item);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int smp_map(struct smp *s, json_t *target, const json_t *patch)
{
    const char *d = json_string_value(json_object_get(patch, "$patch"));
    if (d && strcmp(d, "replace") == 0) {
        json_object_clear(target);
        json_t *rest = strip(patch);
        json_object_update(target, rest);
        json_decref(rest);
        return 0;
    }
    if (d && strcmp(d, "delete") == 0) {
        json_object_clear(target);
        return 0;
    }
    if (d && strcmp(d, "merge") != 0) {
        snprintf(s->msg, s->msgsize, "Unknown patch type: %s in map: %s", d, "patch");
        return PATCH_MALFORMED;
    }
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe((json_t *)patch, tmp, k, v) {
        if (strncmp(k, "$deleteFromPrimitiveList/", 25) == 0) {
            json_t *list = json_object_get(target, k + 25);
            if (json_is_array(list) && json_is_array(v)) {
                size_t i;
                json_t *x;
                json_array_foreach(v, i, x)
                    for (size_t j = json_array_size(list); j-- > 0;)
                        if (json_equal(json_array_get(list, j), x))
                            json_array_remove(list, j);
            }
            continue;
        }
        if (is_directive(k))
            continue;
        if (json_is_null(v)) {
            json_object_del(target, k);
            continue;
        }
        if (s->depth >= MAX_PATH) {
            snprintf(s->msg, s->msgsize, "patch nested too deeply");
            return PATCH_UNPROCESSABLE;
        }
        s->path[s->depth++] = k;
        json_t *cur = json_object_get(target, k);
        int rc = 0;
        if (json_is_object(v)) {
            const char *vd = json_string_value(json_object_get(v, "$patch"));
            if (vd && strcmp(vd, "delete") == 0) {
                json_object_del(target, k);
            } else if (json_is_object(cur)) {
                rc = smp_map(s, cur, v);
            } else {
                json_t *fresh = json_object();
                json_object_set_new(target, k, fresh);
                rc = smp_map(s, fresh, v);
            }
        } else if (json_is_array(v)) {
            rc = smp_list(s, target, k, cur, v);
        } else {
            json_object_set(target, k, v);
        }
        s->depth--;
        if (rc)
            return rc;
    }
    json_t *retain = json_object_get(patch, "$retainKeys");
    if (json_is_array(retain)) {
        json_object_foreach_safe(target, tmp, k, v) {
            bool keep = false;
            size_t i;
            json_t *x;
            json_array_foreach(retain, i, x)
                if (json_is_string(x) && strcmp(json_string_value(x), k) == 0)
                    keep = true;
            if (!keep)
                json_object_del(target, k);
        }
    }
    return 0;
}

/* The Status for an internal result (msg: its message). */
static int patch_status(int rc, const char *msg, luna_ds_status *st)
{
    switch (rc) {
    case PATCH_OK:            return 0;
    case PATCH_MALFORMED:     return luna_ds_status_bad_request(st, "%s", msg);
    case PATCH_UNPROCESSABLE: return luna_ds_status_set(st, 422, "Invalid", "%s", msg);
    case PATCH_TOO_LARGE:     return luna_ds_status_set(st, 413, "RequestEntityTooLarge",
                                                        "Request entity too large: %s", msg);
    default:                  return luna_ds_status_oom(st);
    }
}

int luna_ds_patch_json(json_t **doc, const json_t *ops, luna_ds_status *st)
{
    return luna_ds_patch_json_bounded(doc, ops, LUNA_DS_PATCH_MAX_COPY_BYTES, st);
}

int luna_ds_patch_json_bounded(json_t **doc, const json_t *ops, size_t max_copy_bytes,
                               luna_ds_status *st)
{
    char msg[1024] = "";
    int rc = json_patch(doc, ops, max_copy_bytes, msg, sizeof msg);
    if (rc != PATCH_UNPROCESSABLE)
        return patch_status(rc, msg, st);
    /* kube-apiserver answers an operation that does not apply (a failed
     * test, a missing path, the copy bound) with a generic 422 and keeps
     * json-patch's reason to itself (NewGenericServerResponse): so does
     * the dev server, logging the reason for whoever debugs a patch. */
    luna_debug("JSON patch does not apply", "reason", msg);
    rc = luna_ds_status_set(st, 422, "Invalid",
                            "the server rejected our request due to an error in our request");
    st->details = json_object();
    return rc;
}

int luna_ds_patch_strategic(json_t *doc, const json_t *patch, const luna_ds_type *t,
                            luna_ds_status *st)
{
    if (!json_is_object(patch))
        return luna_ds_status_bad_request(st, "json: cannot unmarshal %s into Go value of type "
                                          "map[string]interface {}",
                                          json_is_array(patch) ? "array" : "value");
    char msg[1024] = "";
    struct smp s = { .type = t, .msg = msg, .msgsize = sizeof msg };
    return patch_status(smp_map(&s, doc, patch), msg, st);
}
