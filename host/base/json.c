/* json.c — see json.h (the writer is json_writer.c).
 *
 * One concept over ~900 lines: the push parser with the checks yajl
 * lacks (UTF-8, surrogates, numbers, depth, size), and the path lookup that
 * is a client of it.
 */
#include "base/json.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

/* Number conversion must not depend on the process locale (a script could
 * change LC_NUMERIC): strtod_l and snprintf run under a "C" locale. */
locale_t luna_json_c_locale(void)
{
    static locale_t loc;
    if (!loc)
        loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    return loc;
}

double luna_json_strtod_c(const char *s, char **end)
{
    locale_t loc = luna_json_c_locale();
    return loc ? strtod_l(s, end, loc) : strtod(s, end);
}

/* ------------------------------------------------------------------------
 * UTF-8
 */

size_t luna_json_utf8_valid_prefix(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        if (len - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & UINT64_C(0x8080808080808080))) {
                i += 8;
                continue;
            }
        }
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (len - i < 2 || (s[i + 1] & 0xC0) != 0x80)
                return i;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            unsigned lo = c == 0xE0 ? 0xA0 : 0x80; /* no overlong forms */
            unsigned hi = c == 0xED ? 0x9F : 0xBF; /* no surrogates */
            if (len - i < 3 || s[i + 1] < lo || s[i + 1] > hi ||
                (s[i + 2] & 0xC0) != 0x80)
                return i;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            unsigned lo = c == 0xF0 ? 0x90 : 0x80; /* no overlong forms */
            unsigned hi = c == 0xF4 ? 0x8F : 0xBF; /* nothing past U+10FFFF */
            if (len - i < 4 || s[i + 1] < lo || s[i + 1] > hi ||
                (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return i;
            i += 4;
        } else {
            return i;
        }
    }
    return len;
}

/* ------------------------------------------------------------------------
 * Numbers
 */

/* Classifies and converts the number text s[0..n) (already checked by the
 * lexer against the JSON grammar).  Returns 0, or -1 if a fraction/exponent
 * form overflows a double. */
static int convert_number(const char *s, size_t n, luna_json_event *ev)
{
    const char *p = s, *end = s + n;
    bool neg = false;
    if (p < end && *p == '-') {
        neg = true;
        p++;
    }
    uint64_t v = 0;
    bool overflow = false;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            v = v * 10 + d;
    }
    if (p == end && !(neg && v == 0 && !overflow)) {
        if (overflow) {
            ev->kind = LUNA_JSON_BIGINT;
        } else if (neg) {
            if (v > (uint64_t)INT64_MAX + 1) {
                ev->kind = LUNA_JSON_BIGINT;
            } else {
                ev->kind = LUNA_JSON_INT;
                ev->i = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
                ev->d = (double)ev->i;
                return 0;
            }
        } else if (v > (uint64_t)INT64_MAX) {
            ev->kind = LUNA_JSON_UINT;
            ev->u = v;
            ev->d = (double)v;
            return 0;
        } else {
            ev->kind = LUNA_JSON_INT;
            ev->i = (int64_t)v;
            ev->d = (double)v;
            return 0;
        }
    } else {
        ev->kind = LUNA_JSON_DOUBLE; /* also "-0": the sign must survive */
    }
    /* strtod needs a NUL-terminated copy: the text is not terminated. */
    char small[64];
    char *copy = n < sizeof small ? small : malloc(n + 1);
    if (!copy) {
        ev->d = 0;
        return -2;
    }
    memcpy(copy, s, n);
    copy[n] = '\0';
    errno = 0;
    ev->d = luna_json_strtod_c(copy, NULL);
    int range = errno == ERANGE && isinf(ev->d);
    if (copy != small)
        free(copy);
    return range && ev->kind == LUNA_JSON_DOUBLE ? -1 : 0;
}

/* ------------------------------------------------------------------------
 * Parser
 */

/* State of the \u-escape scanner, which runs over the raw bytes before
 * yajl sees them: yajl does not reject unpaired surrogate escapes. */
