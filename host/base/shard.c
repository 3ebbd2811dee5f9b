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

const char *luna_shard_field_path(enum luna_shard_field f) { return paths[f]; }

/* ---- parsing ------------------------------------------------------------ */

struct scan {
    const char *text, *p;
    luna_error *err;
};

static void skip_blanks(struct scan *s)
{
    while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')
        s->p++;
}

static int fail(struct scan *s, const char *what)
{
    return luna_error_set(s->err, LUNA_EINVAL, "invalid shardSelector at offset %zu: %s",
                          (size_t)(s->p - s->text), what);
}

/* Consumes tok (after blanks) or fails saying what was expected. */
static int expect(struct scan *s, const char *tok)
{
    skip_blanks(s);
    size_t n = strlen(tok);
    if (strncmp(s->p, tok, n) != 0) {
        char what[96];
        snprintf(what, sizeof what, "expected \"%s\"", tok);
        return fail(s, what);
    }
    s->p += n;
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A quoted '0x…' bound.  *v is its value and *top is true for exactly
 * 2^64 (then *v is 0); more is refused. */
static int parse_bound(struct scan *s, const char *which, uint64_t *v, bool *top)
{
    char what[128];
    skip_blanks(s);
    char q = *s->p;
    if (q != '\'' && q != '"') {
        snprintf(what, sizeof what, "%s must be a quoted hex string such as '0x8000000000000000'",
                 which);
        return fail(s, what);
    }
    s->p++;
    if (s->p[0] != '0' || (s->p[1] != 'x' && s->p[1] != 'X')) {
        snprintf(what, sizeof what, "%s must start with 0x", which);
        return fail(s, what);
    }
    s->p += 2;
    uint64_t x = 0;
    bool carry = false; /* the value is 2^64 + x */
    int digits = 0;
    for (int d; (d = hex_digit(*s->p)) >= 0; s->p++, digits++) {
        /* The value is 2^64·carry + x; one more digit multiplies it by 16. */
        uint64_t nibble = x >> 60;
        if (!carry && nibble == 0) {
            x = x << 4 | (uint64_t)d;
        } else if (!carry && nibble == 1 && (x << 4) == 0 && d == 0) {
            carry = true; /* exactly 2^64 */
            x = 0;
        } else {
            snprintf(what, sizeof what, "%s exceeds 0x10000000000000000", which);
            return fail(s, what);
        }
    }
    if (!digits) {
        snprintf(what, sizeof what, "%s has no hex digits after 0x", which);
        return fail(s, what);
    }
    if (*s->p != q) {
        snprintf(what, sizeof what, "%s: expected a hex digit or the closing quote", which);
        return fail(s, what);
    }
    s->p++;
    *v = x;
    *top = carry;
    return 0;
}

static int parse_term(struct scan *s, struct luna_shard_range *r)
{
    int rc;
    if ((rc = expect(s, "shardRange")) < 0 || (rc = expect(s, "(")) < 0)
        return rc;
    skip_blanks(s);
    const char *field = s->p;
    while ((*s->p >= 'a' && *s->p <= 'z') || (*s->p >= 'A' && *s->p <= 'Z') || *s->p == '.' ||
           *s->p == '_' || (*s->p >= '0' && *s->p <= '9'))
        s->p++;
    size_t flen = (size_t)(s->p - field);
    if (flen == strlen(paths[0]) && memcmp(field, paths[0], flen) == 0) {
        r->field = LUNA_SHARD_UID;
    } else if (flen == strlen(paths[1]) && memcmp(field, paths[1], flen) == 0) {
        r->field = LUNA_SHARD_NAMESPACE;
    } else {
        s->p = field;
        char what[160];
        snprintf(what, sizeof what, "unsupported field path \"%.*s\": supported are "
                 "object.metadata.uid and object.metadata.namespace",
                 (int)(flen > 64 ? 64 : flen), field);
        return fail(s, what);
    }
    uint64_t start, end;
    bool start_top, end_top;
    if ((rc = expect(s, ",")) < 0 || (rc = parse_bound(s, "start", &start, &start_top)) < 0 ||
        (rc = expect(s, ",")) < 0 || (rc = parse_bound(s, "end", &end, &end_top)) < 0 ||
        (rc = expect(s, ")")) < 0)
        return rc;
    if (start_top || (!end_top && start >= end))
        return fail(s, "the start of a range must be less than its end");
    r->start = start;
    r->last = end_top ? UINT64_MAX : end - 1;
    return 0;
}

int luna_shard_parse(const char *text, struct luna_shard_selector **out, luna_error *err)
{
    *out = NULL;
    struct scan s = { .text = text ? text : "", .p = text ? text : "", .err = err };
    skip_blanks(&s);
    if (!*s.p)
        return 0;
    /* Every term is at least "shardRange(" long: bounds the count. */
    size_t cap = strlen(s.p) / 11 + 1;
    struct luna_shard_selector *sel = malloc(sizeof *sel + cap * sizeof sel->ranges[0]);
    if (!sel)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    sel->n = 0;
    for (;;) {
        int rc = sel->n < cap ? parse_term(&s, &sel->ranges[sel->n]) : fail(&s, "too many terms");
        if (rc < 0) {
            free(sel);
            return rc;
        }
        sel->n++;
        skip_blanks(&s);
        if (!*s.p)
            break;
        if (s.p[0] != '|' || s.p[1] != '|') {
            free(sel);
            return fail(&s, "expected \"||\" or the end of the selector");
        }
        s.p += 2;
    }
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
        if (r[i].start > r[i].last ||
            (r[i].field != LUNA_SHARD_UID && r[i].field != LUNA_SHARD_NAMESPACE))
            return luna_error_set(err, LUNA_EINVAL, "shard range %zu is invalid", i);
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

bool luna_shard_contains(const struct luna_shard_selector *s, enum luna_shard_field f, uint64_t h)
{
    if (!s)
        return true;
    for (size_t i = 0; i < s->n; i++)
        if (s->ranges[i].field == f && h >= s->ranges[i].start && h <= s->ranges[i].last)
            return true;
    return false;
}

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

bool luna_shard_uses(const struct luna_shard_selector *s, enum luna_shard_field f)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (s->ranges[i].field == f)
            return true;
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
