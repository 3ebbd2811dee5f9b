/* selector.c — see selector.h. */
#include "selector.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 63
#define PREFIX_MAX_LEN 253

struct parser {
    const char *text;
    const char *p;
    enum luna_selector_kind kind;
    luna_error *err;
};

static void skip_blanks(struct parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t')
        ps->p++;
}

static bool is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

static int fail(struct parser *ps, const char *what)
{
    return luna_error_set(ps->err, LUNA_EINVAL, "invalid %s selector \"%s\": %s at position %d",
                          ps->kind == LUNA_SELECTOR_LABELS ? "label" : "field", ps->text,
                          what, (int)(ps->p - ps->text));
}

/* Label values: empty, or alphanumeric at both ends with [-_.] inside. */
static bool valid_label_value(const char *v, size_t len)
{
    if (len == 0)
        return true;
    if (len > NAME_MAX_LEN || !isalnum((unsigned char)v[0]) ||
        !isalnum((unsigned char)v[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_name_char(v[i]))
            return false;
    return true;
}

static bool valid_dns_subdomain(const char *s, size_t len)
{
    if (len == 0 || len > PREFIX_MAX_LEN)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-' || c == '.'))
            return false;
    }
    return isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[len - 1]);
}

static bool valid_key(const char *k, size_t len, enum luna_selector_kind kind)
{
    if (kind == LUNA_SELECTOR_FIELDS)
        return len > 0;
    const char *slash = memchr(k, '/', len);
    if (slash) {
        if (!valid_dns_subdomain(k, (size_t)(slash - k)))
            return false;
        len -= (size_t)(slash - k) + 1;
        k = slash + 1;
    }
    return len > 0 && valid_label_value(k, len);
}

static char *dup_range(const char *s, size_t len)
{
    char *out = malloc(len + 1);
    if (out) {
        memcpy(out, s, len);
        out[len] = '\0';
    }
    return out;
}

static int add_value(struct luna_selector_req *r, const char *v, size_t len)
{
    for (size_t i = 0; i < r->nvalues; i++)
        if (strlen(r->values[i]) == len && memcmp(r->values[i], v, len) == 0)
            return 0;
    char **values = realloc(r->values, (r->nvalues + 1) * sizeof *values);
    if (!values)
        return LUNA_ENOMEM;
    r->values = values;
    if (!(r->values[r->nvalues] = dup_range(v, len)))
        return LUNA_ENOMEM;
    r->nvalues++;
    return 0;
}

static void req_clear(struct luna_selector_req *r)
{
    free(r->key);
    for (size_t i = 0; i < r->nvalues; i++)
        free(r->values[i]);
    free(r->values);
}

/* Reads a bare token: a key or value up to a delimiter. */
static size_t token_len(struct parser *ps)
{
    const char *q = ps->p;
    if (ps->kind == LUNA_SELECTOR_FIELDS) {
        while (*q && *q != ',' && *q != '=' && *q != '!' && *q != ' ')
            q++;
    } else {
        while (*q && (is_name_char(*q) || *q == '/'))
            q++;
    }
    return (size_t)(q - ps->p);
}

static int parse_value(struct parser *ps, struct luna_selector_req *r)
{
    skip_blanks(ps);
    size_t len;
    if (ps->kind == LUNA_SELECTOR_FIELDS) {
        const char *q = ps->p;
        while (*q && *q != ',')
            q++;
        len = (size_t)(q - ps->p);
        while (len && ps->p[len - 1] == ' ')
            len--;
    } else {
        len = token_len(ps);
        if (!valid_label_value(ps->p, len))
            return fail(ps, "invalid value");
    }
    if (add_value(r, ps->p, len) < 0)
        return luna_error_set(ps->err, LUNA_ENOMEM, "out of memory");
    ps->p += len;
    return 0;
}

static int parse_set(struct parser *ps, struct luna_selector_req *r)
{
    skip_blanks(ps);
    if (*ps->p != '(')
        return fail(ps, "expected '('");
    ps->p++;
    for (;;) {
        skip_blanks(ps);
        size_t len = token_len(ps);
        if (len == 0 && *ps->p == ')' && r->nvalues == 0)
            return fail(ps, "values set can't be empty");
        if (!valid_label_value(ps->p, len))
            return fail(ps, "invalid value");
        if (add_value(r, ps->p, len) < 0)
            return luna_error_set(ps->err, LUNA_ENOMEM, "out of memory");
        ps->p += len;
        skip_blanks(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == ')') {
            ps->p++;
            return 0;
        }
        return fail(ps, "expected ',' or ')'");
    }
}

