/* kubeconfig.c — see kubeconfig.h. */
#include "client/kubeconfig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <yaml.h>

#include "client/exec_plugin.h"
#include "client/kubeconfig_impl.h"
#include "client/kubeconfig_incluster.h"
#include "client/kubeconfig_tls.h"
#include "client/kubeconfig_transport.h"
#include "client/kubeconfig_yaml.h"
#include "client/token_file.h"
#include "base/log.h"

#define EXEC_EXTENSION "client.authentication.k8s.io/exec"

/* ======================================================================
 * Parsed files
 * ====================================================================== */

struct kc_file;

struct kc_cluster {
    char *name;
    int index;
    const struct kc_file *file;
    char *server;
    char *ca_file;              /* resolved against the file's directory */
    unsigned char *ca_data;
    size_t ca_data_len;
    bool insecure;
    char *tls_server_name;
    char *proxy_url;
    char *exec_config_json;     /* extensions[client.authentication.k8s.io/exec] */
};

struct kc_exec {
    char *command;              /* resolved if it contains '/' */
    char **args;
    size_t nargs;
    char **env;                 /* "NAME=value" */
    size_t nenv;
    char *api_version;
    char *install_hint;
    char *interactive_mode;
    bool provide_cluster_info;
};

struct kc_user {
    char *name;
    int index;
    const struct kc_file *file;
    char *token;
    char *token_file;
    char *username;
    char *password;
    bool has_password;
    char *cert_file;
    char *key_file;
    unsigned char *cert_data;
    size_t cert_data_len;
    unsigned char *key_data;
    size_t key_data_len;
    struct kc_exec *exec;
    const char *unsupported;    /* first unsupported field present, or NULL */
};

struct kc_context {
    char *name;
    int index;
    const struct kc_file *file;
    char *cluster;
    char *user;
    char *namespace;
};

struct kc_file {
    char *path;                 /* as given (for messages) */
    char *dir;                  /* absolute, clean directory of the file */
    char *current_context;
    struct kc_cluster *clusters;
    size_t nclusters;
    struct kc_context *contexts;
    size_t ncontexts;
    struct kc_user *users;
    size_t nusers;
};


