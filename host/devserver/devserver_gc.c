/* devserver_gc.c — see devserver_gc.h. */
#include "devserver/devserver_gc.h"

#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver/devserver_doc.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_write.h"
#include "base/loop.h"

/* Keys of the stored objects `want` accepts (given arg), each with its type.
 * Free with free_keys().  Out of memory, it holds those collected so far
 * and `incomplete` is set. */
struct key_list {
    bool (*want)(const luna_ds_obj *o, const char *arg);
    const char *arg;
    struct { luna_ds_type *t; char *key; } *items;
    size_t n, cap;
    bool incomplete;
};

static bool collect_key(void *ctx, luna_ds_obj *o)
{
    struct key_list *l = ctx;
    if (!l->want(o, l->arg))
        return true;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        void *items = realloc(l->items, cap * sizeof *l->items);
        if (!items) {
            l->incomplete = true;
            return false;
        }
        l->items = items;
        l->cap = cap;
    }
    char *key = strdup(o->key);
    if (!key) {
        l->incomplete = true;
        return false;
    }
    l->items[l->n].key = key;
    l->items[l->n].t = NULL;
    l->n++;
    return true;
}

/* Adds the wanted objects of every stored type (namespaced types only if
 * namespaced_only), grouped by type; returns how many the list holds. */
static size_t collect_keys(luna_ds *ds, struct key_list *l, bool namespaced_only)
{
    for (luna_ds_type *t = luna_ds_types_all(ds->types); t && !l->incomplete; t = t->next) {
        if (!t->storage || (namespaced_only && !t->namespaced))
            continue;
        size_t before = l->n;
        luna_ds_store_each(t->coll, collect_key, l);
        for (size_t i = before; i < l->n; i++)
            l->items[i].t = t;
    }
    return l->n;
}

static void free_keys(struct key_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i].key);
    free(l->items);
}

static bool owned_by(const luna_ds_obj *o, const char *uid)
{
    for (int i = 0; i < o->nowners; i++)
        if (strcmp(o->owner_uids[i], uid) == 0)
            return true;
    return false;
}

/* Keys of every object with an ownerReference to uid, grouped by type. */
static void find_dependents(luna_ds *ds, const char *uid, struct key_list *d)
{
    d->want = owned_by;
    d->arg = uid;
    collect_keys(ds, d, false);
}

static bool uid_exists_cb(void *ctx, luna_ds_obj *o)
{
    const char **uid = ctx;
    if (*uid && strcmp(o->uid, *uid) == 0) {
        *uid = NULL;
        return false;
    }
    return true;
}

static bool uid_exists(luna_ds *ds, const char *uid)
{
    const char *probe = uid;
    for (luna_ds_type *t = luna_ds_types_all(ds->types); t && probe; t = t->next)
        if (t->storage)
            luna_ds_store_each(t->coll, uid_exists_cb, &probe);
    return probe == NULL;
}

/* The garbage collector's and namespace finalizer's delete: luna_ds_gc_delete with
 * its result and status dropped. */
static void delete_quietly(luna_ds *ds, luna_ds_type *t, luna_ds_obj *o, enum luna_ds_propagation prop)
{
    json_t *out = NULL;
    bool removed;
    luna_ds_status st = { 0 };
    luna_ds_gc_delete(ds, t, o, prop, &out, &removed, &st);
    if (out)
        json_decref(out);
    luna_ds_status_clear(&st);
}

/* The garbage collector's own update of o to doc (consumed): any
 * resourceVersion, result and status dropped. */
static void update_quietly(luna_ds *ds, luna_ds_type *t, luna_ds_obj *o, json_t *doc,
                           const char *manager)
{
    json_t *out = NULL;
    luna_ds_status st = { 0 };
    json_object_del(luna_ds_doc_meta(doc), "resourceVersion");
    luna_ds_write_update(ds, t, o, doc, NULL, manager, &out, &st);
    json_decref(out);
    luna_ds_status_clear(&st);
}

