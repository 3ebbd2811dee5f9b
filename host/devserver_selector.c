/* devserver_selector.c — see devserver_selector.h. */
#include "devserver_selector.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver_store.h"

enum op { OP_EXISTS, OP_NOT_EXISTS, OP_EQ, OP_NEQ, OP_IN, OP_NOTIN, OP_GT, OP_LT };

struct req {
    char *key;
    enum op op;
    char **values;
    int nvalues;
};

struct luna_ds_selector {
    struct req *reqs;
    int n;
};

void luna_ds_selector_free(luna_ds_selector *sel)
{
    if (!sel)
        return;
    for (int i = 0; i < sel->n; i++) {
        free(sel->reqs[i].key);
        for (int j = 0; j < sel->reqs[i].nvalues; j++)
            free(sel->reqs[i].values[j]);
        free(sel->reqs[i].values);
    }
    free(sel->reqs);
    free(sel);
}

static struct req *add_req(luna_ds_selector *sel)
{
    struct req *r = realloc(sel->reqs, (size_t)(sel->n + 1) * sizeof *r);
    if (!r)
        abort();
    sel->reqs = r;
    memset(&r[sel->n], 0, sizeof *r);
    return &r[sel->n++];
}

static void add_value(struct req *r, const char *v, size_t len)
{
    char **vals = realloc(r->values, (size_t)(r->nvalues + 1) * sizeof *vals);
    if (!vals)
        abort();
    r->values = vals;
    r->values[r->nvalues++] = strndup(v, len);
}

/* ---- validation (k8s.io/apimachinery/pkg/util/validation) ---- */

