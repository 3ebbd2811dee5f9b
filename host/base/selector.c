/* selector.c — see selector.h. */
#include "base/selector.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 63
#define PREFIX_MAX_LEN 253

#define ALNUM_RULE "consist of alphanumeric characters, '-', '_' or '.', and must start and " \
                   "end with an alphanumeric character"

struct parser {
    const char *text;  /* the whole selector, for messages */
    const char *p;
    struct luna_selector *sel;
    luna_error *err;
};

static int oom(struct parser *ps)
{
    return luna_error_set(ps->err, LUNA_ENOMEM, "out of memory");
}

static void skip_blanks(struct parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t')
        ps->p++;
}

/* ---- validation (k8s.io/apimachinery/pkg/util/validation) ---- */

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 characters. */
static bool valid_name(const char *s, size_t len)
{
    if (len == 0 || len > NAME_MAX_LEN || !isalnum((unsigned char)s[0]) ||
        !isalnum((unsigned char)s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i]))
            return false;
    return true;
}

static bool is_lower_alnum(char c)
{
    return islower((unsigned char)c) || isdigit((unsigned char)c);
}

/* Dot-separated labels of [a-z0-9-], each 1..63 long and alphanumeric at
 * both ends; at most 253 characters. */
static bool valid_dns_subdomain(const char *s, size_t len)
{
    if (len == 0 || len > PREFIX_MAX_LEN)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.') {
            if (!is_lower_alnum(s[i]) && s[i] != '-')
                return false;
            continue;
        }
        size_t n = i - start;
        if (n == 0 || n > NAME_MAX_LEN || !is_lower_alnum(s[start]) ||
            !is_lower_alnum(s[i - 1]))
            return false;
        start = i + 1;
    }
    return true;
}

static bool valid_key(const char *k, size_t len)
{
    const char *slash = memchr(k, '/', len);
    if (!slash)
        return valid_name(k, len);
    size_t plen = (size_t)(slash - k);
    return valid_dns_subdomain(k, plen) && valid_name(slash + 1, len - plen - 1);
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

/* ---- building a selector ---- */

static struct luna_selector_req *new_req(struct parser *ps)
{
    struct luna_selector *sel = ps->sel;
    struct luna_selector_req *reqs = realloc(sel->reqs, (sel->n + 1) * sizeof *reqs);
    if (!reqs)
        return NULL;
    sel->reqs = reqs;
    memset(&reqs[sel->n], 0, sizeof *reqs);
    return &reqs[sel->n++];
}

/* Adds the value, unescaping field-selector backslashes when `unescape`. */
static int add_value(struct parser *ps, struct luna_selector_req *r, const char *v, size_t len,
                     bool unescape)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return oom(ps);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (unescape && v[i] == '\\' && i + 1 < len)
            i++;
        copy[n++] = v[i];
    }
    copy[n] = '\0';
    for (size_t i = 0; i < r->nvalues; i++) {
        if (strcmp(r->values[i], copy) == 0) {
            free(copy);
            return 0;
        }
    }
    char **values = realloc(r->values, (r->nvalues + 1) * sizeof *values);
    if (!values) {
        free(copy);
        return oom(ps);
    }
    r->values = values;
    r->values[r->nvalues++] = copy;
    return 0;
}

/* ---- label selectors ---- */

static bool is_ident_char(char c)
{
    return c && !strchr(" \t,()=!<>", c);
}

/* Reads an identifier (key or value) after blanks; returns its length. */
static size_t ident(struct parser *ps, const char **start)
{
    skip_blanks(ps);
    *start = ps->p;
    while (is_ident_char(*ps->p))
        ps->p++;
    return (size_t)(ps->p - *start);
}

static int unexpected(struct parser *ps, const char *expected)
{
    return luna_error_set(ps->err, LUNA_EINVAL,
                          "unable to parse requirement: found unexpected token, expected%s in "
                          "selector %s",
                          expected, ps->text);
}