/* Drops the ownerReference to owner_uid from the object at key. */
static void drop_owner_ref(luna_ds *ds, luna_ds_type *t, const char *key, const char *owner_uid)
{
    luna_ds_obj *o = luna_ds_store_get(t->coll, key);
    if (!o)
        return;
    json_t *doc = luna_ds_obj_doc(o);
    if (!doc)
        return;
    json_t *refs = json_object_get(luna_ds_doc_meta(doc), "ownerReferences");
    for (size_t i = json_array_size(refs); i-- > 0;) {
        const char *uid = luna_ds_doc_str(json_array_get(refs, i), "uid");
        if (strcmp(uid ? uid : "", owner_uid) == 0)
            json_array_remove(refs, i);
    }
    if (json_array_size(refs) == 0)
        json_object_del(luna_ds_doc_meta(doc), "ownerReferences");
    update_quietly(ds, t, o, doc, "garbage-collector");
}

/* Removes finalizer `name` from the object (which may then go). */
static void drop_finalizer(luna_ds *ds, luna_ds_type *t, const char *key, const char *name)
{
    luna_ds_obj *o = luna_ds_store_get(t->coll, key);
    if (!o)
        return;
    json_t *doc = luna_ds_obj_doc(o);
    if (!doc)
        return;
    json_t *fin = json_object_get(luna_ds_doc_meta(doc), "finalizers");
    bool changed = false;
    for (size_t i = json_array_size(fin); i-- > 0;)
        if (json_is_string(json_array_get(fin, i)) &&
            strcmp(json_string_value(json_array_get(fin, i)), name) == 0) {
            json_array_remove(fin, i);
            changed = true;
        }
    if (!changed) {
        json_decref(doc);
        return;
    }
    update_quietly(ds, t, o, doc, NULL);
}

static bool has_finalizer(const luna_ds_obj *o, const char *name)
{
    if (o->nfinalizers == 0)
        return false;
    json_t *doc = luna_ds_obj_doc(o);
    bool has = luna_ds_doc_has_string(json_object_get(luna_ds_doc_meta(doc), "finalizers"), name);
    json_decref(doc);
    return has;
}

/* Runs the garbage collector's part for an owner being deleted with the
 * foreground or orphan policy (it carries that finalizer). */
static void gc_owner(luna_ds *ds, luna_ds_type *t, const char *key)
{
    luna_ds_obj *o = luna_ds_store_get(t->coll, key);
    if (!o || !o->deleting)
        return;
    char *uid = strdup(o->uid);
    if (!uid)
        return;
    struct key_list d = { 0 };
    if (has_finalizer(o, "orphan")) {
        find_dependents(ds, uid, &d);
        for (size_t i = 0; i < d.n; i++)
            drop_owner_ref(ds, d.items[i].t, d.items[i].key, uid);
        drop_finalizer(ds, t, key, "orphan");
    } else if (has_finalizer(o, "foregroundDeletion")) {
        find_dependents(ds, uid, &d);
        for (size_t i = 0; i < d.n; i++) {
            luna_ds_obj *dep = luna_ds_store_get(d.items[i].t->coll, d.items[i].key);
            if (dep && !dep->deleting)
                delete_quietly(ds, d.items[i].t, dep, LUNA_DS_PROP_FOREGROUND);
        }
        free_keys(&d);
        memset(&d, 0, sizeof d);
        find_dependents(ds, uid, &d);
        if (d.n == 0 && !d.incomplete)
            drop_finalizer(ds, t, key, "foregroundDeletion");
    }
    free_keys(&d);
    free(uid);
}

/* After an object is gone: dependents whose every owner is gone are deleted
 * (background); others lose the reference.  Owners waiting in foreground
 * deletion for this object are re-examined. */
