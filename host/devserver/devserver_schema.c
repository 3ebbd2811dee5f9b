/* devserver_schema.c — see devserver_schema.h. */
#include "devserver/devserver_schema.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR(off) (luna_ds_sch_strings + (off))

static const luna_ds_sch_kind *kind_of(const luna_ds_type *t)
{
    for (size_t i = 0; i < luna_ds_sch_n_kinds; i++)
        if (strcmp(STR(luna_ds_sch_kinds[i].kind), t->kind) == 0 &&
            strcmp(STR(luna_ds_sch_kinds[i].api_version), t->api_version) == 0)
            return &luna_ds_sch_kinds[i];
    return NULL;
}

static const luna_ds_sch_field *field_named(const luna_ds_sch_struct *s, const char *key)
{
    const luna_ds_sch_field *f = &luna_ds_sch_fields[s->first];
    for (size_t i = 0; i < s->n_fields; i++)
        if (strcmp(STR(f[i].json), key) == 0)
            return &f[i];
    return NULL;
}

/* ---- decoding: Go's encoding/json (as sigs.k8s.io/json) ---- */

/* One decode walk: the path as Go's decoder names it (JSON names joined
 * with '.', no list index or map key) and the first error's text. */
struct dec {
    char path[1024];
    char err[1200];
};

/* How Go's UnmarshalTypeError names a JSON value. */
static const char *value_word(const json_t *v, char *buf, size_t size)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_TRUE:
    case JSON_FALSE: return "bool";
    default: break;
    }
    (void)buf;
    (void)size;
    return "number";
}

/* "number 1.5": a number that does not fit an integer type. */
static const char *number_word(const json_t *v, char *buf, size_t size)
{
    if (json_is_integer(v))
        snprintf(buf, size, "number %lld", (long long)json_integer_value(v));
    else
        snprintf(buf, size, "number %.17g", json_real_value(v));
    return buf;
}

static bool fits_int(const json_t *v, bool is32)
{
    if (!json_is_integer(v))
        return false;
    long long n = json_integer_value(v);
    return !is32 || (n >= INT32_MIN && n <= INT32_MAX);
}

static void type_error(struct dec *d, const char *what, const char *sname, const char *go_type)
{
    if (!d->err[0])
        snprintf(d->err, sizeof d->err, "json: cannot unmarshal %s into Go struct field %s.%s "
                 "of type %s", what, sname, d->path, go_type);
}

static void dec_struct(struct dec *d, int s, const json_t *obj);

/* One value v (an element when elem) of field f of struct sname at
 * d->path. */
static void dec_value(struct dec *d, const luna_ds_sch_field *f, const char *sname,
                      const json_t *v)
{
    char nb[64];
    if (json_is_null(v) || d->err[0])
        return;
    switch (f->type) {
    case LUNA_SCH_STRING:
        if (!json_is_string(v))
            type_error(d, value_word(v, nb, sizeof nb), sname, STR(f->go_type));
        return;
    case LUNA_SCH_BOOL:
        if (!json_is_boolean(v))
            type_error(d, value_word(v, nb, sizeof nb), sname, STR(f->go_type));
        return;
    case LUNA_SCH_INT32:
    case LUNA_SCH_INT64:
        if (!json_is_number(v))
            type_error(d, value_word(v, nb, sizeof nb), sname, STR(f->go_type));
        else if (!fits_int(v, f->type == LUNA_SCH_INT32))
            type_error(d, number_word(v, nb, sizeof nb), sname, STR(f->go_type));
        return;
    case LUNA_SCH_FLOAT:
        if (!json_is_number(v))
            type_error(d, value_word(v, nb, sizeof nb), sname, STR(f->go_type));
        return;
    case LUNA_SCH_BYTES:
        if (!json_is_string(v))
            type_error(d, value_word(v, nb, sizeof nb), sname, STR(f->go_type));
        return;
    case LUNA_SCH_STRUCT:
        if (!json_is_object(v))
            type_error(d, value_word(v, nb, sizeof nb), sname, STR(f->go_type));
        else if (f->ref >= 0)
            dec_struct(d, f->ref, v);
        return;
    case LUNA_SCH_TIME:
        /* Time.UnmarshalJSON decodes a string first; Go's decoder names
         * the field its error came from */
        if (!json_is_string(v))
            type_error(d, value_word(v, nb, sizeof nb), sname, "string");
        return;
    case LUNA_SCH_INTORSTRING:
        /* IntOrString.UnmarshalJSON: a string, else an int32 */
        if (json_is_string(v))
            return;
        if (!json_is_number(v))
            type_error(d, value_word(v, nb, sizeof nb), sname, "int32");
        else if (!fits_int(v, true))
            type_error(d, number_word(v, nb, sizeof nb), sname, "int32");
        return;
    case LUNA_SCH_QUANTITY:
        /* Quantity.UnmarshalJSON parses what is not a string as a quantity */
        if (!json_is_string(v) && !json_is_number(v))
            snprintf(d->err, sizeof d->err, "quantities must match the regular expression "
                     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
        return;
    default:
        return;
    }
}

static void dec_struct(struct dec *d, int s, const json_t *obj)
{
    const luna_ds_sch_struct *st = &luna_ds_sch_structs[s];
    size_t len = strlen(d->path);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        const luna_ds_sch_field *f = field_named(st, key);
        if (!f || json_is_null(v))
            continue;
        int n = snprintf(d->path + len, sizeof d->path - len, len ? ".%s" : "%s", key);
        if (n < 0 || (size_t)n >= sizeof d->path - len) {
            d->path[len] = '\0';
            continue;
        }
        char gt[300];
        if (f->flags & LUNA_SCH_F_LIST) {
            if (!json_is_array(v)) {
                snprintf(gt, sizeof gt, "[]%s", STR(f->go_type));
                char nb[64];
                type_error(d, value_word(v, nb, sizeof nb), STR(st->go_name), gt);
            } else {
                size_t i;
                json_t *e;
                json_array_foreach(v, i, e)
                    dec_value(d, f, STR(st->go_name), e);
            }
        } else if (f->flags & LUNA_SCH_F_MAP) {
            if (!json_is_object(v)) {
                snprintf(gt, sizeof gt, "map[string]%s", STR(f->go_type));
                char nb[64];
                type_error(d, value_word(v, nb, sizeof nb), STR(st->go_name), gt);
            } else {
                const char *k;
                json_t *e;
                json_object_foreach(v, k, e)
                    dec_value(d, f, STR(st->go_name), e);
            }
        } else {
            dec_value(d, f, STR(st->go_name), v);
        }
        d->path[len] = '\0';
        if (d->err[0])
            return;
    }
}

