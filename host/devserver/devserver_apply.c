/* devserver_apply.c — see devserver_apply.h. */
#include "devserver/devserver_apply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver/devserver_patch.h"
#include "base/error.h"

#define MAX_DEPTH 64
#define SEP '\n'   /* joins path elements in a flat set (no field name holds it) */

/* A flat field set: a JSON object whose keys are paths (elements joined by
 * SEP) and whose values are true.  Non-leaf membership ends in ".". */

struct walk {
    const luna_ds_type *type;
    const char *names[MAX_DEPTH];  /* field names only, for list schemas */
    int nnames;
    char path[4096];
    size_t plen;
    bool oom;                      /* an allocation failed: the set is incomplete */
};

static size_t push(struct walk *w, const char *elem)
{
    size_t saved = w->plen;
    size_t n = strlen(elem);
    if (w->plen + n + 2 >= sizeof w->path)
        return saved;
    if (w->plen)
        w->path[w->plen++] = SEP;
    memcpy(w->path + w->plen, elem, n);
    w->plen += n;
    w->path[w->plen] = '\0';
    return saved;
}

static void pop(struct walk *w, size_t saved)
{
    w->plen = saved;
    w->path[w->plen] = '\0';
}

static void add(json_t *set, struct walk *w, const char *extra)
{
    if (extra) {
        size_t saved = push(w, extra);
        json_object_set_new(set, w->path, json_true());
        pop(w, saved);
    } else {
        json_object_set_new(set, w->path, json_true());
    }
}

static bool skipped(int depth, const char *parent, const char *k)
{
    if (depth == 0)
        return strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0;
    if (depth == 1 && strcmp(parent, "metadata") == 0)
        return strcmp(k, "name") == 0 || strcmp(k, "namespace") == 0 ||
               strcmp(k, "uid") == 0 || strcmp(k, "resourceVersion") == 0 ||
               strcmp(k, "generation") == 0 || strcmp(k, "creationTimestamp") == 0 ||
               strcmp(k, "managedFields") == 0 || strcmp(k, "deletionTimestamp") == 0 ||
               strcmp(k, "deletionGracePeriodSeconds") == 0 || strcmp(k, "selfLink") == 0;
    return false;
}

/* "PREFIX:JSON" for v (caller frees), or NULL with w->oom set. */
static char *element(struct walk *w, char prefix, const json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    char *out = s ? malloc(strlen(s) + 3) : NULL;
    if (out)
        sprintf(out, "%c:%s", prefix, s);
    else
        w->oom = true;
    free(s);
    return out;
}

/* A keyed list item's element: k:{"KEY":value}. */
static char *item_key(struct walk *w, const json_t *item, const char *key)
{
    json_t *k = json_pack("{s:O}", key, json_object_get(item, key));
    char *out = element(w, 'k', k);
    json_decref(k);
    return out;
}

/* A set member's element: v:value. */
static char *set_member(struct walk *w, const json_t *v)
{
    return element(w, 'v', v);
}

/* Adds every field of obj (at w's path) to set.  dots: mark maps and list
 * items with "." (Update sets mark new maps; Apply sets only list items). */
static void collect(json_t *set, struct walk *w, const json_t *obj, bool dots, int depth)
{
    if (depth >= MAX_DEPTH)
        return;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        if (skipped(depth, w->nnames ? w->names[w->nnames - 1] : "", k))
            continue;
        char elem[1024];
        snprintf(elem, sizeof elem, "f:%s", k);
        size_t saved = push(w, elem);
        w->names[w->nnames++] = k;
        if (json_is_object(v) && json_object_size(v)) {
            if (dots && depth > 0)
                add(set, w, ".");
            collect(set, w, v, dots, depth + 1);
        } else if (json_is_array(v)) {
            const char *key;
            enum luna_ds_list_kind kind = luna_ds_patch_list_key(w->type, w->names, w->nnames, &key);
            if (kind == LUNA_DS_LIST_MAP) {
                size_t i;
                json_t *item;
                json_array_foreach(v, i, item) {
                    if (!json_is_object(item) || !json_object_get(item, key))
                        continue;
                    char *ik = item_key(w, item, key);
                    if (!ik)
                        continue;
                    size_t s2 = push(w, ik);
                    free(ik);
                    add(set, w, ".");
                    collect(set, w, item, dots, depth + 1);
                    pop(w, s2);
                }
            } else if (kind == LUNA_DS_LIST_SET) {
                size_t i;
                json_t *item;
                json_array_foreach(v, i, item) {
                    char *m = set_member(w, item);
                    if (m)
                        add(set, w, m);
                    free(m);
                }
            } else {
                add(set, w, NULL);
            }
        } else {
            add(set, w, NULL);
        }
        w->nnames--;
        pop(w, saved);
    }
}