static void free_secret(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static void free_secret_bytes(unsigned char *s, size_t len)
{
    if (s) {
        explicit_bzero(s, len);
        free(s);
    }
}

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

static void free_file(struct kc_file *f)
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
        free_secret(u->token);
        free(u->token_file);
        free(u->username);
        free_secret(u->password);
        free(u->cert_file);
        free(u->key_file);
        free(u->cert_data);
        free_secret_bytes(u->key_data, u->key_data_len);
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

/* Moves a pointer out of a parsed entry into the result. */
static void *take(void *pp)
{
    void **p = pp;
    void *v = *p;
    *p = NULL;
    return v;
}

static int oom(luna_error *err)
{
    return luna_error_set(err, LUNA_ENOMEM, "out of memory");
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
    return *out ? 0 : oom(f->err);
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
        return oom(f->err);
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *v = yaml_document_get_node(f->doc, seq->data.sequence.items.start[i]);
        char ipath[96];
        snprintf(ipath, sizeof ipath, "%s.%s[%zu]", path, key, i);
        if (v && v->type != YAML_SCALAR_NODE)
            return luna_kubeconfig_yaml_type_error(f, ipath, NULL, "a string", v);
        (*out)[i] = v ? luna_kubeconfig_yaml_scalar_dup(v) : strdup("");
        (*n)++;
        if (!(*out)[i])
            return oom(f->err);
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
            return oom(f->err);
        free(e->command);
        e->command = resolved;
    }
    if (!env)
        return 0;
    size_t count = (size_t)(env->data.sequence.items.top - env->data.sequence.items.start);
    if (!(e->env = calloc(count + 1, sizeof *e->env)))
        return oom(f->err);
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
            free_secret(value);
            return rc;
        }
        if (!name || !*name || strchr(name, '=')) {
            free(name);
            free_secret(value);
            return luna_kubeconfig_yaml_field_error(f, ipath, "name", "must be a non-empty name without '='");
        }
        rc = asprintf(&e->env[i], "%s=%s", name, value ? value : "");
        free(name);
        free_secret(value);
        if (rc < 0) {
            e->env[i] = NULL;
            return oom(f->err);
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
        return oom(f->err);
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
        return oom(f->err);
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
            return oom(f->err);
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
static int load_file(const char *path, struct kc_file *kf, luna_error *err)
{
    memset(kf, 0, sizeof *kf);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return luna_error_set(err, errno == ENOENT ? LUNA_ENOTFOUND : LUNA_EIO,
                              "%s: cannot read kubeconfig: %s", path, strerror(errno));
    if (!(kf->path = strdup(path)) || !(kf->dir = abs_dir(path))) {
        fclose(fp);
        free_file(kf);
        return oom(err);
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        fclose(fp);
        free_file(kf);
        return oom(err);
    }
    yaml_parser_set_input_file(&parser, fp);
    int rc = 0;
    if (!yaml_parser_load(&parser, &doc)) {
        if (parser.error == YAML_MEMORY_ERROR)
            rc = oom(err);
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
        free_file(kf);
        return rc;
    }
    struct luna_kubeconfig_yaml f = { .path = path, .doc = &doc, .err = err };
    rc = parse_document(&f, kf);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    fclose(fp);
    if (rc < 0)
        free_file(kf);
    return rc;
}

/* ======================================================================
 * Loading: sources, merge, selection, validation
 * ====================================================================== */

void luna_kubeconfig_options_from_env(struct luna_kubeconfig_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->kubeconfig_env = getenv("KUBECONFIG");
    opts->home = getenv("HOME");
    opts->service_host = getenv("KUBERNETES_SERVICE_HOST");
    opts->service_port = getenv("KUBERNETES_SERVICE_PORT");
    opts->pod_namespace = getenv("POD_NAMESPACE");
    opts->serviceaccount_dir = getenv("LUNA_SERVICEACCOUNT_DIR");
}

const char *luna_auth_kind_name(enum luna_auth_kind kind)
{
    switch (kind) {
    case LUNA_AUTH_NONE:        return "none";
    case LUNA_AUTH_CLIENT_CERT: return "client-certificate";
    case LUNA_AUTH_TOKEN:       return "token";
    case LUNA_AUTH_TOKEN_FILE:  return "token-file";
    case LUNA_AUTH_BASIC:       return "basic";
    case LUNA_AUTH_EXEC:        return "exec";
    }
    return "unknown";
}

struct kc_set {
    struct kc_file *files;
    size_t n;
    char *source;               /* paths joined with ':' */
};

static void free_set(struct kc_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free_file(&s->files[i]);
    free(s->files);
    free(s->source);
}

static int add_file(struct kc_set *s, const char *path, bool must_exist, luna_error *err)
{
    for (size_t i = 0; i < s->n; i++)   /* kubectl de-duplicates the list */
        if (strcmp(s->files[i].path, path) == 0)
            return 0;
    struct kc_file kf;
    int rc = load_file(path, &kf, err);
    if (rc == LUNA_ENOTFOUND && !must_exist)
        return 0;
    if (rc < 0)
        return rc;
    struct kc_file *files = realloc(s->files, (s->n + 1) * sizeof *files);
    if (!files) {
        free_file(&kf);
        return oom(err);
    }
    s->files = files;
    s->files[s->n++] = kf;
    /* Entries point at their file: re-point after the array moved. */
    for (size_t i = 0; i < s->n; i++) {
        struct kc_file *f = &s->files[i];
        for (size_t j = 0; j < f->nclusters; j++)
            f->clusters[j].file = f;
        for (size_t j = 0; j < f->ncontexts; j++)
            f->contexts[j].file = f;
        for (size_t j = 0; j < f->nusers; j++)
            f->users[j].file = f;
    }
    return 0;
}

static int set_source(struct kc_set *s, luna_error *err)
{
    size_t len = 1;
    for (size_t i = 0; i < s->n; i++)
        len += strlen(s->files[i].path) + 1;
    if (!(s->source = malloc(len)))
        return oom(err);
    s->source[0] = '\0';
    for (size_t i = 0; i < s->n; i++) {
        if (i)
            strcat(s->source, ":");
        strcat(s->source, s->files[i].path);
    }
    return 0;
}

/* Reads the files named by the options.  *found is false when no kubeconfig
 * applies (no path, no KUBECONFIG, no ~/.kube/config): in-cluster. */
static int load_set(const struct luna_kubeconfig_options *o, struct kc_set *s, bool *found,
                    luna_error *err)
{
    memset(s, 0, sizeof *s);
    *found = true;
    int rc;
    if (o->path && *o->path) {
        if ((rc = add_file(s, o->path, true, err)) < 0)
            return rc;
    } else if (o->kubeconfig_env && *o->kubeconfig_env) {
        char *list = strdup(o->kubeconfig_env);
        if (!list)
            return oom(err);
        /* strsep over the whole list: empty entries are skipped. */
        char *cursor = list;
        char *item;
        rc = 0;
        while (rc == 0 && (item = strsep(&cursor, ":")) != NULL)
            if (*item)
                rc = add_file(s, item, false, err);
        free(list);
        if (rc < 0)
            return rc;
        if (s->n == 0)
            return luna_error_set(err, LUNA_ENOTFOUND,
                                  "KUBECONFIG=%s: none of the listed kubeconfig files exists",
                                  o->kubeconfig_env);
    } else {
        char *home_config = NULL;
        if (o->home && *o->home &&
            asprintf(&home_config, "%s/.kube/config", o->home) < 0)
            return oom(err);
        rc = home_config ? add_file(s, home_config, false, err) : 0;
        free(home_config);
        if (rc < 0)
            return rc;
        if (s->n == 0) {
            *found = false;
            return 0;
        }
    }
    return set_source(s, err);
}

static const struct kc_context *find_context(const struct kc_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->files[i].ncontexts; j++)
            if (strcmp(s->files[i].contexts[j].name, name) == 0)
                return &s->files[i].contexts[j];
    return NULL;
}

