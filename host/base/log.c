/* log.c — see log.h. */
#include "base/log.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static enum luna_log_level log_level = LUNA_LOG_INFO;
static enum luna_log_format log_format = LUNA_LOG_TEXT;

static const char *const level_names[] = { "debug", "info", "warn", "error" };
static const char *const level_upper[] = { "DEBUG", "INFO", "WARN", "ERROR" };
static const char *const host_keys[] = { LUNA_LOG_HOST_KEYS };
#define NHOST_KEYS (sizeof host_keys / sizeof host_keys[0])
/* The keys the writer itself writes in every line. */
static const char *const writer_keys[] = { "ts", "level", "msg", "truncated" };
#define NWRITER_KEYS 4

void luna_log_set_level(enum luna_log_level level) { log_level = level; }
void luna_log_set_format(enum luna_log_format format) { log_format = format; }
bool luna_log_enabled(enum luna_log_level level) { return level >= log_level; }

int luna_log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    if (strcmp(name, "warning") == 0)
        return LUNA_LOG_WARN;
    return -1;
}

/* ---- escaping ---------------------------------------------------------------- */

/* The code point of the valid UTF-8 sequence at s (at most n bytes): its
 * length (2 to 4), or 0 when the bytes are not valid UTF-8 (overlong forms,
 * surrogates and values past U+10FFFF included). */
static size_t utf8_char(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t len;
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        unsigned char b = s[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF))
            return 0;
        v = v << 6 | (b & 0x3F);
    }
    *cp = v;
    return len;
}

/* Characters that are valid UTF-8 but written as \uXXXX: the C1 controls
 * (a terminal takes U+009B for ESC [), the bidi controls (they reorder what
 * a reader sees: a value could seem to end the line and start another),
 * the line separators, and U+FFFD itself (so that one decoded string has
 * one escaped form: a byte that is not UTF-8 is written \ufffd too). */
static bool escaped_char(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
           (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xFFFD;
}

/* One character of a string as written: `in` bytes of input; `esc` the
 * escape (esc_len bytes) or, with esc_len 0, the input bytes themselves;
 * `bare` whether it may stand in an unquoted text token (spaces are told
 * apart: a message may hold them). */
struct unit {
    size_t in, esc_len;
    char esc[6];
    bool bare, space;
};

static void unit_u4(struct unit *u, uint32_t cp)
{
    static const char hex[] = "0123456789abcdef";
    memcpy(u->esc, "\\u", 2);
    for (int i = 0; i < 4; i++)
        u->esc[2 + i] = hex[(cp >> (12 - 4 * i)) & 0xF];
    u->esc_len = 6;
}

static void next_unit(const unsigned char *s, size_t n, struct unit *u)
{
    u->in = 1;
    u->esc_len = 0;
    u->bare = false;
    u->space = false;
    unsigned char c = s[0];
    if (c >= 0x80) {
        uint32_t cp;
        size_t len = utf8_char(s, n, &cp);
        if (!len) {
            unit_u4(u, 0xFFFD);
        } else {
            u->in = len;
            if (escaped_char(cp))
                unit_u4(u, cp);
            else
                u->bare = true;
        }
        return;
    }
    switch (c) {
    case '"':  memcpy(u->esc, "\\\"", 2); u->esc_len = 2; return;
    case '\\': memcpy(u->esc, "\\\\", 2); u->esc_len = 2; return;
    case '\n': memcpy(u->esc, "\\n", 2); u->esc_len = 2; return;
    case '\r': memcpy(u->esc, "\\r", 2); u->esc_len = 2; return;
    case '\t': memcpy(u->esc, "\\t", 2); u->esc_len = 2; return;
    case ' ':  u->space = true; return;
    case '=':  return;
    default:
        if (c < 0x20 || c == 0x7F)
            unit_u4(u, c);
        else
            u->bare = true;
    }
}

/* How a string is written. */
enum shape {
    SHAPE_QUOTED,   /* always a JSON string (JSON format) */
    SHAPE_TOKEN,    /* text value or key: bare if it can be */
    SHAPE_MESSAGE,  /* text message: bare if it can be, inner spaces allowed */
};

/* Measures s as written in full, scanning until that passes `cap` bytes:
 * *bare whether it is written bare; returns its length (quotes included),
 * or cap + 1 when longer. */
static size_t measure(const char *s, size_t n, enum shape shape, size_t cap, bool *bare)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t quoted = 2, raw = 0, i = 0;
    bool can_bare = shape != SHAPE_QUOTED && n > 0;
    if (shape == SHAPE_MESSAGE && n > 0 && (p[0] == ' ' || p[n - 1] == ' '))
        can_bare = false;
    struct unit u;
    while (i < n && (quoted <= cap || (can_bare && raw <= cap))) {
        next_unit(p + i, n - i, &u);
        if (!(u.bare || (u.space && shape == SHAPE_MESSAGE)))
            can_bare = false;
        quoted += u.esc_len ? u.esc_len : u.in;
        raw += u.in;
        i += u.in;
    }
    *bare = can_bare;
    size_t len = can_bare ? raw : quoted;
    return len > cap ? cap + 1 : len;
}

