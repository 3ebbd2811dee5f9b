/* devserver_protobuf.c — see devserver_protobuf.h. */
#include "devserver/devserver_protobuf.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

/* The first error of one decode: a 400 with msg, or a 500 when memory ran
 * out (oom). */
struct ctx {
    char msg[512];
    bool failed;
    bool oom;
};

static bool fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(struct ctx *c, const char *fmt, ...)
{
    if (!c->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->msg, sizeof c->msg, fmt, ap);
        va_end(ap);
        c->failed = true;
    }
    return false;
}

static bool oom(struct ctx *c)
{
    if (!c->failed)
        c->failed = c->oom = true;
    return false;
}

/* v, or NULL with the decode marked out of memory when an allocation
 * (jansson's or ours) gave NULL without a decode error. */
static json_t *need(json_t *v, struct ctx *c)
{
    if (!v)
        oom(c);
    return v;
}

/* ---- the wire ---- */

struct rd {
    const uint8_t *p, *end;
};

static bool read_varint(struct rd *r, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return false;
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false; /* more than ten bytes */
}

/* One field occurrence: its wire type and value (a varint, or bytes). */
struct occ {
    int wire;
    uint64_t v;
    const uint8_t *p;
    size_t len;
};

/* Reads the next tag and value; false at the end (ok) or on an error. */
static bool next_field(struct rd *r, uint32_t *num, struct occ *o, struct ctx *c, const char *where)
{
    uint64_t tag;
    if (!read_varint(r, &tag))
        return fail(c, "proto: %s: truncated field tag", where);
    *num = (uint32_t)(tag >> 3);
    o->wire = (int)(tag & 7);
    if (*num == 0 || tag >> 3 > 0x1fffffff)
        return fail(c, "proto: %s: illegal field number %llu", where,
                    (unsigned long long)(tag >> 3));
    switch (o->wire) {
    case WIRE_VARINT:
        if (!read_varint(r, &o->v))
            return fail(c, "proto: %s: truncated varint in field %u", where, *num);
        return true;
    case WIRE_FIXED64:
    case WIRE_FIXED32: {
        size_t n = o->wire == WIRE_FIXED64 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n)
            return fail(c, "proto: %s: truncated fixed value in field %u", where, *num);
        o->p = r->p;
        o->len = n;
        r->p += n;
        return true;
    }
    case WIRE_LEN: {
        uint64_t n;
        if (!read_varint(r, &n) || n > (uint64_t)(r->end - r->p))
            return fail(c, "proto: %s: field %u: length past the end of the message", where, *num);
        o->p = r->p;
        o->len = (size_t)n;
        r->p += n;
        return true;
    }
    default:
        return fail(c, "proto: %s: illegal wire type %d for field %u", where, o->wire, *num);
    }
}

/* ---- values ---- */

static const luna_ds_pb_field *find(const luna_ds_pb_message *m, uint32_t num, size_t *idx)
{
    for (size_t i = 0; i < m->n_fields; i++)
        if (m->fields[i].num == num) {
            *idx = i;
            return &m->fields[i];
        }
    return NULL;
}

static bool is_varint_type(int t)
{
    return t == LUNA_PB_BOOL || t == LUNA_PB_INT32 || t == LUNA_PB_INT64;
}

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
    uint8_t b = p[0];
    if (b < 0x80)
        return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (b >= 0xc2 && b <= 0xdf)
        len = 2;
    else if (b >= 0xe0 && b <= 0xef) {
        len = 3;
        if (b == 0xe0)
            lo = 0xa0; /* no overlong forms */
        else if (b == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (b >= 0xf0 && b <= 0xf4) {
        len = 4;
        if (b == 0xf0)
            lo = 0x90;
        else if (b == 0xf4)
            hi = 0x8f; /* nothing past U+10FFFF */
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return len;
}

/* A protobuf string as JSON.  Protobuf does not check UTF-8; Go's JSON
 * encoder writes each byte that does not start a valid sequence as U+FFFD,
 * and so does this. */
static json_t *string_value(const uint8_t *p, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len(p + i, n - i);
        bad += l == 0;
        i += l ? l : 1;
    }
    if (bad == 0)
        return json_stringn((const char *)p, n);
    char *out = malloc(n + 2 * bad + 1), *w = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len(p + i, n - i);
        if (l) {
            memcpy(w, p + i, l);
            w += l;
            i += l;
        } else {
            memcpy(w, "\xef\xbf\xbd", 3);
            w += 3;
            i++;
        }
    }
    json_t *s = json_stringn(out, (size_t)(w - out));
    free(out);
    return s;
}

