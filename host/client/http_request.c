/* http_request.c — a request built into a curl easy handle (http.h): the
 * method, URL and headers checked, TLS (CA, client certificate, the name
 * verified), routing by tls-server-name, the proxy, timeouts; then started
 * on the client, cancelled, described. */
#include "client/http_impl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <utlist.h>

#include "base/log.h"
#include "base/url.h"

/* ---- request ------------------------------------------------------------ */

/* "METHOD URL" through luna_url_redact (no user, password or query
 * secret); NULL if url is not a valid http(s) URL (err says why). */
static char *describe(const char *method, const char *url, luna_error *err)
{
    CURLU *u = curl_url();
    if (!u) {
        luna_error_set(err, LUNA_ENOMEM, "out of memory parsing a URL");
        return NULL;
    }
    char *what = NULL;
    char *scheme = NULL, *clean = NULL;
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, 0);
    if (uc != CURLUE_OK) {
        /* Not echoed: it may hold credentials we cannot find in it. */
        luna_error_set(err, uc == CURLUE_OUT_OF_MEMORY ? LUNA_ENOMEM : LUNA_EINVAL,
                       "%s: invalid URL (%s)", method, curl_url_strerror(uc));
        goto out;
    }
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
        luna_error_set(err, LUNA_EINVAL, "%s: unsupported URL scheme '%s' (http or https)",
                       method, scheme ? scheme : "");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_URL, &clean, 0) != CURLUE_OK) {
        luna_error_set(err, LUNA_EINVAL, "%s: invalid URL", method);
        goto out;
    }
    size_t n = strlen(method) + 1 + strlen(clean) + 1;
    char *raw = malloc(n);
    if (raw) {
        snprintf(raw, n, "%s %s", method, clean);
        what = luna_url_redact(raw);
        explicit_bzero(raw, n);
        free(raw);
    }
    if (!what)
        luna_error_set(err, LUNA_ENOMEM, "out of memory");
out:
    curl_free(scheme);
    curl_free(clean);
    curl_url_cleanup(u);
    return what;
}

static bool has_header(const luna_http_options *o, const char *name)
{
    for (size_t i = 0; i < o->nheaders; i++)
        if (strcasecmp(o->headers[i].name, name) == 0)
            return true;
    return false;
}

/* Adds "Name: value".  An empty value is sent as such if send_empty
 * ("Name;" in curl's syntax), else it removes a header curl would add. */
static bool slist_add(struct curl_slist **list, const char *name, const char *value,
                      bool send_empty)
{
    size_t n = strlen(name) + 2 + strlen(value) + 1;
    char *line = malloc(n);
    if (!line)
        return false;
    snprintf(line, n, value[0] ? "%s: %s" : send_empty ? "%s;" : "%s:", name, value);
    struct curl_slist *l = curl_slist_append(*list, line);
    free(line);
    if (!l)
        return false;
    *list = l;
    return true;
}

static bool build_headers(luna_http_request *r, const luna_http_options *o, bool body)
{
    struct curl_slist *l = NULL;
    for (size_t i = 0; i < o->nheaders; i++) {
        if (o->bearer_token && strcasecmp(o->headers[i].name, "Authorization") == 0)
            continue;
        if (!slist_add(&l, o->headers[i].name, o->headers[i].value, true))
            goto fail;
    }
    if (o->bearer_token) {
        const char *prefix = "Authorization: Bearer ";
        size_t n = strlen(prefix) + strlen(o->bearer_token) + 1;
        char *line = malloc(n);
        if (!line)
            goto fail;
        snprintf(line, n, "%s%s", prefix, o->bearer_token);
        struct curl_slist *nl = curl_slist_append(l, line);
        explicit_bzero(line, n);
        free(line);
        if (!nl)
            goto fail;
        l = nl;
    }
    /* No "Expect: 100-continue" round trip; no form content type. */
    if (!has_header(o, "Expect") && !slist_add(&l, "Expect", "", false))
        goto fail;
    if (body && !has_header(o, "Content-Type") && !slist_add(&l, "Content-Type", "", false))
        goto fail;
    r->req_headers = l;
    return true;
fail:
    curl_slist_free_all(l);
    return false;
}

/* Checks the options other than method and URL; messages start with what.
 * Header values are never echoed (they may be credentials). */