int luna_ds_schema_zero_status(const luna_ds_type *t, json_t **out)
{
    *out = NULL;
    const luna_ds_sch_kind *k = kind_of(t);
    if (!k || !k->zero_status)
        return 0;
    /* generated text that parses: only memory can fail it */
    *out = json_loads(STR(k->zero_status), 0, NULL);
    return *out ? 0 : LUNA_ENOMEM;
}

int luna_ds_schema_decode(const luna_ds_type *t, const json_t *doc, int patch,
                          luna_ds_status *st)
{
    const luna_ds_sch_kind *k = kind_of(t);
    if (!k || !json_is_object(doc))
        return 0;
    struct dec d = { .path = "", .err = "" };
    dec_struct(&d, k->root, doc);
    if (!d.err[0])
        return 0;
    if (!patch)
        return luna_ds_status_bad_request(st, "%s in version \"%s\" cannot be handled as a %s: %s",
                                          t->kind, t->version, t->kind, d.err);
    /* kube's patcher: the patched object as the invalid value */
    char *js = json_dumps(doc, JSON_COMPACT);
    int rc = luna_ds_status_invalid(st, "", "", "", "FieldValueInvalid", "patch",
                                    "Invalid value: \"%.300s\": %s", js ? js : "", d.err);
    free(js);
    return rc;
}

/* ---- defaults and validation ---- */

struct val {
    char path[1024];   /* kube's field path: '.', [index], [key] */
    json_t *causes;
    bool oom;
};

static void add_cause(struct val *w, const char *reason, const char *message)
{
    json_t *c = json_pack("{s:s,s:s,s:s}", "reason", reason, "message", message, "field",
                          w->path);
    if (!c || json_array_append_new(w->causes, c) < 0)
        w->oom = true;
}

/* Go's %q of s, into buf. */
static void go_quote(char *buf, size_t size, const char *s)
{
    size_t o = 0;
    buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 8 < size; p++) {
        if (*p == '"' || *p == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)*p;
        } else if (*p < 0x20 || *p == 0x7f) {
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", *p);
        } else {
            buf[o++] = (char)*p;
        }
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

static bool push(struct val *w, size_t len, const char *fmt, const char *a)
{
    int n = snprintf(w->path + len, sizeof w->path - len, fmt, a);
    if (n < 0 || (size_t)n >= sizeof w->path - len) {
        w->path[len] = '\0';
        return false;
    }
    return true;
}