enum esc_state {
    ESC_TEXT,      /* looking for a backslash */
    ESC_AFTER_BS,  /* just after a backslash */
    ESC_HEX,       /* inside the 4 hex digits of \u */
    ESC_NEED_LOW,  /* a high surrogate was complete: '\' must follow */
};

struct luna_json_parser {
    yajl_handle h;
    luna_json_handler fn;
    void *ud;
    luna_json_options opts;
    int depth;
    int hidden;            /* containers open past max_depth (SOFT_LIMITS):
                              their events are not delivered */
    uint64_t base;         /* offset of chunk[0]; after a feed, bytes fed */
    uint64_t value_from;   /* offset where the current top-level value's
                              byte count starts (LUNA_JSON_MULTIPLE) */
    bool tail_pending;     /* non-space bytes after the last complete
                              top-level value (LUNA_JSON_MULTIPLE) */
    int status;            /* 0, or the sticky error code */
    luna_error err;        /* the sticky error */
    luna_error herr;       /* what the handler writes */
    luna_json_event ev;    /* scratch for the current event */
    enum esc_state esc;
    int esc_n;
    unsigned esc_v;
    bool esc_high;         /* the escape being read follows a high surrogate */
    uint64_t esc_at;       /* offset of the backslash of a high surrogate */
    uint64_t values;       /* complete top-level values */
    bool clean;            /* yajl is between values: reusable by reset */
    unsigned char u8[4];   /* an incomplete UTF-8 sequence at the end of
                              the last chunk */
    int u8_n;
    uint64_t u8_at;        /* offset of its first byte */
};

static uint64_t here(const luna_json_parser *p)
{
    return p->base + yajl_get_bytes_consumed(p->h);
}

static int fail(luna_json_parser *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(luna_json_parser *p, int code, const char *fmt, ...)
{
    if (p->status)
        return p->status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err.msg, sizeof p->err.msg, fmt, ap);
    va_end(ap);
    p->err.code = code;
    p->status = code;
    return code;
}

/* Delivers p->ev; returns 1 to let yajl go on, 0 to stop it. */
static int emit(luna_json_parser *p, enum luna_json_event_type type)
{
    luna_json_event *ev = &p->ev;
    ev->type = type;
    ev->depth = p->depth;
    ev->offset = here(p);
    if (p->depth == 0 && p->values && !(p->opts.flags & LUNA_JSON_MULTIPLE) &&
        type != LUNA_JSON_OBJECT_END && type != LUNA_JSON_ARRAY_END) {
        /* yajl always runs in multiple-values mode (so that a handle can
         * be reused): a second value is refused here. */
        fail(p, LUNA_EPROTO, "malformed JSON at byte %" PRIu64 ": parse error: trailing garbage",
             ev->offset - 1);
        return 0;
    }
    int rc = p->fn(p->ud, ev, &p->herr);
    if (rc) {
        if (rc > 0)
            rc = LUNA_ECANCELED;
        fail(p, rc, "%s at byte %" PRIu64,
             p->herr.msg[0] ? p->herr.msg : "stopped by the handler", ev->offset);
        return 0;
    }
    if (p->depth == 0 && type != LUNA_JSON_OBJECT_START &&
        type != LUNA_JSON_ARRAY_START) {
        p->value_from = ev->offset;
        p->tail_pending = false;
        p->values++;
    }
    return 1;
}

/* A bound passed under LUNA_JSON_SOFT_LIMITS: one LIMIT event. */
static int emit_limit(luna_json_parser *p, const char *why)
{
    p->ev.str = why;
    p->ev.len = strlen(why);
    return emit(p, LUNA_JSON_LIMIT);
}

static int cb_null(void *ctx)
{
    luna_json_parser *p = ctx;
    return p->hidden ? 1 : emit(p, LUNA_JSON_NULL);
}

static int cb_boolean(void *ctx, int v)
{
    luna_json_parser *p = ctx;
    return p->hidden ? 1 : emit(p, v ? LUNA_JSON_TRUE : LUNA_JSON_FALSE);
}

