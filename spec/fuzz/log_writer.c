/*
 * log_writer.c — libFuzzer target for the log writer's formatter
 * (base/log: luna_log_format_line), in both formats.
 *
 * Input: byte 0 options (bit 0 JSON, bits 1-2 the level, bit 3 the message
 * repeated past the line bound, bit 4 the last script value likewise,
 * bit 5 script fields typed: the i-th a string, a number, a boolean for
 * i mod 3 = 0, 1, 2),
 * byte 1 which host pairs the record has (one bit per key of HOST below),
 * then parts separated by the two bytes NUL '|': the message, one value
 * per host pair (up to its first NUL: host values are C strings), then the
 * script's fields as key, value, key, value...  In JSON runs a NUL in a
 * script key becomes 0x01 (jansson, the oracle, refuses "\u0000" in
 * object keys; the text runs keep it).
 *
 * Checked, whatever the bytes: the line is at most LUNA_LOG_LINE_MAX bytes
 * and is one line (its only newline the last byte); it holds no raw C0
 * control, DEL, C1 or bidi control, line separator or invalid UTF-8; it
 * parses back (text: timestamp, level, message, key=value pairs, bare or
 * quoted; JSON: one object, no duplicate keys, by jansson) to one record
 * whose timestamp and level are the host's, whose keys are each once, and
 * where every host key carries the host's value (whole when short enough
 * to be owed its share, else a prefix), every script field sits under its
 * own name or "script." + name when that would be a host key, with its
 * value or a prefix; nothing else is in it.  Without truncated=N nothing
 * was left out: message, host values and script fields are all there,
 * whole (a value that is not UTF-8 decodes with U+FFFD for each bad byte).
 * Typed values (JSON): a JSON number or boolean is only ever the value of
 * a typed field, a number equal to what strtod reads from the field's
 * value (which is a JSON number by the grammar), a boolean its value
 * "true" or "false"; a typed field written as a string carries its value
 * as a string field does; a host value is always a string.
 */
#include "fuzz_input.h"

#include <jansson.h>
#include <stdbool.h>

#include "base/log.h"

static const char *const HOST[] = { "controller", "key", "reconcile_id", "namespace",
                                    "name", "source", "error", "server" };
#define NHOST 8
static const char *const RESERVED[] = { LUNA_LOG_HOST_KEYS };
#define NRESERVED (sizeof RESERVED / sizeof RESERVED[0])
#define MAX_FIELDS 80
#define TS "2026-11-29T01:02:03.456Z"

/* Bytes with a length (decoded strings may hold NUL). */
struct bytes {
    char *p;
    size_t n;
};

static void bytes_free(struct bytes *b)
{
    free(b->p);
    b->p = NULL;
    b->n = 0;
}

/* Valid UTF-8 sequence length at s (the writer's rules, written again:
 * no overlong forms, no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t v;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; }
    else return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
        (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

/* What a reader decodes from the writer's form of s: s with each byte that
 * is not part of valid UTF-8 replaced by U+FFFD. */
static struct bytes sanitize(const char *s, size_t n)
{
    struct bytes out = { malloc(3 * n + 1), 0 };
    if (!out.p)
        abort();
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = utf8_len(p + i, n - i, &cp);
        if (!len) {
            memcpy(out.p + out.n, "\xEF\xBF\xBD", 3);
            out.n += 3;
            i++;
        } else {
            memcpy(out.p + out.n, p + i, len);
            out.n += len;
            i += len;
        }
    }
    return out;
}

static bool same(const struct bytes *a, const char *p, size_t n)
{
    return a->n == n && (n == 0 || memcmp(a->p, p, n) == 0);
}

static bool prefix_of(const struct bytes *a, const char *p, size_t n)
{
    return a->n <= n && (a->n == 0 || memcmp(a->p, p, a->n) == 0);
}

/* ---- the record as read back ------------------------------------------------- */