/* field.NotSupported(path, v, enum) */
static void check_enum(struct val *w, const luna_ds_sch_field *f, const json_t *v)
{
    if (f->enum_idx < 0 || !json_is_string(v) || json_string_length(v) == 0)
        return; /* "" is the zero value kube's defaulters fill */
    const luna_ds_sch_enum *e = &luna_ds_sch_enums[f->enum_idx];
    const char *s = json_string_value(v);
    const uint32_t *vals = &luna_ds_sch_enum_values[e->first];
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(STR(vals[i]), s) == 0)
            return;
    char msg[2048], q[300];
    go_quote(q, sizeof q, s);
    size_t o = (size_t)snprintf(msg, sizeof msg, "Unsupported value: %s: supported values: ", q);
    for (size_t i = 0; i < e->n && o < sizeof msg; i++) {
        go_quote(q, sizeof q, STR(vals[i]));
        o += (size_t)snprintf(msg + o, sizeof msg - o, "%s%s", i ? ", " : "", q);
    }
    add_cause(w, "FieldValueNotSupported", msg);
}

static void val_struct(struct val *w, int s, json_t *obj, bool top);

/* An absent or null field f (its key pushed on w->path) of a present
 * object: its default, or "Required value". */
static void absent(struct val *w, const luna_ds_sch_field *f, json_t *obj)
{
    if (f->def) {
        json_t *v = json_loads(STR(f->def), JSON_DECODE_ANY, NULL);
        if (!v || json_object_set_new(obj, STR(f->json), v) < 0)
            w->oom = true;
        return;
    }
    if (!(f->flags & LUNA_SCH_F_REQUIRED))
        return;
    bool list = f->flags & (LUNA_SCH_F_LIST | LUNA_SCH_F_MAP);
    if (!list && f->type == LUNA_SCH_STRUCT && !(f->flags & LUNA_SCH_F_POINTER)) {
        /* the zero struct: kube validates what it holds */
        json_t *zero = json_object();
        if (!zero) {
            w->oom = true;
            return;
        }
        if (f->ref >= 0)
            val_struct(w, f->ref, zero, false);
        json_decref(zero);
        return;
    }
    if (!list && (f->type == LUNA_SCH_INT32 || f->type == LUNA_SCH_INT64 ||
                  f->type == LUNA_SCH_FLOAT || f->type == LUNA_SCH_BOOL))
        return; /* 0 and false are values kube takes */
    add_cause(w, "FieldValueRequired", "Required value");
}

static void val_struct(struct val *w, int s, json_t *obj, bool top)
{
    const luna_ds_sch_struct *st = &luna_ds_sch_structs[s];
    size_t len = strlen(w->path);
    for (size_t i = 0; i < st->n_fields && !w->oom; i++) {
        const luna_ds_sch_field *f = &luna_ds_sch_fields[st->first + i];
        const char *name = STR(f->json);
        /* metadata: devserver_validate.c; status: reset by kube on writes */
        if (top && (strcmp(name, "metadata") == 0 || strcmp(name, "status") == 0))
            continue;
        if (!push(w, len, len ? ".%s" : "%s", name))
            continue;
        json_t *v = json_object_get(obj, name);
        bool empty = !v || json_is_null(v) || (json_is_string(v) && !json_string_length(v) &&
                                               f->type != LUNA_SCH_BYTES) ||
                     (json_is_array(v) && json_array_size(v) == 0 && (f->flags & LUNA_SCH_F_LIST)) ||
                     (json_is_object(v) && json_object_size(v) == 0 && (f->flags & LUNA_SCH_F_MAP));
        if (empty) {
            absent(w, f, obj);
        } else if (f->flags & LUNA_SCH_F_LIST) {
            size_t j;
            json_t *e;
            size_t l2 = strlen(w->path);
            json_array_foreach(v, j, e) {
                char idx[24];
                snprintf(idx, sizeof idx, "%zu", j);
                if (!push(w, l2, "[%s]", idx))
                    continue;
                if (f->type == LUNA_SCH_STRUCT && f->ref >= 0 && json_is_object(e))
                    val_struct(w, f->ref, e, false);
                else
                    check_enum(w, f, e);
                w->path[l2] = '\0';
            }
        } else if (f->flags & LUNA_SCH_F_MAP) {
            const char *k;
            json_t *e;
            size_t l2 = strlen(w->path);
            json_object_foreach(v, k, e) {
                if (!push(w, l2, "[%s]", k))
                    continue;
                if (f->type == LUNA_SCH_STRUCT && f->ref >= 0 && json_is_object(e))
                    val_struct(w, f->ref, e, false);
                w->path[l2] = '\0';
            }
        } else if (f->type == LUNA_SCH_STRUCT && f->ref >= 0 && json_is_object(v)) {
            val_struct(w, f->ref, v, false);
        } else {
            check_enum(w, f, v);
        }
        w->path[len] = '\0';
    }
}