/* Paths of fields whose value differs between a and b (either may be NULL):
 * leaves changed, added or removed; with "." for maps/items that appeared. */
static void diff(json_t *set, struct walk *w, const json_t *a, const json_t *b, int depth)
{
    if (depth >= MAX_DEPTH)
        return;
    const char *k;
    json_t *v;
    /* changed or added in b */
    json_object_foreach((json_t *)b, k, v) {
        if (skipped(depth, w->nnames ? w->names[w->nnames - 1] : "", k))
            continue;
        json_t *old = a ? json_object_get(a, k) : NULL;
        if (old && json_equal(old, v))
            continue;
        char elem[1024];
        snprintf(elem, sizeof elem, "f:%s", k);
        size_t saved = push(w, elem);
        w->names[w->nnames++] = k;
        if (json_is_object(v) && json_object_size(v)) {
            if (!json_is_object(old) && depth > 0)
                add(set, w, ".");
            diff(set, w, json_is_object(old) ? old : NULL, v, depth + 1);
        } else if (json_is_array(v)) {
            const char *key;
            enum luna_ds_list_kind kind = luna_ds_patch_list_key(w->type, w->names, w->nnames, &key);
            if (kind == LUNA_DS_LIST_MAP) {
                size_t i;
                json_t *item;
                json_array_foreach(v, i, item) {
                    if (!json_is_object(item) || !json_object_get(item, key))
                        continue;
                    json_t *olditem = NULL;
                    size_t j;
                    json_t *o;
                    if (json_is_array(old))
                        json_array_foreach(old, j, o)
                            if (json_is_object(o) &&
                                json_equal(json_object_get(o, key), json_object_get(item, key)))
                                olditem = o;
                    if (olditem && json_equal(olditem, item))
                        continue;
                    char *ik = item_key(w, item, key);
                    if (!ik)
                        continue;
                    size_t s2 = push(w, ik);
                    free(ik);
                    if (!olditem)
                        add(set, w, ".");
                    diff(set, w, olditem, item, depth + 1);
                    pop(w, s2);
                }
            } else if (kind == LUNA_DS_LIST_SET) {
                size_t i;
                json_t *item;
                json_array_foreach(v, i, item) {
                    bool had = false;
                    size_t j;
                    json_t *o;
                    if (json_is_array(old))
                        json_array_foreach(old, j, o)
                            if (json_equal(o, item))
                                had = true;
                    if (!had) {
                        char *m = set_member(w, item);
                        if (m)
                            add(set, w, m);
                        free(m);
                    }
                }
            } else {
                add(set, w, NULL);
            }
        } else {
            add(set, w, NULL);
        }
        w->nnames--;
        pop(w, saved);
    }
}

/* Flat set → FieldsV1 object. */
static json_t *nest(const json_t *flat)
{
    json_t *root = json_object();
    const char *path;
    json_t *v;
    json_object_foreach((json_t *)flat, path, v) {
        json_t *cur = root;
        const char *p = path;
        while (*p) {
            size_t n = strcspn(p, "\n");
            char *elem = strndup(p, n);
            json_t *next = json_object_get(cur, elem);
            if (!next) {
                next = json_object();
                json_object_set_new(cur, elem, next);
            }
            free(elem);
            cur = next;
            p += n;
            if (*p)
                p++;
        }
    }
    return root;
}