static int cb_number(void *ctx, const char *s, size_t len)
{
    luna_json_parser *p = ctx;
    if (p->hidden)
        return 1;
    int rc = convert_number(s, len, &p->ev);
    if (rc == -1 && (p->opts.flags & LUNA_JSON_SOFT_LIMITS))
        return emit_limit(p, "number out of double range");
    if (rc == -1) {
        fail(p, LUNA_EPROTO, "number out of range at byte %" PRIu64, here(p));
        return 0;
    }
    if (rc) {
        fail(p, LUNA_ENOMEM, "out of memory at byte %" PRIu64, here(p));
        return 0;
    }
    p->ev.str = s;
    p->ev.len = len;
    return emit(p, LUNA_JSON_NUMBER);
}

static int cb_string(void *ctx, const unsigned char *s, size_t len)
{
    luna_json_parser *p = ctx;
    if (p->hidden)
        return 1;
    p->ev.str = (const char *)s;
    p->ev.len = len;
    return emit(p, LUNA_JSON_STRING);
}

static int cb_key(void *ctx, const unsigned char *s, size_t len)
{
    luna_json_parser *p = ctx;
    if (p->hidden)
        return 1;
    p->ev.str = (const char *)s;
    p->ev.len = len;
    return emit(p, LUNA_JSON_KEY);
}

static int open_container(luna_json_parser *p, enum luna_json_event_type type)
{
    if (p->depth >= p->opts.max_depth && (p->opts.flags & LUNA_JSON_SOFT_LIMITS)) {
        /* yajl's own stack grows by a byte a level, bounded by the input. */
        if (!p->hidden && !emit_limit(p, "nesting deeper than the limit"))
            return 0;
        p->hidden++;
        p->depth++;
        return 1;
    }
    if (p->depth >= p->opts.max_depth) {
        fail(p, LUNA_ETOOBIG, "nesting deeper than %d at byte %" PRIu64,
             p->opts.max_depth, here(p));
        return 0;
    }
    if (!emit(p, type))
        return 0;
    p->depth++;
    return 1;
}

static int close_container(luna_json_parser *p, enum luna_json_event_type type)
{
    p->depth--;
    if (p->hidden) {
        p->hidden--;
        return 1;
    }
    return emit(p, type);
}

static int cb_start_map(void *ctx) { return open_container(ctx, LUNA_JSON_OBJECT_START); }
static int cb_end_map(void *ctx) { return close_container(ctx, LUNA_JSON_OBJECT_END); }
static int cb_start_array(void *ctx) { return open_container(ctx, LUNA_JSON_ARRAY_START); }
static int cb_end_array(void *ctx) { return close_container(ctx, LUNA_JSON_ARRAY_END); }

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_boolean,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_key,
    .yajl_end_map = cb_end_map,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end_array,
};

static int open_yajl(luna_json_parser *p)
{
    p->h = yajl_alloc(&callbacks, NULL, p);
    if (!p->h)
        return LUNA_ENOMEM;
    /* UTF-8 is checked here, strictly, on the decoded strings.  Multiple
     * values are always on, so that after a complete document the handle
     * can parse the next one (reset without reallocating); in single mode
     * emit() refuses a second value. */
    yajl_config(p->h, yajl_dont_validate_strings, 1);
    yajl_config(p->h, yajl_allow_multiple_values, 1);
    return 0;
}

/* Everything but the handle, options and handler back to "no input". */
static void clear_state(luna_json_parser *p)
{
    p->depth = 0;
    p->hidden = 0;
    p->base = 0;
    p->value_from = 0;
    p->tail_pending = false;
    p->status = 0;
    p->err.code = 0;
    p->err.msg[0] = '\0';
    p->herr.code = 0;
    p->herr.msg[0] = '\0';
    memset(&p->ev, 0, sizeof p->ev);
    p->esc = ESC_TEXT;
    p->esc_n = 0;
    p->esc_v = 0;
    p->esc_high = false;
    p->esc_at = 0;
    p->values = 0;
    p->clean = false;
    p->u8_n = 0;
    p->u8_at = 0;
}

