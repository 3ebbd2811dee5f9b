/*
 * kubeconfig.h — where the API server is and how to authenticate to it:
 * kubeconfig files (merged as kubectl merges them) or the in-cluster
 * service account, resolved to one context, as client-go's clientcmd does.
 *
 * Uses: libyaml (document API) through kubeconfig_yaml (typed getters,
 * YAML to JSON), kubeconfig_tls (PEM checks), kubeconfig_transport (server,
 * proxy-url and tls-server-name checks), kubeconfig_incluster (the
 * service-account configuration), token_file (tokenFile and the
 * service-account token), exec_plugin (exec credential plugins).  Runs on the loop thread.  Never reads the process environment
 * itself: the caller passes $KUBECONFIG, $HOME and the in-cluster variables
 * in luna_kubeconfig_options (luna_kubeconfig_options_from_env fills them).
 *
 * Sources, first that applies:
 *   1. options.path (--kubeconfig): that one file; it must exist.
 *   2. options.kubeconfig_env ($KUBECONFIG): a ':'-separated list; empty
 *      entries and missing files are skipped, but at least one must exist.
 *      Merged like kubectl: clusters, contexts and users by name, the first
 *      file that defines a name wins (entries are never merged field by
 *      field); current-context from the first file that sets it.
 *   3. options.home/.kube/config if it exists.
 *   4. In-cluster: KUBERNETES_SERVICE_HOST/_PORT (an IPv6 host is bracketed),
 *      token, ca.crt and namespace from the service-account directory.
 * Relative paths in a file (certificate-authority, client-certificate,
 * client-key, tokenFile, an exec command containing '/') are resolved
 * against the directory of the file that defined the entry.
 *
 * Loading validates what client-go validates when it builds a client, and
 * fails with ONE error naming the file and the field:
 *   /home/u/.kube/config: users[0].user.client-certificate-data: invalid base64
 *   /home/u/.kube/config:3:5: YAML syntax error: ...
 *   /home/u/.kube/config: contexts: context "prod" not found
 * Every file in the list is parsed completely (a type or base64 error in any
 * entry fails the load, as in kubectl); references, file readability, PEM
 * content and auth conflicts are checked for the selected context only.
 * Secrets (tokens, passwords, key material, plugin output) never appear in
 * an error or a log line.  server and proxy_url may hold a user and
 * password (userinfo, sent as basic auth as client-go sends it): callers
 * print them only through luna_url_redact() (base/url.h).
 *
 * Credentials: luna_kubeconfig_credentials() returns what to send now.  A
 * tokenFile (and the service-account token) is re-read when the file
 * changes (see token_file.h); an exec plugin runs SYNCHRONOUSLY, blocking
 * the loop, on first use and again when its credential nears expiry (see
 * exec_plugin.h); after a 401 call luna_kubeconfig_invalidate() with the
 * credentials' generation.
 *
 * Invariants: auth == LUNA_AUTH_EXEC if and only if the user has an exec
 * section; ca_file and ca_data are never both set, nor are client_cert_file
 * and client_cert_data (or the key pair); client_cert_* is set if and only
 * if client_key_* is; insecure is never set together with a CA.
 *
 * Ownership: luna_kubeconfig_load returns a struct owned by the caller,
 * freed (secrets wiped) with luna_kubeconfig_free().  All fields are owned
 * by the struct and read-only for the caller.  Options are borrowed for the
 * call.  Credentials are borrowed until the next credentials(), invalidate()
 * or free on the same struct.
 */
#ifndef LUNA_KUBECONFIG_H
#define LUNA_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "base/error.h"

#define LUNA_SERVICEACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* All borrowed for the duration of luna_kubeconfig_load; NULL means unset. */
struct luna_kubeconfig_options {
    const char *path;               /* --kubeconfig */
    const char *context;            /* --context; NULL: current-context */
    const char *kubeconfig_env;     /* $KUBECONFIG */
    const char *home;               /* $HOME */
    const char *service_host;       /* $KUBERNETES_SERVICE_HOST */
    const char *service_port;       /* $KUBERNETES_SERVICE_PORT */
    const char *pod_namespace;      /* $POD_NAMESPACE (in-cluster namespace) */
    const char *serviceaccount_dir; /* NULL: LUNA_SERVICEACCOUNT_DIR */
    double exec_timeout;            /* seconds per plugin run; <= 0: 30 */
};

/* Fills opts from the process environment: KUBECONFIG, HOME,
 * KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT, POD_NAMESPACE and
 * LUNA_SERVICEACCOUNT_DIR (borrowed from environ).  path and context are
 * left NULL for the caller to set. */
void luna_kubeconfig_options_from_env(struct luna_kubeconfig_options *opts);

