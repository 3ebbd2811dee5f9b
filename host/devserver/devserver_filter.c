/* devserver_filter.c — see devserver_filter.h. */
#include "devserver/devserver_filter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver/devserver_store.h"

static const char *label_of(const char *key, void *labels)
{
    json_t *v = labels ? json_object_get(labels, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

struct field_ctx {
    const struct luna_ds_obj *obj;
    json_t *doc;  /* parsed on the first path outside metadata.name/namespace */
    char buf[64];
};

static const char *field_of(const char *path, void *vctx)
{
    struct field_ctx *ctx = vctx;
    if (strcmp(path, "metadata.name") == 0)
        return ctx->obj->name;
    if (strcmp(path, "metadata.namespace") == 0)
        return ctx->obj->ns;
    if (!ctx->doc)
        ctx->doc = luna_ds_obj_doc(ctx->obj);
    json_t *v = ctx->doc;
    char part[256];
    const char *p = path;
    while (*p && v) {
        size_t n = strcspn(p, ".");
        if (n >= sizeof part)
            return NULL;
        memcpy(part, p, n);
        part[n] = '\0';
        v = json_object_get(v, part);
        p += n;
        if (*p == '.')
            p++;
    }
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_boolean(v))
        return json_is_true(v) ? "true" : "false";
    if (json_is_integer(v)) {
        snprintf(ctx->buf, sizeof ctx->buf, "%lld", (long long)json_integer_value(v));
        return ctx->buf;
    }
    return NULL;
}

bool luna_ds_filter_match(const luna_ds_filter *f, const struct luna_ds_obj *o)
{
    if (f->ns && *f->ns && strcmp(f->ns, o->ns) != 0)
        return false;
    if (!luna_shard_matches(f->shard, o->ns, o->uid))
        return false;
    if (!luna_selector_matches(f->labels, label_of, o->labels))
        return false;
    struct field_ctx ctx = { .obj = o };
    bool ok = luna_selector_matches(f->fields, field_of, &ctx);
    if (ctx.doc)
        json_decref(ctx.doc);
    return ok;
}

bool luna_ds_filter_selects(const luna_ds_filter *f)
{
    return !luna_selector_empty(f->labels) || !luna_selector_empty(f->fields) || f->shard;
}

void luna_ds_filter_clear(luna_ds_filter *f)
{
    free(f->ns);
    luna_selector_free(f->labels);
    luna_selector_free(f->fields);
    luna_shard_free(f->shard);
    free(f->shard_text);
    f->ns = NULL;
    f->labels = f->fields = NULL;
    f->shard = NULL;
    f->shard_text = NULL;
}
