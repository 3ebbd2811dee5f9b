/* devserver_seed.c — see devserver_seed.h. */
#include "devserver/devserver_seed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver/devserver_doc.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"
#include "devserver/devserver_write.h"

int luna_ds_seed_load(luna_ds *ds, const json_t *doc, luna_error *err)
{
    if (!json_is_object(doc))
        return luna_error_set(err, LUNA_EINVAL, "seed document is not an object");
    const char *kind = luna_ds_doc_str(doc, "kind");
    const char *av = luna_ds_doc_str(doc, "apiVersion");
    json_t *items = json_object_get(doc, "items");
    if (kind && strlen(kind) >= 4 && strcmp(kind + strlen(kind) - 4, "List") == 0 &&
        json_is_array(items)) {
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) {
            int rc = luna_ds_seed_load(ds, it, err);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    if (!kind || !av)
        return luna_error_set(err, LUNA_EINVAL, "seed object without apiVersion and kind");
    luna_ds_type *t = luna_ds_types_find_kind(ds->types, av, kind);
    if (!t)
        return luna_error_set(err, LUNA_ENOTFOUND, "no resource for %s %s", av, kind);
    json_t *copy = json_deep_copy(doc);
    json_t *md = luna_ds_doc_meta(copy);
    if (!md) {
        json_decref(copy);
        return luna_error_set(err, LUNA_ENOMEM, "%s: out of memory", kind);
    }
    const char *ns = luna_ds_doc_str(md, "namespace");
    if (t->namespaced && (!ns || !*ns)) {
        json_object_set_new(md, "namespace", json_string("default"));
        ns = "default";
    }
    luna_ds_status st = { 0 };
    if (t->namespaced) {
        luna_ds_type *nt = luna_ds_types_namespaces(ds->types);
        if (!luna_ds_store_get(nt->coll, ns)) {
            json_t *nsdoc = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind",
                                      "Namespace", "metadata", "name", ns);
            json_t *out = NULL;
            int rc = nsdoc ? luna_ds_write_create(ds, nt, nsdoc, "luna-seed", &out, &st)
                           : luna_ds_status_oom(&st);
            if (rc < 0) {
                luna_error_set(err, rc, "namespace %s: %s", ns, st.message);
                luna_ds_status_clear(&st);
                json_decref(copy);
                return rc;
            }
            json_decref(out);
        }
    }
    json_object_del(md, "resourceVersion");
    /* the write consumes copy: keep the name for the message */
    char name[300];
    snprintf(name, sizeof name, "%s", luna_ds_doc_str(md, "name") ? luna_ds_doc_str(md, "name") : "");
    char key[600];
    luna_ds_doc_key(key, sizeof key, t, ns ? ns : "", name);
    luna_ds_obj *cur = *name ? luna_ds_store_get(t->coll, key) : NULL;
    json_t *out = NULL;
    int rc;
    if (cur)
        rc = luna_ds_write_update(ds, t, cur, copy, NULL, "luna-seed", &out, &st);
    else
        rc = luna_ds_write_create(ds, t, copy, "luna-seed", &out, &st);
    if (rc < 0) {
        luna_error_set(err, rc, "%s %s: %s", kind, name, st.message);
        luna_ds_status_clear(&st);
        return rc;
    }
    json_decref(out);
    return 0;
}

json_t *luna_ds_seed_dump(luna_ds *ds)
{
    json_t *items = json_array();
    bool ok = items != NULL;
    for (luna_ds_type *t = luna_ds_types_all(ds->types); ok && t; t = t->next) {
        if (!t->storage || !t->served)
            continue;
        luna_ds_obj **objs;
        size_t n;
        if (luna_ds_store_snapshot(t->coll, 0, &objs, &n) < 0) {
            ok = false;
            break;
        }
        for (size_t i = 0; ok && i < n; i++)
            ok = json_array_append_new(items, luna_ds_obj_doc(objs[i])) == 0;
        free(objs);
    }
    if (!ok) {
        json_decref(items);
        return NULL;
    }
    char rv[32];
    snprintf(rv, sizeof rv, "%llu", (unsigned long long)luna_ds_store_rv(ds->store));
    return json_pack("{s:s,s:s,s:{s:s},s:o}", "kind", "List", "apiVersion", "v1", "metadata",
                     "resourceVersion", rv, "items", items);
}
