/* kubeconfig_file.c — one kubeconfig file parsed into its clusters,
 * contexts and users (kubeconfig_impl.h): YAML read, types checked, paths
 * resolved against the file's directory; the merge and the selection of a
 * context are kubeconfig.c's. */
#include "client/kubeconfig_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <yaml.h>

#include "client/kubeconfig_yaml.h"
#include "base/log.h"

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void free_exec(struct kc_exec *e)
{
    if (!e)
        return;
    free(e->command);
    free_strv(e->args, e->nargs);
    free_strv(e->env, e->nenv);
    free(e->api_version);
    free(e->install_hint);
    free(e->interactive_mode);
    free(e);
}

void luna_kubeconfig_file_free(struct kc_file *f)
{
    for (size_t i = 0; i < f->nclusters; i++) {
        struct kc_cluster *c = &f->clusters[i];
        free(c->name);
        free(c->server);
        free(c->ca_file);
        free(c->ca_data);
        free(c->tls_server_name);
        free(c->proxy_url);
        free(c->exec_config_json);
    }
    for (size_t i = 0; i < f->ncontexts; i++) {
        struct kc_context *c = &f->contexts[i];
        free(c->name);
        free(c->cluster);
        free(c->user);
        free(c->namespace);
    }
    for (size_t i = 0; i < f->nusers; i++) {
        struct kc_user *u = &f->users[i];
        free(u->name);
        luna_kubeconfig_free_secret(u->token);
        free(u->token_file);
        free(u->username);
        luna_kubeconfig_free_secret(u->password);
        free(u->cert_file);
        free(u->key_file);
        free(u->cert_data);
        luna_kubeconfig_free_secret_bytes(u->key_data, u->key_data_len);
        free_exec(u->exec);
    }
    free(f->clusters);
    free(f->contexts);
    free(f->users);
    free(f->path);
    free(f->dir);
    free(f->current_context);
    memset(f, 0, sizeof *f);
}

/* ======================================================================
 * Paths (Go's filepath.Clean / Join / Abs semantics)
 * ====================================================================== */

/* Lexically cleans path in place: collapses '//', removes '.', resolves
 * '..' against earlier elements; "" becomes ".". */
static void clean_path(char *path)
{
    bool rooted = path[0] == '/';
    size_t n = strlen(path);
    size_t r = 0, w = 0, dotdot = 0;
    if (rooted) {
        path[w++] = '/';
        r = 1;
        dotdot = 1;
    }
    while (r < n) {
        if (path[r] == '/') {
            r++;
        } else if (path[r] == '.' && (r + 1 == n || path[r + 1] == '/')) {
            r++;
        } else if (path[r] == '.' && path[r + 1] == '.' && (r + 2 == n || path[r + 2] == '/')) {
            r += 2;
            if (w > dotdot) {
                w--;
                while (w > dotdot && path[w] != '/')
                    w--;
            } else if (!rooted) {
                if (w > 0)
                    path[w++] = '/';
                path[w++] = '.';
                path[w++] = '.';
                dotdot = w;
            }
        } else {
            if ((rooted && w != 1) || (!rooted && w != 0))
                path[w++] = '/';
            while (r < n && path[r] != '/')
                path[w++] = path[r++];
        }
    }
    if (w == 0)
        path[w++] = '.';
    path[w] = '\0';
}

/* base + "/" + rel, cleaned; rel if it is absolute.  NULL on OOM. */
static char *join_path(const char *base, const char *rel)
{
    char *out;
    if (rel[0] == '/')
        out = strdup(rel);
    else if (asprintf(&out, "%s/%s", base, rel) < 0)
        out = NULL;
    if (out)
        clean_path(out);
    return out;
}

/* The absolute, clean directory containing path.  NULL on OOM/getcwd. */
static char *abs_dir(const char *path)
{
    char *abs;
    if (path[0] == '/') {
        abs = strdup(path);
    } else {
        char *cwd = getcwd(NULL, 0);
        if (!cwd)
            return NULL;
        abs = join_path(cwd, path);
        free(cwd);
    }
    if (!abs)
        return NULL;
    clean_path(abs);
    char *slash = strrchr(abs, '/');
    if (slash == abs)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    return abs;
}