static struct kc_cluster *find_cluster(struct kc_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->files[i].nclusters; j++)
            if (strcmp(s->files[i].clusters[j].name, name) == 0)
                return &s->files[i].clusters[j];
    return NULL;
}

static struct kc_user *find_user(struct kc_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->files[i].nusers; j++)
            if (strcmp(s->files[i].users[j].name, name) == 0)
                return &s->files[i].users[j];
    return NULL;
}

/* ---- building the result -------------------------------------------------- */

static int prefix_of(char *buf, size_t size, const struct kc_file *f, const char *sec,
                     int index, const char *item)
{
    return snprintf(buf, size, "%s: %s[%d].%s", f->path, sec, index, item);
}

static int normalize_server(struct luna_kubeconfig *cfg, const char *server, bool tls,
                            const char *where, luna_error *err)
{
    size_t len = strlen(server);
    while (len > 0 && server[len - 1] == '/')
        len--;
    /* The host starts after the scheme the server names; the trailing
     * slashes just cut may have eaten into the scheme ("https://"). */
    const char *scheme = "";
    size_t host_at = 0;
    if (strncasecmp(server, "https://", 8) == 0) {
        host_at = 8;
    } else if (strncasecmp(server, "http://", 7) == 0) {
        host_at = 7;
    } else {
        if (strstr(server, "://"))
            return luna_error_set(err, LUNA_EINVAL,
                                  "%s.server: unsupported URL scheme (want https:// or http://)",
                                  where);
        scheme = tls ? "https://" : "http://";
    }
    if (len <= host_at || server[host_at] == '/')
        return luna_error_set(err, LUNA_EINVAL, "%s.server: URL has no host", where);
    if (asprintf(&cfg->server, "%s%.*s", scheme, (int)len, server) < 0) {
        cfg->server = NULL;
        return oom(err);
    }
    /* Never echoed: it may hold a password (userinfo). */
    const char *why = luna_kubeconfig_check_server(cfg->server);
    if (why)
        return luna_error_set(err, LUNA_EINVAL, "%s.server: not a valid URL: %s", where, why);
    return 0;
}

