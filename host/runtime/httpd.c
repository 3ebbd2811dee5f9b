/* httpd.c — see httpd.h. */
#include "runtime/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/liblog.h"
#include "base/mhd_loop.h"
#include "base/textbuf.h"

#define MAX_CONNECTIONS 64u
#define IDLE_TIMEOUT_S 30u
#define MAX_EXCLUDE 32
#define TEXT_PLAIN "text/plain; charset=utf-8"

struct luna_httpd {
    struct luna_mhd_loop ml;
    struct luna_metrics *metrics;
    struct luna_health *health;
    void (*prepare)(void *ud, enum luna_httpd_endpoint endpoint);
    void *ud;
    char address[INET6_ADDRSTRLEN + 16];
    int port;
};

/* con_cls of a request whose head has been seen (bodies are dropped). */
static char seen_head;

int luna_httpd_parse_address(const char *address, char *host, size_t host_size, int *port,
                             luna_error *err)
{
    const char *colon = address ? strrchr(address, ':') : NULL;
    if (!colon)
        return luna_error_set(err, LUNA_EINVAL, "address \"%s\": want HOST:PORT (\":8080\")",
                              address ? address : "");
    const char *h = address, *h_end = colon;
    if (*h == '[') {
        if (h_end == h || h_end[-1] != ']')
            return luna_error_set(err, LUNA_EINVAL, "address \"%s\": unclosed '['", address);
        h++;
        h_end--;
    } else if (memchr(h, ':', (size_t)(h_end - h))) {
        return luna_error_set(err, LUNA_EINVAL,
                              "address \"%s\": an IPv6 host needs brackets (\"[::1]:8080\")",
                              address);
    }
    const char *p = colon + 1;
    long v = 0;
    if (!*p || strlen(p) > 5)
        return luna_error_set(err, LUNA_EINVAL, "address \"%s\": bad port", address);
    for (const char *q = p; *q; q++) {
        if (*q < '0' || *q > '9')
            return luna_error_set(err, LUNA_EINVAL, "address \"%s\": bad port", address);
        v = v * 10 + (*q - '0');
    }
    if (v > 65535)
        return luna_error_set(err, LUNA_EINVAL, "address \"%s\": port out of range", address);
    size_t hl = (size_t)(h_end - h);
    if (hl + 1 > host_size)
        return luna_error_set(err, LUNA_EINVAL, "address \"%s\": host too long", address);
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)v;
    return 0;
}

/* ---- requests ------------------------------------------------------------- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *ctype,
                                 char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body, body ? MHD_RESPMEM_MUST_FREE
                                                        : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Cache-Control", "no-cache, private");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_static(struct MHD_Connection *c, unsigned status, const char *text)
{
    char *body = strdup(text);
    if (!body)
        return MHD_NO;
    return send_text(c, status, TEXT_PLAIN, body, strlen(body));
}

static enum MHD_Result send_buffer(struct MHD_Connection *c, unsigned status, const char *ctype,
                                   struct luna_textbuf *b)
{
    if (b->failed) {
        luna_textbuf_free(b);
        return send_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    size_t len = 0;
    char *body = luna_textbuf_steal(b, &len);
    return send_text(c, status, ctype, body, len);
}

struct query {
    const char *exclude[MAX_EXCLUDE + 1];
    size_t n;
    bool verbose;
};

/* ?verbose (with or without a value) and every ?exclude=NAME. */
static enum MHD_Result read_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    struct query *q = cls;
    if (key && strcmp(key, "verbose") == 0)
        q->verbose = true;
    else if (key && value && strcmp(key, "exclude") == 0 && q->n < MAX_EXCLUDE)
        q->exclude[q->n++] = value;
    return MHD_YES;
}

