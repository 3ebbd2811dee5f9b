/* devserver_negotiate.c — see devserver_negotiate.h. */
#include "devserver/devserver_negotiate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#define MAX_CLAUSES 32
#define MAX_PARAMS 8
#define ACCEPTED "application/json, application/yaml, application/vnd.kubernetes.protobuf"
#define ACCEPTED_STREAM "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"

/* One Accept clause; strings point into the caller's copy of the header. */
struct clause {
    const char *type, *subtype;
    double q;
    const char *keys[MAX_PARAMS], *values[MAX_PARAMS];
    int nparams;
};

/* s with the spaces (only ' ', as goautoneg trims) at both ends cut, in place. */
static char *trim(char *s)
{
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == ' ')
        s[--n] = '\0';
    return s;
}

/* Cuts s at the first sep: returns s, *rest the text after it (NULL if
 * there is none). */
static char *split(char *s, char sep, char **rest)
{
    char *at = strchr(s, sep);
    if (at) {
        *at = '\0';
        *rest = at + 1;
    } else {
        *rest = NULL;
    }
    return s;
}

/* goautoneg's parseClause; false for a clause it skips. */
static bool parse_clause(char *part, struct clause *c)
{
    memset(c, 0, sizeof *c);
    c->q = 1.0;
    char *params;
    char *media = split(trim(part), ';', &params);
    char *sub;
    c->type = trim(split(media, '/', &sub));
    if (!sub) {
        if (strcmp(c->type, "*") != 0)
            return false;
        c->subtype = "*";
    } else {
        if (strchr(sub, '/'))
            return false;
        c->subtype = trim(sub);
    }
    while (params && *params) {
        char *next;
        char *p = split(params, ';', &next);
        params = next;
        char *value;
        char *key = split(p, '=', &value);
        if (!value || strchr(value, '='))
            continue;
        key = trim(key);
        if (strcmp(key, "q") == 0) {
            /* Go's ParseFloat: a value that does not parse is 0 */
            char *end;
            double q = strtod(value, &end);
            c->q = end != value && *end == '\0' ? q : 0;
        } else if (c->nparams < MAX_PARAMS) {
            c->keys[c->nparams] = key;
            c->values[c->nparams++] = trim(value);
        }
    }
    return true;
}

/* goautoneg's acceptSlice.Less. */
static bool before(const struct clause *a, const struct clause *b)
{
    if (a->q > b->q)
        return true;
    if (strcmp(a->type, "*") != 0 && strcmp(b->type, "*") == 0)
        return true;
    if (strcmp(a->subtype, "*") != 0 && strcmp(b->subtype, "*") == 0)
        return true;
    return false;
}

static const struct {
    const char *subtype;
    luna_ds_media media;
    bool streams;
} served[] = {
    { "json", LUNA_DS_MEDIA_JSON, true },
    { "yaml", LUNA_DS_MEDIA_YAML, false },
    { "vnd.kubernetes.protobuf", LUNA_DS_MEDIA_PROTOBUF, true },
};

/* acceptMediaTypeOptions with the RequestScope's restrictions. */
static bool allowed(const struct clause *c, size_t m, const luna_ds_type *t, luna_ds_output *out)
{
    const char *as = NULL, *g = NULL, *v = NULL;
    bool convert = false;
    for (int i = 0; i < c->nparams; i++) {
        const char *k = c->keys[i], *val = c->values[i];
        if (strcmp(k, "as") == 0) {
            as = val;
            convert = true;
        } else if (strcmp(k, "g") == 0) {
            g = val;
            convert = true;
        } else if (strcmp(k, "v") == 0) {
            v = val;
            convert = true;
        } else if (strcmp(k, "stream") == 0) {
            if (*val && (!served[m].streams || strcmp(val, "watch") != 0))
                return false;
        } else if (strcmp(k, "sv") == 0) {
            if (*val && strcmp(val, "v1") != 0)
                return false;
        }
    }
    out->media = served[m].media;
    out->as = LUNA_DS_AS_OBJECT;
    out->meta_version = NULL;
    if (!convert)
        return !t->custom || served[m].media != LUNA_DS_MEDIA_PROTOBUF;
    if (!g || strcmp(g, "meta.k8s.io") != 0 || !v ||
        (strcmp(v, "v1") != 0 && strcmp(v, "v1beta1") != 0) || !as)
        return false;
    out->meta_version = strcmp(v, "v1") == 0 ? "v1" : "v1beta1";
    if (strcmp(as, "PartialObjectMetadata") == 0)
        out->as = LUNA_DS_AS_PARTIAL;
    else if (strcmp(as, "PartialObjectMetadataList") == 0)
        out->as = LUNA_DS_AS_PARTIAL_LIST;
    else if (strcmp(as, "Table") == 0 && served[m].media != LUNA_DS_MEDIA_PROTOBUF)
        out->as = LUNA_DS_AS_TABLE;
    else
        return false;
    return true;
}

