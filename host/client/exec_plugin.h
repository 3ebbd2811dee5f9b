/*
 * exec_plugin.h — kubeconfig `exec` credential plugins (client-go's
 * plugin/pkg/client/auth/exec): run a command, read an ExecCredential from
 * its stdout, cache the credential until it expires.
 *
 * Uses: posix_spawn, poll, yajl (tree API to parse, generator to write
 * KUBERNETES_EXEC_INFO), libcrypto (base64 of the CA for spec.cluster).
 *
 * The plugin runs SYNCHRONOUSLY on the loop thread, as client-go runs it
 * inside the request that needs the credential: luna_exec_plugin_get()
 * blocks the loop until the plugin exits, at most `timeout` seconds (then
 * the plugin's whole process group is killed with SIGKILL).  Plugins that
 * return an expirationTimestamp run once per credential lifetime, so the
 * loop stalls rarely; a plugin without one runs once for the process (or
 * again after luna_exec_plugin_invalidate, after a 401).
 *
 * The child: argv = command + args (command looked up in the PATH of this
 * process when it has no '/'); environment = this process's environment,
 * then the configured env entries (overriding), then KUBERNETES_EXEC_INFO =
 * {"kind":"ExecCredential","apiVersion":...,"spec":{"cluster":{...},
 * "interactive":false}} (spec.cluster only with provideClusterInfo);
 * stdin = /dev/null (luna never has a terminal: spec.interactive is false);
 * stdout = a pipe read here (at most LUNA_EXEC_MAX_OUTPUT bytes); stderr =
 * a pipe read here whose lines are logged ("exec plugin stderr" at warn,
 * source = the command; at most LUNA_EXEC_MAX_STDERR bytes a run, the rest
 * dropped), never passed through raw; its own process group.
 *
 * The credential: status.token, and/or status.clientCertificateData with
 * status.clientKeyData (PEM), and status.expirationTimestamp (RFC 3339,
 * optional).  apiVersion must equal the configured one and kind must be
 * ExecCredential.  Errors (exit status, timeout, missing executable with the
 * installHint, bad JSON, wrong apiVersion/kind, missing status, token or
 * key) name the plugin's command, never the credential or the plugin's
 * output.
 *
 * Invariants: a credential is cached if and only if the last run succeeded
 * and nothing invalidated it since; get() re-runs the plugin if and only if
 * nothing is cached or the cached credential expires within its refresh
 * margin (min(LUNA_EXEC_REFRESH_MARGIN, a tenth of its lifetime)).
 * Every successful run gets a new generation number (1, 2, ...).
 *
 * Ownership: luna_exec_plugin_new copies everything in the config.  The
 * credential from get() is borrowed until the next get(), invalidate() or
 * free.  Free the plugin with luna_exec_plugin_free(), which wipes secrets.
 */
#ifndef LUNA_EXEC_PLUGIN_H
#define LUNA_EXEC_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "base/error.h"

#define LUNA_EXEC_DEFAULT_TIMEOUT 30.0  /* seconds: hard limit for one run */
#define LUNA_EXEC_REFRESH_MARGIN 10     /* seconds before expiry to refresh */
#define LUNA_EXEC_MAX_OUTPUT (4 << 20)  /* bytes of stdout accepted */
#define LUNA_EXEC_MAX_STDERR (64 << 10) /* bytes of stderr logged per run */

#define LUNA_EXEC_V1 "client.authentication.k8s.io/v1"
#define LUNA_EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"

/* The cluster handed to the plugin (spec.cluster) with provideClusterInfo.
 * All borrowed for the duration of luna_exec_plugin_new. */
struct luna_exec_cluster {
    const char *server;
    const char *tls_server_name;          /* NULL if unset */
    bool insecure;
    const unsigned char *ca_data;         /* CA bundle bytes (PEM), or NULL */
    size_t ca_data_len;
    const char *proxy_url;                /* NULL if unset */
    const char *config_json;              /* spec.cluster.config: the cluster's
                                             client.authentication.k8s.io/exec
                                             extension as JSON, or NULL */
};

/* Borrowed for the duration of luna_exec_plugin_new. */
struct luna_exec_config {
    const char *command;                  /* path or name looked up in PATH */
    const char *const *args;              /* nargs strings */
    size_t nargs;
    const char *const *env;               /* nenv "NAME=value" strings */
    size_t nenv;
    const char *api_version;              /* LUNA_EXEC_V1 or LUNA_EXEC_V1BETA1 */
    const char *install_hint;             /* shown when command is missing, or NULL */
    const struct luna_exec_cluster *cluster; /* non-NULL iff provideClusterInfo */
    double timeout;                       /* seconds; <= 0 means the default */
    const char *where;                    /* prefix for error messages, e.g.
                                             "/k/config: users[0].user.exec" */
};

struct luna_exec_credential {
    char *token;                          /* NULL if the plugin returned none */
    char *client_cert_data;               /* PEM, NULL if none */
    size_t client_cert_len;
    char *client_key_data;                /* PEM, NULL iff client_cert_data is */
    size_t client_key_len;
    time_t expires;                       /* 0 if no expirationTimestamp */
    time_t fetched;                       /* when the plugin returned it */
    unsigned generation;
};

struct luna_exec_plugin;

/* Copies cfg.  Returns 0, or LUNA_EINVAL (api_version not supported,
 * cluster config_json not valid JSON) / LUNA_ENOMEM. */
int luna_exec_plugin_new(const struct luna_exec_config *cfg,
                         struct luna_exec_plugin **out, luna_error *err);

/* The cached credential, or a new one from running the plugin (blocking).
 * `now` is the wall clock in seconds (injectable for specs).  On failure
 * returns LUNA_EEXEC (exit status, signal, bad output), LUNA_ENOTFOUND
 * (no such executable), LUNA_ETIMEOUT, LUNA_ETOOBIG or LUNA_EIO, and
 * keeps no credential. */
int luna_exec_plugin_get(struct luna_exec_plugin *p, time_t now,
                         const struct luna_exec_credential **out, luna_error *err);

/* Drops the cached credential if its generation is `generation` (the one a
 * request was sent with and got 401 for), so many failed requests with the
 * same credential cause one re-run; generation 0 drops any. */
void luna_exec_plugin_invalidate(struct luna_exec_plugin *p, unsigned generation);

/* Number of attempts to start the plugin (for logs and specs). */
unsigned luna_exec_plugin_runs(const struct luna_exec_plugin *p);

void luna_exec_plugin_free(struct luna_exec_plugin *p);

#endif