void luna_ds_gc_after_removal(luna_ds *ds, const char *uid)
{
    struct key_list d = { 0 };
    find_dependents(ds, uid, &d);
    for (size_t i = 0; i < d.n; i++) {
        luna_ds_obj *dep = luna_ds_store_get(d.items[i].t->coll, d.items[i].key);
        if (!dep)
            continue;
        bool other_owner = false;
        for (int j = 0; j < dep->nowners; j++)
            if (strcmp(dep->owner_uids[j], uid) != 0 && uid_exists(ds, dep->owner_uids[j]))
                other_owner = true;
        if (other_owner) {
            drop_owner_ref(ds, d.items[i].t, d.items[i].key, uid);
        } else if (!dep->deleting) {
            delete_quietly(ds, d.items[i].t, dep, LUNA_DS_PROP_BACKGROUND);
        }
    }
    free_keys(&d);
}

struct uid_finder {
    const char *uid;
    char key[600];
    bool found;
};

static bool find_uid_cb(void *ctx, luna_ds_obj *o)
{
    struct uid_finder *f = ctx;
    if (strcmp(o->uid, f->uid) == 0) {
        snprintf(f->key, sizeof f->key, "%s", o->key);
        f->found = true;
        return false;
    }
    return true;
}

/* Owners of a removed object that wait in foreground deletion get another
 * look: they go once their last dependent is gone. */
void luna_ds_gc_recheck_owners(luna_ds *ds, const json_t *doc)
{
    json_t *refs = json_object_get(json_object_get(doc, "metadata"), "ownerReferences");
    size_t i;
    json_t *r;
    json_array_foreach(refs, i, r) {
        const char *uid = luna_ds_doc_str(r, "uid");
        if (!uid)
            continue;
        for (luna_ds_type *t = luna_ds_types_all(ds->types); t; t = t->next) {
            if (!t->storage)
                continue;
            struct uid_finder f = { .uid = uid };
            luna_ds_store_each(t->coll, find_uid_cb, &f);
            if (!f.found)
                continue;
            luna_ds_obj *owner = luna_ds_store_get(t->coll, f.key);
            if (owner && owner->deleting)
                gc_owner(ds, t, f.key);
            break;
        }
    }
}

static const char *deletion_reply_kind(luna_ds_type *t) { return t->resource; }

/* Deletes cur.  *out: the response document; *removed: whether the object
 * is gone. */