static json_t *base64_value(const uint8_t *p, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out)
        return NULL;
    int w = EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    json_t *s = json_stringn(out, (size_t)w);
    free(out);
    return s;
}

/* Reads one varint field of a small fixed message ({1: seconds} and the
 * like) into vals[num] for num < n; other numbers are skipped. */
static bool small_message(const uint8_t *p, size_t len, uint64_t *vals, const char **strs,
                          size_t *strlens, size_t n, struct ctx *c, const char *where)
{
    struct rd r = { p, p + len };
    while (r.p < r.end) {
        uint32_t num;
        struct occ o;
        if (!next_field(&r, &num, &o, c, where))
            return false;
        if (num >= n)
            continue;
        if (o.wire == WIRE_VARINT && vals)
            vals[num] = o.v;
        else if (o.wire == WIRE_LEN && strs) {
            strs[num] = (const char *)o.p;
            strlens[num] = o.len;
        } else
            return fail(c, "proto: %s: wrong wire type %d for field %u", where, o.wire, num);
    }
    return true;
}

static json_t *time_value(const uint8_t *p, size_t len, bool *zero, struct ctx *c,
                          const char *where)
{
    *zero = len == 0;
    if (len == 0)
        return json_null(); /* metav1.Time: zero is null */
    uint64_t vals[2] = { 0, 0 };
    if (!small_message(p, len, vals, NULL, NULL, 2, c, where))
        return NULL;
    time_t secs = (time_t)(int64_t)vals[1];
    struct tm tm;
    if (!gmtime_r(&secs, &tm) || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999) {
        fail(c, "proto: %s: time %lld seconds is out of range", where, (long long)secs);
        return NULL;
    }
    char buf[32];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

static json_t *int_or_string_value(const uint8_t *p, size_t len, bool *zero, struct ctx *c,
                                   const char *where)
{
    uint64_t vals[3] = { 0, 0, 0 };
    const char *strs[4] = { 0 };
    size_t lens[4] = { 0 };
    struct rd r = { p, p + len };
    while (r.p < r.end) {
        uint32_t num;
        struct occ o;
        if (!next_field(&r, &num, &o, c, where))
            return NULL;
        if ((num == 1 || num == 2) && o.wire == WIRE_VARINT)
            vals[num] = o.v;
        else if (num == 3 && o.wire == WIRE_LEN) {
            strs[3] = (const char *)o.p;
            lens[3] = o.len;
        } else if (num <= 3) {
            fail(c, "proto: %s: wrong wire type %d for field %u", where, o.wire, num);
            return NULL;
        }
    }
    *zero = vals[1] == 0 && vals[2] == 0 && lens[3] == 0;
    if (vals[1] == 0)
        return json_integer((int32_t)(uint32_t)vals[2]);
    if (vals[1] == 1)
        return strs[3] ? string_value((const uint8_t *)strs[3], lens[3])
                       : json_string("");
    fail(c, "proto: %s: impossible IntOrString type %llu", where, (unsigned long long)vals[1]);
    return NULL;
}

static json_t *quantity_value(const uint8_t *p, size_t len, bool *zero, struct ctx *c,
                              const char *where)
{
    const char *strs[2] = { 0 };
    size_t lens[2] = { 0 };
    if (!small_message(p, len, NULL, strs, lens, 2, c, where))
        return NULL;
    *zero = lens[1] == 0;
    if (lens[1] == 0)
        return json_string("0");
    return string_value((const uint8_t *)strs[1], lens[1]);
}

static json_t *raw_json_value(const uint8_t *p, size_t len, bool *zero, struct ctx *c,
                              const char *where)
{
    const char *strs[2] = { 0 };
    size_t lens[2] = { 0 };
    if (!small_message(p, len, NULL, strs, lens, 2, c, where))
        return NULL;
    *zero = strs[1] == NULL;
    if (lens[1] == 0)
        return json_null();
    json_error_t e;
    json_t *doc = json_loadb(strs[1], lens[1], JSON_DECODE_ANY, &e);
    if (!doc)
        fail(c, "proto: %s: raw JSON does not parse: %s", where, e.text);
    return doc;
}

static bool emit_message(int msg, const uint8_t *p, size_t len, json_t *out,
                         bool *zero, struct ctx *c);

/* The JSON for one value of field f from occurrence bytes (message kinds)
 * or a varint; *zero tells whether Go would consider it the zero value. */
static json_t *value_of(const luna_ds_pb_field *f, const struct occ *o, bool *zero,
                        struct ctx *c, const char *where)
{
    switch (f->type) {
    case LUNA_PB_STRING:
        *zero = o->len == 0;
        return string_value(o->p, o->len);
    case LUNA_PB_BYTES:
        *zero = o->len == 0;
        return base64_value(o->p, o->len);
    case LUNA_PB_BOOL:
        *zero = o->v == 0;
        return json_boolean(o->v != 0);
    case LUNA_PB_INT32:
        *zero = (uint32_t)o->v == 0;
        return json_integer((int32_t)(uint32_t)o->v);
    case LUNA_PB_INT64:
        *zero = o->v == 0;
        return json_integer((json_int_t)(int64_t)o->v);
    case LUNA_PB_MESSAGE: {
        json_t *obj = json_object();
        if (!obj || !emit_message(f->msg, o->p, o->len, obj, zero, c)) {
            json_decref(obj);
            return NULL;
        }
        return obj;
    }
    case LUNA_PB_TIME:
        return time_value(o->p, o->len, zero, c, where);
    case LUNA_PB_INTORSTRING:
        return int_or_string_value(o->p, o->len, zero, c, where);
    case LUNA_PB_QUANTITY:
        return quantity_value(o->p, o->len, zero, c, where);
    case LUNA_PB_RAWJSON:
        return raw_json_value(o->p, o->len, zero, c, where);
    }
    fail(c, "proto: %s: no rule for field type %d", where, f->type);
    return NULL;
}

static json_t *value(const luna_ds_pb_field *f, const struct occ *o, bool *zero,
                     struct ctx *c, const char *where)
{
    return need(value_of(f, o, zero, c, where), c);
}

/* The zero value of a non-pointer field, as Go's encoder writes it. */
static json_t *zero_value(const luna_ds_pb_field *f, struct ctx *c)
{
    struct occ none = { .wire = WIRE_LEN, .v = 0, .p = (const uint8_t *)"", .len = 0 };
    bool z;
    return value(f, &none, &z, c, "zero value");
}

/* The occurrences of one field in one message. */
struct slot {
    struct occ *occ;
    size_t n, cap;
};

static bool slot_add(struct slot *s, const struct occ *o)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4;
        struct occ *occ = realloc(s->occ, cap * sizeof *occ);
        if (!occ)
            return false;
        s->occ = occ;
        s->cap = cap;
    }
    s->occ[s->n++] = *o;
    return true;
}

