/*
 * kubeconfig_impl.h — what the kubeconfig loader's files share, private
 * to them (kubeconfig.c, kubeconfig_incluster.c, kubeconfig_transport.c):
 * the private part of a loaded kubeconfig (struct luna_kubeconfig.priv),
 * the credentials to send and the sources that renew them.
 *
 * Owned by its luna_kubeconfig and freed (secrets wiped) with it.  token,
 * username and password are secrets: they never appear in a message.
 */
#ifndef LUNA_KUBECONFIG_AUTH_H
#define LUNA_KUBECONFIG_AUTH_H

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "client/kubeconfig.h"

struct luna_token_file;
struct luna_exec_plugin;

struct luna_kubeconfig_auth {
    char *where;                /* "FILE: users[N].user" for messages */
    char *token;                /* static token (also the tokenFile fallback) */
    char *username;
    char *password;
    struct luna_token_file *token_file;
    unsigned token_generation;
    struct luna_exec_plugin *exec;
    unsigned exec_checked;      /* generation whose client cert was checked */
};

/* The exec credential plugin's extension key in a cluster's extensions. */
#define EXEC_EXTENSION "client.authentication.k8s.io/exec"

/* ---- one parsed kubeconfig file (kubeconfig_file.c) ---- */

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

/* Parses path into kf.  LUNA_ENOTFOUND (with err set) if it does not
 * exist.  What it set stays in kf for luna_kubeconfig_file_free(). */
int luna_kubeconfig_file_load(const char *path, struct kc_file *kf, luna_error *err);
/* Frees what kf holds (secrets wiped) and zeroes it. */
void luna_kubeconfig_file_free(struct kc_file *f);

/* ---- small helpers both halves use ---- */

static inline void luna_kubeconfig_free_secret(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static inline void luna_kubeconfig_free_secret_bytes(unsigned char *s, size_t len)
{
    if (s) {
        explicit_bzero(s, len);
        free(s);
    }
}

/* Moves a pointer out of a parsed entry into the result. */
static inline void *luna_kubeconfig_take(void *pp)
{
    void **p = pp;
    void *v = *p;
    *p = NULL;
    return v;
}

static inline int luna_kubeconfig_oom(luna_error *err)
{
    return luna_error_set(err, LUNA_ENOMEM, "out of memory");
}

#endif