/* Writes s into out (at most cap bytes, cap >= 2), bare or quoted, whole
 * characters only; *consumed gets the input bytes written.  A bare string
 * of which nothing fits is written "". */
static size_t emit(char *out, size_t cap, const char *s, size_t n, bool bare, size_t *consumed)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0, i = 0, close = bare ? 0 : 1;
    if (!bare)
        out[o++] = '"';
    struct unit u;
    while (i < n) {
        next_unit(p + i, n - i, &u);
        size_t w = u.esc_len ? u.esc_len : u.in;
        if (o + w + close > cap)
            break;
        memcpy(out + o, u.esc_len ? u.esc : (const char *)p + i, w);
        o += w;
        i += u.in;
    }
    *consumed = i;
    if (bare && o == 0) {
        memcpy(out, "\"\"", 2);
        return 2;
    }
    if (!bare)
        out[o++] = '"';
    return o;
}

/* ---- formatting ---------------------------------------------------------------- */

/* One string of a line: the message (no key) or a pair's value. */
struct item {
    const char *s;
    size_t n;
    const char *key;      /* escaped key in the scratch, NULL for the message */
    size_t key_len;
    size_t key_raw;       /* input bytes of the key (what dropping it loses) */
    bool bare;
    bool literal;         /* JSON: a number or boolean written bare (log.h) */
    size_t need;          /* bytes as written in full (capped) */
    size_t allow;         /* bytes it may take */
};

struct keyset {
    char *scratch;
    size_t used, cap;
    const char *seen[NWRITER_KEYS + LUNA_LOG_PAIRS_MAX + LUNA_LOG_FIELDS_MAX];
    size_t seen_len[NWRITER_KEYS + LUNA_LOG_PAIRS_MAX + LUNA_LOG_FIELDS_MAX];
    int nseen;
};

enum key_result { KEY_OK, KEY_TOO_LONG, KEY_DUPLICATE };

/* Escapes prefix + key into the scratch as the format writes keys and
 * records it; KEY_DUPLICATE when the same escaped key (that is, the same
 * decoded key) is there already. */
static enum key_result add_key(struct keyset *ks, bool json, const char *prefix,
                               const char *key, size_t key_len, const char **out,
                               size_t *out_len)
{
    char joined[LUNA_LOG_KEY_MAX + 1];
    size_t plen = strlen(prefix);
    if (plen + key_len > LUNA_LOG_KEY_MAX)
        return KEY_TOO_LONG;
    memcpy(joined, prefix, plen);
    if (key_len)
        memcpy(joined + plen, key, key_len);
    size_t n = plen + key_len;
    bool bare;
    size_t need = measure(joined, n, json ? SHAPE_QUOTED : SHAPE_TOKEN, LUNA_LOG_KEY_MAX, &bare);
    if (need > LUNA_LOG_KEY_MAX || ks->cap - ks->used < need)
        return KEY_TOO_LONG;
    char *k = ks->scratch + ks->used;
    size_t consumed;
    size_t len = emit(k, need, joined, n, bare, &consumed);
    for (int i = 0; i < ks->nseen; i++)
        if (ks->seen_len[i] == len && memcmp(ks->seen[i], k, len) == 0)
            return KEY_DUPLICATE;
    ks->used += len;
    ks->seen[ks->nseen] = k;
    ks->seen_len[ks->nseen++] = len;
    *out = k;
    *out_len = len;
    return KEY_OK;
}

