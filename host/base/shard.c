/* shard.c — see shard.h. */
#include "base/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

uint64_t luna_shard_hash(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = FNV_OFFSET;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

static const char *const paths[] = { "object.metadata.uid", "object.metadata.namespace" };

/* ---- parsing ------------------------------------------------------------ */

/* A recursive-descent reader of the one CEL shape the API server accepts
 * (k8s.io/apiserver/pkg/sharding): shardRange calls joined by ||, with
 * parentheses.  The messages are the server's, so a selector the dev server
 * refuses reads as kube-apiserver would refuse it; syntax the server's CEL
 * parser rejects gets "CEL parse error: " and our own words. */

#define MAX_ARGS 8

enum arg_kind { ARG_PATH, ARG_STRING, ARG_OTHER };

struct arg {
    enum arg_kind kind;
    const char *at;   /* PATH: the path; STRING: the content; OTHER: the token */
    size_t len;
};

struct scan {
    const char *p;
    struct luna_shard_range *out;
    size_t n, cap;
    int depth;
    luna_error *err;
};

static void skip_blanks(struct scan *s)
{
    while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')
        s->p++;
}

static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

static int syntax(struct scan *s, const char *what)
{
    return luna_error_set(s->err, LUNA_EINVAL, "CEL parse error: %s", what);
}

/* One argument of a call: a dotted path, a quoted string, or any other
 * token (a number, say), kept for the message. */
static int parse_arg(struct scan *s, struct arg *a)
{
    skip_blanks(s);
    const char *p = s->p;
    if (*p == '\'' || *p == '"') {
        const char *end = strchr(p + 1, *p);
        if (!end)
            return syntax(s, "unterminated string literal");
        *a = (struct arg){ ARG_STRING, p + 1, (size_t)(end - p - 1) };
        s->p = end + 1;
        return 0;
    }
    if (ident_start(*p)) {
        const char *q = p;
        for (;;) {
            while (ident_char(*q))
                q++;
            if (q[0] == '.' && ident_start(q[1]))
                q++;
            else
                break;
        }
        *a = (struct arg){ ARG_PATH, p, (size_t)(q - p) };
        s->p = q;
        return 0;
    }
    const char *q = p;
    while (*q && *q != ',' && *q != ')' && *q != ' ' && *q != '\t' && *q != '\n' && *q != '\r')
        q++;
    if (q == p)
        return syntax(s, "expected an argument");
    *a = (struct arg){ ARG_OTHER, p, (size_t)(q - p) };
    s->p = q;
    return 0;
}

/* A bound: the server's extractHexLiteral. *v, *top as in the range. */
static int check_bound(struct scan *s, const struct arg *a, const char *name, uint64_t *v, bool *top)
{
    if (a->kind != ARG_STRING)
        return luna_error_set(s->err, LUNA_EINVAL, "%s must be a string literal (e.g. '0xff')",
                              name);
    const char *t = a->at;
    size_t len = a->len;
    if (len < 2 || t[0] != '0' || t[1] != 'x')
        return luna_error_set(s->err, LUNA_EINVAL, "%s must have '0x' prefix, got \"%.*s\"", name,
                              (int)(len > 64 ? 64 : len), t);
    const char *hex = t + 2;
    size_t n = len - 2;
    if (n == 0)
        return luna_error_set(s->err, LUNA_EINVAL, "%s: hex value is required after '0x'", name);
    if (n > 17)
        return luna_error_set(s->err, LUNA_EINVAL, "%s: hex value too long (%zu chars, max 17): "
                              "\"%.*s\"", name, n, (int)(n > 64 ? 64 : n), hex);
    for (size_t i = 0; i < n; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
            return luna_error_set(s->err, LUNA_EINVAL, "%s: invalid hex character \"%c\" in "
                                  "\"%.*s\"", name, hex[i], (int)len, t);
    if (n == 17) {
        if (memcmp(hex, "10000000000000000", 17) != 0)
            return luna_error_set(s->err, LUNA_EINVAL, "%s: 17-digit hex value must be "
                                  "'0x10000000000000000' (2^64), got \"%.*s\"", name, (int)len, t);
        *v = 0;
        *top = true;
        return 0;
    }
    if (n != 16)
        return luna_error_set(s->err, LUNA_EINVAL, "%s must be a 0x-prefixed 16-digit hex value, "
                              "got \"%.*s\" (did you mean \"0x%.*s%.*s\"?)", name, (int)len, t,
                              (int)(16 - n), "0000000000000000", (int)n, hex);
    uint64_t x = 0;
    for (size_t i = 0; i < 16; i++)
        x = x << 4 | (uint64_t)(hex[i] <= '9' ? hex[i] - '0' : hex[i] - 'a' + 10);
    *v = x;
    *top = false;
    return 0;
}

static int parse_or(struct scan *s);

/* shardRange(FIELD, 'START', 'END') — the name is already read. */
static int parse_call(struct scan *s)
{
    struct arg args[MAX_ARGS];
    size_t nargs = 0;
    s->p++; /* '(' */
    skip_blanks(s);
    if (*s->p == ')') {
        s->p++;
    } else {
        for (;;) {
            struct arg a;
            int rc = parse_arg(s, &a);
            if (rc < 0)
                return rc;
            if (nargs < MAX_ARGS)
                args[nargs] = a;
            nargs++;
            skip_blanks(s);
            if (*s->p == ',') {
                s->p++;
                continue;
            }
            if (*s->p == ')') {
                s->p++;
                break;
            }
            return syntax(s, "expected ',' or ')' in the arguments of shardRange");
        }
    }
    if (nargs != 3)
        return luna_error_set(s->err, LUNA_EINVAL,
                              "shardRange() requires exactly 3 arguments, got %zu", nargs);
    if (args[0].kind != ARG_PATH)
        return luna_error_set(s->err, LUNA_EINVAL, "shardRange() first argument: expected field "
                              "path (e.g. object.metadata.uid)");
    struct luna_shard_range r;
    if (args[0].len == strlen(paths[0]) && memcmp(args[0].at, paths[0], args[0].len) == 0)
        r.field = LUNA_SHARD_UID;
    else if (args[0].len == strlen(paths[1]) && memcmp(args[0].at, paths[1], args[0].len) == 0)
        r.field = LUNA_SHARD_NAMESPACE;
    else
        return luna_error_set(s->err, LUNA_EINVAL, "unsupported field path \"%.*s\"; supported: "
                              "object.metadata.uid, object.metadata.namespace",
                              (int)(args[0].len > 64 ? 64 : args[0].len), args[0].at);
    uint64_t start, end;
    bool start_top, end_top;
    int rc;
    if ((rc = check_bound(s, &args[1], "hexStart", &start, &start_top)) < 0 ||
        (rc = check_bound(s, &args[2], "hexEnd", &end, &end_top)) < 0)
        return rc;
    if (start_top || (!end_top && start >= end))
        return luna_error_set(s->err, LUNA_EINVAL, "shard range start %.*s must be less than "
                              "end %.*s", (int)args[1].len, args[1].at, (int)args[2].len,
                              args[2].at);
    r.start = start;
    r.last = end_top ? UINT64_MAX : end - 1;
    if (s->n == s->cap)
        return syntax(s, "too many terms");
    s->out[s->n++] = r;
    return 0;
}

/* primary := '(' or ')' | NAME '(' args ')' */
static int parse_primary(struct scan *s)
{
    skip_blanks(s);
    if (*s->p == '(') {
        if (++s->depth > 32)
            return syntax(s, "parentheses nested too deep");
        s->p++;
        int rc = parse_or(s);
        if (rc < 0)
            return rc;
        skip_blanks(s);
        if (*s->p != ')')
            return syntax(s, "expected ')'");
        s->p++;
        s->depth--;
        return 0;
    }
    if (!ident_start(*s->p))
        return syntax(s, *s->p ? "expected shardRange(...)" : "unexpected end of the expression");
    const char *name = s->p;
    while (ident_char(*s->p) || (s->p[0] == '.' && ident_start(s->p[1])))
        s->p++;
    size_t len = (size_t)(s->p - name);
    skip_blanks(s);
    if (*s->p != '(')
        return luna_error_set(s->err, LUNA_EINVAL, "unexpected expression \"%.*s\"; expected "
                              "shardRange() call or || operator", (int)(len > 64 ? 64 : len), name);
    if (len != 10 || memcmp(name, "shardRange", 10) != 0)
        return luna_error_set(s->err, LUNA_EINVAL, "unsupported function \"%.*s\"; only "
                              "shardRange() and || are allowed", (int)(len > 64 ? 64 : len), name);
    return parse_call(s);
}

/* or := primary ('||' primary)* ; '&&' is CEL's _&&_, which is refused. */
static int parse_or(struct scan *s)
{
    for (;;) {
        int rc = parse_primary(s);
        if (rc < 0)
            return rc;
        skip_blanks(s);
        if (s->p[0] == '|' && s->p[1] == '|') {
            s->p += 2;
            continue;
        }
        if (s->p[0] == '&' && s->p[1] == '&')
            return luna_error_set(s->err, LUNA_EINVAL, "unsupported function \"_&&_\"; only "
                                  "shardRange() and || are allowed");
        return 0;
    }
}

int luna_shard_parse(const char *text, struct luna_shard_selector **out, luna_error *err)
{
    *out = NULL;
    if (!text || !*text)
        return 0;
    struct scan s = { .p = text, .err = err };
    skip_blanks(&s);
    if (!*s.p)
        return luna_error_set(err, LUNA_EINVAL, "empty shard selector is not allowed; omit the "
                              "parameter for unfiltered lists");
    /* Every term is at least "shardRange(a,'0x','0x')" long: bounds the count. */
    s.cap = strlen(s.p) / 16 + 1;
    struct luna_shard_selector *sel = malloc(sizeof *sel + s.cap * sizeof sel->ranges[0]);
    if (!sel)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    s.out = sel->ranges;
    int rc = parse_or(&s);
    skip_blanks(&s);
    if (rc == 0 && *s.p)
        rc = syntax(&s, "unexpected text after the expression");
    for (size_t i = 1; rc == 0 && i < s.n; i++)
        if (s.out[i].field != s.out[0].field)
            rc = luna_error_set(err, LUNA_EINVAL, "all shard ranges must use the same field, got "
                                "\"%s\" and \"%s\"", paths[s.out[0].field], paths[s.out[i].field]);
    if (rc < 0) {
        free(sel);
        return rc;
    }
    sel->n = s.n;
    *out = sel;
    return 0;
}

int luna_shard_new(const struct luna_shard_range *r, size_t n, struct luna_shard_selector **out,
                   luna_error *err)
{
    *out = NULL;
    if (n == 0)
        return luna_error_set(err, LUNA_EINVAL, "a shard selector needs at least one range");
    for (size_t i = 0; i < n; i++)
        if (r[i].start > r[i].last || r[i].field != r[0].field ||
            (r[i].field != LUNA_SHARD_UID && r[i].field != LUNA_SHARD_NAMESPACE))
            return luna_error_set(err, LUNA_EINVAL, "shard range %zu is invalid (each start <= "
                                  "last, one field for all)", i);
    struct luna_shard_selector *s = malloc(sizeof *s + n * sizeof s->ranges[0]);
    if (!s)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    s->n = n;
    memcpy(s->ranges, r, n * sizeof *r);
    *out = s;
    return 0;
}

struct luna_shard_selector *luna_shard_copy(const struct luna_shard_selector *s)
{
    struct luna_shard_selector *c = NULL;
    if (s)
        luna_shard_new(s->ranges, s->n, &c, NULL);
    return c;
}

void luna_shard_free(struct luna_shard_selector *s) { free(s); }

/* ---- printing ----------------------------------------------------------- */

size_t luna_shard_print(const struct luna_shard_selector *s, char *buf, size_t size)
{
    size_t len = 0;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; s && i < s->n; i++) {
        const struct luna_shard_range *r = &s->ranges[i];
        char end[24];
        if (r->last == UINT64_MAX)
            snprintf(end, sizeof end, "0x10000000000000000");
        else
            snprintf(end, sizeof end, "0x%016llx", (unsigned long long)(r->last + 1));
        int n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0,
                         "%sshardRange(%s, '0x%016llx', '%s')", i ? " || " : "",
                         paths[r->field], (unsigned long long)r->start, end);
        len += n > 0 ? (size_t)n : 0;
    }
    return len;
}