static void set_options(luna_json_parser *p, const luna_json_options *opts)
{
    if (opts)
        p->opts = *opts;
    if (p->opts.max_depth <= 0)
        p->opts.max_depth = LUNA_JSON_DEFAULT_MAX_DEPTH;
}

luna_json_parser *luna_json_parser_new(const luna_json_options *opts,
                                       luna_json_handler fn, void *ud)
{
    luna_json_parser *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    set_options(p, opts);
    p->fn = fn;
    p->ud = ud;
    clear_state(p);
    if (open_yajl(p)) {
        free(p);
        return NULL;
    }
    return p;
}

void luna_json_parser_free(luna_json_parser *p)
{
    if (!p)
        return;
    if (p->h)
        yajl_free(p->h);
    free(p);
}

int luna_json_parser_reset(luna_json_parser *p, const luna_json_options *opts)
{
    bool reuse = p->h && p->clean;
    set_options(p, opts);
    clear_state(p);
    if (reuse)
        return 0;
    if (p->h)
        yajl_free(p->h);
    if (open_yajl(p))
        return fail(p, LUNA_ENOMEM, "out of memory");
    return 0;
}

uint64_t luna_json_parser_offset(const luna_json_parser *p)
{
    return p->base;
}

static int report(const luna_json_parser *p, luna_error *err)
{
    if (err)
        *err = p->err;
    return p->status;
}

/* Scans data[0..len) for \u escapes; returns len, or the index at which
 * an unpaired surrogate escape makes the input invalid (message in p). */
static size_t scan_escapes(luna_json_parser *p, const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        switch (p->esc) {
        case ESC_TEXT: {
            const unsigned char *bs = memchr(s + i, '\\', len - i);
            if (!bs)
                return len;
            i = (size_t)(bs - s) + 1;
            p->esc = ESC_AFTER_BS;
            break;
        }
        case ESC_NEED_LOW:
            if (s[i] != '\\')
                goto unpaired_high;
            i++;
            p->esc = ESC_AFTER_BS;
            break;
        case ESC_AFTER_BS:
            if (s[i] == 'u') {
                p->esc = ESC_HEX;
                p->esc_n = 0;
                p->esc_v = 0;
            } else if (p->esc_high) {
                goto unpaired_high;
            } else {
                p->esc = ESC_TEXT;
            }
            i++;
            break;
        case ESC_HEX: {
            unsigned c = s[i], d;
            if (c >= '0' && c <= '9')
                d = c - '0';
            else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
                d = (c | 0x20) - 'a' + 10;
            else {
                /* Not an escape: yajl reports it. */
                p->esc = ESC_TEXT;
                p->esc_high = false;
                break;
            }
            i++;
            p->esc_v = p->esc_v << 4 | d;
            if (++p->esc_n < 4)
                break;
            uint64_t at = p->base + i - 6; /* the backslash, if in this chunk */
            bool high = p->esc_v >= 0xD800 && p->esc_v <= 0xDBFF;
            bool low = p->esc_v >= 0xDC00 && p->esc_v <= 0xDFFF;
            if (p->esc_high) {
                if (!low)
                    goto unpaired_high;
                p->esc_high = false;
                p->esc = ESC_TEXT;
            } else if (high) {
                p->esc_high = true;
                p->esc_at = at;
                p->esc = ESC_NEED_LOW;
            } else if (low) {
                fail(p, LUNA_EPROTO,
                     "invalid \\u escape: low surrogate without a high one at byte %" PRIu64,
                     at);
                return i >= 6 ? i - 6 : 0;
            } else {
                p->esc = ESC_TEXT;
            }
            break;
        }
        }
    }
    return len;
unpaired_high:
    fail(p, LUNA_EPROTO,
         "invalid \\u escape: high surrogate without a low one at byte %" PRIu64,
         p->esc_at);
    return i;
}

