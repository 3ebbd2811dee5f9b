/* kubeconfig_yaml.c — see kubeconfig_yaml.h. */
#include "client/kubeconfig_yaml.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <yajl/yajl_gen.h>

#define EXTENSION_MAX_DEPTH 64
#define EXTENSION_MAX_JSON (1 << 20)

const char *luna_kubeconfig_yaml_node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:  return "a mapping";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_SCALAR_NODE:
        return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "a scalar" : "a quoted string";
    default:                 return "nothing";
    }
}

static bool scalar_is(const yaml_node_t *n, const char *s)
{
    return n->data.scalar.length == strlen(s) &&
           memcmp(n->data.scalar.value, s, n->data.scalar.length) == 0;
}

/* A plain scalar that YAML reads as null: "", ~, null. */
bool luna_kubeconfig_yaml_is_null(const yaml_node_t *n)
{
    if (!n)
        return true;
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    return scalar_is(n, "") || scalar_is(n, "~") || scalar_is(n, "null") ||
           scalar_is(n, "Null") || scalar_is(n, "NULL");
}

int luna_kubeconfig_yaml_type_error(struct luna_kubeconfig_yaml *f, const char *path, const char *key,
                      const char *want, const yaml_node_t *got)
{
    return luna_error_set(f->err, LUNA_EINVAL, "%s: %s%s%s: expected %s, got %s (line %zu)",
                          f->path, path, *path && key ? "." : "", key ? key : "", want,
                          luna_kubeconfig_yaml_node_kind(got), got->start_mark.line + 1);
}

int luna_kubeconfig_yaml_field_error(struct luna_kubeconfig_yaml *f, const char *path, const char *key, const char *what)
{
    return luna_error_set(f->err, LUNA_EINVAL, "%s: %s%s%s: %s", f->path, path,
                          *path && key ? "." : "", key ? key : "", what);
}

static int oom(luna_error *err)
{
    return luna_error_set(err, LUNA_ENOMEM, "out of memory");
}

/* *out = the value for key in map, or NULL when absent or null.  A key that
 * appears twice is an error (as in kubectl's YAML decoder). */
int luna_kubeconfig_yaml_get(struct luna_kubeconfig_yaml *f, yaml_node_t *map, const char *path, const char *key,
                   yaml_node_t **out)
{
    *out = NULL;
    bool found = false;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
         p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(f->doc, p->key);
        if (!k || k->type != YAML_SCALAR_NODE || !scalar_is(k, key))
            continue;
        if (found)
            return luna_error_set(f->err, LUNA_EINVAL, "%s: %s%s%s: key appears twice (line %zu)",
                                  f->path, path, *path ? "." : "", key, k->start_mark.line + 1);
        found = true;
        yaml_node_t *v = yaml_document_get_node(f->doc, p->value);
        *out = luna_kubeconfig_yaml_is_null(v) ? NULL : v;
    }
    return 0;
}

static int get_typed(struct luna_kubeconfig_yaml *f, yaml_node_t *map, const char *path, const char *key,
                     yaml_node_type_t type, const char *want, yaml_node_t **out)
{
    int rc = luna_kubeconfig_yaml_get(f, map, path, key, out);
    if (rc < 0)
        return rc;
    if (*out && (*out)->type != type)
        return luna_kubeconfig_yaml_type_error(f, path, key, want, *out);
    return 0;
}

int luna_kubeconfig_yaml_map(struct luna_kubeconfig_yaml *f, yaml_node_t *map, const char *path, const char *key,
                   yaml_node_t **out)
{
    return get_typed(f, map, path, key, YAML_MAPPING_NODE, "a mapping", out);
}

int luna_kubeconfig_yaml_seq(struct luna_kubeconfig_yaml *f, yaml_node_t *map, const char *path, const char *key,
                   yaml_node_t **out)
{
    return get_typed(f, map, path, key, YAML_SEQUENCE_NODE, "a list", out);
}