/* A path field, resolved against the file's directory when relative. */
static int get_path(struct luna_kubeconfig_yaml *f, const struct kc_file *kf, yaml_node_t *map,
                    const char *path, const char *key, char **out)
{
    char *s = NULL;
    int rc = luna_kubeconfig_yaml_string(f, map, path, key, &s);
    if (rc < 0 || !s)
        return rc;
    if (!*s) {
        free(s);
        return 0;
    }
    *out = join_path(kf->dir, s);
    free(s);
    return *out ? 0 : luna_kubeconfig_oom(f->err);
}

/* ---- entries ---------------------------------------------------------------- */

static int parse_cluster(struct luna_kubeconfig_yaml *f, struct kc_file *kf, yaml_node_t *m,
                         struct kc_cluster *c)
{
    char path[64];
    snprintf(path, sizeof path, "clusters[%d].cluster", c->index);
    bool compress = false;
    yaml_node_t *ext;
    int rc;
    if ((rc = luna_kubeconfig_yaml_string(f, m, path, "server", &c->server)) < 0 ||
        (rc = get_path(f, kf, m, path, "certificate-authority", &c->ca_file)) < 0 ||
        (rc = luna_kubeconfig_yaml_base64(f, m, path, "certificate-authority-data", &c->ca_data,
                         &c->ca_data_len)) < 0 ||
        (rc = luna_kubeconfig_yaml_bool(f, m, path, "insecure-skip-tls-verify", &c->insecure)) < 0 ||
        (rc = luna_kubeconfig_yaml_string(f, m, path, "tls-server-name", &c->tls_server_name)) < 0 ||
        (rc = luna_kubeconfig_yaml_string(f, m, path, "proxy-url", &c->proxy_url)) < 0 ||
        (rc = luna_kubeconfig_yaml_bool(f, m, path, "disable-compression", &compress)) < 0 ||
        (rc = luna_kubeconfig_yaml_seq(f, m, path, "extensions", &ext)) < 0)
        return rc;
    if (!ext)
        return 0;
    int i = 0;
    for (yaml_node_item_t *it = ext->data.sequence.items.start;
         it < ext->data.sequence.items.top; it++, i++) {
        yaml_node_t *e = yaml_document_get_node(f->doc, *it);
        char epath[96];
        snprintf(epath, sizeof epath, "%s.extensions[%d]", path, i);
        if (luna_kubeconfig_yaml_is_null(e))
            continue;
        if (e->type != YAML_MAPPING_NODE)
            return luna_kubeconfig_yaml_type_error(f, epath, NULL, "a mapping", e);
        char *name = NULL;
        yaml_node_t *value;
        if ((rc = luna_kubeconfig_yaml_string(f, e, epath, "name", &name)) < 0 ||
            (rc = luna_kubeconfig_yaml_get(f, e, epath, "extension", &value)) < 0) {
            free(name);
            return rc;
        }
        if (name && strcmp(name, EXEC_EXTENSION) == 0 && value && !c->exec_config_json) {
            char vpath[128];
            snprintf(vpath, sizeof vpath, "%s.extension", epath);
            rc = luna_kubeconfig_yaml_to_json(f, value, vpath, &c->exec_config_json);
        }
        free(name);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int parse_string_list(struct luna_kubeconfig_yaml *f, yaml_node_t *m, const char *path,
                             const char *key, char ***out, size_t *n)
{
    yaml_node_t *seq;
    int rc = luna_kubeconfig_yaml_seq(f, m, path, key, &seq);
    if (rc < 0 || !seq)
        return rc;
    size_t count = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (!(*out = calloc(count + 1, sizeof **out)))
        return luna_kubeconfig_oom(f->err);
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *v = yaml_document_get_node(f->doc, seq->data.sequence.items.start[i]);
        char ipath[96];
        snprintf(ipath, sizeof ipath, "%s.%s[%zu]", path, key, i);
        if (v && v->type != YAML_SCALAR_NODE)
            return luna_kubeconfig_yaml_type_error(f, ipath, NULL, "a string", v);
        (*out)[i] = v ? luna_kubeconfig_yaml_scalar_dup(v) : strdup("");
        (*n)++;
        if (!(*out)[i])
            return luna_kubeconfig_oom(f->err);
    }
    return 0;
}

static int parse_exec(struct luna_kubeconfig_yaml *f, struct kc_file *kf, yaml_node_t *m, const char *path,
                      struct kc_exec *e)
{
    yaml_node_t *env;
    int rc;
    if ((rc = luna_kubeconfig_yaml_string(f, m, path, "command", &e->command)) < 0 ||
        (rc = parse_string_list(f, m, path, "args", &e->args, &e->nargs)) < 0 ||
        (rc = luna_kubeconfig_yaml_string(f, m, path, "apiVersion", &e->api_version)) < 0 ||
        (rc = luna_kubeconfig_yaml_string(f, m, path, "installHint", &e->install_hint)) < 0 ||
        (rc = luna_kubeconfig_yaml_bool(f, m, path, "provideClusterInfo", &e->provide_cluster_info)) < 0 ||
        (rc = luna_kubeconfig_yaml_string(f, m, path, "interactiveMode", &e->interactive_mode)) < 0 ||
        (rc = luna_kubeconfig_yaml_seq(f, m, path, "env", &env)) < 0)
        return rc;
    /* client-go resolves the command only when it is a path, not a name. */
    if (e->command && strchr(e->command, '/')) {
        char *resolved = join_path(kf->dir, e->command);
        if (!resolved)
            return luna_kubeconfig_oom(f->err);
        free(e->command);
        e->command = resolved;
    }
    if (!env)
        return 0;
    size_t count = (size_t)(env->data.sequence.items.top - env->data.sequence.items.start);
    if (!(e->env = calloc(count + 1, sizeof *e->env)))
        return luna_kubeconfig_oom(f->err);
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *v = yaml_document_get_node(f->doc, env->data.sequence.items.start[i]);
        char ipath[128];
        snprintf(ipath, sizeof ipath, "%s.env[%zu]", path, i);
        if (!v || v->type != YAML_MAPPING_NODE)
            return v ? luna_kubeconfig_yaml_type_error(f, ipath, NULL, "a mapping", v)
                     : luna_kubeconfig_yaml_field_error(f, ipath, NULL, "expected a mapping with name and value");
        char *name = NULL, *value = NULL;
        if ((rc = luna_kubeconfig_yaml_string(f, v, ipath, "name", &name)) < 0 ||
            (rc = luna_kubeconfig_yaml_string(f, v, ipath, "value", &value)) < 0) {
            free(name);
            luna_kubeconfig_free_secret(value);
            return rc;
        }
        if (!name || !*name || strchr(name, '=')) {
            free(name);
            luna_kubeconfig_free_secret(value);
            return luna_kubeconfig_yaml_field_error(f, ipath, "name", "must be a non-empty name without '='");
        }
        rc = asprintf(&e->env[i], "%s=%s", name, value ? value : "");
        free(name);
        luna_kubeconfig_free_secret(value);
        if (rc < 0) {
            e->env[i] = NULL;
            return luna_kubeconfig_oom(f->err);
        }
        e->nenv++;
    }
    return 0;
}