/* A host pair's key without its type mark (log.h), and its type. */
static const char *pair_key(const char *key, enum luna_log_type *type)
{
    *type = key[0] == '#' ? LUNA_LOG_TYPE_NUMBER : key[0] == '?' ? LUNA_LOG_TYPE_BOOL
                                                               : LUNA_LOG_TYPE_STRING;
    return *type == LUNA_LOG_TYPE_STRING ? key : key + 1;
}

/* Whether s is a JSON number (RFC 8259's grammar), at most 64 bytes,
 * below 1e308 in magnitude: a reader parsing it as a double (Go's
 * encoding/json, jansson) must not overflow, so "1e999" stays a string. */
static bool json_number(const char *s, size_t n)
{
    size_t i = 0;
    long mag = 0; /* the decimal exponent of the first significant digit */
    bool nonzero = false;
    if (n == 0 || n > 64)
        return false;
    if (s[i] == '-')
        i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
        nonzero = true;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
            mag++;
        }
        mag--;
    } else {
        return false;
    }
    if (i < n && s[i] == '.') {
        size_t d = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (!nonzero && s[i] != '0') {
                nonzero = true;
                mag = -(long)(i - d) - 1;
            }
            i++;
        }
        if (i == d)
            return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool neg = i < n && s[i] == '-';
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t d = i;
        long e = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (e < 100000)
                e = e * 10 + (s[i] - '0');
            i++;
        }
        if (i == d)
            return false;
        mag += neg ? -e : e;
    }
    return i == n && (!nonzero || mag <= 307);
}

/* Whether a value of this type is written as a bare JSON literal. */
static bool json_literal(enum luna_log_type type, const char *s, size_t n)
{
    if (type == LUNA_LOG_TYPE_NUMBER)
        return json_number(s, n);
    if (type == LUNA_LOG_TYPE_BOOL)
        return (n == 4 && memcmp(s, "true", 4) == 0) || (n == 5 && memcmp(s, "false", 5) == 0);
    return false;
}

static bool reserved_key(const char *key, size_t len, const char *const *pairs, int npairs)
{
    size_t plen = strlen(LUNA_LOG_SCRIPT_PREFIX);
    if (len >= plen && memcmp(key, LUNA_LOG_SCRIPT_PREFIX, plen) == 0)
        return true;
    for (size_t i = 0; i < NHOST_KEYS; i++)
        if (strlen(host_keys[i]) == len && memcmp(host_keys[i], key, len) == 0)
            return true;
    for (int i = 0; i < npairs; i++) {
        enum luna_log_type t;
        const char *k = pair_key(pairs[2 * i], &t);
        if (pairs[2 * i + 1] && strlen(k) == len && memcmp(k, key, len) == 0)
            return true;
    }
    return false;
}

/* The host's own pair key=value (C strings) repeated by a script field. */
static bool repeats_host_pair(const struct luna_log_field *f, const char *const *pairs, int npairs)
{
    for (int i = 0; i < npairs; i++) {
        enum luna_log_type t;
        const char *k = pair_key(pairs[2 * i], &t), *v = pairs[2 * i + 1];
        if (v && strlen(k) == f->key_len && memcmp(k, f->key, f->key_len) == 0 &&
            strlen(v) == f->value_len && memcmp(v, f->value, f->value_len) == 0)
            return true;
    }
    return false;
}

static size_t put(char *out, size_t o, const char *s)
{
    size_t n = strlen(s);
    memcpy(out + o, s, n);
    return o + n;
}

/* Room kept for " truncated=N" / ,"truncated":N (N up to 20 digits). */
#define TRAILER_MAX 34