char *luna_kubeconfig_yaml_scalar_dup(const yaml_node_t *n)
{
    char *s = malloc(n->data.scalar.length + 1);
    if (s) {
        memcpy(s, n->data.scalar.value, n->data.scalar.length);
        s[n->data.scalar.length] = '\0';
    }
    return s;
}

/* A string field: any scalar (numbers are taken as written).  *out stays
 * NULL when absent; an embedded NUL is rejected. */
int luna_kubeconfig_yaml_string(struct luna_kubeconfig_yaml *f, yaml_node_t *map, const char *path, const char *key,
                      char **out)
{
    yaml_node_t *v;
    int rc = get_typed(f, map, path, key, YAML_SCALAR_NODE, "a string", &v);
    if (rc < 0 || !v)
        return rc;
    if (memchr(v->data.scalar.value, '\0', v->data.scalar.length))
        return luna_kubeconfig_yaml_field_error(f, path, key, "contains a NUL character");
    if (!(*out = luna_kubeconfig_yaml_scalar_dup(v)))
        return oom(f->err);
    return 0;
}

/* A boolean field: an unquoted YAML 1.1 boolean (true/false/yes/no/on/off). */
int luna_kubeconfig_yaml_bool(struct luna_kubeconfig_yaml *f, yaml_node_t *map, const char *path, const char *key,
                    bool *out)
{
    static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "YES",
                                       "on", "On", "ON", "y", "Y", NULL };
    static const char *const no[] = { "false", "False", "FALSE", "no", "No", "NO",
                                      "off", "Off", "OFF", "n", "N", NULL };
    yaml_node_t *v;
    int rc = luna_kubeconfig_yaml_get(f, map, path, key, &v);
    if (rc < 0 || !v)
        return rc;
    if (v->type == YAML_SCALAR_NODE && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        for (int i = 0; yes[i]; i++)
            if (scalar_is(v, yes[i])) {
                *out = true;
                return 0;
            }
        for (int i = 0; no[i]; i++)
            if (scalar_is(v, no[i])) {
                *out = false;
                return 0;
            }
    }
    return luna_kubeconfig_yaml_type_error(f, path, key, "a boolean (true or false)", v);
}

/* Decodes standard base64 with padding, ignoring CR and LF (Go's
 * encoding/json []byte rules).  An empty value leaves *out NULL. */
static int decode_base64(const char *in, unsigned char **out, size_t *out_len)
{
    size_t n = strlen(in);
    char *clean = malloc(n + 1);
    if (!clean)
        return LUNA_ENOMEM;
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        if (in[i] != '\r' && in[i] != '\n')
            clean[len++] = in[i];
    clean[len] = '\0';
    *out = NULL;
    *out_len = 0;
    if (len == 0) {
        free(clean);
        return 0;
    }
    size_t pad = 0;
    bool bad = len % 4 != 0;
    for (size_t i = 0; i < len && !bad; i++) {
        char c = clean[i];
        if (c == '=') {
            pad++;
        } else if (pad || !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '+' || c == '/')) {
            bad = true;
        }
    }
    if (pad > 2)
        bad = true;
    unsigned char *buf = bad ? NULL : malloc(len / 4 * 3 + 1);
    int got = buf ? EVP_DecodeBlock(buf, (const unsigned char *)clean, (int)len) : -1;
    explicit_bzero(clean, len);
    free(clean);
    if (bad)
        return LUNA_EINVAL;
    if (!buf)
        return LUNA_ENOMEM;
    if (got < 0 || (size_t)got < pad) {
        free(buf);
        return LUNA_EINVAL;
    }
    *out = buf;
    *out_len = (size_t)got - pad;
    return 0;
}

int luna_kubeconfig_yaml_base64(struct luna_kubeconfig_yaml *f, yaml_node_t *map, const char *path, const char *key,
                      unsigned char **out, size_t *out_len)
{
    char *s = NULL;
    int rc = luna_kubeconfig_yaml_string(f, map, path, key, &s);
    if (rc < 0 || !s)
        return rc;
    rc = decode_base64(s, out, out_len);
    explicit_bzero(s, strlen(s));
    free(s);
    if (rc == LUNA_ENOMEM)
        return oom(f->err);
    if (rc < 0)
        return luna_kubeconfig_yaml_field_error(f, path, key, "invalid base64");
    return 0;
}