static int yajl_failed(luna_json_parser *p, yajl_status st)
{
    if (st == yajl_status_client_canceled || p->status)
        return p->status ? p->status : fail(p, LUNA_ECANCELED, "canceled");
    unsigned char *msg = yajl_get_error(p->h, 0, NULL, 0);
    char text[200] = "malformed";
    if (msg) {
        snprintf(text, sizeof text, "%s", (const char *)msg);
        yajl_free_error(p->h, msg);
        size_t n = strlen(text);
        while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '.'))
            text[--n] = '\0';
    }
    /* yajl stops just past the offending byte (lexical errors) or token
     * (grammar errors): name the last byte it consumed. */
    uint64_t at = here(p);
    return fail(p, LUNA_EPROTO, "malformed JSON at byte %" PRIu64 ": %s",
                at > 0 ? at - 1 : 0, text);
}

static bool has_high_byte(const unsigned char *s, size_t len)
{
    uint64_t any = 0, w4[4];
    size_t k = 0;
    for (; k + 32 <= len; k += 32) { /* the common, all-ASCII case */
        memcpy(w4, s + k, 32);
        any |= w4[0] | w4[1] | w4[2] | w4[3];
    }
    for (; k < len; k++)
        any |= s[k];
    return (any & UINT64_C(0x8080808080808080)) != 0;
}

/* Length of the UTF-8 sequence a lead byte starts, 0 if it cannot lead. */
static size_t utf8_seq_len(unsigned char c)
{
    if (c >= 0xC2 && c <= 0xDF)
        return 2;
    if (c >= 0xE0 && c <= 0xEF)
        return 3;
    if (c >= 0xF0 && c <= 0xF4)
        return 4;
    return 0;
}

/* True if s[0..n) is a proper prefix of some valid UTF-8 sequence. */
static bool utf8_partial_ok(const unsigned char *s, size_t n)
{
    size_t need = utf8_seq_len(s[0]);
    if (n == 0 || n >= need)
        return false;
    if (n >= 2) {
        unsigned lo = s[0] == 0xE0 ? 0xA0 : s[0] == 0xF0 ? 0x90 : 0x80;
        unsigned hi = s[0] == 0xED ? 0x9F : s[0] == 0xF4 ? 0x8F : 0xBF;
        if (s[1] < lo || s[1] > hi)
            return false;
    }
    return n < 3 || (s[2] & 0xC0) == 0x80;
}

/* Checks that the raw input is UTF-8, across chunk boundaries.  Bytes >= 0x80
 * are legal only inside strings and escapes always decode to valid UTF-8,
 * so this is the whole UTF-8 check, with exact offsets.  Returns len, or
 * the index where the input stops being valid (message in p). */
static size_t scan_utf8(luna_json_parser *p, const unsigned char *s, size_t len)
{
    size_t i = 0;
    if (p->u8_n) {
        unsigned char seq[4];
        size_t n = (size_t)p->u8_n, need = utf8_seq_len(p->u8[0]);
        memcpy(seq, p->u8, n);
        while (n < need && i < len)
            seq[n++] = s[i++];
        if (n == need && luna_json_utf8_valid_prefix((const char *)seq, n) == n) {
            p->u8_n = 0;
        } else if (n < need && utf8_partial_ok(seq, n)) {
            memcpy(p->u8, seq, n);
            p->u8_n = (int)n;
            return len;
        } else {
            fail(p, LUNA_EPROTO, "invalid UTF-8 at byte %" PRIu64, p->u8_at);
            return 0;
        }
    }
    if (!has_high_byte(s + i, len - i))
        return len;
    size_t ok = i + luna_json_utf8_valid_prefix((const char *)s + i, len - i);
    if (ok == len)
        return len;
    if (utf8_partial_ok(s + ok, len - ok)) {
        memcpy(p->u8, s + ok, len - ok);
        p->u8_n = (int)(len - ok);
        p->u8_at = p->base + ok;
        return len;
    }
    fail(p, LUNA_EPROTO, "invalid UTF-8 at byte %" PRIu64, p->base + ok);
    return ok;
}

