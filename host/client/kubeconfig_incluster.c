/* kubeconfig_incluster.c — see kubeconfig_incluster.h. */
#include "client/kubeconfig_incluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/kubeconfig_impl.h"
#include "client/kubeconfig_tls.h"
#include "client/token_file.h"
#include "base/log.h"

static char *read_small_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    char *start = buf;
    while (*start == ' ' || *start == '\n' || *start == '\t' || *start == '\r')
        start++;
    size_t len = strlen(start);
    while (len > 0 && (start[len - 1] == ' ' || start[len - 1] == '\n' ||
                       start[len - 1] == '\t' || start[len - 1] == '\r'))
        len--;
    return len ? strndup(start, len) : NULL;
}

int luna_kubeconfig_incluster_load(const struct luna_kubeconfig_options *o, struct luna_kubeconfig *cfg,
                           luna_error *err)
{
    const char *host = o->service_host, *port = o->service_port;
    if (!host || !*host || !port || !*port) {
        const char *home_hint = o->home && *o->home ? o->home : "$HOME";
        return luna_error_set(err, LUNA_ENOTFOUND,
                              "no configuration: %s/.kube/config does not exist, KUBECONFIG "
                              "and --kubeconfig are not set, and this is not a pod "
                              "(KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset)",
                              home_hint);
    }
    if (o->context && *o->context)
        return luna_error_set(err, LUNA_ENOTFOUND,
                              "in-cluster: contexts: context \"%s\" not found (no kubeconfig "
                              "file was found)", o->context);
    const char *dir = o->serviceaccount_dir && *o->serviceaccount_dir ? o->serviceaccount_dir
                                                                       : LUNA_SERVICEACCOUNT_DIR;
    struct luna_kubeconfig_auth *a = cfg->priv;
    char *token_path = NULL, *ca_path = NULL, *ns_path = NULL;
    if (asprintf(&token_path, "%s/token", dir) < 0)
        token_path = NULL;
    if (asprintf(&ca_path, "%s/ca.crt", dir) < 0)
        ca_path = NULL;
    if (asprintf(&ns_path, "%s/namespace", dir) < 0)
        ns_path = NULL;
    bool v6 = strchr(host, ':') != NULL;
    int rc = 0;
    if (!token_path || !ca_path || !ns_path || !(cfg->source = strdup("in-cluster")) ||
        asprintf(&cfg->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
                 port) < 0 ||
        !(a->token_file = luna_token_file_new(token_path)) ||
        !(a->where = strdup("in-cluster"))) {
        rc = luna_error_set(err, LUNA_ENOMEM, "out of memory");
        goto out;
    }
    a->token_generation = 1;
    cfg->auth = LUNA_AUTH_TOKEN_FILE;
    const char *tok;
    luna_error local = { 0 };
    if (luna_token_file_get(a->token_file, time(NULL), &tok, &local) < 0) {
        rc = luna_error_set(err, local.code, "in-cluster: %s", local.msg);
        goto out;
    }
    /* client-go logs and goes on without the CA when it cannot load it. */
    const char *why = luna_kubeconfig_tls_check_certs(ca_path, NULL, 0);
    if (why)
        luna_warn("in-cluster CA not loaded, using system roots", "path", ca_path, "error", why);
    else {
        cfg->ca_file = ca_path;
        ca_path = NULL;
    }
    if (o->pod_namespace && *o->pod_namespace)
        cfg->namespace = strdup(o->pod_namespace);
    else if (!(cfg->namespace = read_small_file(ns_path)))
        cfg->namespace = strdup("default");
    if (!cfg->namespace)
        rc = luna_error_set(err, LUNA_ENOMEM, "out of memory");
out:
    free(token_path);
    free(ca_path);
    free(ns_path);
    return rc;
}