int luna_ds_gc_delete(luna_ds *ds, luna_ds_type *t, luna_ds_obj *cur, enum luna_ds_propagation prop, json_t **out,
                     bool *removed, luna_ds_status *st)
{
    *removed = false;
    *out = NULL;
    /* cur may be freed by the writes below: keep what is needed of it */
    char key[600];
    snprintf(key, sizeof key, "%s", cur->key);
    json_t *doc = luna_ds_doc_as(ds, t, cur);
    json_t *md = luna_ds_doc_meta(doc);
    json_t *fin = json_object_get(md, "finalizers");
    if (md && !json_is_array(fin)) {
        fin = json_array();
        json_object_set_new(md, "finalizers", fin);
        fin = json_object_get(md, "finalizers");
    }
    if (!fin) {
        json_decref(doc);
        return luna_ds_status_oom(st);
    }
    bool changed = false;
    if (prop == LUNA_DS_PROP_FOREGROUND && !luna_ds_doc_has_string(fin, "foregroundDeletion")) {
        json_array_append_new(fin, json_string("foregroundDeletion"));
        changed = true;
    }
    if (prop == LUNA_DS_PROP_ORPHAN && !luna_ds_doc_has_string(fin, "orphan")) {
        json_array_append_new(fin, json_string("orphan"));
        changed = true;
    }
    /* namespaces: contents go first */
    bool is_ns = strcmp(t->resource, "namespaces") == 0 && !*t->group && !t->custom;
    if (json_array_size(fin) == 0 && !is_ns) {
        json_decref(doc);
        luna_ds_obj *gone = luna_ds_write_remove(ds, t, cur);
        if (!gone)
            return luna_ds_status_oom(st);
        *removed = true;
        if (t->return_deleted)
            *out = luna_ds_doc_as(ds, t, gone);
        else
            *out = luna_ds_status_success_delete(t->group, deletion_reply_kind(t), gone->name,
                                                 gone->uid);
        luna_ds_obj_unref(gone);
        return *out ? 0 : luna_ds_status_oom(st);
    }
    if (json_array_size(fin) == 0)
        json_object_del(md, "finalizers");
    if (!cur->deleting) {
        char now[32];
        luna_ds_doc_now(now);
        json_object_set_new(md, "deletionTimestamp", json_string(now));
        json_object_set_new(md, "deletionGracePeriodSeconds", json_integer(0));
        json_int_t gen = json_integer_value(json_object_get(md, "generation"));
        if (gen > 0)
            json_object_set_new(md, "generation", json_integer(gen + 1));
        if (is_ns) {
            json_t *status = json_object_get(doc, "status");
            if (!json_is_object(status)) {
                status = json_object();
                json_object_set_new(doc, "status", status);
            }
            json_object_set_new(status, "phase", json_string("Terminating"));
        }
        changed = true;
    }
    if (changed) {
        luna_ds_obj *o = luna_ds_write_store(ds, t, LUNA_DS_MODIFIED, doc);
        if (!o)
            return luna_ds_status_oom(st);
        *out = luna_ds_doc_as(ds, t, o);
        luna_ds_obj_unref(o);
    } else {
        *out = doc;
    }
    if (is_ns) {
        luna_ds_gc_namespace_finalize(ds, key); /* a namespace's key is its name */
    } else {
        gc_owner(ds, t, key);
    }
    *removed = luna_ds_store_get(luna_ds_types_storage_of(ds->types, t)->coll, key) == NULL;
    return *out ? 0 : luna_ds_status_oom(st);
}

static bool in_namespace(const luna_ds_obj *o, const char *ns)
{
    return strcmp(o->ns, ns) == 0;
}

static size_t namespace_contents(luna_ds *ds, const char *ns, struct key_list *c)
{
    c->want = in_namespace;
    c->arg = ns;
    return collect_keys(ds, c, true);
}

/* A terminating namespace: delete what is in it; once empty, remove it. */
void luna_ds_gc_namespace_finalize(luna_ds *ds, const char *ns_name)
{
    luna_ds_type *nt = luna_ds_types_namespaces(ds->types);
    luna_ds_obj *ns = luna_ds_store_get(nt->coll, ns_name);
    if (!ns || !ns->deleting || ds->gc.finalizing_ns)
        return;
    char *name = strdup(ns_name);
    if (!name)
        return;
    ds->gc.finalizing_ns = true;
    struct key_list c = { 0 };
    namespace_contents(ds, name, &c);
    for (size_t i = 0; i < c.n; i++) {
        luna_ds_obj *o = luna_ds_store_get(c.items[i].t->coll, c.items[i].key);
        if (o && !o->deleting)
            delete_quietly(ds, c.items[i].t, o, LUNA_DS_PROP_BACKGROUND);
    }
    free_keys(&c);
    memset(&c, 0, sizeof c);
    size_t left = namespace_contents(ds, name, &c);
    bool incomplete = c.incomplete;
    free_keys(&c);
    ds->gc.finalizing_ns = false;
    ns = luna_ds_store_get(nt->coll, name);
    if (left == 0 && !incomplete && ns) {
        json_t *doc = luna_ds_obj_doc(ns);
        json_object_del(json_object_get(doc, "spec"), "finalizers");
        json_object_del(luna_ds_doc_meta(doc), "finalizers");
        luna_ds_obj *o = luna_ds_write_store(ds, nt, LUNA_DS_MODIFIED, doc);
        if (o)
            luna_ds_obj_unref(luna_ds_write_remove(ds, nt, o));
        luna_ds_obj_unref(o);
    }
    free(name);
}


