/* json_writer.c — see json_writer.h. */
#include "base/json_writer.h"

#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Writer
 */

enum frame { FRAME_KEY = 'k', FRAME_VALUE = 'v', FRAME_ARRAY = 'a' };

static int wfail(luna_json_writer *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int wfail(luna_json_writer *w, int code, const char *fmt, ...)
{
    if (w->status)
        return w->status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err.msg, sizeof w->err.msg, fmt, ap);
    va_end(ap);
    w->err.code = code;
    w->status = code;
    return code;
}

void luna_json_writer_init(luna_json_writer *w)
{
    memset(w, 0, sizeof *w);
}

void luna_json_writer_set_alloc(luna_json_writer *w, luna_json_alloc_fn fn, void *ud)
{
    w->alloc = fn;
    w->alloc_ud = ud;
}

/* realloc(p, n) through the writer's allocator; n > 0. */
static void *wrealloc(luna_json_writer *w, void *p, size_t osize, size_t n)
{
    return w->alloc ? w->alloc(w->alloc_ud, p, p ? osize : 0, n) : realloc(p, n);
}

static void wfree(luna_json_writer *w, void *p, size_t osize)
{
    if (!p)
        return;
    if (w->alloc)
        w->alloc(w->alloc_ud, p, osize, 0);
    else
        free(p);
}

void luna_json_writer_free(luna_json_writer *w)
{
    wfree(w, w->buf, w->cap);
    wfree(w, w->frames, w->frames_cap);
    luna_json_alloc_fn fn = w->alloc;
    void *ud = w->alloc_ud;
    memset(w, 0, sizeof *w);
    w->alloc = fn;
    w->alloc_ud = ud;
}

void luna_json_writer_reset(luna_json_writer *w)
{
    w->len = 0;
    w->depth = 0;
    w->need_comma = false;
    w->done = false;
    w->status = 0;
    w->err.code = 0;
    w->err.msg[0] = '\0';
}

/* Makes room for n more bytes plus a NUL. */
static int reserve(luna_json_writer *w, size_t n)
{
    if (w->cap - w->len > n)
        return 0;
    size_t cap = w->cap ? w->cap : 256;
    while (cap - w->len <= n) {
        if (cap > SIZE_MAX / 2)
            return wfail(w, LUNA_ENOMEM, "out of memory");
        cap *= 2;
    }
    char *buf = wrealloc(w, w->buf, w->cap, cap);
    if (!buf)
        return wfail(w, LUNA_ENOMEM, "out of memory");
    w->buf = buf;
    w->cap = cap;
    return 0;
}

static int put(luna_json_writer *w, const char *s, size_t n)
{
    if (reserve(w, n))
        return w->status;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    return 0;
}

static int before_value(luna_json_writer *w)
{
    if (w->status)
        return w->status;
    if (w->depth == 0) {
        if (w->done)
            return wfail(w, LUNA_EINVAL, "a second top-level value");
        return 0;
    }
    unsigned char *f = &w->frames[w->depth - 1];
    if (*f == FRAME_KEY)
        return wfail(w, LUNA_EINVAL, "a value where an object key is due");
    if (*f == FRAME_VALUE) {
        *f = FRAME_KEY;
        return 0;
    }
    return w->need_comma ? put(w, ",", 1) : 0;
}

static void after_value(luna_json_writer *w)
{
    if (w->depth == 0)
        w->done = true;
    else
        w->need_comma = true;
}

static int open_frame(luna_json_writer *w, enum frame f, char c)
{
    if (before_value(w))
        return w->status;
    if (w->depth == w->frames_cap) {
        size_t cap = w->frames_cap ? w->frames_cap * 2 : 16;
        unsigned char *fr = wrealloc(w, w->frames, w->frames_cap, cap);
        if (!fr)
            return wfail(w, LUNA_ENOMEM, "out of memory");
        w->frames = fr;
        w->frames_cap = cap;
    }
    if (put(w, &c, 1))
        return w->status;
    w->frames[w->depth++] = (unsigned char)f;
    w->need_comma = false;
    return 0;
}

static int close_frame(luna_json_writer *w, enum frame f, char c)
{
    if (w->status)
        return w->status;
    if (w->depth == 0 || w->frames[w->depth - 1] != f)
        return wfail(w, LUNA_EINVAL, "%s does not close the open container",
                     c == '}' ? "object end" : "array end");
    if (put(w, &c, 1))
        return w->status;
    w->depth--;
    after_value(w);
    return 0;
}

int luna_json_write_object_start(luna_json_writer *w) { return open_frame(w, FRAME_KEY, '{'); }
int luna_json_write_object_end(luna_json_writer *w) { return close_frame(w, FRAME_KEY, '}'); }
int luna_json_write_array_start(luna_json_writer *w) { return open_frame(w, FRAME_ARRAY, '['); }
int luna_json_write_array_end(luna_json_writer *w) { return close_frame(w, FRAME_ARRAY, ']'); }

/* 1: the byte needs an escape. */
static const unsigned char needs_escape[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* '"' */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, /* '\\' */
};

/* Writes s as a JSON string; validate: check UTF-8 first. */
static int put_string(luna_json_writer *w, const char *s, size_t len, bool validate)
{
    if (validate) {
        size_t ok = luna_json_utf8_valid_prefix(s, len);
        if (ok != len)
            return wfail(w, LUNA_EINVAL, "string is not valid UTF-8 (byte %zu)", ok);
    }
    if (reserve(w, len + 2))
        return w->status;
    w->buf[w->len++] = '"';
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        while (i < len && !needs_escape[(unsigned char)s[i]])
            i++;
        if (put(w, s + start, i - start))
            return w->status;
        if (i == len)
            break;
        unsigned char c = (unsigned char)s[i++];
        char esc[7];
        size_t n = 2;
        esc[0] = '\\';
        switch (c) {
        case '"':  esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", c);
            n = 6;
        }
        if (put(w, esc, n))
            return w->status;
    }
    return put(w, "\"", 1);
}