static void flatten_into(json_t *flat, const json_t *node, char *path, size_t plen, size_t cap)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)node, k, v) {
        size_t n = strlen(k);
        if (plen + n + 2 >= cap)
            continue;
        size_t l = plen;
        if (l)
            path[l++] = SEP;
        memcpy(path + l, k, n);
        path[l + n] = '\0';
        if (json_is_object(v) && json_object_size(v))
            flatten_into(flat, v, path, l + n, cap);
        else
            json_object_set_new(flat, path, json_true());
        path[plen] = '\0';
    }
}

static json_t *flatten(const json_t *fields)
{
    json_t *flat = json_object();
    char path[4096] = "";
    if (json_is_object(fields))
        flatten_into(flat, fields, path, 0, sizeof path);
    return flat;
}

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static bool same_entry(const json_t *e, const char *manager, const char *op, const char *sub)
{
    const char *esub = str(e, "subresource");
    return str(e, "manager") && strcmp(str(e, "manager"), manager) == 0 &&
           str(e, "operation") && strcmp(str(e, "operation"), op) == 0 &&
           strcmp(esub ? esub : "", sub ? sub : "") == 0;
}

static json_t *make_entry(const char *manager, const char *op, const char *api_version,
                          const char *now, const json_t *flat, const char *sub)
{
    json_t *e = json_object();
    json_object_set_new(e, "manager", json_string(manager));
    json_object_set_new(e, "operation", json_string(op));
    json_object_set_new(e, "apiVersion", json_string(api_version));
    json_object_set_new(e, "time", json_string(now));
    json_object_set_new(e, "fieldsType", json_string("FieldsV1"));
    json_object_set_new(e, "fieldsV1", nest(flat));
    if (sub && *sub)
        json_object_set_new(e, "subresource", json_string(sub));
    return e;
}

/* Rebuilds managedFields: `mine` (flat, borrowed) becomes the (manager, op,
 * sub) entry; `taken` (flat) paths are removed from every other entry;
 * entries left empty are dropped. */
static json_t *rebuild(const json_t *old_entries, const char *manager, const char *op,
                       const char *sub, const json_t *mine, const json_t *taken,
                       const char *api_version, const char *now, bool replace_mine)
{
    json_t *out = json_array();
    bool placed = false;
    size_t i;
    json_t *e;
    json_array_foreach(old_entries, i, e) {
        if (!json_is_object(e))
            continue;
        json_t *flat = flatten(json_object_get(e, "fieldsV1"));
        if (same_entry(e, manager, op, sub)) {
            if (!replace_mine)
                json_object_update(flat, (json_t *)mine);
            else {
                json_object_clear(flat);
                json_object_update(flat, (json_t *)mine);
            }
            if (json_object_size(flat))
                json_array_append_new(out, make_entry(manager, op, api_version, now, flat, sub));
            placed = true;
        } else {
            const char *p;
            json_t *x;
            json_object_foreach((json_t *)taken, p, x)
                json_object_del(flat, p);
            if (json_object_size(flat)) {
                json_t *copy = json_deep_copy(e);
                json_object_set_new(copy, "fieldsV1", nest(flat));
                json_array_append_new(out, copy);
            }
        }
        json_decref(flat);
    }
    if (!placed && json_object_size(mine))
        json_array_append_new(out, make_entry(manager, op, api_version, now, mine, sub));
    return out;
}

static const char *api_version_of(const json_t *doc, const luna_ds_type *t)
{
    const char *av = str(doc, "apiVersion");
    return av ? av : t->api_version;
}