/* Orphans: kube-controller-manager's garbage collector also deletes an
 * object written with ownerReferences none of which exists any more (a
 * dependent re-created by a controller racing its owner's deletion).  As
 * there, this happens shortly after the write, not inside it. */
struct luna_ds_orphan_check {
    luna_ds_type *t;
    char *key;
};

static void orphan_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    luna_ds *ds = w->data;
    struct luna_ds_orphan_check *checks = ds->gc.checks;
    size_t n = ds->gc.n;
    ds->gc.checks = NULL;
    ds->gc.n = ds->gc.cap = 0;
    for (size_t i = 0; i < n; i++) {
        luna_ds_obj *o = luna_ds_store_get(checks[i].t->coll, checks[i].key);
        bool orphan = o && !o->deleting && o->nowners > 0;
        for (int j = 0; orphan && j < o->nowners; j++)
            if (uid_exists(ds, o->owner_uids[j]))
                orphan = false;
        if (orphan)
            delete_quietly(ds, checks[i].t, o, LUNA_DS_PROP_BACKGROUND);
        free(checks[i].key);
    }
    free(checks);
}

void luna_ds_gc_check_orphan_later(luna_ds *ds, luna_ds_type *t, const json_t *doc)
{
    json_t *refs = json_object_get(json_object_get(doc, "metadata"), "ownerReferences");
    if (!json_is_array(refs) || json_array_size(refs) == 0)
        return;
    json_t *m = json_object_get(doc, "metadata");
    const char *name = luna_ds_doc_str(m, "name"), *ns = luna_ds_doc_str(m, "namespace");
    if (!name)
        return;
    luna_ds_gc *gc = &ds->gc;
    if (gc->n == gc->cap) {
        size_t cap = gc->cap ? 2 * gc->cap : 16;
        struct luna_ds_orphan_check *v = realloc(gc->checks, cap * sizeof *v);
        if (!v)
            return;
        gc->checks = v;
        gc->cap = cap;
    }
    char key[600];
    snprintf(key, sizeof key, "%s%s%s", t->namespaced && ns ? ns : "",
             t->namespaced && ns ? "/" : "", name);
    char *copy = strdup(key);
    if (!copy)
        return;
    gc->checks[gc->n++] = (struct luna_ds_orphan_check){ t, copy };
    if (!gc->timer_ready) {
        ev_timer_init(&gc->timer, orphan_sweep, 0., 0.);
        gc->timer.data = ds;
        gc->timer_ready = true;
    }
    if (!ev_is_active(&gc->timer)) {
        ev_timer_set(&gc->timer, 0.05, 0.);
        ev_timer_start(luna_loop(), &gc->timer);
    }
}

void luna_ds_gc_shutdown(luna_ds *ds)
{
    luna_ds_gc *gc = &ds->gc;
    if (gc->timer_ready)
        ev_timer_stop(luna_loop(), &gc->timer);
    for (size_t i = 0; i < gc->n; i++)
        free(gc->checks[i].key);
    free(gc->checks);
    gc->checks = NULL;
    gc->n = gc->cap = 0;
}

static void hook_removed(luna_ds *ds, const char *uid, const char *ns)
{
    luna_ds_gc_after_removal(ds, uid);
    if (*ns)
        luna_ds_gc_namespace_finalize(ds, ns);
}

static void hook_written(luna_ds *ds, luna_ds_type *t, enum luna_ds_event_type type,
                         const json_t *doc)
{
    if (type == LUNA_DS_DELETED)
        luna_ds_gc_recheck_owners(ds, doc);
    else
        luna_ds_gc_check_orphan_later(ds, t, doc);
}

const struct luna_ds_write_hooks *luna_ds_gc_write_hooks(void)
{
    static const struct luna_ds_write_hooks hooks = { hook_removed, hook_written };
    return &hooks;
}