struct record {
    struct bytes ts, level, msg;
    int n;
    struct bytes key[2 * MAX_FIELDS], value[2 * MAX_FIELDS];
    /* JSON: the value was a number (num[i]) or a boolean (value[i] is
     * "true" or "false"), not a string */
    bool literal[2 * MAX_FIELDS];
    double num[2 * MAX_FIELDS];
    bool truncated;
    unsigned long long cut;
};

static void record_free(struct record *r)
{
    bytes_free(&r->ts);
    bytes_free(&r->level);
    bytes_free(&r->msg);
    for (int i = 0; i < r->n; i++) {
        bytes_free(&r->key[i]);
        bytes_free(&r->value[i]);
    }
}

static struct bytes copy(const char *p, size_t n)
{
    struct bytes b = { fuzz_cstr(p, n), n };
    return b;
}

/* The JSON string token at s[*i] (a '"'), decoded by jansson. */
static struct bytes json_token(const char *s, size_t len, size_t *i, const char *line)
{
    size_t start = *i, j = start + 1;
    while (j < len && s[j] != '"')
        j += s[j] == '\\' ? 2 : 1;
    FUZZ_CHECK(j < len, "unterminated quoted string in: %s", line);
    json_error_t je;
    json_t *v = json_loadb(s + start, j + 1 - start, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    FUZZ_CHECK(v && json_is_string(v), "quoted token is not a JSON string (%s) in: %s",
               v ? "not a string" : je.text, line);
    struct bytes b = copy(json_string_value(v), json_string_length(v));
    json_decref(v);
    *i = j + 1;
    return b;
}

static void add_pair(struct record *r, struct bytes k, struct bytes v, const char *line)
{
    FUZZ_CHECK(r->n < 2 * MAX_FIELDS, "too many pairs in: %s", line);
    for (int i = 0; i < r->n; i++)
        FUZZ_CHECK(!same(&r->key[i], k.p, k.n), "key '%s' twice in: %s", k.p, line);
    r->key[r->n] = k;
    r->value[r->n++] = v;
}

static unsigned long long positive(const struct bytes *v, const char *line)
{
    FUZZ_CHECK(v->n > 0 && v->n <= 20 && strspn(v->p, "0123456789") == v->n && v->p[0] != '0',
               "truncated= is not a positive number in: %s", line);
    return strtoull(v->p, NULL, 10);
}

/* text: TS LEVEL message( key=value)* — message bare (no '"' or '=',
 * no leading or trailing space) or quoted; keys and values bare (no
 * space, '"' or '=') or quoted. */
static void parse_text(const char *s, size_t len, struct record *r, const char *line)
{
    const char *sp = memchr(s, ' ', len);
    FUZZ_CHECK(sp, "no timestamp in: %s", line);
    r->ts = copy(s, (size_t)(sp - s));
    size_t i = (size_t)(sp - s) + 1;
    sp = memchr(s + i, ' ', len - i);
    FUZZ_CHECK(sp, "no level in: %s", line);
    r->level = copy(s + i, (size_t)(sp - (s + i)));
    i = (size_t)(sp - s) + 1;
    FUZZ_CHECK(i < len, "no message in: %s", line);
    if (s[i] == '"') {
        r->msg = json_token(s, len, &i, line);
    } else {
        size_t j = i;
        while (j < len && s[j] != '"' && s[j] != '=')
            j++;
        size_t end = j;
        if (j < len && s[j] == '=') {
            while (end > i && s[end - 1] != ' ')
                end--;
            FUZZ_CHECK(end > i, "a bare message holds '=' in: %s", line);
            end--;
        } else if (j < len) {
            FUZZ_CHECK(j > i && s[j - 1] == ' ', "a bare message holds '\"' in: %s", line);
            end = j - 1;
        }
        FUZZ_CHECK(end > i, "empty bare message in: %s", line);
        r->msg = copy(s + i, end - i);
        i = end;
    }
    while (i < len) {
        FUZZ_CHECK(s[i] == ' ', "no space before a pair at %zu in: %s", i, line);
        i++;
        FUZZ_CHECK(i < len, "trailing space in: %s", line);
        struct bytes k, v;
        if (s[i] == '"') {
            k = json_token(s, len, &i, line);
        } else {
            size_t j = i;
            while (j < len && s[j] != '=' && s[j] != ' ' && s[j] != '"')
                j++;
            FUZZ_CHECK(j > i, "empty bare key in: %s", line);
            k = copy(s + i, j - i);
            i = j;
        }
        FUZZ_CHECK(i < len && s[i] == '=', "no '=' after key '%s' in: %s", k.p, line);
        i++;
        FUZZ_CHECK(i < len, "no value for key '%s' in: %s", k.p, line);
        if (s[i] == '"') {
            v = json_token(s, len, &i, line);
        } else {
            size_t j = i;
            while (j < len && s[j] != ' ') {
                FUZZ_CHECK(s[j] != '"' && s[j] != '=', "bare value holds '%c' in: %s", s[j], line);
                j++;
            }
            v = copy(s + i, j - i);
            i = j;
        }
        if (same(&k, "truncated", 9)) {
            FUZZ_CHECK(!r->truncated, "truncated twice in: %s", line);
            FUZZ_CHECK(i == len, "truncated= is not last in: %s", line);
            r->truncated = true;
            r->cut = positive(&v, line);
            bytes_free(&k);
            bytes_free(&v);
            continue;
        }
        add_pair(r, k, v, line);
    }
}

static void parse_json(const char *s, size_t len, struct record *r, const char *line)
{
    json_error_t je;
    json_t *o = json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
                           &je);
    FUZZ_CHECK(o, "not a JSON object without duplicate keys (%s) in: %s", je.text, line);
    FUZZ_CHECK(json_is_object(o), "not an object: %s", line);
    const char *k;
    json_t *v;
    bool have_ts = false, have_level = false, have_msg = false;
    json_object_foreach(o, k, v) {
        size_t kn = strlen(k);
        if (strcmp(k, "truncated") == 0) {
            double t = json_is_real(v) ? json_real_value(v) : 0;
            FUZZ_CHECK(t >= 1 && t < 1e15 && t == (double)(unsigned long long)t,
                       "truncated is not a positive integer in: %s", line);
            r->truncated = true;
            r->cut = (unsigned long long)t;
            continue;
        }
        if (json_is_real(v) || json_is_boolean(v)) {
            FUZZ_CHECK(strcmp(k, "ts") && strcmp(k, "level") && strcmp(k, "msg"),
                       "key '%s' is not a string in: %s", k, line);
            const char *text = json_is_true(v) ? "true" : "false";
            struct bytes b = copy(json_is_real(v) ? "" : text, json_is_real(v) ? 0 : strlen(text));
            add_pair(r, copy(k, kn), b, line);
            r->literal[r->n - 1] = true;
            r->num[r->n - 1] = json_is_real(v) ? json_real_value(v) : 0;
            continue;
        }
        FUZZ_CHECK(json_is_string(v), "key '%s' has no string value in: %s", k, line);
        struct bytes b = copy(json_string_value(v), json_string_length(v));
        if (strcmp(k, "ts") == 0) {
            r->ts = b;
            have_ts = true;
        } else if (strcmp(k, "level") == 0) {
            r->level = b;
            have_level = true;
        } else if (strcmp(k, "msg") == 0) {
            r->msg = b;
            have_msg = true;
        } else {
            add_pair(r, copy(k, kn), b, line);
        }
    }
    FUZZ_CHECK(have_ts && have_level && have_msg, "ts, level or msg missing in: %s", line);
    /* the order a reader of the raw line sees: ts, level, msg first */
    FUZZ_CHECK(len > 7 && memcmp(s, "{\"ts\":\"", 7) == 0, "ts is not first in: %s", line);
    json_decref(o);
}