static enum MHD_Result serve_metrics(struct luna_httpd *s, struct MHD_Connection *c)
{
    if (s->prepare)
        s->prepare(s->ud, LUNA_HTTPD_METRICS);
    struct luna_textbuf b = LUNA_TEXTBUF_INIT;
    if (luna_metrics_render(s->metrics, &b, NULL) < 0)
        b.failed = true;
    return send_buffer(c, MHD_HTTP_OK, LUNA_METRICS_CONTENT_TYPE, &b);
}

static enum MHD_Result serve_health(struct luna_httpd *s, struct MHD_Connection *c,
                                    enum luna_health_endpoint endpoint)
{
    if (s->prepare)
        s->prepare(s->ud, endpoint == LUNA_HEALTH_READYZ ? LUNA_HTTPD_READYZ
                                                         : LUNA_HTTPD_HEALTHZ);
    struct query q = { .n = 0 };
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, read_query, &q);
    q.exclude[q.n] = NULL;
    struct luna_textbuf b = LUNA_TEXTBUF_INIT;
    int status = luna_health_render(s->health, endpoint, q.verbose, q.n ? q.exclude : NULL, &b);
    return send_buffer(c, status < 0 ? MHD_HTTP_INTERNAL_SERVER_ERROR : (unsigned)status,
                       TEXT_PLAIN, &b);
}

/* /healthz/NAME and /readyz/NAME: one check ("loop" on both). */
static enum MHD_Result serve_check(struct luna_httpd *s, struct MHD_Connection *c,
                                   enum luna_health_endpoint endpoint, const char *name)
{
    if (s->prepare)
        s->prepare(s->ud, endpoint == LUNA_HEALTH_READYZ ? LUNA_HTTPD_READYZ
                                                         : LUNA_HTTPD_HEALTHZ);
    bool ok;
    const char *reason = "";
    if (strcmp(name, "loop") == 0) {
        ok = luna_health_live(s->health);
        if (!ok)
            reason = "no heartbeat";
    } else if (endpoint != LUNA_HEALTH_READYZ ||
               luna_health_check(s->health, name, &ok, &reason) < 0) {
        return send_static(c, MHD_HTTP_NOT_FOUND, "404 page not found\n");
    }
    struct luna_textbuf b = LUNA_TEXTBUF_INIT;
    if (ok)
        luna_textbuf_puts(&b, "ok");
    else if (*reason)
        luna_textbuf_printf(&b, "[-]%s failed: %s\n", name, reason);
    else
        luna_textbuf_printf(&b, "[-]%s failed\n", name);
    return send_buffer(c, ok ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR, TEXT_PLAIN, &b);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
    struct luna_httpd *s = cls;
    if (!*con_cls) {
        *con_cls = &seen_head;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* bodies mean nothing here */
        return MHD_YES;
    }
    bool known = (s->metrics && strcmp(url, "/metrics") == 0) ||
                 (s->health && (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0 ||
                                strncmp(url, "/healthz/", 9) == 0 ||
                                strncmp(url, "/readyz/", 8) == 0));
    if (!known)
        return send_static(c, MHD_HTTP_NOT_FOUND, "404 page not found\n");
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return send_static(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    if (strcmp(url, "/metrics") == 0)
        return serve_metrics(s, c);
    if (strcmp(url, "/healthz") == 0)
        return serve_health(s, c, LUNA_HEALTH_HEALTHZ);
    if (strcmp(url, "/readyz") == 0)
        return serve_health(s, c, LUNA_HEALTH_READYZ);
    if (strncmp(url, "/healthz/", 9) == 0)
        return serve_check(s, c, LUNA_HEALTH_HEALTHZ, url + 9);
    return serve_check(s, c, LUNA_HEALTH_READYZ, url + 8);
}

/* ---- binding -------------------------------------------------------------- */

/* libmicrohttpd's own messages go through luna's logger, at debug: a
 * scraper that hung up, a bind that falls back from IPv6 to IPv4.  What
 * matters (cannot listen) is luna's own error. */
static const struct luna_liblog_source mhd_log = {
    .source = "libmicrohttpd", .server = "metrics-and-probes", .level = LUNA_LOG_DEBUG,
};

static struct MHD_Daemon *listen_on(struct luna_httpd *s, const struct sockaddr *sa,
                                    unsigned flags)
{
    return MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG | flags, 0, NULL, NULL,
                            on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, luna_liblog_mhd, &mhd_log,
                            MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_CONNECTION_LIMIT, MAX_CONNECTIONS,
                            MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S,
                            MHD_OPTION_END);
}