int luna_json_write_key(luna_json_writer *w, const char *s, size_t len)
{
    if (w->status)
        return w->status;
    if (w->depth == 0 || w->frames[w->depth - 1] != FRAME_KEY)
        return wfail(w, LUNA_EINVAL, "an object key where a value is due");
    if (w->need_comma && put(w, ",", 1))
        return w->status;
    if (put_string(w, s, len, true) || put(w, ":", 1))
        return w->status;
    w->frames[w->depth - 1] = FRAME_VALUE;
    return 0;
}

int luna_json_write_string(luna_json_writer *w, const char *s, size_t len)
{
    if (before_value(w) || put_string(w, s, len, true))
        return w->status;
    after_value(w);
    return 0;
}

static int put_raw_value(luna_json_writer *w, const char *s, size_t len)
{
    if (before_value(w) || put(w, s, len))
        return w->status;
    after_value(w);
    return 0;
}

/* Writes the decimal digits of v ending at end; returns the start. */
static char *u64_digits(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

int luna_json_write_uint(luna_json_writer *w, uint64_t v)
{
    char buf[24];
    char *s = u64_digits(buf + sizeof buf, v);
    return put_raw_value(w, s, (size_t)(buf + sizeof buf - s));
}

int luna_json_write_int(luna_json_writer *w, int64_t v)
{
    char buf[24];
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char *s = u64_digits(buf + sizeof buf, mag);
    if (v < 0)
        *--s = '-';
    return put_raw_value(w, s, (size_t)(buf + sizeof buf - s));
}

#define EXACT_INT_LIMIT 9007199254740992.0 /* 2^53 */

int luna_json_write_double(luna_json_writer *w, double v)
{
    if (w->status)
        return w->status;
    if (!isfinite(v))
        return wfail(w, LUNA_EINVAL, "%s cannot be written as JSON",
                     isnan(v) ? "NaN" : "infinity");
    if (fabs(v) <= EXACT_INT_LIMIT && v == trunc(v)) {
        if (v == 0 && signbit(v))
            return put_raw_value(w, "-0", 2);
        return luna_json_write_int(w, (int64_t)v);
    }
    /* The fewest significant digits that read back to v: if p digits do,
     * so do p + 1 (closer to v), so a binary search over 1..17 finds it. */
    char buf[320]; /* %g with up to 17 digits needs < 32; the compiler
                      cannot see the bound on the precision */
    locale_t loc = luna_json_c_locale(), old = loc ? uselocale(loc) : (locale_t)0;
    int lo = 1, hi = 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        snprintf(buf, sizeof buf, "%.*g", mid, v);
        if (luna_json_strtod_c(buf, NULL) == v)
            hi = mid;
        else
            lo = mid + 1;
    }
    snprintf(buf, sizeof buf, "%.*g", lo, v);
    if (loc)
        uselocale(old);
    return put_raw_value(w, buf, strlen(buf));
}

int luna_json_write_bool(luna_json_writer *w, bool v)
{
    return v ? put_raw_value(w, "true", 4) : put_raw_value(w, "false", 5);
}

int luna_json_write_null(luna_json_writer *w)
{
    return put_raw_value(w, "null", 4);
}

int luna_json_write_raw(luna_json_writer *w, const char *json, size_t len)
{
    return put_raw_value(w, json, len);
}

int luna_json_write_event(luna_json_writer *w, const luna_json_event *ev)
{
    switch (ev->type) {
    case LUNA_JSON_NULL:         return luna_json_write_null(w);
    case LUNA_JSON_FALSE:        return luna_json_write_bool(w, false);
    case LUNA_JSON_TRUE:         return luna_json_write_bool(w, true);
    case LUNA_JSON_NUMBER:       return put_raw_value(w, ev->str, ev->len);
    case LUNA_JSON_OBJECT_START: return luna_json_write_object_start(w);
    case LUNA_JSON_OBJECT_END:   return luna_json_write_object_end(w);
    case LUNA_JSON_ARRAY_START:  return luna_json_write_array_start(w);
    case LUNA_JSON_ARRAY_END:    return luna_json_write_array_end(w);
    case LUNA_JSON_LIMIT:        return LUNA_EINVAL; /* no value to write */
    case LUNA_JSON_STRING:
        /* Parser strings are valid UTF-8 already. */
        if (before_value(w) || put_string(w, ev->str, ev->len, false))
            return w->status;
        after_value(w);
        return 0;
    case LUNA_JSON_KEY:
        return luna_json_write_key(w, ev->str, ev->len);
    }
    return wfail(w, LUNA_EINVAL, "unknown event type %d", (int)ev->type);
}

int luna_json_writer_finish(luna_json_writer *w, luna_error *err)
{
    if (!w->status && (w->depth > 0 || !w->done))
        wfail(w, LUNA_EINVAL, "incomplete document");
    if (w->status && err)
        *err = w->err;
    return w->status;
}

const char *luna_json_writer_data(luna_json_writer *w, size_t *len)
{
    if (len)
        *len = w->len;
    if (!w->buf)
        return "";
    w->buf[w->len] = '\0';
    return w->buf;
}

char *luna_json_writer_steal(luna_json_writer *w, size_t *len)
{
    char *buf = w->buf;
    if (!buf) {
        buf = malloc(1);
        if (!buf)
            return NULL;
    } else {
        buf[w->len] = '\0';
    }
    if (len)
        *len = w->len;
    w->buf = NULL;
    w->cap = 0;
    luna_json_writer_reset(w);
    return buf;
}