/* Reads value number `index` of r. */
static int label_value(struct parser *ps, struct luna_selector_req *r, int index)
{
    const char *v;
    size_t len = ident(ps, &v);
    if (len && !valid_name(v, len))
        return luna_error_set(ps->err, LUNA_EINVAL,
                              "unable to parse requirement: values[%d][%s]: Invalid value: "
                              "\"%.*s\": a valid label must be an empty string or " ALNUM_RULE,
                              index, r->key, (int)len, v);
    return add_value(ps, r, v, len, false);
}

static int label_requirement(struct parser *ps, struct luna_selector_req *r)
{
    skip_blanks(ps);
    bool negated = *ps->p == '!';
    if (negated)
        ps->p++;
    const char *k;
    size_t klen = ident(ps, &k);
    if (klen == 0)
        return unexpected(ps, " identifier");
    if (!valid_key(k, klen))
        return luna_error_set(ps->err, LUNA_EINVAL,
                              "unable to parse requirement: key: Invalid value: \"%.*s\": name "
                              "part must " ALNUM_RULE,
                              (int)klen, k);
    if (!(r->key = strndup(k, klen)))
        return oom(ps);
    skip_blanks(ps);
    char c = *ps->p;
    if (negated) {
        r->op = LUNA_SEL_NOT_EXISTS;
        return 0;
    }
    if (c == '\0' || c == ',') {
        r->op = LUNA_SEL_EXISTS;
        return 0;
    }
    if (c == '=' || (c == '!' && ps->p[1] == '=')) {
        r->op = c == '=' ? LUNA_SEL_EQUALS : LUNA_SEL_NOT_EQUALS;
        ps->p += (c == '!' || ps->p[1] == '=') ? 2 : 1;
        return label_value(ps, r, 0);
    }
    if (c == '<' || c == '>') {
        r->op = c == '<' ? LUNA_SEL_LT : LUNA_SEL_GT;
        ps->p++;
        const char *v;
        size_t len = ident(ps, &v);
        int rc = add_value(ps, r, v, len, false);
        if (rc == 0 && !is_integer(r->values[0]))
            return luna_error_set(ps->err, LUNA_EINVAL,
                                  "unable to parse requirement: for 'Gt', 'Lt' operators, the "
                                  "value must be an integer");
        return rc;
    }
    const char *w;
    size_t wlen = ident(ps, &w);
    if (wlen == 2 && strncmp(w, "in", 2) == 0)
        r->op = LUNA_SEL_IN;
    else if (wlen == 5 && strncmp(w, "notin", 5) == 0)
        r->op = LUNA_SEL_NOT_IN;
    else
        return unexpected(ps, ": '=', '!=', '==', 'in', notin'");
    skip_blanks(ps);
    if (*ps->p != '(')
        return unexpected(ps, ": '('");
    ps->p++;
    for (int i = 0;; i++) {
        int rc = label_value(ps, r, i);
        if (rc < 0)
            return rc;
        skip_blanks(ps);
        if (*ps->p == ')') {
            ps->p++;
            return 0;
        }
        if (*ps->p != ',')
            return unexpected(ps, " ',' or ')'");
        ps->p++;
    }
}

static int parse_labels(struct parser *ps)
{
    skip_blanks(ps);
    if (!*ps->p)
        return 0;
    for (;;) {
        struct luna_selector_req *r = new_req(ps);
        if (!r)
            return oom(ps);
        int rc = label_requirement(ps, r);
        if (rc < 0)
            return rc;
        skip_blanks(ps);
        if (!*ps->p)
            return 0;
        if (*ps->p++ != ',')
            return unexpected(ps, " ','");
    }
}

/* ---- field selectors ---- */

static bool allowed_path(const char *const *allowed, const char *path)
{
    if (!allowed)
        return true;
    for (; *allowed; allowed++)
        if (strcmp(*allowed, path) == 0)
            return true;
    return false;
}