/* yajl takes vertical tab and form feed for blanks; JSON has neither
 * (blanks are space, tab, LF, CR, and a string may not hold a raw control
 * character), so either byte anywhere is an error.  Returns len, or the
 * index of the first one (message in p). */
static size_t scan_blanks(luna_json_parser *p, const unsigned char *s, size_t len)
{
    const unsigned char *v = memchr(s, '\v', len);
    const unsigned char *f = memchr(s, '\f', v ? (size_t)(v - s) : len);
    const unsigned char *bad = f ? f : v;
    if (!bad)
        return len;
    fail(p, LUNA_EPROTO, "malformed JSON at byte %" PRIu64 ": invalid character (\\%c)",
         p->base + (uint64_t)(bad - s), *bad == '\v' ? 'v' : 'f');
    return (size_t)(bad - s);
}

static int feed_chunk(luna_json_parser *p, const unsigned char *s, size_t len)
{
    /* Find the first invalid UTF-8 or unpaired surrogate escape, give yajl
     * the bytes before it (an earlier error found by yajl wins), then
     * report it. */
    size_t stop = scan_utf8(p, s, len);
    int code = p->status;
    luna_error found = p->err;
    p->status = 0;
    size_t esc_stop = scan_escapes(p, s, stop);
    if (p->status) {
        code = p->status;
        found = p->err;
        stop = esc_stop;
        p->status = 0;
    }
    size_t blank_stop = scan_blanks(p, s, stop);
    if (p->status) {
        code = p->status;
        found = p->err;
        stop = blank_stop;
        p->status = 0;
    }
    yajl_status st = yajl_parse(p->h, s, stop);
    if (st != yajl_status_ok)
        return yajl_failed(p, st);
    if (code) {
        p->status = code;
        p->err = found;
        return code;
    }
    if (p->depth == 0 && !p->tail_pending) {
        size_t i = p->value_from >= p->base ? (size_t)(p->value_from - p->base) : 0;
        for (; i < len; i++) {
            unsigned char c = s[i];
            if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
                p->tail_pending = true;
                break;
            }
        }
    }
    p->base += len;
    return 0;
}

int luna_json_parser_feed(luna_json_parser *p, const void *data, size_t len,
                          luna_error *err)
{
    if (p->status)
        return report(p, err);
    const unsigned char *s = data;
    p->herr.msg[0] = '\0';
    while (len > 0) {
        size_t n = len;
        if (p->opts.max_size) {
            uint64_t used = p->base - p->value_from;
            if (used >= p->opts.max_size) {
                fail(p, LUNA_ETOOBIG, "document larger than %" PRIu64
                     " bytes at byte %" PRIu64, p->opts.max_size, p->base);
                return report(p, err);
            }
            if (n > p->opts.max_size - used)
                n = (size_t)(p->opts.max_size - used);
        }
        if (feed_chunk(p, s, n))
            return report(p, err);
        s += n;
        len -= n;
    }
    return 0;
}