static int apply_cluster(struct luna_kubeconfig *cfg, struct kc_cluster *c, luna_error *err)
{
    char where[512];
    prefix_of(where, sizeof where, c->file, "clusters", c->index, "cluster");
    if (!c->server || !*c->server)
        return luna_error_set(err, LUNA_EINVAL, "%s.server: not set (cluster \"%s\")", where,
                              c->name);
    if (c->ca_file && c->ca_data)
        return luna_error_set(err, LUNA_EINVAL,
                              "%s: certificate-authority and certificate-authority-data "
                              "are both set; set one", where);
    if (c->insecure && (c->ca_file || c->ca_data))
        return luna_error_set(err, LUNA_EINVAL,
                              "%s: insecure-skip-tls-verify cannot be combined with a "
                              "certificate authority", where);
    const char *why;
    if (c->ca_file && (why = luna_kubeconfig_tls_check_certs(c->ca_file, NULL, 0)))
        return luna_error_set(err, LUNA_EINVAL, "%s.certificate-authority: %s: %s", where,
                              c->ca_file, why);
    if (c->ca_data && (why = luna_kubeconfig_tls_check_certs(NULL, c->ca_data, c->ca_data_len)))
        return luna_error_set(err, LUNA_EINVAL, "%s.certificate-authority-data: %s", where, why);
    if (c->tls_server_name && *c->tls_server_name &&
        (why = luna_kubeconfig_check_server_name(c->tls_server_name)))
        return luna_error_set(err, LUNA_EINVAL, "%s.tls-server-name: %s", where, why);
    /* The proxy URL is never echoed: it may hold the proxy's password. */
    if (c->proxy_url && *c->proxy_url && (why = luna_kubeconfig_check_proxy(c->proxy_url)))
        return luna_error_set(err, LUNA_EINVAL, "%s.proxy-url: not a valid proxy URL: %s",
                              where, why);
    cfg->cluster = take(&c->name);
    cfg->ca_file = take(&c->ca_file);
    cfg->ca_data_len = c->ca_data_len;
    cfg->ca_data = take(&c->ca_data);
    cfg->insecure = c->insecure;
    if (c->tls_server_name && *c->tls_server_name)
        cfg->tls_server_name = take(&c->tls_server_name);
    if (c->proxy_url && *c->proxy_url)
        cfg->proxy_url = take(&c->proxy_url);
    return 0;
}

static int user_error(luna_error *err, const char *where, const char *msg)
{
    return luna_error_set(err, LUNA_EINVAL, "%s: %s", where, msg);
}