static int parse_user(struct luna_kubeconfig_yaml *f, struct kc_file *kf, yaml_node_t *m, struct kc_user *u)
{
    static const char *const unsupported[] = { "auth-provider", "as", "as-uid", "as-groups",
                                               "as-user-extra", NULL };
    char path[64];
    snprintf(path, sizeof path, "users[%d].user", u->index);
    yaml_node_t *exec;
    int rc;
    if ((rc = luna_kubeconfig_yaml_string(f, m, path, "token", &u->token)) < 0 ||
        (rc = get_path(f, kf, m, path, "tokenFile", &u->token_file)) < 0 ||
        (rc = luna_kubeconfig_yaml_string(f, m, path, "username", &u->username)) < 0 ||
        (rc = luna_kubeconfig_yaml_string(f, m, path, "password", &u->password)) < 0 ||
        (rc = get_path(f, kf, m, path, "client-certificate", &u->cert_file)) < 0 ||
        (rc = get_path(f, kf, m, path, "client-key", &u->key_file)) < 0 ||
        (rc = luna_kubeconfig_yaml_base64(f, m, path, "client-certificate-data", &u->cert_data,
                         &u->cert_data_len)) < 0 ||
        (rc = luna_kubeconfig_yaml_base64(f, m, path, "client-key-data", &u->key_data, &u->key_data_len)) < 0 ||
        (rc = luna_kubeconfig_yaml_map(f, m, path, "exec", &exec)) < 0)
        return rc;
    for (int i = 0; unsupported[i]; i++) {
        yaml_node_t *v;
        if ((rc = luna_kubeconfig_yaml_get(f, m, path, unsupported[i], &v)) < 0)
            return rc;
        if (v && !u->unsupported)
            u->unsupported = unsupported[i];
    }
    if (u->token && !*u->token) {
        free(u->token);
        u->token = NULL;
    }
    if (u->password) {
        u->has_password = *u->password != '\0';
    }
    if (u->username && !*u->username) {
        free(u->username);
        u->username = NULL;
    }
    if (!exec)
        return 0;
    if (!(u->exec = calloc(1, sizeof *u->exec)))
        return luna_kubeconfig_oom(f->err);
    char epath[80];
    snprintf(epath, sizeof epath, "%s.exec", path);
    return parse_exec(f, kf, exec, epath, u->exec);
}