enum luna_auth_kind {
    LUNA_AUTH_NONE,        /* anonymous */
    LUNA_AUTH_CLIENT_CERT, /* TLS client certificate only */
    LUNA_AUTH_TOKEN,       /* static bearer token */
    LUNA_AUTH_TOKEN_FILE,  /* bearer token re-read from a file (also in-cluster) */
    LUNA_AUTH_BASIC,       /* username / password */
    LUNA_AUTH_EXEC,        /* exec credential plugin */
};

/* "none", "client-certificate", "token", "token-file", "basic", "exec".
 * A static client certificate may accompany token, token-file and basic
 * (client_cert_* fields); exec excludes every other method. */
const char *luna_auth_kind_name(enum luna_auth_kind kind);

struct luna_kubeconfig_auth;  /* private: token file, exec plugin, secrets */

struct luna_kubeconfig {
    char *source;            /* the file(s) read, ':'-joined, or "in-cluster" */
    char *context;           /* selected context; NULL in-cluster */
    char *cluster;           /* its cluster's name; NULL in-cluster */
    char *user;              /* its user's name; NULL in-cluster or no user */
    char *server;            /* scheme://host[:port][/path], no trailing '/' */
    char *namespace;         /* the context's namespace, or "default" */

    /* TLS.  A CA is a file path or PEM bytes (never both); neither: the
     * system roots.  Client certificate and key likewise (static ones; an
     * exec plugin may supply them in the credentials instead). */
    char *ca_file;
    unsigned char *ca_data;
    size_t ca_data_len;
    char *client_cert_file;
    unsigned char *client_cert_data;
    size_t client_cert_data_len;
    char *client_key_file;
    unsigned char *client_key_data;
    size_t client_key_data_len;
    bool insecure;           /* insecure-skip-tls-verify */
    char *tls_server_name;   /* SNI and verification name, or NULL */
    char *proxy_url;         /* every request goes through it, or NULL
                                (then $HTTPS_PROXY/$NO_PROXY, as client-go) */

    enum luna_auth_kind auth;
    struct luna_kubeconfig_auth *priv;
};

/* What to send with a request right now.  Pointers are borrowed (see the
 * ownership note above); unset ones are NULL. */
struct luna_credentials {
    const char *token;              /* Authorization: Bearer <token> */
    const char *username;           /* basic auth; password may be "" */
    const char *password;
    /* The client certificate to present: from the exec plugin if it
     * returned one, else the static one from the kubeconfig. */
    const unsigned char *client_cert_data;
    size_t client_cert_data_len;
    const unsigned char *client_key_data;
    size_t client_key_data_len;
    const char *client_cert_file;
    const char *client_key_file;
    unsigned generation;            /* pass to luna_kubeconfig_invalidate */
};

/* Loads, merges, selects the context and validates.  Returns 0 and a new
 * config in *out, or a negative LUNA_E* code with err set (nothing to free).
 * Does not run exec plugins (the first credentials() call does). */
int luna_kubeconfig_load(const struct luna_kubeconfig_options *opts,
                         struct luna_kubeconfig **out, luna_error *err);

/* The credentials to use now (wall clock).  Re-reads a changed token file,
 * runs the exec plugin when nothing valid is cached.  Errors name the
 * kubeconfig file and user (or the token file), never a secret. */
int luna_kubeconfig_credentials(struct luna_kubeconfig *cfg,
                                struct luna_credentials *out, luna_error *err);

/* Same with an explicit wall-clock time in seconds (specs step it). */
int luna_kubeconfig_credentials_at(struct luna_kubeconfig *cfg, time_t now,
                                   struct luna_credentials *out, luna_error *err);

/* After a 401 for a request sent with credentials of `generation`: makes
 * the next credentials() call re-run the exec plugin and re-read a token
 * file, unless that already happened (another generation is current).
 * Generation 0 invalidates unconditionally.  No-op for static credentials. */
void luna_kubeconfig_invalidate(struct luna_kubeconfig *cfg, unsigned generation);

/* How many times luna tried to start the exec plugin (0 without one). */
unsigned luna_kubeconfig_exec_runs(const struct luna_kubeconfig *cfg);

/* Logs "kubeconfig loaded" (source, server, context, namespace, auth kind,
 * proxy and tls_server_name when set), URLs through luna_url_redact, and a
 * warning when TLS does not protect the connection: insecure-skip-tls-verify,
 * or plain http to a host other than this machine.  Call once per load
 * (luna run loads once).  In kubeconfig_transport.c. */
void luna_kubeconfig_log_loaded(const struct luna_kubeconfig *cfg);

void luna_kubeconfig_free(struct luna_kubeconfig *cfg);

#endif