/* No byte a terminal or a line reader would act on. */
static void check_bytes(const char *line, size_t len)
{
    FUZZ_CHECK(len >= 2 && len <= LUNA_LOG_LINE_MAX, "line of %zu bytes", len);
    FUZZ_CHECK(line[len - 1] == '\n', "no final newline: %.*s", (int)len, line);
    const unsigned char *p = (const unsigned char *)line;
    for (size_t i = 0; i < len - 1;) {
        uint32_t cp;
        size_t n = utf8_len(p + i, len - 1 - i, &cp);
        FUZZ_CHECK(n, "invalid UTF-8 at %zu: %.*s", i, (int)len, line);
        FUZZ_CHECK(cp >= 0x20 && cp != 0x7F && !(cp >= 0x80 && cp <= 0x9F),
                   "raw control U+%04X at %zu: %.*s", (unsigned)cp, i, (int)len, line);
        FUZZ_CHECK(cp != 0x061C && cp != 0x200E && cp != 0x200F &&
                   !(cp >= 0x2028 && cp <= 0x202E) && !(cp >= 0x2066 && cp <= 0x2069),
                   "raw bidi or separator U+%04X at %zu: %.*s", (unsigned)cp, i, (int)len, line);
        i += n;
    }
}

/* ---- the record as written ------------------------------------------------------ */

