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
        luna_kubeconfig_file_free(&s->files[i]);
    free(s->files);
    free(s->source);
}

static int add_file(struct kc_set *s, const char *path, bool must_exist, luna_error *err)
{
    for (size_t i = 0; i < s->n; i++)   /* kubectl de-duplicates the list */
        if (strcmp(s->files[i].path, path) == 0)
            return 0;
    struct kc_file kf;
    int rc = luna_kubeconfig_file_load(path, &kf, err);
    if (rc == LUNA_ENOTFOUND && !must_exist)
        return 0;
    if (rc < 0)
        return rc;
    struct kc_file *files = realloc(s->files, (s->n + 1) * sizeof *files);
    if (!files) {
        luna_kubeconfig_file_free(&kf);
        return luna_kubeconfig_oom(err);
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
        return luna_kubeconfig_oom(err);
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
            return luna_kubeconfig_oom(err);
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
            return luna_kubeconfig_oom(err);
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
        return luna_kubeconfig_oom(err);
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
    cfg->cluster = luna_kubeconfig_take(&c->name);
    cfg->ca_file = luna_kubeconfig_take(&c->ca_file);
    cfg->ca_data_len = c->ca_data_len;
    cfg->ca_data = luna_kubeconfig_take(&c->ca_data);
    cfg->insecure = c->insecure;
    if (c->tls_server_name && *c->tls_server_name)
        cfg->tls_server_name = luna_kubeconfig_take(&c->tls_server_name);
    if (c->proxy_url && *c->proxy_url)
        cfg->proxy_url = luna_kubeconfig_take(&c->proxy_url);
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
        return luna_kubeconfig_oom(err);
    cfg->user = luna_kubeconfig_take(&u->name);
    cfg->client_cert_file = luna_kubeconfig_take(&u->cert_file);
    cfg->client_key_file = luna_kubeconfig_take(&u->key_file);
    cfg->client_cert_data_len = u->cert_data_len;
    cfg->client_cert_data = luna_kubeconfig_take(&u->cert_data);
    cfg->client_key_data_len = u->key_data_len;
    cfg->client_key_data = luna_kubeconfig_take(&u->key_data);
    a->token = luna_kubeconfig_take(&u->token);
    if (basic) {
        a->username = u->username ? luna_kubeconfig_take(&u->username) : strdup("");
        a->password = u->password ? luna_kubeconfig_take(&u->password) : strdup("");
        if (!a->username || !a->password)
            return luna_kubeconfig_oom(err);
        cfg->auth = LUNA_AUTH_BASIC;
    } else if (u->token_file) {
        if (!(a->token_file = luna_token_file_new(u->token_file)))
            return luna_kubeconfig_oom(err);
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
                            return luna_kubeconfig_oom(err);
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
        return luna_kubeconfig_oom(err);
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
        return luna_kubeconfig_oom(err);
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
        luna_kubeconfig_free_secret(a->token);
        luna_kubeconfig_free_secret(a->username);
        luna_kubeconfig_free_secret(a->password);
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
    luna_kubeconfig_free_secret_bytes(cfg->client_key_data, cfg->client_key_data_len);
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