static int validate(const luna_http_options *o, const char *what, enum luna_http_reason *reason,
                    luna_error *err)
{
    const char *bad = NULL;
    for (size_t i = 0; i < o->nheaders && !bad; i++) {
        const luna_http_header *h = &o->headers[i];
        if (!h->name || !h->value || !luna_http_is_token(h->name, 256) || !luna_http_is_field_value(h->value))
            bad = h->name ? h->name : "(null)";
    }
    if (bad)
        luna_error_set(err, LUNA_EINVAL, "%s: invalid request header '%.64s' (name must be a "
                       "token, value without line breaks)", what, bad);
    else if (o->bearer_token && (!luna_http_is_field_value(o->bearer_token) || !o->bearer_token[0]))
        luna_error_set(err, LUNA_EINVAL, "%s: invalid bearer token (empty or with a line break)",
                       what);
    else if (o->timeout < 0 || o->connect_timeout < 0 || o->idle_timeout < 0)
        luna_error_set(err, LUNA_EINVAL, "%s: timeouts must not be negative", what);
    else if (o->on_chunk && o->on_line)
        luna_error_set(err, LUNA_EINVAL, "%s: on_chunk and on_line are exclusive", what);
    else if (o->body_len && !o->body)
        luna_error_set(err, LUNA_EINVAL, "%s: body_len without body", what);
    else if (o->tls.server_name &&
             strspn(o->tls.server_name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789.-:") != strlen(o->tls.server_name))
        luna_error_set(err, LUNA_EINVAL, "%s: invalid TLS server name (a host name or IP "
                       "address)", what);
    else if (o->proxy && *o->proxy && !strstr(o->proxy, "://"))
        luna_error_set(err, LUNA_EINVAL, "%s: invalid proxy (want scheme://host:port)", what);
    else
        return 0;
    return luna_http_set_reason(reason, LUNA_HTTP_INVALID, LUNA_EINVAL);
}

static long ms_of(double seconds)
{
    double ms = seconds * 1000.0;
    if (ms < 1)
        return 1;
    if (ms > (double)LONG_MAX / 2)
        return LONG_MAX / 2;
    return (long)ms;
}

static bool set_blob(CURL *easy, CURLoption opt, const char *data, size_t len)
{
    struct curl_blob blob = { .data = (void *)data, .len = len, .flags = CURL_BLOB_COPY };
    return curl_easy_setopt(easy, opt, &blob) == CURLE_OK;
}

static bool setup_tls(CURL *easy, const luna_http_tls *t)
{
    bool ok = true;
    if (t->ca_pem || t->ca_file) {
        /* Trust only the given CA, as client-go does, not the system store. */
        ok &= curl_easy_setopt(easy, CURLOPT_CAPATH, NULL) == CURLE_OK;
        if (t->ca_pem)
            ok &= set_blob(easy, CURLOPT_CAINFO_BLOB, t->ca_pem, t->ca_pem_len);
        else
            ok &= curl_easy_setopt(easy, CURLOPT_CAINFO, t->ca_file) == CURLE_OK;
    }
    if (t->cert_pem)
        ok &= set_blob(easy, CURLOPT_SSLCERT_BLOB, t->cert_pem, t->cert_pem_len);
    else if (t->cert_file)
        ok &= curl_easy_setopt(easy, CURLOPT_SSLCERT, t->cert_file) == CURLE_OK;
    if (t->key_pem)
        ok &= set_blob(easy, CURLOPT_SSLKEY_BLOB, t->key_pem, t->key_pem_len);
    else if (t->key_file)
        ok &= curl_easy_setopt(easy, CURLOPT_SSLKEY, t->key_file) == CURLE_OK;
    if (t->insecure_skip_verify) {
        ok &= curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L) == CURLE_OK;
        ok &= curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L) == CURLE_OK;
    }
    return ok;
}

/* tls.server_name, as client-go's tls.Config.ServerName: the TLS session
 * names it (SNI) and the certificate is verified against it, while the
 * connection goes to the URL's host and the Host header names that host.
 * libcurl verifies against the URL's host only, so the URL sent to curl
 * names the server name and CURLOPT_CONNECT_TO maps it back to the real
 * host and port (also the target a proxy is asked to CONNECT to).  Sets
 * *url (curl_free) and appends the Host header; false when out of memory
 * or the URL cannot be rebuilt. */