static bool is_alnum(char c) { return isalnum((unsigned char)c) != 0; }

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 characters. */
static bool valid_label_name(const char *s, size_t len)
{
    if (len == 0 || len > 63 || !is_alnum(s[0]) || !is_alnum(s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

static bool valid_dns_subdomain(const char *s, size_t len)
{
    if (len == 0 || len > 253)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || s[i] == '.') {
            size_t n = i - start;
            if (n == 0 || n > 63)
                return false;
            const char *p = s + start;
            if (!(islower((unsigned char)p[0]) || isdigit((unsigned char)p[0])) ||
                !(islower((unsigned char)p[n - 1]) || isdigit((unsigned char)p[n - 1])))
                return false;
            for (size_t j = 0; j < n; j++)
                if (!islower((unsigned char)p[j]) && !isdigit((unsigned char)p[j]) && p[j] != '-')
                    return false;
            start = i + 1;
        }
    }
    return true;
}

static bool valid_key(const char *s, size_t len)
{
    const char *slash = memchr(s, '/', len);
    if (!slash)
        return valid_label_name(s, len);
    size_t plen = (size_t)(slash - s);
    return valid_dns_subdomain(s, plen) && valid_label_name(slash + 1, len - plen - 1);
}

static bool valid_value(const char *s, size_t len)
{
    return len == 0 || valid_label_name(s, len);
}

/* ---- label selector lexer ---- */

struct lexer {
    const char *s;
    size_t pos;
};

static void skip_ws(struct lexer *lx)
{
    while (lx->s[lx->pos] == ' ' || lx->s[lx->pos] == '\t')
        lx->pos++;
}

static bool is_ident_char(char c)
{
    return c && !strchr(" \t,()=!<>", c);
}

/* Reads an identifier (key or value); returns its length (0 if none). */
static size_t ident(struct lexer *lx, const char **start)
{
    skip_ws(lx);
    *start = lx->s + lx->pos;
    size_t n = 0;
    while (is_ident_char(lx->s[lx->pos + n]))
        n++;
    lx->pos += n;
    return n;
}

static int syntax(char *msg, size_t msgsize, const char *what, const char *s)
{
    snprintf(msg, msgsize, "unable to parse requirement: %s in selector %s", what, s);
    return -1;
}

int luna_ds_selector_parse_labels(const char *s, luna_ds_selector **out,
                                  char *msg, size_t msgsize)
{
    *out = NULL;
    if (!s)
        return 0;
    struct lexer lx = { s, 0 };
    skip_ws(&lx);
    if (s[lx.pos] == '\0')
        return 0;
    luna_ds_selector *sel = calloc(1, sizeof *sel);
    if (!sel)
        abort();
    for (;;) {
        skip_ws(&lx);
        struct req *r = add_req(sel);
        bool negate = false;
        if (s[lx.pos] == '!') {
            negate = true;
            lx.pos++;
        }
        const char *k;
        size_t klen = ident(&lx, &k);
        if (klen == 0) {
            luna_ds_selector_free(sel);
            return syntax(msg, msgsize, "found unexpected token, expected identifier", s);
        }
        if (!valid_key(k, klen)) {
            luna_ds_selector_free(sel);
            snprintf(msg, msgsize,
                     "unable to parse requirement: key: Invalid value: \"%.*s\": name part must "
                     "consist of alphanumeric characters, '-', '_' or '.', and must start and "
                     "end with an alphanumeric character",
                     (int)klen, k);
            return -1;
        }
        r->key = strndup(k, klen);
        skip_ws(&lx);
        char c = s[lx.pos];
        if (negate) {
            r->op = OP_NOT_EXISTS;
        } else if (c == '\0' || c == ',') {
            r->op = OP_EXISTS;
        } else if (c == '=' || (c == '!' && s[lx.pos + 1] == '=')) {
            if (c == '!') {
                r->op = OP_NEQ;
                lx.pos += 2;
            } else {
                r->op = OP_EQ;
                lx.pos += s[lx.pos + 1] == '=' ? 2 : 1;
            }
            const char *v;
            size_t vlen = ident(&lx, &v);
            if (!valid_value(v, vlen)) {
                luna_ds_selector_free(sel);
                snprintf(msg, msgsize,
                         "unable to parse requirement: values[0][%s]: Invalid value: \"%.*s\": "
                         "a valid label must be an empty string or consist of alphanumeric "
                         "characters, '-', '_' or '.', and must start and end with an "
                         "alphanumeric character",
                         r->key, (int)vlen, v);
                return -1;
            }
            add_value(r, v, vlen);
        } else if (c == '<' || c == '>') {
            r->op = c == '<' ? OP_LT : OP_GT;
            lx.pos++;
            const char *v;
            size_t vlen = ident(&lx, &v);
            char *end;
            char tmp[64];
            snprintf(tmp, sizeof tmp, "%.*s", (int)vlen, v);
            strtoll(tmp, &end, 10);
            if (vlen == 0 || *end) {
                luna_ds_selector_free(sel);
                snprintf(msg, msgsize,
                         "unable to parse requirement: for 'Gt', 'Lt' operators, the value "
                         "must be an integer");
                return -1;
            }
            add_value(r, v, vlen);
        } else {
            const char *w;
            size_t wlen = ident(&lx, &w);
            if (wlen == 2 && strncmp(w, "in", 2) == 0)
                r->op = OP_IN;
            else if (wlen == 5 && strncmp(w, "notin", 5) == 0)
                r->op = OP_NOTIN;
            else {
                luna_ds_selector_free(sel);
                return syntax(msg, msgsize, "found unexpected token, expected: '=', '!=', "
                              "'==', 'in', notin'", s);
            }
            skip_ws(&lx);
            if (s[lx.pos] != '(') {
                luna_ds_selector_free(sel);
                return syntax(msg, msgsize, "found unexpected token, expected: '('", s);
            }
            lx.pos++;
            for (;;) {
                const char *v;
                size_t vlen = ident(&lx, &v);
                if (!valid_value(v, vlen)) {
                    luna_ds_selector_free(sel);
                    snprintf(msg, msgsize,
                             "unable to parse requirement: values[%d][%s]: Invalid value: "
                             "\"%.*s\": a valid label must be an empty string or consist of "
                             "alphanumeric characters, '-', '_' or '.', and must start and "
                             "end with an alphanumeric character",
                             r->nvalues, r->key, (int)vlen, v);
                    return -1;
                }
                add_value(r, v, vlen);
                skip_ws(&lx);
                if (s[lx.pos] == ',') {
                    lx.pos++;
                    continue;
                }
                if (s[lx.pos] == ')') {
                    lx.pos++;
                    break;
                }
                luna_ds_selector_free(sel);
                return syntax(msg, msgsize, "found unexpected token, expected ',' or ')'", s);
            }
            if (r->nvalues == 1 && r->values[0][0] == '\0' && r->op == OP_IN) {
                /* "k in ()" parses as one empty value, like kube. */
            }
        }
        skip_ws(&lx);
        if (s[lx.pos] == '\0')
            break;
        if (s[lx.pos] != ',') {
            luna_ds_selector_free(sel);
            return syntax(msg, msgsize, "found unexpected token, expected ','", s);
        }
        lx.pos++;
    }
    *out = sel;
    return 0;
}

static bool has_value(const struct req *r, const char *v)
{
    for (int i = 0; i < r->nvalues; i++)
        if (strcmp(r->values[i], v) == 0)
            return true;
    return false;
}

bool luna_ds_selector_match_labels(const luna_ds_selector *sel, const json_t *labels)
{
    if (!sel)
        return true;
    for (int i = 0; i < sel->n; i++) {
        const struct req *r = &sel->reqs[i];
        json_t *jv = labels ? json_object_get(labels, r->key) : NULL;
        const char *v = json_is_string(jv) ? json_string_value(jv) : NULL;
        bool ok;
        switch (r->op) {
        case OP_EXISTS: ok = v != NULL; break;
        case OP_NOT_EXISTS: ok = v == NULL; break;
        case OP_EQ:
        case OP_IN: ok = v && has_value(r, v); break;
        case OP_NEQ:
        case OP_NOTIN: ok = !v || !has_value(r, v); break;
        case OP_GT:
        case OP_LT: {
            if (!v) {
                ok = false;
                break;
            }
            char *end;
            long long lv = strtoll(v, &end, 10);
            if (*end || !*v) {
                ok = false;
                break;
            }
            long long rv = strtoll(r->values[0], NULL, 10);
            ok = r->op == OP_GT ? lv > rv : lv < rv;
            break;
        }
        default: ok = false;
        }
        if (!ok)
            return false;
    }
    return true;
}

/* ---- field selectors ---- */

/* Splits on unescaped `sep`; unescapes "\\," "\\=" "\\\\". */
int luna_ds_selector_parse_fields(const char *s, const char *const *allowed,
                                  luna_ds_selector **out, char *msg, size_t msgsize)
{
    *out = NULL;
    if (!s || !*s)
        return 0;
    luna_ds_selector *sel = calloc(1, sizeof *sel);
    if (!sel)
        abort();
    size_t len = strlen(s);
    char *term = malloc(len + 1);
    size_t pos = 0;
    while (pos <= len) {
        /* one term up to an unescaped ',' */
        size_t t = 0;
        while (pos < len && s[pos] != ',') {
            if (s[pos] == '\\' && pos + 1 < len) {
                term[t++] = s[pos++];
            }
            term[t++] = s[pos++];
        }
        term[t] = '\0';
        pos++;
        if (t == 0)
            continue;
        /* find the operator: the first unescaped "!=", "==" or "=" */
        size_t i = 0;
        enum op op = OP_EQ;
        size_t oplen = 0;
        for (; i < t; i++) {
            if (term[i] == '\\') {
                i++;
                continue;
            }
            if (term[i] == '!' && term[i + 1] == '=') {
                op = OP_NEQ;
                oplen = 2;
                break;
            }
            if (term[i] == '=') {
                op = OP_EQ;
                oplen = term[i + 1] == '=' ? 2 : 1;
                break;
            }
        }
        if (oplen == 0) {
            snprintf(msg, msgsize, "invalid selector: '%s'; can't understand '%s'", s, term);
            free(term);
            luna_ds_selector_free(sel);
            return -1;
        }
        struct req *r = add_req(sel);
        r->key = strndup(term, i);
        r->op = op;
        /* unescape the value */
        const char *v = term + i + oplen;
        char *val = malloc(strlen(v) + 1);
        size_t n = 0;
        for (; *v; v++) {
            if (*v == '\\' && v[1]) {
                v++;
            }
            val[n++] = *v;
        }
        val[n] = '\0';
        add_value(r, val, n);
        free(val);
        bool ok = false;
        for (const char *const *a = allowed; a && *a; a++)
            if (strcmp(*a, r->key) == 0)
                ok = true;
        if (!ok) {
            snprintf(msg, msgsize, "field label not supported: %s", r->key);
            free(term);
            luna_ds_selector_free(sel);
            return -1;
        }
    }
    free(term);
    if (sel->n == 0) {
        luna_ds_selector_free(sel);
        sel = NULL;
    }
    *out = sel;
    return 0;
}

bool luna_ds_selector_match_fields(const luna_ds_selector *sel, luna_ds_field_fn get,
                                   void *ctx)
{
    if (!sel)
        return true;
    for (int i = 0; i < sel->n; i++) {
        const struct req *r = &sel->reqs[i];
        const char *v = get(ctx, r->key);
        if (!v)
            v = "";
        bool eq = strcmp(v, r->values[0]) == 0;
        if ((r->op == OP_EQ) != eq)
            return false;
    }
    return true;
}

bool luna_ds_selector_fields_metadata_only(const luna_ds_selector *sel)
{
    if (!sel)
        return true;
    for (int i = 0; i < sel->n; i++)
        if (strcmp(sel->reqs[i].key, "metadata.name") != 0 &&
            strcmp(sel->reqs[i].key, "metadata.namespace") != 0)
            return false;
    return true;
}

/* ---- filters over stored objects ---- */

struct field_ctx {
    const struct luna_ds_obj *obj;
    json_t *doc;
    char buf[64];
};

static const char *field_of(void *vctx, const char *path)
{
    struct field_ctx *ctx = vctx;
    if (strcmp(path, "metadata.name") == 0)
        return ctx->obj->name;
    if (strcmp(path, "metadata.namespace") == 0)
        return ctx->obj->ns;
    if (!ctx->doc)
        ctx->doc = luna_ds_obj_doc(ctx->obj);
    json_t *v = ctx->doc;
    char part[256];
    const char *p = path;
    while (*p && v) {
        size_t n = strcspn(p, ".");
        if (n >= sizeof part)
            return NULL;
        memcpy(part, p, n);
        part[n] = '\0';
        v = json_object_get(v, part);
        p += n;
        if (*p == '.')
            p++;
    }
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_boolean(v))
        return json_is_true(v) ? "true" : "false";
    if (json_is_integer(v)) {
        snprintf(ctx->buf, sizeof ctx->buf, "%lld", (long long)json_integer_value(v));
        return ctx->buf;
    }
    return NULL;
}

bool luna_ds_filter_match(const luna_ds_filter *f, const struct luna_ds_obj *o)
{
    if (f->ns && *f->ns && strcmp(f->ns, o->ns) != 0)
        return false;
    if (!luna_ds_selector_match_labels(f->labels, o->labels))
        return false;
    if (!f->fields)
        return true;
    struct field_ctx ctx = { .obj = o };
    bool ok = luna_ds_selector_match_fields(f->fields, field_of, &ctx);
    if (ctx.doc)
        json_decref(ctx.doc);
    return ok;
}

bool luna_ds_filter_selects(const luna_ds_filter *f)
{
    return f->labels || f->fields;
}

void luna_ds_filter_clear(luna_ds_filter *f)
{
    free(f->ns);
    luna_ds_selector_free(f->labels);
    luna_ds_selector_free(f->fields);
    f->ns = NULL;
    f->labels = f->fields = NULL;
}
