/*
 * devserver_patch.c — libFuzzer target for the dev server's PATCH formats
 * and server-side apply (devserver/devserver_patch, devserver_apply), on
 * documents of the built-in types whose lists have merge keys.
 *
 * Input: byte 0 the operation (mod 6: merge patch, JSON patch, strategic
 * merge patch, apply, forced apply, update tracking), byte 1 the type
 * (mod 6: pods, deployments, services, configmaps, jobs, namespaces),
 * then the current object as JSON, a line `===`, and the patch (or the
 * applied configuration, or the new object) as JSON.
 *
 * The operations are called with what devserver_verbs guarantees: the
 * current object is a JSON object, a merge patch is an object.  Checked:
 * success leaves a JSON object, failure sets a Status with a 4xx/5xx code
 * and a message; every reference is dropped.
 */
#include "fuzz_input.h"

#include <jansson.h>

#include "devserver/devserver_apply.h"
#include "devserver/devserver_patch.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"

static luna_ds_store *store;
static luna_ds_types *types;

static void cleanup(void)
{
    luna_ds_types_free(types);
    luna_ds_store_free(store);
}

static luna_ds_type *type_of(uint8_t b)
{
    static const char *const gvr[][3] = {
        { "", "v1", "pods" },          { "apps", "v1", "deployments" },
        { "", "v1", "services" },      { "", "v1", "configmaps" },
        { "batch", "v1", "jobs" },         { "", "v1", "namespaces" },
    };
    const char *const *g = gvr[b % 6];
    luna_ds_type *t = luna_ds_types_find(types, g[0], g[1], g[2]);
    if (!t)
        abort();
    return t;
}

static void check_status(int rc, const luna_ds_status *st)
{
    FUZZ_CHECK(rc < 0, "rc %d", rc);
    json_t *s = luna_ds_status_json(st);
    FUZZ_CHECK(s != NULL, "no Status");
    json_int_t code = json_integer_value(json_object_get(s, "code"));
    FUZZ_CHECK(code >= 400 && code < 600, "Status code %lld", (long long)code);
    FUZZ_CHECK(json_string_value(json_object_get(s, "message")), "Status without a message");
    json_decref(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!types) {
        store = luna_ds_store_new(16);
        types = store ? luna_ds_types_new(store) : NULL;
        if (!types)
            abort();
        atexit(cleanup);
    }
    fuzz_input in = { data, size };
    uint8_t op = fuzz_byte(&in) % 6;
    luna_ds_type *t = type_of(fuzz_byte(&in));
    const uint8_t *a, *b;
    size_t alen, blen;
    fuzz_split(&in, "\n===\n", &a, &alen, &b, &blen);
    json_t *doc = json_loadb((const char *)a, alen, 0, NULL);
    json_t *patch = json_loadb((const char *)b, blen, JSON_DECODE_ANY, NULL);
    if (!patch || (!json_is_object(doc) && op != 3 && op != 4) ||
        (doc && !json_is_object(doc))) {
        json_decref(doc);
        json_decref(patch);
        return 0;
    }
    luna_ds_status st = { 0 };
    const char *now = "2026-01-02T03:04:05Z";
    switch (op) {
    case 0:
        if (json_is_object(patch)) {
            doc = luna_ds_patch_merge(doc, patch);
            FUZZ_CHECK(json_is_object(doc), "merge patch of an object gave a non-object");
        }
        break;
    case 1: {
        int rc = luna_ds_patch_json(&doc, patch, &st);
        if (rc < 0)
            check_status(rc, &st);
        else
            FUZZ_CHECK(doc != NULL, "JSON patch left no document");
        break;
    }
    case 2: {
        int rc = luna_ds_patch_strategic(doc, patch, t, &st);
        if (rc < 0)
            check_status(rc, &st);
        break;
    }
    case 3:
    case 4:
        if (json_is_object(patch)) {
            json_t *res = luna_ds_apply(doc, patch, t, "fuzz", op == 4, NULL, now, &st);
            if (!res) {
                check_status(-1, &st);
                /* A forced apply takes the fields over: it never conflicts. */
                FUZZ_CHECK(op != 4 || st.code != 409, "forced apply conflicted");
            } else {
                FUZZ_CHECK(json_is_object(res), "apply gave a non-object");
            }
            json_decref(res);
        }
        break;
    case 5:
        if (json_is_object(patch)) {
            json_t *newdoc = json_deep_copy(patch);
            if (!newdoc)
                abort();
            luna_ds_apply_track_update(newdoc, doc, t, "fuzz", (size & 1) ? "status" : NULL,
                                       now);
            json_decref(newdoc);
        }
        break;
    }
    luna_ds_status_clear(&st);
    json_decref(doc);
    json_decref(patch);
    return 0;
}