/* Validates the user and moves its credentials into cfg. */
static int apply_user(struct luna_kubeconfig *cfg, struct kc_user *u, const char *cluster_json,
                      const struct luna_kubeconfig_options *o, luna_error *err)
{
    char where[512];
    prefix_of(where, sizeof where, u->file, "users", u->index, "user");
    struct luna_kubeconfig_auth *a = cfg->priv;
    if (u->unsupported)
        return luna_error_set(err, LUNA_EINVAL, "%s.%s: not supported by luna%s", where,
                              u->unsupported,
                              strcmp(u->unsupported, "auth-provider") == 0
                                  ? " (use an exec credential plugin)" : " (impersonation)");
    bool basic = u->username || u->has_password;
    if (u->token && basic)
        return user_error(err, where, "more than one authentication method (token and "
                                      "username/password); only one is allowed");
    if (u->exec && (u->token || u->token_file || basic || u->cert_file || u->cert_data ||
                    u->key_file || u->key_data))
        return user_error(err, where, "exec cannot be combined with another authentication "
                                      "method (token, tokenFile, username/password, client "
                                      "certificate)");
    if (u->cert_file && u->cert_data)
        return user_error(err, where, "client-certificate and client-certificate-data are "
                                      "both set; set one");
    if (u->key_file && u->key_data)
        return user_error(err, where, "client-key and client-key-data are both set; set one");
    bool has_cert = u->cert_file || u->cert_data, has_key = u->key_file || u->key_data;
    if (has_cert && !has_key)
        return user_error(err, where, "client-key or client-key-data must be set to use a "
                                      "client certificate");
    if (has_key && !has_cert)
        return user_error(err, where, "client-certificate or client-certificate-data must "
                                      "be set to use a client key");
    if (has_cert) {
        const char *which;
        const char *why = luna_kubeconfig_tls_check_key_pair(u->cert_file, u->cert_data, u->cert_data_len,
                                         u->key_file, u->key_data, u->key_data_len, &which);
        if (why) {
            bool cert = strcmp(which, "cert") == 0;
            const char *file = cert ? u->cert_file : u->key_file;
            const char *fieldname = cert ? (u->cert_file ? "client-certificate"
                                                         : "client-certificate-data")
                                         : (u->key_file ? "client-key" : "client-key-data");
            return luna_error_set(err, LUNA_EINVAL, "%s.%s: %s%s%s", where, fieldname,
                                  file ? file : "", file ? ": " : "", why);
        }
    }
    if (!(a->where = strdup(where)))
        return oom(err);
    cfg->user = take(&u->name);
    cfg->client_cert_file = take(&u->cert_file);
    cfg->client_key_file = take(&u->key_file);
    cfg->client_cert_data_len = u->cert_data_len;
    cfg->client_cert_data = take(&u->cert_data);
    cfg->client_key_data_len = u->key_data_len;
    cfg->client_key_data = take(&u->key_data);
    a->token = take(&u->token);
    if (basic) {
        a->username = u->username ? take(&u->username) : strdup("");
        a->password = u->password ? take(&u->password) : strdup("");
        if (!a->username || !a->password)
            return oom(err);
        cfg->auth = LUNA_AUTH_BASIC;
    } else if (u->token_file) {
        if (!(a->token_file = luna_token_file_new(u->token_file)))
            return oom(err);
        a->token_generation = 1;
        cfg->auth = LUNA_AUTH_TOKEN_FILE;
        /* client-go reads the file when it builds the client; without a
         * static token to fall back on, an unreadable file is fatal. */
        const char *tok;
        luna_error local = { 0 };
        if (luna_token_file_get(a->token_file, time(NULL), &tok, &local) < 0 && !a->token)
            return luna_error_set(err, local.code, "%s.tokenFile: %s", where, local.msg);
    } else if (a->token) {
        cfg->auth = LUNA_AUTH_TOKEN;
    } else if (u->exec) {
        struct kc_exec *e = u->exec;
        char ewhere[540];
        snprintf(ewhere, sizeof ewhere, "%s.exec", where);
        if (!e->command || !*e->command)
            return luna_error_set(err, LUNA_EINVAL, "%s.command: not set", ewhere);
        if (!e->api_version || !*e->api_version)
            return luna_error_set(err, LUNA_EINVAL, "%s.apiVersion: not set", ewhere);
        if (strcmp(e->api_version, LUNA_EXEC_V1) != 0 &&
            strcmp(e->api_version, LUNA_EXEC_V1BETA1) != 0)
            return luna_error_set(err, LUNA_EINVAL,
                                  "%s.apiVersion: \"%.64s\" is not supported (use "
                                  LUNA_EXEC_V1 " or " LUNA_EXEC_V1BETA1 ")",
                                  ewhere, e->api_version);
        const char *mode = e->interactive_mode && *e->interactive_mode ? e->interactive_mode
                         : strcmp(e->api_version, LUNA_EXEC_V1BETA1) == 0 ? "IfAvailable"
                                                                           : NULL;
        if (!mode)
            return luna_error_set(err, LUNA_EINVAL,
                                  "%s.interactiveMode: must be set for " LUNA_EXEC_V1
                                  " (Never or IfAvailable)", ewhere);
        if (strcmp(mode, "Always") == 0)
            return luna_error_set(err, LUNA_EINVAL,
                                  "%s.interactiveMode: Always needs a terminal, and luna "
                                  "never has one (use Never or IfAvailable)", ewhere);
        if (strcmp(mode, "Never") != 0 && strcmp(mode, "IfAvailable") != 0)
            return luna_error_set(err, LUNA_EINVAL,
                                  "%s.interactiveMode: \"%.32s\" is not one of Never, "
                                  "IfAvailable, Always", ewhere, mode);
        struct luna_exec_cluster cluster = {
            .server = cfg->server,
            .tls_server_name = cfg->tls_server_name,
            .insecure = cfg->insecure,
            .ca_data = cfg->ca_data,
            .ca_data_len = cfg->ca_data_len,
            .proxy_url = cfg->proxy_url,
            .config_json = cluster_json,
        };
        unsigned char *ca_bytes = NULL;
        if (e->provide_cluster_info && cfg->ca_file) {
            /* client-go sends the CA file's content as certificate-authority-data. */
            FILE *fp = fopen(cfg->ca_file, "rb");
            size_t cap = 0, len = 0;
            if (fp) {
                size_t got;
                do {
                    if (len == cap) {
                        unsigned char *b = realloc(ca_bytes, cap = cap ? cap * 2 : 8192);
                        if (!b) {
                            fclose(fp);
                            free(ca_bytes);
                            return oom(err);
                        }
                        ca_bytes = b;
                    }
                    got = fread(ca_bytes + len, 1, cap - len, fp);
                    len += got;
                } while (got > 0);
                fclose(fp);
            }
            cluster.ca_data = ca_bytes;
            cluster.ca_data_len = len;
        }
        struct luna_exec_config ec = {
            .command = e->command,
            .args = (const char *const *)e->args,
            .nargs = e->nargs,
            .env = (const char *const *)e->env,
            .nenv = e->nenv,
            .api_version = e->api_version,
            .install_hint = e->install_hint,
            .cluster = e->provide_cluster_info ? &cluster : NULL,
            .timeout = o->exec_timeout,
            .where = ewhere,
        };
        int rc = luna_exec_plugin_new(&ec, &a->exec, err);
        free(ca_bytes);
        if (rc < 0)
            return rc;
        cfg->auth = LUNA_AUTH_EXEC;
    } else if (cfg->client_cert_file || cfg->client_cert_data) {
        cfg->auth = LUNA_AUTH_CLIENT_CERT;
    } else {
        cfg->auth = LUNA_AUTH_NONE;
    }
    return 0;
}