/* ---- YAML -> JSON ---- */

static bool plain_is_number(const yaml_node_t *n)
{
    const char *s = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length, i = 0;
    if (i < len && (s[i] == '-' || s[i] == '+'))
        i++;
    size_t digits_start = i;
    while (i < len && s[i] >= '0' && s[i] <= '9')
        i++;
    if (i == digits_start)
        return false;
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '-' || s[i] == '+'))
            i++;
        size_t exp_start = i;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == exp_start)
            return false;
    }
    return i == len && s[0] != '+';
}

static int emit_json(struct luna_kubeconfig_yaml *f, yajl_gen g, yaml_node_t *n, int depth)
{
    if (depth > EXTENSION_MAX_DEPTH)
        return -1;
    /* The bound on the JSON is checked as it grows: aliases make a node
     * reachable many times, so a few lines of YAML can stand for
     * gigabytes ("billion laughs"). */
    const unsigned char *buf;
    size_t len;
    if (yajl_gen_get_buf(g, &buf, &len) != yajl_gen_status_ok || len > EXTENSION_MAX_JSON)
        return -1;
    switch (n->type) {
    case YAML_SCALAR_NODE:
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
            if (luna_kubeconfig_yaml_is_null(n))
                return yajl_gen_null(g) == yajl_gen_status_ok ? 0 : -1;
            if (scalar_is(n, "true") || scalar_is(n, "false"))
                return yajl_gen_bool(g, scalar_is(n, "true")) == yajl_gen_status_ok ? 0 : -1;
            if (plain_is_number(n))
                return yajl_gen_number(g, (const char *)n->data.scalar.value,
                                       n->data.scalar.length) == yajl_gen_status_ok ? 0 : -1;
        }
        return yajl_gen_string(g, n->data.scalar.value, n->data.scalar.length) ==
                       yajl_gen_status_ok ? 0 : -1;
    case YAML_SEQUENCE_NODE:
        yajl_gen_array_open(g);
        for (yaml_node_item_t *i = n->data.sequence.items.start;
             i < n->data.sequence.items.top; i++) {
            yaml_node_t *item = yaml_document_get_node(f->doc, *i);
            if (!item || emit_json(f, g, item, depth + 1) < 0)
                return -1;
        }
        return yajl_gen_array_close(g) == yajl_gen_status_ok ? 0 : -1;
    case YAML_MAPPING_NODE:
        yajl_gen_map_open(g);
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
             p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(f->doc, p->key);
            yaml_node_t *v = yaml_document_get_node(f->doc, p->value);
            if (!k || !v || k->type != YAML_SCALAR_NODE)
                return -1;
            if (yajl_gen_string(g, k->data.scalar.value, k->data.scalar.length) !=
                    yajl_gen_status_ok ||
                emit_json(f, g, v, depth + 1) < 0)
                return -1;
        }
        return yajl_gen_map_close(g) == yajl_gen_status_ok ? 0 : -1;
    default:
        return -1;
    }
}

int luna_kubeconfig_yaml_to_json(struct luna_kubeconfig_yaml *f, yaml_node_t *n, const char *path, char **out)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    if (!g)
        return oom(f->err);
    int rc = emit_json(f, g, n, 0);
    const unsigned char *buf;
    size_t len = 0;
    if (rc == 0 && (yajl_gen_get_buf(g, &buf, &len) != yajl_gen_status_ok ||
                    len > EXTENSION_MAX_JSON))
        rc = -1;
    if (rc < 0) {
        yajl_gen_free(g);
        return luna_kubeconfig_yaml_field_error(f, path, NULL, "cannot be converted to JSON (too deep, too big, "
                                          "or a non-string key)");
    }
    *out = strndup((const char *)buf, len);
    yajl_gen_free(g);
    return *out ? 0 : oom(f->err);
}