static void format_host(const struct sockaddr *sa, char *buf, size_t size)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof ip);
        snprintf(buf, size, "[%s]", ip);
    } else {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof ip);
        snprintf(buf, size, "%s", ip);
    }
}

int luna_httpd_start(const struct luna_httpd_options *o, struct luna_httpd **out,
                     luna_error *err)
{
    *out = NULL;
    char host[256];
    int port;
    int rc = luna_httpd_parse_address(o->address, host, sizeof host, &port, err);
    if (rc < 0)
        return rc;
    if (!o->metrics && !o->health)
        return luna_error_set(err, LUNA_EINVAL, "HTTP server %s: nothing to serve", o->address);
    struct luna_httpd *s = calloc(1, sizeof *s);
    if (!s)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    s->metrics = o->metrics;
    s->health = o->health;
    s->prepare = o->prepare;
    s->ud = o->ud;

    struct MHD_Daemon *daemon = NULL;
    char bound_host[INET6_ADDRSTRLEN + 2] = "";
    int saved_errno = 0;
    if (!*host) {
        /* Every interface: dual-stack where the host has IPv6, else IPv4. */
        struct sockaddr_in6 any6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                                     .sin6_addr = IN6ADDR_ANY_INIT };
        struct sockaddr_in any4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                    .sin_addr.s_addr = htonl(INADDR_ANY) };
        daemon = listen_on(s, (struct sockaddr *)&any6, MHD_USE_DUAL_STACK);
        if (daemon) {
            format_host((struct sockaddr *)&any6, bound_host, sizeof bound_host);
        } else {
            daemon = listen_on(s, (struct sockaddr *)&any4, 0);
            saved_errno = errno;
            if (daemon)
                format_host((struct sockaddr *)&any4, bound_host, sizeof bound_host);
        }
    } else {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        struct addrinfo *res = NULL;
        char portbuf[8];
        snprintf(portbuf, sizeof portbuf, "%d", port);
        int gai = getaddrinfo(host, portbuf, &hints, &res);
        if (gai != 0) {
            free(s);
            return luna_error_set(err, LUNA_EIO, "cannot listen on %s: %s", o->address,
                                  gai_strerror(gai));
        }
        for (struct addrinfo *ai = res; ai && !daemon; ai = ai->ai_next) {
            if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
                continue;
            daemon = listen_on(s, ai->ai_addr, ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
            saved_errno = errno;
            if (daemon)
                format_host(ai->ai_addr, bound_host, sizeof bound_host);
        }
        freeaddrinfo(res);
    }
    if (!daemon) {
        free(s);
        return luna_error_set(err, LUNA_EIO, "cannot listen on %s: %s", o->address,
                              saved_errno ? strerror(saved_errno)
                                          : "address in use or not available");
    }
    if ((rc = luna_mhd_loop_attach(&s->ml, daemon, err)) < 0) {
        free(s);
        return rc;
    }
    s->port = luna_mhd_loop_port(&s->ml);
    snprintf(s->address, sizeof s->address, "%s:%d", bound_host, s->port);
    *out = s;
    return 0;
}

void luna_httpd_free(struct luna_httpd *s)
{
    if (!s)
        return;
    luna_mhd_loop_stop(&s->ml);
    free(s);
}

const char *luna_httpd_address(const struct luna_httpd *s) { return s->address; }