static struct luna_kubeconfig *new_config(void)
{
    struct luna_kubeconfig *cfg = calloc(1, sizeof *cfg);
    if (cfg && !(cfg->priv = calloc(1, sizeof *cfg->priv))) {
        free(cfg);
        return NULL;
    }
    return cfg;
}

static int load_from_files(struct kc_set *s, const struct luna_kubeconfig_options *o,
                           struct luna_kubeconfig *cfg, luna_error *err)
{
    const char *name = o->context && *o->context ? o->context : NULL;
    for (size_t i = 0; !name && i < s->n; i++)
        if (s->files[i].current_context && *s->files[i].current_context)
            name = s->files[i].current_context;
    if (!name)
        return luna_error_set(err, LUNA_EINVAL,
                              "%s: current-context is not set and no context was given",
                              s->source);
    const struct kc_context *ctx = find_context(s, name);
    if (!ctx)
        return luna_error_set(err, LUNA_ENOTFOUND, "%s: contexts: context \"%s\" not found",
                              s->source, name);
    char where[512];
    prefix_of(where, sizeof where, ctx->file, "contexts", ctx->index, "context");
    if (!ctx->cluster || !*ctx->cluster)
        return luna_error_set(err, LUNA_EINVAL, "%s.cluster: not set (context \"%s\")", where,
                              name);
    struct kc_cluster *cluster = find_cluster(s, ctx->cluster);
    if (!cluster)
        return luna_error_set(err, LUNA_ENOTFOUND, "%s.cluster: cluster \"%s\" not found",
                              where, ctx->cluster);
    struct kc_user *user = NULL;
    if (ctx->user && *ctx->user && !(user = find_user(s, ctx->user)))
        return luna_error_set(err, LUNA_ENOTFOUND, "%s.user: user \"%s\" not found", where,
                              ctx->user);
    if (!(cfg->source = strdup(s->source)) || !(cfg->context = strdup(name)) ||
        !(cfg->namespace = strdup(ctx->namespace && *ctx->namespace ? ctx->namespace
                                                                     : "default")))
        return oom(err);
    char cwhere[512];
    prefix_of(cwhere, sizeof cwhere, cluster->file, "clusters", cluster->index, "cluster");
    int rc = apply_cluster(cfg, cluster, err);
    if (rc < 0)
        return rc;
    /* client-go's DefaultServerURL: https when TLS is configured. */
    bool tls = cfg->ca_file || cfg->ca_data || cfg->insecure ||
               (user && (user->cert_file || user->cert_data));
    rc = normalize_server(cfg, cluster->server, tls, cwhere, err);
    if (rc < 0)
        return rc;
    if (user)
        return apply_user(cfg, user, cluster->exec_config_json, o, err);
    cfg->auth = LUNA_AUTH_NONE;
    return 0;
}