/* The value of a non-repeated field that arrived s->n times: the last one,
 * except for a message, which protobuf merges: decoding the concatenation
 * is that merge.  *buf is set when a copy was made (caller frees); false
 * when memory ran out. */
static bool merged(const luna_ds_pb_field *f, const struct slot *s, struct occ *out,
                   uint8_t **buf)
{
    *buf = NULL;
    bool message = f->type == LUNA_PB_MESSAGE || f->type == LUNA_PB_TIME ||
                   f->type == LUNA_PB_INTORSTRING || f->type == LUNA_PB_QUANTITY ||
                   f->type == LUNA_PB_RAWJSON;
    if (s->n == 1 || !message) {
        *out = s->occ[s->n - 1];
        return true;
    }
    size_t total = 0;
    for (size_t i = 0; i < s->n; i++)
        total += s->occ[i].len;
    uint8_t *b = malloc(total ? total : 1);
    if (!b)
        return false;
    size_t at = 0;
    for (size_t i = 0; i < s->n; i++) {
        memcpy(b + at, s->occ[i].p, s->occ[i].len);
        at += s->occ[i].len;
    }
    *buf = b;
    *out = (struct occ){ .wire = WIRE_LEN, .p = b, .len = total };
    return true;
}

struct entry {
    const char *key;
    size_t key_len;
    json_t *val;
    size_t seq;
};