static int parse_context(struct luna_kubeconfig_yaml *f, yaml_node_t *m, struct kc_context *c)
{
    char path[64];
    snprintf(path, sizeof path, "contexts[%d].context", c->index);
    int rc;
    if ((rc = luna_kubeconfig_yaml_string(f, m, path, "cluster", &c->cluster)) < 0 ||
        (rc = luna_kubeconfig_yaml_string(f, m, path, "user", &c->user)) < 0 ||
        (rc = luna_kubeconfig_yaml_string(f, m, path, "namespace", &c->namespace)) < 0)
        return rc;
    return 0;
}

enum section { SEC_CLUSTERS, SEC_CONTEXTS, SEC_USERS };

/* Parses the named list (clusters, contexts, users) of the top mapping. */
static int parse_section(struct luna_kubeconfig_yaml *f, struct kc_file *kf, yaml_node_t *root,
                         enum section sec)
{
    static const char *const list_key[] = { "clusters", "contexts", "users" };
    static const char *const item_key[] = { "cluster", "context", "user" };
    static const size_t item_size[] = { sizeof(struct kc_cluster), sizeof(struct kc_context),
                                        sizeof(struct kc_user) };
    yaml_node_t *seq;
    int rc = luna_kubeconfig_yaml_seq(f, root, "", list_key[sec], &seq);
    if (rc < 0 || !seq)
        return rc;
    size_t count = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    void *items = calloc(count ? count : 1, item_size[sec]);
    if (!items)
        return luna_kubeconfig_oom(f->err);
    switch (sec) {
    case SEC_CLUSTERS: kf->clusters = items; break;
    case SEC_CONTEXTS: kf->contexts = items; break;
    case SEC_USERS:    kf->users = items; break;
    }
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *entry = yaml_document_get_node(f->doc, seq->data.sequence.items.start[i]);
        char path[48];
        snprintf(path, sizeof path, "%s[%zu]", list_key[sec], i);
        if (!entry || entry->type != YAML_MAPPING_NODE)
            return entry ? luna_kubeconfig_yaml_type_error(f, path, NULL, "a mapping", entry)
                         : luna_kubeconfig_yaml_field_error(f, path, NULL, "expected a mapping");
        char *name = NULL;
        yaml_node_t *body;
        if ((rc = luna_kubeconfig_yaml_string(f, entry, path, "name", &name)) < 0)
            return rc;
        if (!name && !(name = strdup(""))) /* kubectl accepts a missing name as "" */
            return luna_kubeconfig_oom(f->err);
        if ((rc = luna_kubeconfig_yaml_map(f, entry, path, item_key[sec], &body)) < 0) {
            free(name);
            return rc;
        }
        /* Duplicate names in one file are an error in kubectl too. */
        for (size_t j = 0; j < i; j++) {
            const char *other = sec == SEC_CLUSTERS ? kf->clusters[j].name
                              : sec == SEC_CONTEXTS ? kf->contexts[j].name
                                                    : kf->users[j].name;
            if (strcmp(other, name) == 0) {
                rc = luna_error_set(f->err, LUNA_EINVAL, "%s: %s.name: duplicate name \"%s\"",
                                    f->path, path, name);
                free(name);
                return rc;
            }
        }
        switch (sec) {
        case SEC_CLUSTERS: {
            struct kc_cluster *c = &kf->clusters[kf->nclusters++];
            c->name = name;
            c->index = (int)i;
            c->file = kf;
            rc = body ? parse_cluster(f, kf, body, c) : 0;
            break;
        }
        case SEC_CONTEXTS: {
            struct kc_context *c = &kf->contexts[kf->ncontexts++];
            c->name = name;
            c->index = (int)i;
            c->file = kf;
            rc = body ? parse_context(f, body, c) : 0;
            break;
        }
        case SEC_USERS: {
            struct kc_user *u = &kf->users[kf->nusers++];
            u->name = name;
            u->index = (int)i;
            u->file = kf;
            rc = body ? parse_user(f, kf, body, u) : 0;
            break;
        }
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int parse_document(struct luna_kubeconfig_yaml *f, struct kc_file *kf)
{
    yaml_node_t *root = yaml_document_get_root_node(f->doc);
    if (luna_kubeconfig_yaml_is_null(root))
        return 0;                         /* an empty file is an empty config */
    if (root->type != YAML_MAPPING_NODE)
        return luna_error_set(f->err, LUNA_EINVAL,
                              "%s: expected a mapping at the top level, got %s (line %zu)",
                              f->path, luna_kubeconfig_yaml_node_kind(root), root->start_mark.line + 1);
    char *api = NULL, *kind = NULL;
    int rc;
    if ((rc = luna_kubeconfig_yaml_string(f, root, "", "apiVersion", &api)) < 0 ||
        (rc = luna_kubeconfig_yaml_string(f, root, "", "kind", &kind)) < 0) {
        free(api);
        return rc;
    }
    if (api && *api && strcmp(api, "v1") != 0)
        rc = luna_kubeconfig_yaml_field_error(f, "", "apiVersion", "must be v1");
    else if (kind && *kind && strcmp(kind, "Config") != 0)
        rc = luna_kubeconfig_yaml_field_error(f, "", "kind", "must be Config");
    free(api);
    free(kind);
    if (rc < 0)
        return rc;
    if ((rc = luna_kubeconfig_yaml_string(f, root, "", "current-context", &kf->current_context)) < 0 ||
        (rc = parse_section(f, kf, root, SEC_CLUSTERS)) < 0 ||
        (rc = parse_section(f, kf, root, SEC_CONTEXTS)) < 0 ||
        (rc = parse_section(f, kf, root, SEC_USERS)) < 0)
        return rc;
    return 0;
}

/* Parses path into kf.  LUNA_ENOTFOUND (with err set) if it does not exist. */
int luna_kubeconfig_file_load(const char *path, struct kc_file *kf, luna_error *err)
{
    memset(kf, 0, sizeof *kf);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return luna_error_set(err, errno == ENOENT ? LUNA_ENOTFOUND : LUNA_EIO,
                              "%s: cannot read kubeconfig: %s", path, strerror(errno));
    if (!(kf->path = strdup(path)) || !(kf->dir = abs_dir(path))) {
        fclose(fp);
        luna_kubeconfig_file_free(kf);
        return luna_kubeconfig_oom(err);
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        fclose(fp);
        luna_kubeconfig_file_free(kf);
        return luna_kubeconfig_oom(err);
    }
    yaml_parser_set_input_file(&parser, fp);
    int rc = 0;
    if (!yaml_parser_load(&parser, &doc)) {
        if (parser.error == YAML_MEMORY_ERROR)
            rc = luna_kubeconfig_oom(err);
        else if (parser.error == YAML_READER_ERROR)
            rc = luna_error_set(err, LUNA_EINVAL, "%s: invalid text at byte %zu: %s", path,
                                parser.problem_offset,
                                parser.problem ? parser.problem : "unreadable");
        else
            rc = luna_error_set(err, LUNA_EINVAL, "%s:%zu:%zu: YAML syntax error: %s%s%s%s",
                                path, parser.problem_mark.line + 1,
                                parser.problem_mark.column + 1,
                                parser.problem ? parser.problem : "invalid YAML",
                                parser.context ? " (" : "",
                                parser.context ? parser.context : "",
                                parser.context ? ")" : "");
        yaml_parser_delete(&parser);
        fclose(fp);
        luna_kubeconfig_file_free(kf);
        return rc;
    }
    struct luna_kubeconfig_yaml f = { .path = path, .doc = &doc, .err = err };
    rc = parse_document(&f, kf);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    fclose(fp);
    if (rc < 0)
        luna_kubeconfig_file_free(kf);
    return rc;
}