char *luna_shard_text(const struct luna_shard_selector *s)
{
    if (!s)
        return NULL;
    size_t n = luna_shard_print(s, NULL, 0);
    char *t = malloc(n + 1);
    if (t)
        luna_shard_print(s, t, n + 1);
    return t;
}

/* ---- matching ----------------------------------------------------------- */

bool luna_shard_matches(const struct luna_shard_selector *s, const char *namespace_,
                        const char *uid)
{
    if (!s)
        return true;
    uint64_t h[2];
    bool have[2] = { false, false };
    for (size_t i = 0; i < s->n; i++) {
        const struct luna_shard_range *r = &s->ranges[i];
        if (!have[r->field]) {
            const char *v = r->field == LUNA_SHARD_UID ? uid : namespace_;
            h[r->field] = luna_shard_hash(v ? v : "", v ? strlen(v) : 0);
            have[r->field] = true;
        }
        if (h[r->field] >= r->start && h[r->field] <= r->last)
            return true;
    }
    return false;
}

bool luna_shard_equal(const struct luna_shard_selector *a, const struct luna_shard_selector *b)
{
    if (!a || !b)
        return a == b;
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->ranges[i].field != b->ranges[i].field || a->ranges[i].start != b->ranges[i].start ||
            a->ranges[i].last != b->ranges[i].last)
            return false;
    return true;
}