size_t luna_log_format_line(char out[LUNA_LOG_LINE_MAX], enum luna_log_format format,
                            const char *ts, enum luna_log_level level,
                            const char *msg, size_t msg_len,
                            const char *const *pairs, int npairs,
                            const struct luna_log_field *fields, int nfields,
                            size_t *cut_out)
{
    bool json = format == LUNA_LOG_JSON;
    if ((unsigned)level > LUNA_LOG_ERROR)
        level = LUNA_LOG_ERROR;
    if (npairs > LUNA_LOG_PAIRS_MAX)
        npairs = LUNA_LOG_PAIRS_MAX;
    if (npairs < 0)
        npairs = 0;
    size_t cut = 0;
    bool lost = false;
    if (nfields > LUNA_LOG_FIELDS_MAX) {
        for (int i = LUNA_LOG_FIELDS_MAX; i < nfields; i++)
            cut += fields[i].key_len + fields[i].value_len + 1;
        lost = true;
        nfields = LUNA_LOG_FIELDS_MAX;
    }
    if (nfields < 0)
        nfields = 0;

    char scratch[(NWRITER_KEYS + LUNA_LOG_PAIRS_MAX + LUNA_LOG_FIELDS_MAX) * LUNA_LOG_KEY_MAX];
    struct keyset ks = { .scratch = scratch, .cap = sizeof scratch };
    struct item items[1 + LUNA_LOG_PAIRS_MAX + LUNA_LOG_FIELDS_MAX];
    int n = 0;
    const char *k;
    size_t klen;
    for (int i = 0; i < NWRITER_KEYS; i++)
        add_key(&ks, json, "", writer_keys[i], strlen(writer_keys[i]), &k, &klen);
    items[n++] = (struct item){ .s = msg ? msg : "", .n = msg ? msg_len : 0 };
    for (int i = 0; i < npairs; i++) {
        enum luna_log_type type;
        const char *key = pair_key(pairs[2 * i], &type), *value = pairs[2 * i + 1];
        if (!value)
            continue;
        size_t kraw = strlen(key), vlen = strlen(value);
        if (add_key(&ks, json, "", key, kraw, &k, &klen) != KEY_OK) {
            cut += kraw + vlen;
            lost = true;
            continue;
        }
        items[n++] = (struct item){ .s = value, .n = vlen, .key = k, .key_len = klen,
                                    .key_raw = kraw,
                                    .literal = json && json_literal(type, value, vlen) };
    }
    for (int i = 0; i < nfields; i++) {
        const struct luna_log_field *f = &fields[i];
        const char *key = f->key ? f->key : "", *value = f->value ? f->value : "";
        size_t kraw = f->key ? f->key_len : 0, vlen = f->value ? f->value_len : 0;
        struct luna_log_field g = { key, kraw, value, vlen, f->type };
        if (repeats_host_pair(&g, pairs, npairs))
            continue;
        const char *prefix = reserved_key(key, kraw, pairs, npairs) ? LUNA_LOG_SCRIPT_PREFIX : "";
        if (add_key(&ks, json, prefix, key, kraw, &k, &klen) != KEY_OK) {
            cut += kraw + vlen + 1;
            lost = true;
            continue;
        }
        items[n++] = (struct item){ .s = value, .n = vlen, .key = k, .key_len = klen,
                                    .key_raw = kraw,
                                    .literal = json && json_literal(f->type, value, vlen) };
    }

    /* What every line has, and what each item takes besides its value:
     * text " key=", JSON ",key:". */
    const char *lv = json ? level_names[level] : level_upper[level];
    size_t tslen = strnlen(ts, 40);
    size_t base = json ? strlen("{\"ts\":\"\",\"level\":\"\",\"msg\":}\n") + tslen + strlen(lv)
                       : tslen + 1 + strlen(lv) + 1 + 1;
    size_t keys = 0;
    for (int i = 1; i < n; i++)
        keys += 2 + items[i].key_len;
    /* Too many keys to fit: the last fields go (script fields come last). */
    while (n > 1 && base + keys + 2 * (size_t)n + TRAILER_MAX > LUNA_LOG_LINE_MAX) {
        n--;
        keys -= 2 + items[n].key_len;
        cut += items[n].key_raw + items[n].n + 1;
        lost = true;
    }
    size_t values = 0;
    for (int i = 0; i < n; i++) {
        if (items[i].literal) {
            /* digits, signs, '.', 'e', "true", "false": as they are */
            items[i].need = items[i].n;
            items[i].bare = true;
        } else {
            items[i].need = measure(items[i].s, items[i].n,
                                    json ? SHAPE_QUOTED : i == 0 ? SHAPE_MESSAGE : SHAPE_TOKEN,
                                    LUNA_LOG_LINE_MAX, &items[i].bare);
        }
        items[i].allow = items[i].need;
        values += items[i].need;
    }
    if (lost || base + keys + values > LUNA_LOG_LINE_MAX) {
        /* Share what is left fairly, shortest first: a string that needs
         * less than its share is written whole, the rest of its share
         * goes to the longer ones. */
        size_t left = LUNA_LOG_LINE_MAX - base - keys - TRAILER_MAX;
        int order[1 + LUNA_LOG_PAIRS_MAX + LUNA_LOG_FIELDS_MAX];
        for (int i = 0; i < n; i++) {
            int j = i;
            while (j > 0 && items[order[j - 1]].need > items[i].need) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = i;
        }
        for (int r = 0; r < n; r++) {
            struct item *it = &items[order[r]];
            size_t share = left / (size_t)(n - r);
            it->allow = it->need < share ? it->need : share;
            left -= it->allow;
        }
    }

    size_t o = 0, consumed;
    if (json) {
        o = put(out, o, "{\"ts\":\"");
        memcpy(out + o, ts, tslen);
        o += tslen;
        o = put(out, o, "\",\"level\":\"");
        o = put(out, o, lv);
        o = put(out, o, "\",\"msg\":");
    } else {
        memcpy(out + o, ts, tslen);
        o += tslen;
        out[o++] = ' ';
        o = put(out, o, lv);
        out[o++] = ' ';
    }
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        if (i > 0) {
            out[o++] = json ? ',' : ' ';
            memcpy(out + o, it->key, it->key_len);
            o += it->key_len;
            out[o++] = json ? ':' : '=';
        }
        /* A literal that cannot be written whole (never, in practice: a
         * short value is owed its share) is written as a cut string: a
         * cut number would be another number. */
        bool bare = it->bare && !(it->literal && it->allow < it->n);
        o += emit(out + o, it->allow, it->s, it->n, bare, &consumed);
        if (consumed < it->n) {
            cut += it->n - consumed;
            lost = true;
        }
    }
    if (lost) {
        char num[24];
        snprintf(num, sizeof num, "%zu", cut ? cut : 1);
        o = put(out, o, json ? ",\"truncated\":" : " truncated=");
        o = put(out, o, num);
    }
    if (json)
        out[o++] = '}';
    out[o++] = '\n';
    if (cut_out)
        *cut_out = lost ? (cut ? cut : 1) : 0;
    return o;
}