static bool is_integer(const char *s)
{
    if (!*s)
        return false;
    char *end;
    errno = 0;
    (void)strtoll(s, &end, 10);
    return errno == 0 && *end == '\0';
}

static bool word_at(const char *p, const char *word)
{
    size_t n = strlen(word);
    return strncmp(p, word, n) == 0 && (p[n] == ' ' || p[n] == '(' || p[n] == '\t');
}

static int parse_requirement(struct parser *ps, struct luna_selector_req *r)
{
    skip_blanks(ps);
    bool negated = false;
    if (*ps->p == '!') {
        if (ps->kind == LUNA_SELECTOR_FIELDS)
            return fail(ps, "field selectors do not support '!key'");
        negated = true;
        ps->p++;
        skip_blanks(ps);
    }
    size_t len = token_len(ps);
    if (!valid_key(ps->p, len, ps->kind))
        return fail(ps, len ? "invalid key" : "expected a key");
    if (!(r->key = dup_range(ps->p, len)))
        return luna_error_set(ps->err, LUNA_ENOMEM, "out of memory");
    ps->p += len;
    skip_blanks(ps);
    if (negated) {
        r->op = LUNA_SEL_NOT_EXISTS;
        return (*ps->p == ',' || !*ps->p) ? 0 : fail(ps, "unexpected text after '!key'");
    }
    if (*ps->p == ',' || !*ps->p) {
        if (ps->kind == LUNA_SELECTOR_FIELDS)
            return fail(ps, "field selectors need an operator");
        r->op = LUNA_SEL_EXISTS;
        return 0;
    }
    if (ps->p[0] == '=' && ps->p[1] == '=') {
        r->op = LUNA_SEL_EQUALS;
        ps->p += 2;
        return parse_value(ps, r);
    }
    if (ps->p[0] == '=') {
        r->op = LUNA_SEL_EQUALS;
        ps->p += 1;
        return parse_value(ps, r);
    }
    if (ps->p[0] == '!' && ps->p[1] == '=') {
        r->op = LUNA_SEL_NOT_EQUALS;
        ps->p += 2;
        return parse_value(ps, r);
    }
    if (ps->kind == LUNA_SELECTOR_LABELS && (*ps->p == '>' || *ps->p == '<')) {
        r->op = *ps->p == '>' ? LUNA_SEL_GT : LUNA_SEL_LT;
        ps->p++;
        int rc = parse_value(ps, r);
        if (rc == 0 && !is_integer(r->values[0]))
            return fail(ps, "'>' and '<' need an integer value");
        return rc;
    }
    if (ps->kind == LUNA_SELECTOR_LABELS && word_at(ps->p, "in")) {
        r->op = LUNA_SEL_IN;
        ps->p += 2;
        return parse_set(ps, r);
    }
    if (ps->kind == LUNA_SELECTOR_LABELS && word_at(ps->p, "notin")) {
        r->op = LUNA_SEL_NOT_IN;
        ps->p += 5;
        return parse_set(ps, r);
    }
    return fail(ps, "unknown operator");
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int compare_reqs(const void *a, const void *b)
{
    const struct luna_selector_req *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (int)x->op - (int)y->op;
}

int luna_selector_parse(const char *text, enum luna_selector_kind kind,
                        struct luna_selector **out, luna_error *err)
{
    *out = NULL;
    struct luna_selector *sel = calloc(1, sizeof *sel);
    if (!sel)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    struct parser ps = { text ? text : "", text ? text : "", kind, err };
    skip_blanks(&ps);
    int rc = 0;
    size_t cap = 0;
    while (*ps.p) {
        if (sel->n == cap) {
            cap = cap ? cap * 2 : 4;
            struct luna_selector_req *reqs = realloc(sel->reqs, cap * sizeof *reqs);
            if (!reqs) {
                rc = luna_error_set(err, LUNA_ENOMEM, "out of memory");
                break;
            }
            sel->reqs = reqs;
        }
        struct luna_selector_req *r = &sel->reqs[sel->n];
        memset(r, 0, sizeof *r);
        sel->n++;
        if ((rc = parse_requirement(&ps, r)) < 0)
            break;
        skip_blanks(&ps);
        if (*ps.p == ',') {
            ps.p++;
            skip_blanks(&ps);
            if (!*ps.p) {
                rc = fail(&ps, "expected a requirement after ','");
                break;
            }
        } else if (*ps.p) {
            rc = fail(&ps, "expected ','");
            break;
        }
    }
    if (rc < 0) {
        luna_selector_free(sel);
        return rc;
    }
    for (size_t i = 0; i < sel->n; i++)
        if (sel->reqs[i].nvalues > 1)
            qsort(sel->reqs[i].values, sel->reqs[i].nvalues, sizeof(char *), compare_strings);
    if (sel->n > 1)
        qsort(sel->reqs, sel->n, sizeof *sel->reqs, compare_reqs);
    *out = sel;
    return 0;
}

void luna_selector_free(struct luna_selector *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->n; i++)
        req_clear(&sel->reqs[i]);
    free(sel->reqs);
    free(sel);
}