static bool route_by_name(luna_http_request *r, const char *in, const char *name, char **url)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *given_port = NULL, *line = NULL;
    bool ok = false;
    bool v6 = strchr(name, ':') != NULL;
    if (!u || curl_url_set(u, CURLUPART_URL, in, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
        goto out;
    curl_url_get(u, CURLUPART_PORT, &given_port, 0);   /* absent: the default */
    size_t n = strlen(name) + strlen(host) + 2 * strlen(port) + 16;
    if (!(line = malloc(n)))
        goto out;
    snprintf(line, n, "%s%s%s", v6 ? "[" : "", name, v6 ? "]" : "");
    if (curl_url_set(u, CURLUPART_HOST, line, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, url, 0) != CURLUE_OK)
        goto out;
    snprintf(line, n, "%s%s%s:%s:%s:%s", v6 ? "[" : "", name, v6 ? "]" : "", port, host, port);
    struct curl_slist *l = curl_slist_append(r->connect_to, line);
    if (!l)
        goto out;
    r->connect_to = l;
    snprintf(line, n, "Host: %s%s%s", host, given_port ? ":" : "", given_port ? given_port : "");
    if (!(l = curl_slist_append(r->req_headers, line)))
        goto out;
    r->req_headers = l;
    ok = true;
out:
    free(line);
    curl_free(host);
    curl_free(port);
    curl_free(given_port);
    curl_url_cleanup(u);
    return ok;
}

/* The proxy every request of o goes through (client-go's proxy-url,
 * http.ProxyURL): set on the handle, and kept (redacted) for messages.
 * NO_PROXY does not apply to it.  socks5 is socks5h to libcurl: client-go
 * lets the proxy resolve the server's name. */
static bool setup_proxy(luna_http_request *r, const char *proxy)
{
    CURL *e = r->easy;
    char *mapped = NULL;
    if (strncasecmp(proxy, "socks5://", 9) == 0 && asprintf(&mapped, "socks5h://%s", proxy + 9) < 0)
        return false;
    bool ok = curl_easy_setopt(e, CURLOPT_PROXY, mapped ? mapped : proxy) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_NOPROXY, "") == CURLE_OK;
    if (mapped) {
        explicit_bzero(mapped, strlen(mapped));
        free(mapped);
    }
    return ok && (r->proxy_shown = luna_url_redact(proxy)) != NULL;
}