/* ---- splitting ---------------------------------------------------------- */

/* floor(i · 2^64 / n) for i < n, without 128-bit arithmetic: with
 * 2^64 = n·q + r (0 <= r < n) it is i·q + floor(i·r / n), and i·r < n² fits
 * for n < 2^32. */
static uint64_t split_point(uint64_t i, uint64_t n)
{
    uint64_t q = UINT64_MAX / n, r = UINT64_MAX % n + 1;
    if (r == n) {
        q++;
        r = 0;
    }
    return i * q + (i * r) / n;
}

struct luna_shard_range luna_shard_split_range(size_t i, size_t n, enum luna_shard_field f)
{
    struct luna_shard_range r = { .field = f, .start = split_point(i, n) };
    r.last = i + 1 == n ? UINT64_MAX : split_point(i + 1, n) - 1;
    return r;
}

int luna_shard_split(const char *const *members, size_t n, const char *self,
                     enum luna_shard_field f, struct luna_shard_selector **out, luna_error *err)
{
    *out = NULL;
    if (n == 0 || n > UINT32_MAX)
        return luna_error_set(err, LUNA_EINVAL, "a split needs 1 to 2^32-1 members, not %zu", n);
    if (!self)
        return luna_error_set(err, LUNA_EINVAL, "a split needs the member's own identity");
    size_t rank = 0;
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        if (!members[i] || !*members[i])
            return luna_error_set(err, LUNA_EINVAL, "member %zu has an empty identity", i);
        int c = strcmp(members[i], self);
        if (c < 0)
            rank++;
        else if (c == 0) {
            if (found)
                return luna_error_set(err, LUNA_EINVAL, "member \"%s\" is listed twice", self);
            found = true;
        }
        /* Repeats among the others would shift the ranks differently on
         * each member: refuse them too (n² is fine for a replica count). */
        for (size_t j = 0; j < i; j++)
            if (strcmp(members[i], members[j]) == 0 && c != 0)
                return luna_error_set(err, LUNA_EINVAL, "member \"%s\" is listed twice",
                                      members[i]);
    }
    if (!found)
        return luna_error_set(err, LUNA_EINVAL, "\"%s\" is not among the members", self);
    struct luna_shard_range r = luna_shard_split_range(rank, n, f);
    return luna_shard_new(&r, 1, out, err);
}