int luna_json_parser_finish(luna_json_parser *p, luna_error *err)
{
    if (p->status)
        return report(p, err);
    if (p->u8_n) {
        fail(p, LUNA_EPROTO, "invalid UTF-8 at byte %" PRIu64 " (truncated sequence)",
             p->u8_at);
        return report(p, err);
    }
    if ((p->opts.flags & LUNA_JSON_MULTIPLE) && p->depth == 0 && !p->tail_pending) {
        p->clean = true;
        return 0; /* zero or more complete values, nothing pending */
    }
    if (!(p->opts.flags & LUNA_JSON_MULTIPLE) && p->values == 1 && !p->tail_pending) {
        p->clean = true;
        return 0; /* one complete value and nothing after it */
    }
    yajl_status st = yajl_complete_parse(p->h);
    if (st == yajl_status_ok && p->tail_pending) {
        /* Bytes after the last complete value that yajl's end of input did
         * not complete: a token cut short (`{} "ab`, `{} tru`), which yajl
         * in multiple-values mode takes for the absence of a value.  The
         * handle still holds it, so it is not reusable either. */
        fail(p, LUNA_EPROTO, "unexpected end of input at byte %" PRIu64, p->base);
        return report(p, err);
    }
    if (st == yajl_status_ok && (p->values > 0 || (p->opts.flags & LUNA_JSON_MULTIPLE))) {
        p->clean = true;
        return 0;
    }
    if (st == yajl_status_ok) {
        fail(p, LUNA_EPROTO, "unexpected end of input at byte %" PRIu64, p->base);
        return report(p, err);
    }
    if (st == yajl_status_error) {
        unsigned char *msg = yajl_get_error(p->h, 0, NULL, 0);
        bool eof = msg && strstr((const char *)msg, "premature EOF");
        if (msg)
            yajl_free_error(p->h, msg);
        if (eof || p->depth > 0) {
            fail(p, LUNA_EPROTO, "unexpected end of input at byte %" PRIu64, p->base);
            return report(p, err);
        }
    }
    yajl_failed(p, st);
    return report(p, err);
}

int luna_json_parse(const void *data, size_t len, const luna_json_options *opts,
                    luna_json_handler fn, void *ud, luna_error *err)
{
    luna_json_parser *p = luna_json_parser_new(opts, fn, ud);
    if (!p)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    int rc = luna_json_parser_feed(p, data, len, err);
    if (!rc)
        rc = luna_json_parser_finish(p, err);
    luna_json_parser_free(p);
    return rc;
}

/* ------------------------------------------------------------------------
 * Lookups
 */

struct lookup {
    const char *const *segs;
    size_t nsegs;
    size_t matched;      /* segments matched: we look inside the container
                            at depth `matched` */
    bool in_array;       /* that container is an array */
    bool hit;            /* the next value at depth matched+1 is the one */
    uint64_t index;      /* array: members seen so far */
    uint64_t want;       /* array: the index wanted */
    bool want_ok;        /* the segment is a valid index */
    int target_depth;    /* >= 0: inside the found container */
    luna_json_value *out;
    char *buf;
    size_t cap;
    int result;
};

#define LOOKUP_DONE LUNA_ECANCELED

static void lookup_enter(struct lookup *lk, bool array)
{
    lk->in_array = array;
    lk->hit = false;
    lk->index = 0;
    if (lk->matched < lk->nsegs) {
        const char *seg = lk->segs[lk->matched];
        char *end;
        errno = 0;
        unsigned long long v = strtoull(seg, &end, 10);
        lk->want_ok = array && *seg >= '0' && *seg <= '9' && !*end && !errno;
        lk->want = v;
        if (array && lk->want_ok && lk->want == 0)
            lk->hit = true;
    }
}

static int lookup_found(struct lookup *lk, const luna_json_event *ev)
{
    luna_json_value *o = lk->out;
    o->type = ev->type;
    switch (ev->type) {
    case LUNA_JSON_OBJECT_START:
    case LUNA_JSON_ARRAY_START:
        o->start = ev->offset - 1;
        lk->target_depth = ev->depth;
        return 0;
    case LUNA_JSON_NUMBER:
        o->kind = ev->kind;
        o->i = ev->i;
        o->u = ev->u;
        o->d = ev->d;
        /* fall through */
    case LUNA_JSON_STRING:
        o->len = ev->len;
        o->end = ev->offset;
        if (ev->len >= lk->cap) {
            lk->result = LUNA_ETOOBIG;
            return LOOKUP_DONE;
        }
        memcpy(lk->buf, ev->str, ev->len);
        lk->buf[ev->len] = '\0';
        break;
    default:
        o->end = ev->offset;
        if (lk->cap)
            lk->buf[0] = '\0';
        break;
    }
    lk->result = 0;
    return LOOKUP_DONE;
}