/* The value at path (fields joined with '.') of doc, or NULL. */
static const json_t *at_path(const json_t *doc, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *v = doc;
    for (char *save = NULL, *p = strtok_r(buf, ".", &save); p && v;
         p = strtok_r(NULL, ".", &save))
        v = json_object_get(v, p);
    return v;
}

/* Absent, null, "", {} and [] are one value to kube's Go comparison of a
 * field left empty. */
static bool blank(const json_t *v)
{
    return !v || json_is_null(v) || (json_is_string(v) && !json_string_length(v)) ||
           (json_is_object(v) && !json_object_size(v)) || (json_is_array(v) && !json_array_size(v));
}

static bool same(const json_t *a, const json_t *b)
{
    if (blank(a) || blank(b))
        return blank(a) && blank(b);
    return json_equal(a, b);
}

/* An internal struct of string fields as json.Marshal prints it: every
 * field, keyed by its Go name (names: "json:Go,..."), "" when absent. */
static void go_struct(char *buf, size_t size, const char *names, const json_t *v)
{
    size_t o = 0;
    buf[o++] = '{';
    for (const char *p = names; *p && o + 1 < size;) {
        size_t jn = strcspn(p, ":"), gn = strcspn(p + jn + 1, ",");
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)jn, p);
        json_t *f = json_object_get(v, key);
        char *js = json_is_string(f) ? json_dumps(f, JSON_ENCODE_ANY) : NULL;
        int n = snprintf(buf + o, size - o, "%s\"%.*s\":%s", o > 1 ? "," : "", (int)gn,
                         p + jn + 1, js ? js : "\"\"");
        free(js);
        o += n > 0 ? (size_t)n : 0;
        p += jn + 1 + gn;
        if (*p == ',')
            p++;
    }
    if (o + 2 <= size) {
        buf[o++] = '}';
        buf[o] = '\0';
    } else {
        buf[size - 1] = '\0';
    }
}

/* field.Invalid(path, new, "field is immutable"), the value shown as
 * im says. */
static void changed(struct val *w, const luna_ds_sch_immutable *im, const json_t *nv)
{
    char msg[1400], q[1100];
    if (im->show == LUNA_SCH_SHOW_NULL) {
        snprintf(q, sizeof q, "null");
    } else if (im->show == LUNA_SCH_SHOW_GO) {
        go_struct(q, sizeof q, im->go_names, nv);
    } else if (json_is_string(nv)) {
        go_quote(q, sizeof q, json_string_value(nv));
    } else if (blank(nv)) {
        snprintf(q, sizeof q, "null");
    } else {
        char *js = json_dumps(nv, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        snprintf(q, sizeof q, "%s", js ? js : "");
        free(js);
    }
    snprintf(msg, sizeof msg, "Invalid value: %s: field is immutable", q);
    add_cause(w, "FieldValueInvalid", msg);
}

/* The immutable fields of t: what an update changed. */
static void immutables(struct val *w, const luna_ds_type *t, const json_t *doc, const json_t *old)
{
    bool locked = json_is_true(json_object_get(old, "immutable"));
    for (size_t i = 0; i < luna_ds_sch_n_immutables && !w->oom; i++) {
        const luna_ds_sch_immutable *im = &luna_ds_sch_immutables[i];
        if (strcmp(im->group, t->group) != 0 || strcmp(im->kind, t->kind) != 0)
            continue;
        const json_t *nv = at_path(doc, im->path), *ov = at_path(old, im->path);
        json_t *dflt = NULL; /* kube's defaulting runs before its validation */
        if (*im->absent_as && blank(nv))
            nv = dflt = json_string(im->absent_as);
        if (*im->absent_as && blank(ov))
            ov = dflt ? dflt : (dflt = json_string(im->absent_as));
        snprintf(w->path, sizeof w->path, "%s", im->path);
        if (im->how == LUNA_SCH_LOCKED) {
            if (locked && !same(nv, ov))
                add_cause(w, "FieldValueForbidden",
                          "Forbidden: field is immutable when `immutable` is set");
        } else if (!same(nv, ov)) {
            changed(w, im, nv);
        }
        json_decref(dflt);
    }
    w->path[0] = '\0';
}

int luna_ds_schema_validate(const luna_ds_type *t, json_t *doc, const json_t *old,
                            json_t *causes)
{
    const luna_ds_sch_kind *k = kind_of(t);
    /* a CRD's spec is checked, with kube's messages, by
     * luna_ds_types_crd_validate */
    if (!k || !json_is_object(doc) || strcmp(t->group, "apiextensions.k8s.io") == 0)
        return 0;
    struct val w = { .path = "", .causes = causes };
    if (old)
        immutables(&w, t, doc, old);
    if (!w.oom)
        val_struct(&w, k->root, doc, true);
    return w.oom ? -1 : 0;
}
