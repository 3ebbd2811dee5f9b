/* devserver_yaml.c — see devserver_yaml.h. */
#include "devserver/devserver_yaml.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define MAX_DEPTH 200
/* Aliases expand to copies, so a few hundred bytes of nested aliases
 * ("billion laughs") would expand to gigabytes.  As go-yaml does for
 * kube-apiserver, a document may copy through aliases at most this many
 * values, or as many as it writes out itself when that is more. */
#define MAX_ALIASED_FLOOR 10000

struct anchor {
    char *name;
    json_t *value;
    size_t nodes;   /* values in it (itself included) */
    int height;     /* nesting below it: 0 for a scalar */
};

struct loader {
    yaml_parser_t parser;
    struct anchor *anchors;
    size_t nanchors;
    size_t nodes;   /* values read from the text */
    size_t aliased; /* values copied through aliases */
    luna_error *err;
};

static int fail(struct loader *ld, const char *what)
{
    return luna_error_set(ld->err, LUNA_EPROTO, "yaml: %s at line %zu", what,
                          ld->parser.problem_mark.line + 1);
}

/* Counts the values in v and its nesting height (v's height is bounded
 * by MAX_DEPTH, so the recursion is). */
static void measure(const json_t *v, size_t *nodes, int *height)
{
    size_t n = 1;
    int h = 0;
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            size_t cn;
            int ch;
            measure(e, &cn, &ch);
            n += cn;
            if (ch + 1 > h)
                h = ch + 1;
        }
    } else if (json_is_object(v)) {
        const char *k;
        json_t *e;
        json_object_foreach((json_t *)v, k, e) {
            size_t cn;
            int ch;
            measure(e, &cn, &ch);
            n += cn;
            if (ch + 1 > h)
                h = ch + 1;
        }
    }
    *nodes = n;
    *height = h;
}

static void remember(struct loader *ld, const yaml_char_t *anchor, json_t *v)
{
    if (!anchor)
        return;
    struct anchor *a = realloc(ld->anchors, (ld->nanchors + 1) * sizeof *a);
    if (!a)
        return;
    ld->anchors = a;
    /* Out of memory the anchor is forgotten: its aliases then fail as unknown. */
    char *name = strdup((const char *)anchor);
    if (!name)
        return;
    a[ld->nanchors].name = name;
    a[ld->nanchors].value = json_incref(v);
    measure(v, &a[ld->nanchors].nodes, &a[ld->nanchors].height);
    ld->nanchors++;
}

static json_t *plain_scalar(const char *s, size_t len)
{
    if (len == 0 || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0)
        return json_null();
    if (strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0 || strcasecmp(s, "on") == 0)
        return json_true();
    if (strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0 || strcasecmp(s, "off") == 0)
        return json_false();
    char *end;
    errno = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
        long long v = strtoll(s + 2, &end, s[1] == 'x' ? 16 : 8);
        if (*end == '\0' && end != s + 2 && errno == 0)
            return json_integer(v);
        return json_stringn(s, len);
    }
    long long iv = strtoll(s, &end, 10);
    if (*end == '\0' && errno == 0 && strspn(s, "+-0123456789") == len)
        return json_integer(iv);
    if (strspn(s, "+-0123456789.eE") == len && strpbrk(s, "0123456789")) {
        errno = 0;
        double d = strtod(s, &end);
        if (*end == '\0' && errno == 0)
            return json_real(d);
    }
    if (strcasecmp(s, ".inf") == 0 || strcasecmp(s, ".nan") == 0 ||
        strcasecmp(s, "-.inf") == 0)
        return json_stringn(s, len); /* JSON has no such numbers */
    return json_stringn(s, len);
}

static int load_node(struct loader *ld, yaml_event_t *ev, json_t **out, int depth);

static int next_event(struct loader *ld, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&ld->parser, ev))
        return luna_error_set(ld->err, LUNA_EPROTO, "yaml: %s at line %zu",
                              ld->parser.problem ? ld->parser.problem : "syntax error",
                              ld->parser.problem_mark.line + 1);
    return 0;
}

static int load_mapping(struct loader *ld, json_t *obj, int depth)
{
    for (;;) {
        yaml_event_t kev;
        if (next_event(ld, &kev) < 0)
            return LUNA_EPROTO;
        if (kev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&kev);
            return 0;
        }
        json_t *key = NULL;
        int rc = load_node(ld, &kev, &key, depth + 1);
        yaml_event_delete(&kev);
        if (rc < 0)
            return rc;
        yaml_event_t vev;
        if (next_event(ld, &vev) < 0) {
            json_decref(key);
            return LUNA_EPROTO;
        }
        json_t *val = NULL;
        rc = load_node(ld, &vev, &val, depth + 1);
        yaml_event_delete(&vev);
        if (rc < 0) {
            json_decref(key);
            return rc;
        }
        char numbuf[64];
        const char *k;
        if (json_is_string(key))
            k = json_string_value(key);
        else if (json_is_integer(key)) {
            snprintf(numbuf, sizeof numbuf, "%lld", (long long)json_integer_value(key));
            k = numbuf;
        } else if (json_is_true(key))
            k = "true";
        else if (json_is_false(key))
            k = "false";
        else if (json_is_null(key))
            k = "null";
        else {
            json_decref(key);
            json_decref(val);
            return fail(ld, "mapping key must be a scalar");
        }
        if (strcmp(k, "<<") == 0 && json_is_object(val)) {
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv)
                if (!json_object_get(obj, mk))
                    json_object_set(obj, mk, mv);
            json_decref(val);
        } else {
            json_object_set_new(obj, k, val);
        }
        json_decref(key);
    }
}