static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int d = memcmp(x->key, y->key, n);
    if (d)
        return d;
    if (x->key_len != y->key_len)
        return x->key_len < y->key_len ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq; /* later entries last */
}

/* A map field: entries {1: key, 2: value}, written with sorted keys as Go
 * does; a repeated key keeps its last value. */
static json_t *map_value(const luna_ds_pb_field *f, const struct slot *s,
                         struct ctx *c, const char *where)
{
    struct entry *es = calloc(s->n, sizeof *es);
    if (!es) {
        oom(c);
        return NULL;
    }
    size_t n = 0;
    json_t *obj = NULL;
    for (size_t i = 0; i < s->n; i++) {
        struct rd r = { s->occ[i].p, s->occ[i].p + s->occ[i].len };
        struct occ key = { .wire = WIRE_LEN, .p = (const uint8_t *)"", .len = 0 };
        struct occ val = { .wire = f->type == LUNA_PB_BOOL || f->type == LUNA_PB_INT32 ||
                                           f->type == LUNA_PB_INT64 ? WIRE_VARINT : WIRE_LEN,
                           .p = (const uint8_t *)"", .len = 0 };
        while (r.p < r.end) {
            uint32_t num;
            struct occ o;
            if (!next_field(&r, &num, &o, c, where))
                goto out;
            if (num == 1 && o.wire == WIRE_LEN)
                key = o;
            else if (num == 2 && o.wire == val.wire)
                val = o;
            else if (num == 1 || num == 2) {
                fail(c, "proto: %s: wrong wire type %d in a map entry", where, o.wire);
                goto out;
            }
        }
        bool z;
        json_t *v = value(f, &val, &z, c, where);
        if (!v)
            goto out;
        es[n++] = (struct entry){ (const char *)key.p, key.len, v, i };
    }
    qsort(es, n, sizeof *es, cmp_entry);
    obj = need(json_object(), c);
    for (size_t i = 0; obj && i < n; i++) {
        if (i + 1 < n && es[i].key_len == es[i + 1].key_len &&
            memcmp(es[i].key, es[i + 1].key, es[i].key_len) == 0)
            continue; /* a later value for the same key wins */
        json_t *k = need(string_value((const uint8_t *)es[i].key, es[i].key_len), c);
        if (!k || json_object_setn(obj, json_string_value(k), json_string_length(k),
                                   es[i].val) < 0) {
            oom(c);
            json_decref(obj);
            obj = NULL;
        }
        json_decref(k);
    }
out:
    for (size_t i = 0; i < n; i++)
        json_decref(es[i].val);
    free(es);
    return obj;
}