/* ---- output ------------------------------------------------------------------ */

/* The sink: where lines go and what waits for the reader.  Bytes wait in
 * a ring (ring[head .. head+len), wrapping); a line goes in whole or not
 * at all, and once part of it was written the rest always follows. */
static struct {
    int fd;                  /* stderr, or the private non-blocking reopen of it */
    bool opened;             /* fd is ours (close nothing: it lives as long as the process) */
    bool sock;               /* a socket: sendmsg(MSG_DONTWAIT) */
    bool poll_first;         /* a pipe we could not reopen: poll, then <= PIPE_BUF */
    struct ev_loop *loop;    /* attached: never wait */
    ev_io io;                /* EV_WRITE on fd while bytes wait, attached */
    double deadline;         /* not attached: how long a write may wait (INFINITY at first) */
    size_t head, len;
    uint64_t unreported;     /* dropped since the last "log lines dropped" */
    struct luna_log_stats stats;
    char ring[LUNA_LOG_BUFFER_BYTES];
} sink = { .fd = 2, .deadline = INFINITY };

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void ring_put(const char *s, size_t n)
{
    size_t tail = (sink.head + sink.len) % LUNA_LOG_BUFFER_BYTES;
    size_t first = LUNA_LOG_BUFFER_BYTES - tail < n ? LUNA_LOG_BUFFER_BYTES - tail : n;
    memcpy(sink.ring + tail, s, first);
    memcpy(sink.ring, s + first, n - first);
    sink.len += n;
}