int luna_ds_apply_track_update(json_t *newdoc, const json_t *olddoc, const luna_ds_type *t,
                               const char *manager, const char *subresource, const char *now)
{
    json_t *md = json_object_get(newdoc, "metadata");
    const json_t *oldmd = olddoc ? json_object_get(olddoc, "metadata") : NULL;
    json_t *old_entries = oldmd ? json_object_get(oldmd, "managedFields") : NULL;
    struct walk w = { .type = t };
    json_t *changed = json_object();
    diff(changed, &w, olddoc, newdoc, 0);
    /* removed fields: leave every manager */
    json_t *removed = json_object();
    struct walk w2 = { .type = t };
    if (olddoc)
        diff(removed, &w2, newdoc, olddoc, 0);
    json_t *taken = json_object();
    json_object_update(taken, changed);
    json_object_update(taken, removed);
    if (w.oom || w2.oom || !changed || !removed || !taken) {
        json_decref(changed);
        json_decref(removed);
        json_decref(taken);
        return LUNA_ENOMEM;
    }
    json_t *entries = rebuild(json_is_array(old_entries) ? old_entries : NULL, manager, "Update",
                              subresource, changed, taken, api_version_of(newdoc, t), now, false);
    /* removed paths also leave this manager's own entry */
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        if (!same_entry(e, manager, "Update", subresource))
            continue;
        json_t *flat = flatten(json_object_get(e, "fieldsV1"));
        const char *p;
        json_t *x;
        json_object_foreach(removed, p, x)
            if (!json_object_get(changed, p))
                json_object_del(flat, p);
        json_object_set_new(e, "fieldsV1", nest(flat));
        json_decref(flat);
    }
    json_decref(changed);
    json_decref(removed);
    json_decref(taken);
    if (!entries)
        return LUNA_ENOMEM;
    if (json_array_size(entries))
        json_object_set_new(md, "managedFields", entries);
    else {
        json_decref(entries);
        json_object_del(md, "managedFields");
    }
    return 0;
}

/* ---- apply ---- */

/* True if the list item matches a "k:{...}" or "v:..." path element. */
static bool item_matches(const json_t *item, const char *elem)
{
    bool ok = false;
    if (strncmp(elem, "k:", 2) == 0) {
        json_t *kv = json_loads(elem + 2, 0, NULL);
        ok = kv && json_is_object(item);
        const char *k;
        json_t *v;
        json_object_foreach(kv, k, v)
            if (!ok || !json_equal(json_object_get(item, k), v))
                ok = false;
        json_decref(kv);
    } else if (strncmp(elem, "v:", 2) == 0) {
        json_t *m = json_loads(elem + 2, JSON_DECODE_ANY, NULL);
        ok = m && json_equal(item, m);
        json_decref(m);
    }
    return ok;
}

/* The value at a flat path in doc, or NULL. */
static json_t *value_at(const json_t *doc, const char *path)
{
    const json_t *cur = doc;
    const char *p = path;
    while (*p && cur) {
        size_t n = strcspn(p, "\n");
        char *elem = strndup(p, n);
        if (strncmp(elem, "f:", 2) == 0) {
            cur = json_is_object(cur) ? json_object_get(cur, elem + 2) : NULL;
        } else if (strcmp(elem, ".") != 0) {
            const json_t *found = NULL;
            size_t i;
            json_t *item;
            if (json_is_array(cur))
                json_array_foreach(cur, i, item)
                    if (item_matches(item, elem))
                        found = item;
            cur = found;
        }
        free(elem);
        p += n;
        if (*p)
            p++;
    }
    return (json_t *)cur;
}

/* Removes the node at a flat path from doc (leaf, list item or set member). */
static void remove_at(json_t *doc, const char *path)
{
    size_t len = strlen(path);
    bool dot = len >= 2 && strcmp(path + len - 2, "\n.") == 0;
    char *p = strndup(path, dot ? len - 2 : len);
    char *last = strrchr(p, SEP);
    json_t *parent = doc;
    const char *elem = p;
    if (last) {
        *last = '\0';
        parent = value_at(doc, p);
        elem = last + 1;
    }
    if (strncmp(elem, "f:", 2) == 0 && json_is_object(parent)) {
        json_object_del(parent, elem + 2);
    } else if (json_is_array(parent)) {
        for (size_t i = json_array_size(parent); i-- > 0;)
            if (item_matches(json_array_get(parent, i), elem))
                json_array_remove(parent, i);
    }
    free(p);
}

