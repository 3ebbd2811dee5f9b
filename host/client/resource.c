/* resource.c — see resource.h. */
#include "client/resource.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int luna_resource_copy(struct luna_resource *dst, const struct luna_resource *src)
{
    memset(dst, 0, sizeof *dst);
    dst->group = strdup(src->group ? src->group : "");
    dst->version = strdup(src->version ? src->version : "");
    dst->resource = strdup(src->resource ? src->resource : "");
    dst->kind = strdup(src->kind ? src->kind : "");
    dst->namespaced = src->namespaced;
    dst->has_status = src->has_status;
    if (!dst->group || !dst->version || !dst->resource || !dst->kind) {
        luna_resource_clear(dst);
        return LUNA_ENOMEM;
    }
    return 0;
}

void luna_resource_clear(struct luna_resource *r)
{
    free(r->group);
    free(r->version);
    free(r->resource);
    free(r->kind);
    memset(r, 0, sizeof *r);
}

size_t luna_resource_url_escape(const char *s, char *buf, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~';
        if (plain) {
            if (n + 1 < size)
                buf[n] = (char)*p;
            n++;
        } else {
            if (n + 3 < size) {
                buf[n] = '%';
                buf[n + 1] = hex[*p >> 4];
                buf[n + 2] = hex[*p & 15];
            }
            n += 3;
        }
    }
    if (size)
        buf[n < size ? n : size - 1] = '\0';
    return n;
}

struct path_out {
    char *buf;
    size_t size, len;
};

static void put_raw(struct path_out *o, const char *s)
{
    size_t n = strlen(s);
    if (o->len + n < o->size)
        memcpy(o->buf + o->len, s, n + 1);
    o->len += n;
}

static void put_escaped(struct path_out *o, const char *s)
{
    size_t room = o->len < o->size ? o->size - o->len : 0;
    o->len += luna_resource_url_escape(s, o->buf + (o->len < o->size ? o->len : 0), room);
}

int luna_resource_path(const struct luna_resource *r, const char *namespace_,
                       const char *name, const char *subresource, char *buf, size_t size)
{
    struct path_out o = { buf, size, 0 };
    if (size)
        buf[0] = '\0';
    if (r->group && *r->group) {
        put_raw(&o, "/apis/");
        put_raw(&o, r->group);
        put_raw(&o, "/");
    } else {
        put_raw(&o, "/api/");
    }
    put_raw(&o, r->version);
    if (r->namespaced && namespace_ && *namespace_) {
        put_raw(&o, "/namespaces/");
        put_escaped(&o, namespace_);
    }
    put_raw(&o, "/");
    put_raw(&o, r->resource);
    if (name && *name) {
        put_raw(&o, "/");
        put_escaped(&o, name);
        if (subresource && *subresource) {
            put_raw(&o, "/");
            put_raw(&o, subresource);
        }
    }
    if (o.len >= size)
        return LUNA_ETOOBIG;
    return (int)o.len;
}

static int copy_part(char *dst, size_t size, const char *src, size_t len)
{
    if (len == 0 || len >= size)
        return -1;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return 0;
}

int luna_resource_parse_kind(const char *text, char *group, size_t gsize, char *version, size_t vsize,
                    char *kind, size_t ksize, luna_error *err)
{
    const char *last = strrchr(text, '/');
    if (!last)
        goto bad;
    const char *kind_start = last + 1;
    const char *prev = last;
    while (prev > text && prev[-1] != '/')
        prev--;
    /* prev..last is the version; text..prev-1 the group (maybe empty) */
    if (copy_part(kind, ksize, kind_start, strlen(kind_start)) < 0 ||
        copy_part(version, vsize, prev, (size_t)(last - prev)) < 0)
        goto bad;
    if (prev == text) {
        if (gsize == 0)
            goto bad;
        group[0] = '\0';
    } else if (copy_part(group, gsize, text, (size_t)(prev - 1 - text)) < 0 ||
               strchr(group, '/')) {
        goto bad;
    }
    if (!isupper((unsigned char)kind[0]) || version[0] != 'v')
        goto bad;
    return 0;
bad:
    return luna_error_set(err, LUNA_EINVAL,
                          "invalid kind \"%s\": want \"v1/Kind\" or \"group/version/Kind\"", text);
}