int luna_kubeconfig_load(const struct luna_kubeconfig_options *opts,
                         struct luna_kubeconfig **out, luna_error *err)
{
    struct kc_set set;
    bool found;
    int rc = load_set(opts, &set, &found, err);
    if (rc < 0) {
        free_set(&set);
        return rc;
    }
    struct luna_kubeconfig *cfg = new_config();
    if (!cfg) {
        free_set(&set);
        return oom(err);
    }
    rc = found ? load_from_files(&set, opts, cfg, err) : luna_kubeconfig_incluster_load(opts, cfg, err);
    free_set(&set);
    if (rc < 0) {
        luna_kubeconfig_free(cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}

void luna_kubeconfig_free(struct luna_kubeconfig *cfg)
{
    if (!cfg)
        return;
    struct luna_kubeconfig_auth *a = cfg->priv;
    if (a) {
        free(a->where);
        free_secret(a->token);
        free_secret(a->username);
        free_secret(a->password);
        luna_token_file_free(a->token_file);
        luna_exec_plugin_free(a->exec);
        free(a);
    }
    free(cfg->source);
    free(cfg->context);
    free(cfg->cluster);
    free(cfg->user);
    free(cfg->server);
    free(cfg->namespace);
    free(cfg->ca_file);
    free(cfg->ca_data);
    free(cfg->client_cert_file);
    free(cfg->client_cert_data);
    free(cfg->client_key_file);
    free_secret_bytes(cfg->client_key_data, cfg->client_key_data_len);
    free(cfg->tls_server_name);
    free(cfg->proxy_url);
    free(cfg);
}

/* ======================================================================
 * Credentials
 * ====================================================================== */

int luna_kubeconfig_credentials_at(struct luna_kubeconfig *cfg, time_t now,
                                   struct luna_credentials *out, luna_error *err)
{
    struct luna_kubeconfig_auth *a = cfg->priv;
    memset(out, 0, sizeof *out);
    out->client_cert_data = cfg->client_cert_data;
    out->client_cert_data_len = cfg->client_cert_data_len;
    out->client_key_data = cfg->client_key_data;
    out->client_key_data_len = cfg->client_key_data_len;
    out->client_cert_file = cfg->client_cert_file;
    out->client_key_file = cfg->client_key_file;
    out->generation = 1;
    switch (cfg->auth) {
    case LUNA_AUTH_NONE:
    case LUNA_AUTH_CLIENT_CERT:
        return 0;
    case LUNA_AUTH_TOKEN:
        out->token = a->token;
        return 0;
    case LUNA_AUTH_BASIC:
        out->username = a->username;
        out->password = a->password;
        return 0;
    case LUNA_AUTH_TOKEN_FILE: {
        out->generation = a->token_generation;
        luna_error local = { 0 };
        int rc = luna_token_file_get(a->token_file, now, &out->token, &local);
        if (rc < 0) {
            if (a->token) {   /* client-go falls back to the static token */
                out->token = a->token;
                return 0;
            }
            return luna_error_set(err, rc, "%s.tokenFile: %s", a->where, local.msg);
        }
        return 0;
    }
    case LUNA_AUTH_EXEC: {
        const struct luna_exec_credential *c;
        int rc = luna_exec_plugin_get(a->exec, now, &c, err);
        if (rc < 0)
            return rc;
        if (c->client_cert_data && a->exec_checked != c->generation) {
            const char *which;
            const char *why = luna_kubeconfig_tls_check_key_pair(NULL, (const unsigned char *)c->client_cert_data,
                                             c->client_cert_len, NULL,
                                             (const unsigned char *)c->client_key_data,
                                             c->client_key_len, &which);
            if (why) {
                luna_exec_plugin_invalidate(a->exec, c->generation);
                return luna_error_set(err, LUNA_EEXEC, "%s.exec: plugin returned an invalid "
                                      "status.%s: %s", a->where,
                                      strcmp(which, "cert") == 0 ? "clientCertificateData"
                                                                 : "clientKeyData", why);
            }
            a->exec_checked = c->generation;
        }
        out->token = c->token;
        if (c->client_cert_data) {
            out->client_cert_data = (const unsigned char *)c->client_cert_data;
            out->client_cert_data_len = c->client_cert_len;
            out->client_key_data = (const unsigned char *)c->client_key_data;
            out->client_key_data_len = c->client_key_len;
            out->client_cert_file = NULL;
            out->client_key_file = NULL;
        }
        out->generation = c->generation;
        return 0;
    }
    }
    return luna_error_set(err, LUNA_EINVAL, "unknown auth kind");
}

int luna_kubeconfig_credentials(struct luna_kubeconfig *cfg, struct luna_credentials *out,
                                luna_error *err)
{
    return luna_kubeconfig_credentials_at(cfg, time(NULL), out, err);
}

void luna_kubeconfig_invalidate(struct luna_kubeconfig *cfg, unsigned generation)
{
    struct luna_kubeconfig_auth *a = cfg->priv;
    if (cfg->auth == LUNA_AUTH_EXEC) {
        luna_exec_plugin_invalidate(a->exec, generation);
    } else if (cfg->auth == LUNA_AUTH_TOKEN_FILE &&
               (generation == 0 || generation == a->token_generation)) {
        luna_token_file_expire(a->token_file);
        a->token_generation++;
    }
}

unsigned luna_kubeconfig_exec_runs(const struct luna_kubeconfig *cfg)
{
    return cfg->auth == LUNA_AUTH_EXEC ? luna_exec_plugin_runs(cfg->priv->exec) : 0;
}