/* Merges applied into cur (both objects) following the list schemas. */
static void merge_applied(struct walk *w, json_t *cur, const json_t *applied, int depth)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)applied, k, v) {
        if (depth >= MAX_DEPTH)
            return;
        json_t *c = json_object_get(cur, k);
        w->names[w->nnames++] = k;
        if (json_is_object(v) && json_is_object(c)) {
            merge_applied(w, c, v, depth + 1);
        } else if (json_is_array(v) && json_is_array(c)) {
            const char *key;
            enum luna_ds_list_kind kind = luna_ds_patch_list_key(w->type, w->names, w->nnames, &key);
            if (kind == LUNA_DS_LIST_MAP) {
                size_t i;
                json_t *item;
                json_array_foreach(v, i, item) {
                    json_t *match = NULL;
                    size_t j;
                    json_t *o;
                    json_array_foreach(c, j, o)
                        if (json_is_object(o) && json_is_object(item) &&
                            json_equal(json_object_get(o, key), json_object_get(item, key)))
                            match = o;
                    if (match)
                        merge_applied(w, match, item, depth + 1);
                    else
                        json_array_append_new(c, json_deep_copy(item));
                }
            } else if (kind == LUNA_DS_LIST_SET) {
                size_t i;
                json_t *item;
                json_array_foreach(v, i, item) {
                    bool have = false;
                    size_t j;
                    json_t *o;
                    json_array_foreach(c, j, o)
                        if (json_equal(o, item))
                            have = true;
                    if (!have)
                        json_array_append(c, item);
                }
            } else {
                json_object_set_new(cur, k, json_deep_copy(v));
            }
        } else {
            json_object_set_new(cur, k, json_deep_copy(v));
        }
        w->nnames--;
    }
}

/* ".data.key" / ".spec.containers[name=\"x\"].image" from a flat path. */
static void pretty_path(const char *path, char *out, size_t n)
{
    size_t o = 0;
    const char *p = path;
    out[0] = '\0';
    while (*p && o + 4 < n) {
        size_t len = strcspn(p, "\n");
        if (strncmp(p, "f:", 2) == 0)
            o += (size_t)snprintf(out + o, n - o, ".%.*s", (int)(len - 2), p + 2);
        else if (strncmp(p, "k:", 2) == 0) {
            char *js = strndup(p + 2, len - 2);
            json_t *kv = json_loads(js, 0, NULL);
            free(js);
            const char *k;
            json_t *v;
            o += (size_t)snprintf(out + o, n - o, "[");
            bool first = true;
            json_object_foreach(kv, k, v) {
                char *vs = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
                o += (size_t)snprintf(out + o, n - o, "%s%s=%s", first ? "" : ",", k, vs);
                free(vs);
                first = false;
            }
            json_decref(kv);
            o += (size_t)snprintf(out + o, n - o, "]");
        } else if (strncmp(p, "v:", 2) == 0)
            o += (size_t)snprintf(out + o, n - o, "[=%.*s]", (int)(len - 2), p + 2);
        if (o >= n)
            o = n - 1;
        p += len;
        if (*p)
            p++;
    }
}