/* A repeated field: every occurrence in order; numbers may be packed. */
static json_t *list_value(const luna_ds_pb_field *f, const struct slot *s,
                          struct ctx *c, const char *where)
{
    json_t *arr = need(json_array(), c);
    if (!arr)
        return NULL;
    for (size_t i = 0; i < s->n; i++) {
        const struct occ *o = &s->occ[i];
        if (is_varint_type(f->type) && o->wire == WIRE_LEN) {
            struct rd r = { o->p, o->p + o->len };
            while (r.p < r.end) {
                struct occ e = { .wire = WIRE_VARINT };
                if (!read_varint(&r, &e.v)) {
                    fail(c, "proto: %s: truncated packed list", where);
                    json_decref(arr);
                    return NULL;
                }
                bool z;
                if (json_array_append_new(arr, value(f, &e, &z, c, where)) < 0) {
                    oom(c);
                    json_decref(arr);
                    return NULL;
                }
            }
            continue;
        }
        bool z;
        json_t *v = value(f, o, &z, c, where);
        if (!v || json_array_append_new(arr, v) < 0) {
            oom(c);
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static bool wire_fits(const luna_ds_pb_field *f, int wire)
{
    if (f->flags & LUNA_PB_F_MAP)
        return wire == WIRE_LEN;
    if (is_varint_type(f->type))
        return wire == WIRE_VARINT || (wire == WIRE_LEN && (f->flags & LUNA_PB_F_REPEATED));
    return wire == WIRE_LEN;
}

/* Appends message msg's fields, decoded from p, to out in Go field order;
 * *zero is set when every field holds its zero value. */
static bool emit_message(int msg, const uint8_t *p, size_t len, json_t *out,
                         bool *zero, struct ctx *c)
{
    const luna_ds_pb_message *m = &luna_ds_pb_messages[msg];
    struct slot *slots = calloc(m->n_fields ? m->n_fields : 1, sizeof *slots);
    if (!slots)
        return oom(c);
    bool ok = false;
    *zero = true;
    struct rd r = { p, p + len };
    while (r.p < r.end) {
        uint32_t num;
        struct occ o;
        if (!next_field(&r, &num, &o, c, m->name))
            goto out;
        size_t i;
        const luna_ds_pb_field *f = find(m, num, &i);
        if (!f)
            continue; /* unknown to this version: skipped, as Go's decoder does */
        if (!wire_fits(f, o.wire)) {
            fail(c, "proto: wrong wireType = %d for field %s.%s", o.wire, m->name,
                 f->json ? f->json : "(inline)");
            goto out;
        }
        if (!slot_add(&slots[i], &o)) {
            oom(c);
            goto out;
        }
    }
    for (size_t i = 0; i < m->n_fields; i++) {
        const luna_ds_pb_field *f = &m->fields[i];
        const struct slot *s = &slots[i];
        char where[256];
        snprintf(where, sizeof where, "%s.%s", m->name, f->json ? f->json : "(inline)");
        json_t *v = NULL;
        bool fz = true;    /* Go's IsZero of the field */
        bool empty = true; /* what omitempty tests */
        if (f->flags & (LUNA_PB_F_MAP | LUNA_PB_F_REPEATED)) {
            if (s->n > 0) {
                v = (f->flags & LUNA_PB_F_MAP) ? map_value(f, s, c, where)
                                               : list_value(f, s, c, where);
                if (!v)
                    goto out;
                fz = false;
                empty = (f->flags & LUNA_PB_F_MAP) ? json_object_size(v) == 0
                                                   : json_array_size(v) == 0;
            } else {
                v = json_null(); /* a nil slice or map */
            }
        } else if (s->n > 0) {
            uint8_t *buf;
            struct occ o;
            if (!merged(f, s, &o, &buf)) {
                oom(c);
                goto out;
            }
            v = value(f, &o, &fz, c, where);
            free(buf);
            if (!v)
                goto out;
            bool scalar = f->type == LUNA_PB_STRING || f->type == LUNA_PB_BYTES ||
                          is_varint_type(f->type);
            if (f->flags & LUNA_PB_F_POINTER) {
                fz = false; /* a non-nil pointer */
                empty = false;
            } else {
                empty = scalar && fz;
            }
        } else if (f->flags & LUNA_PB_F_POINTER) {
            v = json_null();
        } else {
            v = zero_value(f, c);
            if (!v)
                goto out;
            bool scalar = f->type == LUNA_PB_STRING || f->type == LUNA_PB_BYTES ||
                          is_varint_type(f->type);
            empty = scalar;
        }
        if (!fz)
            *zero = false;
        bool omit = (f->flags & LUNA_PB_F_NOJSON) ||
                    ((f->flags & LUNA_PB_F_OMITEMPTY) && empty) ||
                    ((f->flags & LUNA_PB_F_OMITZERO) && fz);
        int rc = 0;
        if (!omit && (f->flags & LUNA_PB_F_INLINE) && json_is_object(v))
            rc = json_object_update(out, v);
        else if (!omit && f->json)
            rc = json_object_set(out, f->json, v);
        json_decref(v);
        if (rc < 0) {
            oom(c);
            goto out;
        }
    }
    ok = true;
out:
    for (size_t i = 0; i < m->n_fields; i++)
        free(slots[i].occ);
    free(slots);
    return ok;
}

/* ---- the envelope ---- */

int luna_ds_protobuf_is(const char *content_type)
{
    static const char mt[] = "application/vnd.kubernetes.protobuf";
    if (!content_type || strncasecmp(content_type, mt, sizeof mt - 1) != 0)
        return 0;
    char next = content_type[sizeof mt - 1];
    return next == '\0' || next == ';' || next == ' ';
}

/* A client's bytes, fit to quote in an error message: printable ASCII
 * kept, anything else '?', at most out_size - 1 bytes. */
static void quotable(char *out, size_t out_size, const char *p, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n && w + 1 < out_size; i++) {
        unsigned char b = (unsigned char)p[i];
        out[w++] = b >= 0x20 && b < 0x7f && b != '"' && b != '\\' ? (char)b : '?';
    }
    out[w] = '\0';
}

static void kinds_list(char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < luna_ds_pb_n_kinds && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s %s", i ? ", " : "",
                               luna_ds_pb_kinds[i].api_version, luna_ds_pb_kinds[i].kind);
}

char *luna_ds_protobuf_to_json(const char *body, size_t len, size_t *out_len,
                               luna_ds_status *st)
{
    static const uint8_t magic[4] = { 'k', '8', 's', 0 };
    struct ctx c = { .failed = false };
    const uint8_t *p = (const uint8_t *)body;
    if (len < 4 || memcmp(p, magic, 4) != 0) {
        luna_ds_status_bad_request(st, "the protobuf body does not start with the \"k8s\\x00\" "
                                   "envelope prefix");
        return NULL;
    }
    struct rd r = { p + 4, p + len };
    const char *tm_strs[3] = { 0 };
    size_t tm_lens[3] = { 0 };
    const uint8_t *raw = NULL;
    size_t raw_len = 0;
    while (r.p < r.end) {
        uint32_t num;
        struct occ o;
        if (!next_field(&r, &num, &o, &c, "runtime.Unknown"))
            goto bad;
        if (num >= 1 && num <= 4 && o.wire != WIRE_LEN) {
            fail(&c, "proto: wrong wireType = %d for field runtime.Unknown %u", o.wire, num);
            goto bad;
        }
        if (num == 1) {
            if (!small_message(o.p, o.len, NULL, tm_strs, tm_lens, 3, &c, "runtime.TypeMeta"))
                goto bad;
        } else if (num == 2) {
            raw = o.p;
            raw_len = o.len;
        } else if (num == 3 && o.len > 0) {
            char q[65];
            quotable(q, sizeof q, (const char *)o.p, o.len);
            fail(&c, "unsupported contentEncoding \"%s\" in the protobuf envelope", q);
            goto bad;
        } else if (num == 4 && o.len > 0 &&
                   !(o.len >= 35 && memcmp(o.p, "application/vnd.kubernetes.protobuf", 35) == 0)) {
            char q[65];
            quotable(q, sizeof q, (const char *)o.p, o.len);
            fail(&c, "unsupported contentType \"%s\" in the protobuf envelope", q);
            goto bad;
        }
    }
    int msg = -1;
    const char *api_version = NULL, *kind = NULL;
    for (size_t i = 0; i < luna_ds_pb_n_kinds; i++) {
        const luna_ds_pb_kind *k = &luna_ds_pb_kinds[i];
        if (tm_lens[1] == strlen(k->api_version) && tm_lens[2] == strlen(k->kind) &&
            memcmp(tm_strs[1], k->api_version, tm_lens[1]) == 0 &&
            memcmp(tm_strs[2], k->kind, tm_lens[2]) == 0) {
            msg = k->msg;
            api_version = k->api_version;
            kind = k->kind;
        }
    }
    if (msg < 0) {
        char kinds[1024], av[128], kd[128];
        kinds_list(kinds, sizeof kinds);
        quotable(av, sizeof av, tm_strs[1] ? tm_strs[1] : "", tm_lens[1]);
        quotable(kd, sizeof kd, tm_strs[2] ? tm_strs[2] : "", tm_lens[2]);
        luna_ds_status_set(st, 415, "UnsupportedMediaType",
                           "the dev server reads protobuf bodies only for %s (got apiVersion "
                           "\"%s\" kind \"%s\"): send application/json", kinds, av, kd);
        return NULL;
    }
    json_t *doc = json_object();
    bool zero;
    if (!doc || json_object_set_new(doc, "kind", json_string(kind)) < 0 ||
        json_object_set_new(doc, "apiVersion", json_string(api_version)) < 0) {
        oom(&c);
    } else if (emit_message(msg, raw ? raw : (const uint8_t *)"", raw_len, doc, &zero, &c)) {
        char *text = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        if (text) {
            *out_len = strlen(text);
            return text;
        }
        doc = NULL;
        oom(&c);
    }
    json_decref(doc);
bad:
    if (c.oom)
        luna_ds_status_oom(st);
    else
        luna_ds_status_bad_request(st, "%s", c.msg);
    return NULL;
}