/* One term [s, end): the operator is the first unescaped "!=", "==" or "=". */
static int field_term(struct parser *ps, const char *s, size_t len, const char *const *allowed)
{
    size_t i = 0, oplen = 0;
    enum luna_selector_op op = LUNA_SEL_EQUALS;
    for (; i < len; i++) {
        if (s[i] == '\\') {
            i++;
        } else if (s[i] == '!' && s[i + 1] == '=') {
            op = LUNA_SEL_NOT_EQUALS;
            oplen = 2;
            break;
        } else if (s[i] == '=') {
            oplen = s[i + 1] == '=' ? 2 : 1;
            break;
        }
    }
    if (oplen == 0)
        return luna_error_set(ps->err, LUNA_EINVAL, "invalid selector: '%s'; can't understand '%.*s'",
                              ps->text, (int)len, s);
    struct luna_selector_req *r = new_req(ps);
    if (!r || !(r->key = strndup(s, i)))
        return oom(ps);
    r->op = op;
    int rc = add_value(ps, r, s + i + oplen, len - i - oplen, true);
    if (rc == 0 && !allowed_path(allowed, r->key))
        return luna_error_set(ps->err, LUNA_EINVAL, "field label not supported: %s", r->key);
    return rc;
}

/* Terms end at an unescaped ','; empty terms are skipped. */
static int parse_fields(struct parser *ps, const char *const *allowed)
{
    const char *s = ps->p;
    while (*s) {
        const char *end = s;
        while (*end && *end != ',')
            end += (end[0] == '\\' && end[1]) ? 2 : 1;
        if (end > s) {
            int rc = field_term(ps, s, (size_t)(end - s), allowed);
            if (rc < 0)
                return rc;
        }
        s = *end ? end + 1 : end;
    }
    return 0;
}

/* ---- parse, free, match ---- */

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

static int parse(const char *text, enum luna_selector_kind kind, const char *const *allowed,
                 struct luna_selector **out, luna_error *err)
{
    *out = NULL;
    struct luna_selector *sel = calloc(1, sizeof *sel);
    if (!sel)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    sel->kind = kind;
    struct parser ps = { text ? text : "", text ? text : "", sel, err };
    int rc = kind == LUNA_SELECTOR_LABELS ? parse_labels(&ps) : parse_fields(&ps, allowed);
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

int luna_selector_parse(const char *text, enum luna_selector_kind kind,
                        struct luna_selector **out, luna_error *err)
{
    return parse(text, kind, NULL, out, err);
}

int luna_selector_parse_fields(const char *text, const char *const *allowed,
                               struct luna_selector **out, luna_error *err)
{
    static const char *const none[] = { NULL };
    return parse(text, LUNA_SELECTOR_FIELDS, allowed ? allowed : none, out, err);
}

void luna_selector_free(struct luna_selector *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->n; i++) {
        struct luna_selector_req *r = &sel->reqs[i];
        free(r->key);
        for (size_t j = 0; j < r->nvalues; j++)
            free(r->values[j]);
        free(r->values);
    }
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
    for (size_t i = 0; i < sel->n; i++) {
        const char *v = lookup(sel->reqs[i].key, ud);
        if (!v && sel->kind == LUNA_SELECTOR_FIELDS)
            v = "";
        if (!req_matches(&sel->reqs[i], v))
            return false;
    }
    return true;
}

/* ---- printing ---- */

struct out {
    char *buf;
    size_t size, len;
};

static void put_char(struct out *o, char c)
{
    if (o->len + 1 < o->size) {
        o->buf[o->len] = c;
        o->buf[o->len + 1] = '\0';
    }
    o->len++;
}

static void put(struct out *o, const char *s)
{
    for (; *s; s++)
        put_char(o, *s);
}

/* A value; in field selectors with `\\` `,` `=` escaped, as fields.EscapeValue
 * does. */
static void put_value(struct out *o, enum luna_selector_kind kind, const char *s)
{
    for (; *s; s++) {
        if (kind == LUNA_SELECTOR_FIELDS && (*s == '\\' || *s == ',' || *s == '='))
            put_char(o, '\\');
        put_char(o, *s);
    }
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
        case LUNA_SEL_EQUALS:     put(&o, "=");  put_value(&o, sel->kind, r->values[0]); break;
        case LUNA_SEL_NOT_EQUALS: put(&o, "!="); put_value(&o, sel->kind, r->values[0]); break;
        case LUNA_SEL_GT:         put(&o, ">");  put(&o, r->values[0]); break;
        case LUNA_SEL_LT:         put(&o, "<");  put(&o, r->values[0]); break;
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