json_t *luna_ds_apply(const json_t *cur, const json_t *applied, const luna_ds_type *t,
                      const char *manager, bool force, const char *subresource,
                      const char *now, luna_ds_status *st)
{
    const json_t *curmd = cur ? json_object_get(cur, "metadata") : NULL;
    json_t *entries = curmd ? json_object_get(curmd, "managedFields") : NULL;
    if (!json_is_array(entries))
        entries = NULL;
    struct walk w = { .type = t };
    json_t *newset = json_object();
    collect(newset, &w, applied, false, 0);
    if (w.oom || !newset) {
        json_decref(newset);
        luna_ds_status_oom(st);
        return NULL;
    }

    /* conflicts: a field another manager owns, which this apply changes */
    json_t *conflicts = json_array();
    json_t *taken = json_object();
    const char *p;
    json_t *x;
    json_object_foreach(newset, p, x) {
        size_t plen = strlen(p);
        if (plen >= 2 && strcmp(p + plen - 2, "\n.") == 0)
            continue;
        json_t *have = cur ? value_at(cur, p) : NULL;
        json_t *want = value_at(applied, p);
        bool differs = have && !(want && json_equal(have, want));
        size_t i;
        json_t *e;
        json_array_foreach(entries, i, e) {
            if (same_entry(e, manager, "Apply", subresource))
                continue;
            json_t *flat = flatten(json_object_get(e, "fieldsV1"));
            bool owns = json_object_get(flat, p) != NULL;
            json_decref(flat);
            if (owns && differs) {
                char pretty[512];
                pretty_path(p, pretty, sizeof pretty);
                json_array_append_new(conflicts, json_pack("{s:s,s:s,s:s}", "manager",
                                                           str(e, "manager"), "apiVersion",
                                                           str(e, "apiVersion") ? str(e, "apiVersion") : "",
                                                           "field", pretty));
                json_object_set_new(taken, p, json_true());
            }
        }
    }
    if (json_array_size(conflicts) && !force) {
        size_t n = json_array_size(conflicts);
        char msg[900];
        size_t o = (size_t)snprintf(msg, sizeof msg, "Apply failed with %zu conflict%s: ", n,
                                    n == 1 ? "" : "s");
        json_t *causes = json_array();
        size_t i;
        json_t *c;
        json_array_foreach(conflicts, i, c) {
            char one[600];
            snprintf(one, sizeof one, "conflict with \"%s\" using %s", str(c, "manager"),
                     str(c, "apiVersion"));
            if (o < sizeof msg)
                o += (size_t)snprintf(msg + o, sizeof msg - o, "%s%s: %s", i ? "\n" : "", one,
                                      str(c, "field"));
            json_array_append_new(causes, json_pack("{s:s,s:s,s:s}", "reason",
                                                    "FieldManagerConflict", "message", one,
                                                    "field", str(c, "field")));
        }
        const char *name = str(json_object_get(applied, "metadata"), "name");
        luna_ds_status_set(st, 409, "Conflict", "%s", msg);
        json_t *d = json_object();
        if (name)
            json_object_set_new(d, "name", json_string(name));
        if (*t->group)
            json_object_set_new(d, "group", json_string(t->group));
        json_object_set_new(d, "kind", json_string(t->resource));
        json_object_set_new(d, "causes", causes);
        st->details = d;
        json_decref(conflicts);
        json_decref(taken);
        json_decref(newset);
        return NULL;
    }
    json_decref(conflicts);

    json_t *result = cur ? json_deep_copy(cur) : json_object();
    /* drop what this manager applied before and no longer applies, unless
     * another manager owns it too */
    json_t *prevset = NULL;
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e)
        if (same_entry(e, manager, "Apply", subresource))
            prevset = flatten(json_object_get(e, "fieldsV1"));
    if (prevset) {
        json_object_foreach(prevset, p, x) {
            if (json_object_get(newset, p))
                continue;
            bool other = false;
            json_array_foreach(entries, i, e) {
                if (same_entry(e, manager, "Apply", subresource))
                    continue;
                json_t *flat = flatten(json_object_get(e, "fieldsV1"));
                if (json_object_get(flat, p))
                    other = true;
                json_decref(flat);
            }
            if (!other)
                remove_at(result, p);
        }
        json_decref(prevset);
    }
    struct walk mw = { .type = t };
    merge_applied(&mw, result, applied, 0);
    json_t *md = json_object_get(result, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        json_object_set_new(result, "metadata", md);
    }
    json_t *rebuilt = rebuild(entries, manager, "Apply", subresource, newset, taken,
                              api_version_of(applied, t), now, true);
    json_decref(newset);
    json_decref(taken);
    if (mw.oom || !rebuilt || json_object_set_new(md, "managedFields", rebuilt) < 0) {
        json_decref(result);
        luna_ds_status_oom(st);
        return NULL;
    }
    return result;
}