static int load_sequence(struct loader *ld, json_t *arr, int depth)
{
    for (;;) {
        yaml_event_t ev;
        if (next_event(ld, &ev) < 0)
            return LUNA_EPROTO;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        json_t *v = NULL;
        int rc = load_node(ld, &ev, &v, depth + 1);
        yaml_event_delete(&ev);
        if (rc < 0)
            return rc;
        json_array_append_new(arr, v);
    }
}

static int load_node(struct loader *ld, yaml_event_t *ev, json_t **out, int depth)
{
    if (depth > MAX_DEPTH)
        return fail(ld, "document nested too deeply");
    if (ev->type != YAML_ALIAS_EVENT)
        ld->nodes++;
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        const char *s = (const char *)ev->data.scalar.value;
        size_t len = ev->data.scalar.length;
        const char *tag = (const char *)ev->data.scalar.tag;
        if (tag && strcmp(tag, YAML_STR_TAG) == 0)
            *out = json_stringn(s, len);
        else if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
            *out = plain_scalar(s, len);
        else
            *out = json_stringn(s, len);
        if (!*out)
            return fail(ld, "invalid UTF-8 in scalar");
        remember(ld, ev->data.scalar.anchor, *out);
        return 0;
    }
    case YAML_SEQUENCE_START_EVENT: {
        json_t *arr = json_array();
        int rc = load_sequence(ld, arr, depth);
        if (rc < 0) {
            json_decref(arr);
            return rc;
        }
        remember(ld, ev->data.sequence_start.anchor, arr);
        *out = arr;
        return 0;
    }
    case YAML_MAPPING_START_EVENT: {
        json_t *obj = json_object();
        int rc = load_mapping(ld, obj, depth);
        if (rc < 0) {
            json_decref(obj);
            return rc;
        }
        remember(ld, ev->data.mapping_start.anchor, obj);
        *out = obj;
        return 0;
    }
    case YAML_ALIAS_EVENT:
        for (size_t i = ld->nanchors; i-- > 0;)
            if (strcmp(ld->anchors[i].name, (const char *)ev->data.alias.anchor) == 0) {
                const struct anchor *a = &ld->anchors[i];
                if (depth + a->height > MAX_DEPTH)
                    return fail(ld, "document nested too deeply");
                ld->aliased += a->nodes;
                if (ld->aliased > MAX_ALIASED_FLOOR && ld->aliased > ld->nodes)
                    return fail(ld, "document contains excessive aliasing");
                if (!(*out = json_deep_copy(a->value)))
                    return luna_error_set(ld->err, LUNA_ENOMEM, "yaml: out of memory");
                return 0;
            }
        return fail(ld, "unknown alias");
    default:
        return fail(ld, "unexpected event");
    }
}

json_t *luna_ds_yaml_load(const char *buf, size_t len, luna_error *err)
{
    struct loader ld = { .err = err };
    if (!yaml_parser_initialize(&ld.parser)) {
        luna_error_set(err, LUNA_ENOMEM, "yaml: cannot initialize parser");
        return NULL;
    }
    yaml_parser_set_input_string(&ld.parser, (const unsigned char *)buf, len);
    json_t *docs = json_array();
    int rc = 0;
    for (;;) {
        yaml_event_t ev;
        if ((rc = next_event(&ld, &ev)) < 0)
            break;
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (t == YAML_DOCUMENT_START_EVENT) {
            yaml_event_delete(&ev);
            yaml_event_t root;
            if ((rc = next_event(&ld, &root)) < 0)
                break;
            json_t *v = NULL;
            rc = load_node(&ld, &root, &v, 0);
            yaml_event_delete(&root);
            if (rc < 0)
                break;
            if (!json_is_null(v))
                json_array_append_new(docs, v);
            else
                json_decref(v);
            continue;
        }
        yaml_event_delete(&ev);
    }
    for (size_t i = 0; i < ld.nanchors; i++) {
        free(ld.anchors[i].name);
        json_decref(ld.anchors[i].value);
    }
    free(ld.anchors);
    yaml_parser_delete(&ld.parser);
    if (rc < 0) {
        json_decref(docs);
        return NULL;
    }
    return docs;
}