bool luna_selector_empty(const struct luna_selector *sel)
{
    return !sel || sel->n == 0;
}

static bool has_value(const struct luna_selector_req *r, const char *v)
{
    for (size_t i = 0; i < r->nvalues; i++)
        if (strcmp(r->values[i], v) == 0)
            return true;
    return false;
}

static bool req_matches(const struct luna_selector_req *r, const char *v)
{
    switch (r->op) {
    case LUNA_SEL_EXISTS:     return v != NULL;
    case LUNA_SEL_NOT_EXISTS: return v == NULL;
    case LUNA_SEL_EQUALS:
    case LUNA_SEL_IN:         return v && has_value(r, v);
    case LUNA_SEL_NOT_EQUALS:
    case LUNA_SEL_NOT_IN:     return !v || !has_value(r, v);
    case LUNA_SEL_GT:
    case LUNA_SEL_LT: {
        if (!v || !is_integer(v))
            return false;
        long long have = strtoll(v, NULL, 10), want = strtoll(r->values[0], NULL, 10);
        return r->op == LUNA_SEL_GT ? have > want : have < want;
    }
    }
    return false;
}

bool luna_selector_matches(const struct luna_selector *sel, luna_selector_lookup lookup,
                           void *ud)
{
    if (!sel)
        return true;
    for (size_t i = 0; i < sel->n; i++)
        if (!req_matches(&sel->reqs[i], lookup(sel->reqs[i].key, ud)))
            return false;
    return true;
}

struct out {
    char *buf;
    size_t size, len;
};

static void put(struct out *o, const char *s)
{
    size_t n = strlen(s);
    if (o->len + 1 < o->size) {
        size_t room = o->size - o->len - 1;
        memcpy(o->buf + o->len, s, n < room ? n : room);
        o->buf[o->len + (n < room ? n : room)] = '\0';
    }
    o->len += n;
}

size_t luna_selector_format(const struct luna_selector *sel, char *buf, size_t size)
{
    struct out o = { buf, size, 0 };
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; sel && i < sel->n; i++) {
        const struct luna_selector_req *r = &sel->reqs[i];
        if (i)
            put(&o, ",");
        if (r->op == LUNA_SEL_NOT_EXISTS)
            put(&o, "!");
        put(&o, r->key);
        switch (r->op) {
        case LUNA_SEL_EXISTS:
        case LUNA_SEL_NOT_EXISTS: break;
        case LUNA_SEL_EQUALS:     put(&o, "="); put(&o, r->values[0]); break;
        case LUNA_SEL_NOT_EQUALS: put(&o, "!="); put(&o, r->values[0]); break;
        case LUNA_SEL_GT:         put(&o, ">"); put(&o, r->values[0]); break;
        case LUNA_SEL_LT:         put(&o, "<"); put(&o, r->values[0]); break;
        case LUNA_SEL_IN:
        case LUNA_SEL_NOT_IN:
            put(&o, r->op == LUNA_SEL_IN ? " in (" : " notin (");
            for (size_t j = 0; j < r->nvalues; j++) {
                if (j)
                    put(&o, ",");
                put(&o, r->values[j]);
            }
            put(&o, ")");
            break;
        }
    }
    return o.len;
}