int luna_ds_negotiate_route(const char *accept, const luna_ds_type *t, bool collection,
                            luna_ds_status *st)
{
    if (t->custom || !accept || !*accept)
        return 0;
    for (const char *p = accept; *p;) {
        size_t n = strcspn(p, ",");
        size_t m = strcspn(p, ";");
        if (m > n)
            m = n;
        const char *a = p, *b = p + m;
        while (a < b && *a == ' ')
            a++;
        while (b > a && b[-1] == ' ')
            b--;
        size_t len = (size_t)(b - a);
        if (len == 3 && memcmp(a, "*/*", 3) == 0)
            return 0;
        for (size_t i = 0; i < sizeof served / sizeof served[0]; i++) {
            size_t sl = strlen(served[i].subtype);
            if (len == 12 + sl && memcmp(a, "application/", 12) == 0 &&
                memcmp(a + 12, served[i].subtype, sl) == 0)
                return 0;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    int rc = luna_ds_status_set(st, 406, "NotAcceptable",
                                "406: Not Acceptable\n\nAvailable representations: " ACCEPTED "%s",
                                collection ? ", " ACCEPTED_STREAM : "");
    st->details = json_object();
    return rc;
}

int luna_ds_negotiate(const char *accept, const luna_ds_type *t, luna_ds_output *out,
                      luna_ds_status *st)
{
    memset(out, 0, sizeof *out);
    out->media = LUNA_DS_MEDIA_JSON;
    if (!accept || !*accept)
        return 0;
    char *copy = strdup(accept);
    if (!copy)
        return luna_ds_status_oom(st);
    struct clause clauses[MAX_CLAUSES];
    int n = 0;
    char *rest = copy;
    while (rest && *rest && n < MAX_CLAUSES) {
        char *next;
        char *part = split(rest, ',', &next);
        rest = next;
        if (parse_clause(part, &clauses[n]))
            n++;
    }
    /* Go's sort.Sort is an insertion sort at these sizes: ties keep
     * their order. */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && before(&clauses[j], &clauses[j - 1]); j--) {
            struct clause tmp = clauses[j];
            clauses[j] = clauses[j - 1];
            clauses[j - 1] = tmp;
        }
    for (int i = 0; i < n; i++) {
        const struct clause *c = &clauses[i];
        for (size_t m = 0; m < sizeof served / sizeof served[0]; m++) {
            bool match = (strcmp(c->type, "application") == 0 &&
                          (strcmp(c->subtype, served[m].subtype) == 0 ||
                           strcmp(c->subtype, "*") == 0)) ||
                         (strcmp(c->type, "*") == 0 && strcmp(c->subtype, "*") == 0);
            if (match && allowed(c, m, t, out)) {
                free(copy);
                return 0;
            }
        }
    }
    free(copy);
    return luna_ds_status_set(st, 406, "NotAcceptable",
                              "only the following media types are accepted: " ACCEPTED);
}

int luna_ds_negotiate_stream(const luna_ds_output *out, luna_ds_status *st)
{
    if (out->media != LUNA_DS_MEDIA_YAML)
        return 0;
    return luna_ds_status_set(st, 406, "NotAcceptable",
                              "only the following media types are accepted: " ACCEPTED_STREAM);
}

int luna_ds_negotiate_mismatch(const luna_ds_type *t, bool list, luna_ds_status *st)
{
    /* The Go type the registry hands the handler: an internal type named
     * by its package (the first label of the group, "core" for the core
     * group and for events.k8s.io, whose Events are core Events), or
     * unstructured for a custom resource. */
    char pkg[64];
    const char *kind = t->kind;
    if (t->custom) {
        snprintf(pkg, sizeof pkg, "unstructured");
        kind = "Unstructured";
    } else if (!*t->group || strcmp(t->group, "events.k8s.io") == 0) {
        snprintf(pkg, sizeof pkg, "core");
    } else {
        snprintf(pkg, sizeof pkg, "%.*s", (int)strcspn(t->group, "."), t->group);
    }
    if (list)
        return luna_ds_status_set(st, 406, "NotAcceptable", "you requested PartialObjectMetadata, "
                                  "but the requested object is a list (*%s.%sList)", pkg, kind);
    if (t->custom) /* Unstructured has a list's accessors, not its content */
        return luna_ds_status_set(st, 500, "", "content is not a list");
    return luna_ds_status_set(st, 406, "NotAcceptable", "you requested PartialObjectMetadataList, "
                              "but the requested object is not a list (*%s.%s)", pkg, kind);
}

json_t *luna_ds_partial_object(json_t *doc, const char *version)
{
    if (!doc)
        return NULL;
    json_t *md = json_object_get(doc, "metadata");
    char api_version[32];
    snprintf(api_version, sizeof api_version, "meta.k8s.io/%s", version);
    json_t *out = md ? json_pack("{s:s,s:s,s:O}", "kind", "PartialObjectMetadata", "apiVersion",
                                 api_version, "metadata", md)
                     : json_pack("{s:s,s:s,s:{}}", "kind", "PartialObjectMetadata", "apiVersion",
                                 api_version, "metadata");
    json_decref(doc);
    return out;
}

bool luna_ds_partial_bytes(const char *json, size_t len, const char *version,
                           struct luna_textbuf *b)
{
    luna_json_value v;
    char buf[8];
    if (luna_json_lookup(json, len, "metadata", &v, buf, sizeof buf, NULL) < 0 ||
        v.type != LUNA_JSON_OBJECT_START)
        return false;
    luna_textbuf_printf(b, "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/%s\","
                        "\"metadata\":", version);
    luna_textbuf_append(b, json + v.start, (size_t)(v.end - v.start));
    luna_textbuf_putc(b, '}');
    return true;
}