static void ring_consume(size_t n)
{
    sink.head = (sink.head + n) % LUNA_LOG_BUFFER_BYTES;
    sink.len -= n;
    if (!sink.len)
        sink.head = 0;
}

/* Lines that begin in the waiting bytes (those being discarded). */
static uint64_t ring_lines(void)
{
    uint64_t lines = 0;
    for (size_t i = 0; i < sink.len; i++)
        if (sink.ring[(sink.head + i) % LUNA_LOG_BUFFER_BYTES] == '\n')
            lines++;
    return lines;
}

/* 1: nothing waits any more; 0: the reader is not ready; -1: the output
 * failed (the waiting lines are dropped). */
static int write_some(void)
{
    while (sink.len) {
        struct iovec iov[2];
        int cnt = 1;
        size_t first = LUNA_LOG_BUFFER_BYTES - sink.head;
        iov[0].iov_base = sink.ring + sink.head;
        iov[0].iov_len = sink.len < first ? sink.len : first;
        if (sink.len > first) {
            iov[1].iov_base = sink.ring;
            iov[1].iov_len = sink.len - first;
            cnt = 2;
        }
        ssize_t w;
        if (sink.sock) {
            struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };
            w = sendmsg(sink.fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else {
            if (sink.poll_first) {
                struct pollfd p = { .fd = sink.fd, .events = POLLOUT };
                if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLOUT | POLLERR | POLLHUP)))
                    return 0;
                /* a pipe with room takes PIPE_BUF bytes without waiting */
                cnt = 1;
                if (iov[0].iov_len > PIPE_BUF)
                    iov[0].iov_len = PIPE_BUF;
            }
            w = writev(sink.fd, iov, cnt);
        }
        if (w > 0) {
            ring_consume((size_t)w);
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        } else {
            uint64_t lost = ring_lines();
            sink.stats.dropped += lost;
            ring_consume(sink.len);
            return -1;
        }
    }
    return 1;
}

/* Writes until nothing waits, the output fails, or the deadline passes. */
static int write_until(double deadline)
{
    int saved = errno;
    int r;
    while ((r = write_some()) == 0) {
        int ms = -1;
        if (isfinite(deadline)) {
            double left = deadline - mono_now();
            if (left <= 0)
                break;
            ms = (int)(left * 1000) + 1;
        }
        struct pollfd p = { .fd = sink.fd, .events = POLLOUT };
        if (poll(&p, 1, ms) < 0 && errno != EINTR)
            break;
    }
    errno = saved;
    return r;
}

static void append_line(const char *line, size_t len)
{
    if (LUNA_LOG_BUFFER_BYTES - sink.len < len) {
        sink.stats.dropped++;
        sink.unreported++;
        return;
    }
    ring_put(line, len);
}

static void format_append(enum luna_log_level level, const char *msg, size_t msg_len,
                          const char *const *pairs, int npairs,
                          const struct luna_log_field *fields, int nfields);

/* The warning that lines were lost: queued once everything before it is
 * out. */
static void report_dropped(void)
{
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)sink.unreported);
    sink.unreported = 0;
    const char *pairs[] = { "dropped", num };
    format_append(LUNA_LOG_WARN, "log lines dropped", strlen("log lines dropped"), pairs, 1,
                  NULL, 0);
}

