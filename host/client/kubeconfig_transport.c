/* kubeconfig_transport.c — see kubeconfig_transport.h. */
#include "client/kubeconfig_transport.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "base/log.h"
#include "base/url.h"
#include "client/kubeconfig_impl.h"

/* Parses url; NULL if it is a valid URL with a host whose scheme is one of
 * schemes (NULL-terminated), else why not. */
static const char *check(const char *url, const char *const *schemes, const char *want)
{
    CURLU *u = curl_url();
    if (!u)
        return "out of memory";
    const char *why = NULL;
    char *scheme = NULL, *host = NULL;
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
    if (uc != CURLUE_OK) {
        why = curl_url_strerror(uc);
    } else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
        why = "no scheme";
    } else if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host) {
        why = "no host";
    } else {
        bool known = false;
        for (size_t i = 0; schemes[i] && !known; i++)
            known = strcasecmp(scheme, schemes[i]) == 0;
        if (!known)
            why = want;
    }
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    return why;
}

const char *luna_kubeconfig_check_server(const char *url)
{
    static const char *const schemes[] = { "https", "http", NULL };
    return check(url, schemes, "unsupported URL scheme (want https:// or http://)");
}

const char *luna_kubeconfig_check_proxy(const char *url)
{
    if (!strstr(url, "://"))
        return "not a URL (want http://, https:// or socks5://HOST:PORT)";
    static const char *const schemes[] = { "http", "https", "socks5", NULL };
    return check(url, schemes, "unsupported scheme (want http, https or socks5, as client-go)");
}

const char *luna_kubeconfig_check_server_name(const char *name)
{
    size_t len = strlen(name);
    if (len > 253)
        return "longer than 253 characters";
    const char *why = "not a host name or IP address (no scheme, port, path or brackets)";
    if (strchr(name, ':')) {   /* only an IPv6 address has one */
        unsigned char addr[16];
        return inet_pton(AF_INET6, name, addr) == 1 ? NULL : why;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '-' && c != '.')
            return why;
    }
    return NULL;
}

/* Whether host[:port] names this machine: an unencrypted connection to it
 * never crosses a network. */
static bool loopback(const char *hostport)
{
    if (strncmp(hostport, "[::1]", 5) == 0 || strncmp(hostport, "127.", 4) == 0)
        return true;
    size_t n = strcspn(hostport, ":");
    return n == 9 && strncasecmp(hostport, "localhost", 9) == 0;
}

void luna_kubeconfig_log_loaded(const struct luna_kubeconfig *cfg)
{
    char server[512], proxy[512], host[300];
    luna_url_redact_buf(cfg->server, server, sizeof server);
    if (cfg->proxy_url)
        luna_url_redact_buf(cfg->proxy_url, proxy, sizeof proxy);
    const char *pairs[] = {
        "source", cfg->source,
        "server", server,
        "context", cfg->context ? cfg->context : "(in-cluster)",
        "namespace", cfg->namespace,
        "auth", luna_auth_kind_name(cfg->auth),
        "proxy", cfg->proxy_url ? proxy : NULL,
        "tls_server_name", cfg->tls_server_name,
    };
    luna_log_pairs(LUNA_LOG_INFO, "kubeconfig loaded", pairs, (int)(sizeof pairs / sizeof *pairs / 2));
    /* Once per load, which is once per process: a configuration that
     * gives up what TLS protects says so where an operator looks. */
    if (cfg->insecure)
        luna_warn("TLS verification is off (insecure-skip-tls-verify): the API server's "
                  "certificate is not checked, so anyone on the path can read and change "
                  "the traffic, credentials included", "source", cfg->source, "server", server);
    else if (strncasecmp(cfg->server, "http://", 7) == 0 &&
             !loopback(luna_url_host(cfg->server, host, sizeof host)))
        luna_warn("the API server is reached over plain http: no TLS, so anyone on the path "
                  "can read and change the traffic, credentials included", "source",
                  cfg->source, "server", server);
}