static int lookup_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct lookup *lk = ud;
    if (lk->target_depth >= 0) {
        if ((ev->type == LUNA_JSON_OBJECT_END || ev->type == LUNA_JSON_ARRAY_END) &&
            ev->depth == lk->target_depth) {
            lk->out->end = ev->offset;
            lk->result = 0;
            return LOOKUP_DONE;
        }
        return 0;
    }
    bool start = ev->type == LUNA_JSON_OBJECT_START || ev->type == LUNA_JSON_ARRAY_START;
    if (ev->depth == 0 && lk->matched == 0 && lk->nsegs == 0)
        return lookup_found(lk, ev);
    if (ev->depth == 0) {
        if (!start)
            return LOOKUP_DONE; /* a scalar has no members */
        lookup_enter(lk, ev->type == LUNA_JSON_ARRAY_START);
        return 0;
    }
    if ((size_t)ev->depth != lk->matched + 1) {
        if ((size_t)ev->depth == lk->matched &&
            (ev->type == LUNA_JSON_OBJECT_END || ev->type == LUNA_JSON_ARRAY_END))
            return LOOKUP_DONE; /* the container ended without a match */
        return 0;
    }
    if (ev->type == LUNA_JSON_KEY) {
        const char *seg = lk->segs[lk->matched];
        lk->hit = strlen(seg) == ev->len && memcmp(seg, ev->str, ev->len) == 0;
        return 0;
    }
    if (ev->type == LUNA_JSON_OBJECT_END || ev->type == LUNA_JSON_ARRAY_END)
        return 0;
    /* A member value at depth matched + 1. */
    bool hit = lk->hit;
    if (lk->in_array) {
        lk->index++;
        lk->hit = lk->want_ok && lk->index == lk->want;
    } else {
        lk->hit = false;
    }
    if (!hit)
        return 0;
    lk->matched++;
    if (lk->matched == lk->nsegs)
        return lookup_found(lk, ev);
    if (!start)
        return LOOKUP_DONE;
    lookup_enter(lk, ev->type == LUNA_JSON_ARRAY_START);
    return 0;
}

int luna_json_lookupv(const void *json, size_t len, const char *const *segs,
                      size_t nsegs, luna_json_value *out, char *buf, size_t cap,
                      luna_error *err)
{
    struct lookup lk = {
        .segs = segs, .nsegs = nsegs, .target_depth = -1,
        .out = out, .buf = buf, .cap = cap, .result = LUNA_ENOTFOUND,
    };
    memset(out, 0, sizeof *out);
    luna_error perr = { 0 };
    int rc = luna_json_parse(json, len, NULL, lookup_event, &lk, &perr);
    if (rc == LOOKUP_DONE || rc == 0) {
        if (lk.result == LUNA_ENOTFOUND)
            return luna_error_set(err, LUNA_ENOTFOUND, "no value at the path");
        if (lk.result == LUNA_ETOOBIG)
            return luna_error_set(err, LUNA_ETOOBIG,
                                  "value of %zu bytes does not fit in %zu", out->len, cap);
        return 0;
    }
    if (err)
        *err = perr;
    return rc;
}

#define LOOKUP_MAX_SEGS 32

int luna_json_lookup(const void *json, size_t len, const char *path,
                     luna_json_value *out, char *buf, size_t cap,
                     luna_error *err)
{
    char copy[512];
    size_t plen = strlen(path);
    if (plen >= sizeof copy)
        return luna_error_set(err, LUNA_EINVAL, "path longer than %zu bytes",
                              sizeof copy - 1);
    memcpy(copy, path, plen + 1);
    const char *segs[LOOKUP_MAX_SEGS];
    size_t n = 0;
    if (plen > 0) {
        char *s = copy;
        for (;;) {
            if (n == LOOKUP_MAX_SEGS)
                return luna_error_set(err, LUNA_EINVAL, "path has more than %d segments",
                                      LOOKUP_MAX_SEGS);
            segs[n++] = s;
            char *dot = strchr(s, '.');
            if (!dot)
                break;
            *dot = '\0';
            s = dot + 1;
        }
    }
    return luna_json_lookupv(json, len, segs, n, out, buf, cap, err);
}