static bool setup_easy(luna_http_request *r, const luna_http_options *o, const char *method)
{
    CURL *e = r->easy;
    bool ok = true;
#define SET(opt, val) (ok &= curl_easy_setopt(e, opt, val) == CURLE_OK)
    bool body = o->body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
                strcmp(method, "PATCH") == 0;
    ok &= build_headers(r, o, body);
    const char *name = o->tls.server_name;
    if (ok && name && *name && strncasecmp(o->url, "https:", 6) == 0) {
        char *routed = NULL;
        ok &= route_by_name(r, o->url, name, &routed);
        SET(CURLOPT_URL, routed ? routed : o->url);
        curl_free(routed);
        SET(CURLOPT_CONNECT_TO, r->connect_to);
    } else {
        SET(CURLOPT_URL, o->url);
    }
    if (o->proxy && *o->proxy)
        ok &= setup_proxy(r, o->proxy);
    SET(CURLOPT_PRIVATE, (char *)r);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_ERRORBUFFER, r->errbuf);
    SET(CURLOPT_STDERR, r->client->log.file);
    SET(CURLOPT_WRITEFUNCTION, luna_http_write_cb);
    SET(CURLOPT_WRITEDATA, r);
    SET(CURLOPT_HEADERFUNCTION, luna_http_header_cb);
    SET(CURLOPT_HEADERDATA, r);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* Over TLS, wait for ALPN before opening another connection, so
     * concurrent requests share one HTTP/2 connection.  Not for plain
     * http: that is HTTP/1.1 here, and curl 7.88 wakes a transfer waiting
     * for a multiplexable connection only when another one ends, which
     * stalls concurrent long-lived streams. */
    if (strncasecmp(o->url, "https:", 6) == 0)
        SET(CURLOPT_PIPEWAIT, 1L);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_TCP_KEEPIDLE, KEEPALIVE_IDLE_S);
    SET(CURLOPT_SOCKOPTFUNCTION, luna_http_sockopt_cb);
    SET(CURLOPT_SOCKOPTDATA, r);
    SET(CURLOPT_TCP_KEEPINTVL, KEEPALIVE_INTERVAL_S);
    SET(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    SET(CURLOPT_USERAGENT, USER_AGENT);
    SET(CURLOPT_CONNECTTIMEOUT_MS,
        ms_of(o->connect_timeout > 0 ? o->connect_timeout : LUNA_HTTP_DEFAULT_CONNECT_TIMEOUT));
    if (o->timeout > 0)
        SET(CURLOPT_TIMEOUT_MS, ms_of(o->timeout));
    if (body) {
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
        SET(CURLOPT_POSTFIELDS, r->req_body);
        if (strcmp(method, "POST") != 0)
            SET(CURLOPT_CUSTOMREQUEST, method);
    } else if (strcmp(method, "HEAD") == 0) {
        SET(CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        SET(CURLOPT_CUSTOMREQUEST, method);
    }
    SET(CURLOPT_HTTPHEADER, r->req_headers);
    ok &= setup_tls(e, &o->tls);
#undef SET
    return ok;
}

luna_http_request *luna_http_request_start(luna_http_client *c,
                                           const luna_http_options *o,
                                           enum luna_http_reason *reason,
                                           luna_error *err)
{
    if (!c || !o || !o->url) {
        luna_http_set_reason(reason, LUNA_HTTP_INVALID, 0);
        luna_error_set(err, LUNA_EINVAL, "HTTP request without a client or URL");
        return NULL;
    }
    const char *method = o->method ? o->method : "GET";
    if (!luna_http_is_token(method, 32)) {
        luna_http_set_reason(reason, LUNA_HTTP_INVALID, 0);
        luna_error_set(err, LUNA_EINVAL, "invalid HTTP method '%.32s'", method);
        return NULL;
    }
    luna_error local = { 0, "" };
    char *what = describe(method, o->url, &local);
    if (!what) {
        luna_http_set_reason(reason, local.code == LUNA_ENOMEM ? LUNA_HTTP_NO_MEMORY : LUNA_HTTP_INVALID, 0);
        if (err)
            *err = local;
        return NULL;
    }
    if (validate(o, what, reason, err)) {
        free(what);
        return NULL;
    }
    size_t max_request = o->max_request_bytes ? o->max_request_bytes : LUNA_HTTP_DEFAULT_MAX_REQUEST;
    if (o->body_len > max_request) {
        luna_http_set_reason(reason, LUNA_HTTP_TOO_BIG, 0);
        luna_error_set(err, LUNA_ETOOBIG, "%s: request body of %zu bytes exceeds %zu bytes",
                       what, o->body_len, max_request);
        free(what);
        return NULL;
    }
    luna_http_request *r = calloc(1, sizeof *r);
    if (!r) {
        free(what);
        luna_http_set_reason(reason, LUNA_HTTP_NO_MEMORY, 0);
        luna_error_set(err, LUNA_ENOMEM, "out of memory starting a request");
        return NULL;
    }
    r->client = c;
    r->what = what;
    r->on_headers = o->on_headers;
    r->on_done = o->on_done;
    r->ud = o->ud;
    r->mode = o->on_chunk ? MODE_CHUNK : o->on_line ? MODE_LINE : MODE_WHOLE;
    r->on_data = o->on_chunk ? o->on_chunk : o->on_line;
    r->max_response = o->max_response_bytes;
    if (r->mode == MODE_WHOLE && !r->max_response)
        r->max_response = LUNA_HTTP_DEFAULT_MAX_RESPONSE;
    luna_ndjson_init(&r->framer, o->max_line_bytes ? o->max_line_bytes : LUNA_HTTP_DEFAULT_MAX_LINE,
                     luna_http_framer_line, r);
    ev_init(&r->idle, luna_http_idle_cb);
    r->idle_timeout = o->idle_timeout;
    DL_APPEND(c->live, r);

    bool ok = true;
    if (o->body && o->body_borrowed) {
        /* the caller keeps it alive until on_done or cancel: no copy */
        r->req_body = (char *)o->body;
        r->borrowed_body = true;
    } else if (o->body) {
        r->req_body = malloc(o->body_len + 1);
        ok = r->req_body != NULL;
        if (ok) {
            memcpy(r->req_body, o->body, o->body_len);
            r->req_body[o->body_len] = '\0';
        }
    } else {
        r->req_body = strdup("");
        ok = r->req_body != NULL;
    }
    r->easy = ok ? curl_easy_init() : NULL;
    if (!r->easy || !setup_easy(r, o, method)) {
        luna_http_set_reason(reason, LUNA_HTTP_NO_MEMORY, 0);
        luna_error_set(err, LUNA_ENOMEM, "%s: cannot set up the transfer", what);
        luna_http_destroy(r);
        return NULL;
    }
    CURLMcode mrc = curl_multi_add_handle(c->multi, r->easy);
    if (mrc != CURLM_OK) {
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
        luna_http_set_reason(reason, LUNA_HTTP_INVALID, 0);
        luna_error_set(err, LUNA_EINVAL, "%s: cannot start the transfer: %s", what,
                       curl_multi_strerror(mrc));
        luna_http_destroy(r);
        return NULL;
    }
    r->counted = true;
    c->active++;
    if (r->idle_timeout > 0) {
        r->last_rx = ev_now(c->loop);
        ev_timer_set(&r->idle, r->idle_timeout, 0.);
        ev_timer_start(c->loop, &r->idle);
    }
    luna_debug("http request start", "request", what);
    return r;
}

void luna_http_request_cancel(luna_http_request *r)
{
    if (!r || r->canceled || r->done_called)
        return;
    r->canceled = true;
    luna_http_uncount(r);
    ev_timer_stop(r->client->loop, &r->idle);
    luna_http_unmark_pending(r);
    luna_http_detach(r);
    if (!r->busy)
        luna_http_destroy(r); /* else luna_http_drive() frees it when the callback returns */
}

const char *luna_http_request_describe(const luna_http_request *r)
{
    return r->what;
}