struct input {
    bool json;
    enum luna_log_level level;
    const char *msg;
    size_t msg_len;
    const char *pairs[2 * NHOST];
    int npairs;
    struct luna_log_field fields[MAX_FIELDS];
    int nfields;
};

static bool reserved(const struct input *in, const char *k, size_t n)
{
    if (n >= 7 && memcmp(k, "script.", 7) == 0)
        return true;
    for (size_t i = 0; i < NRESERVED; i++)
        if (strlen(RESERVED[i]) == n && memcmp(RESERVED[i], k, n) == 0)
            return true;
    for (int i = 0; i < in->npairs; i++)
        if (strlen(in->pairs[2 * i]) == n && memcmp(in->pairs[2 * i], k, n) == 0)
            return true;
    return false;
}

static int find_key(const struct record *r, const struct bytes *k)
{
    for (int i = 0; i < r->n; i++)
        if (same(&r->key[i], k->p, k->n))
            return i;
    return -1;
}

/* JSON's number grammar (RFC 8259), written again. */
static bool is_json_number(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    size_t d = i;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    if (i == d || (s[d] == '0' && i - d > 1))
        return false;
    if (i < n && s[i] == '.') {
        d = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        if (++i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return false;
    }
    return i == n;
}

/* A script field written as a JSON number or boolean: typed so, and its
 * value that literal. */
static void check_literal(const struct luna_log_field *f, const struct record *r, int at,
                          const char *key, const char *line)
{
    FUZZ_CHECK(f->type != LUNA_LOG_TYPE_STRING, "string field '%s' written as a literal in: %s",
               key, line);
    if (r->value[at].n) {
        FUZZ_CHECK(f->type == LUNA_LOG_TYPE_BOOL && same(&r->value[at], f->value, f->value_len),
                   "field '%s' written as a boolean other than its value in: %s", key, line);
        return;
    }
    FUZZ_CHECK(f->type == LUNA_LOG_TYPE_NUMBER && is_json_number(f->value, f->value_len) &&
               f->value_len < 128, "field '%s' written as a number it is not in: %s", key, line);
    char text[128];
    memcpy(text, f->value, f->value_len);
    text[f->value_len] = '\0';
    FUZZ_CHECK(strtod(text, NULL) == r->num[at], "field '%s' written as another number in: %s",
               key, line);
}

static void check_record(const struct input *in, const struct record *r, const char *line)
{
    static const char *const upper[] = { "DEBUG", "INFO", "WARN", "ERROR" };
    static const char *const lower[] = { "debug", "info", "warn", "error" };
    const char *lv = in->json ? lower[in->level] : upper[in->level];
    FUZZ_CHECK(same(&r->ts, TS, strlen(TS)), "timestamp is not the host's in: %s", line);
    FUZZ_CHECK(same(&r->level, lv, strlen(lv)), "level is not the host's in: %s", line);
    struct bytes m = sanitize(in->msg, in->msg_len);
    if (r->truncated)
        FUZZ_CHECK(prefix_of(&r->msg, m.p, m.n), "message is not a prefix of the input's: %s",
                   line);
    else
        FUZZ_CHECK(same(&r->msg, m.p, m.n), "message changed without truncated=: %s", line);
    bytes_free(&m);

    bool used[2 * MAX_FIELDS] = { false };
    /* A bound on what keys take: with it, a host value that needs less
     * than its fair share of the rest is owed its whole value. */
    size_t items = 1 + (size_t)in->npairs + (size_t)in->nfields, keys = 0;
    for (int i = 0; i < in->npairs; i++)
        keys += strlen(in->pairs[2 * i]) + 4;
    for (int i = 0; i < in->nfields; i++) {
        size_t k = 6 * in->fields[i].key_len + 16;
        keys += k < LUNA_LOG_KEY_MAX + 4 ? k : LUNA_LOG_KEY_MAX + 4;
    }
    size_t room = keys + 200 < LUNA_LOG_LINE_MAX ? LUNA_LOG_LINE_MAX - keys - 200 : 0;

    for (int i = 0; i < in->npairs; i++) {
        const char *k = in->pairs[2 * i], *v = in->pairs[2 * i + 1];
        struct bytes kb = { (char *)k, strlen(k) };
        int at = find_key(r, &kb);
        struct bytes want = sanitize(v, strlen(v));
        bool owed = 6 * strlen(v) + 2 <= room / items;
        if (at < 0) {
            FUZZ_CHECK(r->truncated && !owed, "host key '%s' missing in: %s", k, line);
        } else {
            used[at] = true;
            FUZZ_CHECK(!r->literal[at], "host key '%s' is not a string in: %s", k, line);
            if (r->truncated && !owed)
                FUZZ_CHECK(prefix_of(&r->value[at], want.p, want.n),
                           "host key '%s' does not carry the host's value in: %s", k, line);
            else
                FUZZ_CHECK(same(&r->value[at], want.p, want.n),
                           "host key '%s' does not carry the host's whole value in: %s", k, line);
        }
        bytes_free(&want);
    }
    for (int i = 0; i < in->nfields; i++) {
        const struct luna_log_field *f = &in->fields[i];
        /* a field that repeats the host's own pair is written once, as the host's */
        bool repeat = false;
        for (int j = 0; j < in->npairs; j++)
            repeat |= strlen(in->pairs[2 * j]) == f->key_len &&
                      memcmp(in->pairs[2 * j], f->key, f->key_len) == 0 &&
                      strlen(in->pairs[2 * j + 1]) == f->value_len &&
                      memcmp(in->pairs[2 * j + 1], f->value, f->value_len) == 0;
        if (repeat)
            continue;
        char *raw = malloc(8 + f->key_len);
        if (!raw)
            abort();
        size_t n = 0;
        if (reserved(in, f->key, f->key_len)) {
            memcpy(raw, "script.", 7);
            n = 7;
        }
        memcpy(raw + n, f->key, f->key_len);
        n += f->key_len;
        struct bytes key = sanitize(raw, n), want = sanitize(f->value, f->value_len);
        free(raw);
        int at = find_key(r, &key);
        if (at < 0 || used[at]) {
            /* left out: only with the marker (too long a key, no room, or
             * the same decoded key as an earlier field) */
            FUZZ_CHECK(r->truncated, "script field '%s' missing without truncated=: %s", key.p,
                       line);
        } else if (r->literal[at]) {
            used[at] = true;
            check_literal(f, r, at, key.p, line);
        } else {
            used[at] = true;
            if (r->truncated)
                FUZZ_CHECK(prefix_of(&r->value[at], want.p, want.n),
                           "script field '%s' has another value in: %s", key.p, line);
            else
                FUZZ_CHECK(same(&r->value[at], want.p, want.n),
                           "script field '%s' changed without truncated=: %s", key.p, line);
        }
        bytes_free(&key);
        bytes_free(&want);
    }
    for (int i = 0; i < r->n; i++)
        FUZZ_CHECK(used[i], "key '%s' is neither the host's nor a script field's in: %s",
                   r->key[i].p, line);
}

/* The next part of the input (up to the two bytes NUL '|'), or NULL at
 * its end; borrowed from the input. */
static const char *next_part(fuzz_input *in, size_t *len)
{
    if (!in->n)
        return NULL;
    size_t n = in->n;
    for (size_t i = 0; i + 1 < in->n; i++)
        if (in->p[i] == 0 && in->p[i + 1] == '|') {
            n = i;
            break;
        }
    const char *part = (const char *)in->p;
    *len = n;
    size_t skip = n + 2 <= in->n ? n + 2 : in->n;
    in->p += skip;
    in->n -= skip;
    return part;
}

/* s repeated to more than two lines' worth (a malloc'd copy). */
static char *repeat(const char *s, size_t n, size_t *out_len)
{
    size_t times = n ? (2 * LUNA_LOG_LINE_MAX) / n + 1 : 0;
    char *p = malloc(n * times + 1);
    if (!p)
        abort();
    for (size_t i = 0; i < times; i++)
        memcpy(p + i * n, s, n);
    *out_len = n * times;
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input fi = { data, size };
    uint8_t opt = fuzz_byte(&fi), mask = fuzz_byte(&fi);
    struct input in = { .json = opt & 1, .level = (enum luna_log_level)((opt >> 1) & 3) };
    char *owned[2 + NHOST + 2 * MAX_FIELDS];
    int nowned = 0;
    size_t len;
    const char *part = next_part(&fi, &len);
    in.msg = part ? part : "";
    in.msg_len = part ? len : 0;
    if (opt & 8) {
        in.msg = owned[nowned++] = repeat(in.msg, in.msg_len, &in.msg_len);
    }
    for (int i = 0; i < NHOST; i++) {
        if (!(mask & (1u << i)))
            continue;
        part = next_part(&fi, &len);
        char *v = owned[nowned++] = fuzz_cstr(part ? part : "", part ? len : 0);
        in.pairs[2 * in.npairs] = HOST[i];
        in.pairs[2 * in.npairs++ + 1] = v; /* up to its first NUL */
    }
    while (in.nfields < MAX_FIELDS && (part = next_part(&fi, &len))) {
        struct luna_log_field *f = &in.fields[in.nfields++];
        char *k = owned[nowned++] = fuzz_cstr(part, len);
        if (in.json)
            for (size_t i = 0; i < len; i++)
                if (!k[i])
                    k[i] = 1;
        f->key = k;
        f->key_len = len;
        part = next_part(&fi, &len);
        f->value = part ? part : "";
        f->value_len = part ? len : 0;
        if (opt & 32)
            f->type = (enum luna_log_type)((in.nfields - 1) % 3);
    }
    if ((opt & 16) && in.nfields > 0) {
        struct luna_log_field *f = &in.fields[in.nfields - 1];
        f->value = owned[nowned++] = repeat(f->value, f->value_len, &f->value_len);
    }
    /* the writer reads at most LUNA_LOG_FIELDS_MAX fields; more are the
     * binding's error (luna.log raises), so the oracle gives no more */
    if (in.nfields > LUNA_LOG_FIELDS_MAX)
        in.nfields = LUNA_LOG_FIELDS_MAX;

    char line[LUNA_LOG_LINE_MAX];
    size_t cut = 0;
    size_t n = luna_log_format_line(line, in.json ? LUNA_LOG_JSON : LUNA_LOG_TEXT, TS, in.level,
                                    in.msg, in.msg_len, in.pairs, in.npairs, in.fields,
                                    in.nfields, &cut);
    check_bytes(line, n);
    char *shown = fuzz_cstr(line, n - 1);
    struct record r = { 0 };
    if (in.json)
        parse_json(line, n - 1, &r, shown);
    else
        parse_text(line, n - 1, &r, shown);
    FUZZ_CHECK(r.truncated == (cut > 0), "truncated= in the line and the cut (%zu) disagree: %s",
               cut, shown);
    FUZZ_CHECK(!r.truncated || r.cut == cut, "truncated=%llu but %zu bytes cut: %s", r.cut, cut,
               shown);
    check_record(&in, &r, shown);
    record_free(&r);
    free(shown);
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    return 0;
}