static void pump(void)
{
    for (;;) {
        int r;
        if (sink.loop) {
            if (ev_is_active(&sink.io))
                return; /* the watcher writes once the reader is ready */
            int saved = errno;
            r = write_some();
            errno = saved;
            if (r == 0) {
                ev_io_start(sink.loop, &sink.io);
                return;
            }
        } else {
            r = write_until(sink.deadline);
        }
        if (r <= 0 || !sink.unreported)
            return;
        report_dropped();
    }
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    ev_io_stop(loop, w);
    pump();
}

static void timestamp(char ts[40])
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    /* each field reduced to its width, so the compiler sees the text fit */
    snprintf(ts, 40, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ",
             (unsigned)(tm.tm_year + 1900) % 10000u, (unsigned)(tm.tm_mon + 1) % 100u,
             (unsigned)tm.tm_mday % 100u, (unsigned)tm.tm_hour % 100u,
             (unsigned)tm.tm_min % 100u, (unsigned)tm.tm_sec % 100u,
             (unsigned)(tv.tv_usec / 1000) % 1000u);
}

static void format_append(enum luna_log_level level, const char *msg, size_t msg_len,
                          const char *const *pairs, int npairs,
                          const struct luna_log_field *fields, int nfields)
{
    char ts[40], line[LUNA_LOG_LINE_MAX];
    size_t cut;
    timestamp(ts);
    size_t len = luna_log_format_line(line, log_format, ts, level, msg, msg_len, pairs, npairs,
                                      fields, nfields, &cut);
    sink.stats.lines++;
    if (cut)
        sink.stats.truncated++;
    append_line(line, len);
}

void luna_log_record(enum luna_log_level level, const char *msg, size_t msg_len,
                     const char *const *pairs, int npairs,
                     const struct luna_log_field *fields, int nfields)
{
    if (!luna_log_enabled(level))
        return;
    format_append(level, msg, msg_len, pairs, npairs, fields, nfields);
    pump();
}

void luna_log_pairs(enum luna_log_level level, const char *msg,
                    const char *const *pairs, int npairs)
{
    luna_log_record(level, msg, msg ? strlen(msg) : 0, pairs, npairs, NULL, 0);
}

void luna_log(enum luna_log_level level, const char *msg, ...)
{
    if (!luna_log_enabled(level))
        return;
    const char *pairs[2 * LUNA_LOG_PAIRS_MAX];
    int n = 0;
    va_list ap;
    va_start(ap, msg);
    for (;;) {
        const char *key = va_arg(ap, const char *);
        if (!key || n == LUNA_LOG_PAIRS_MAX)
            break;
        pairs[2 * n] = key;
        pairs[2 * n + 1] = va_arg(ap, const char *);
        n++;
    }
    va_end(ap);
    luna_log_pairs(level, msg, pairs, n);
}

/* A descriptor of our own for stderr that never waits: O_NONBLOCK set on
 * fd 2 itself would be set on the open file description it shares with
 * the parent (a shell's terminal, a supervisor's pipe), so a pipe or a
 * terminal is opened again through /proc; a socket takes MSG_DONTWAIT per
 * call; a file does not wait for a reader anyway. */
static void open_output(void)
{
    struct stat st;
    if (sink.opened || fstat(2, &st) < 0)
        return;
    if (S_ISSOCK(st.st_mode)) {
        sink.sock = true;
    } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
        int fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd >= 0) {
            sink.fd = fd;
            sink.opened = true;
        } else {
            sink.poll_first = S_ISFIFO(st.st_mode);
        }
    }
}

void luna_log_attach(struct ev_loop *loop)
{
    if (sink.loop)
        return;
    open_output();
    ev_io_init(&sink.io, io_cb, sink.fd, EV_WRITE);
    sink.loop = loop;
    pump();
}

void luna_log_detach(double wait)
{
    if (sink.loop) {
        ev_io_stop(sink.loop, &sink.io);
        sink.loop = NULL;
    }
    sink.deadline = mono_now() + wait;
    pump();
}

void luna_log_flush(double wait)
{
    if (sink.loop)
        ev_io_stop(sink.loop, &sink.io);
    write_until(mono_now() + wait);
}

void luna_log_get_stats(struct luna_log_stats *out)
{
    *out = sink.stats;
    out->buffered = sink.len;
}
