/* httpd.c — see httpd.h. */
#include "serve/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/liblog.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/mhd_loop.h"
#include "base/textbuf.h"
#include "serve/metrics_auth.h"

#define MAX_CONNECTIONS LUNA_HTTPD_MAX_CONNECTIONS
/* libmicrohttpd's own limit is higher: a connection we close to make room
 * still counts for it until its next run, and it accepts up to 10 queued
 * connections in one run, refusing those past its limit.  Without the
 * margin, the probe queued behind a burst of slow clients would be
 * refused while the places they took were being freed. */
#define MHD_CONNECTION_LIMIT (MAX_CONNECTIONS + 16u)
/* One address gets a quarter of the connections, so a scraper or a pod
 * cannot take the kubelet's probes' (or Prometheus's) place on its own. */
#define MAX_CONNECTIONS_PER_ADDRESS LUNA_HTTPD_MAX_CONNECTIONS_PER_ADDRESS
/* libmicrohttpd's idle timeout, reset by every byte: it ends connections
 * that send nothing (and answers nobody reads); the read deadlines below
 * end those that send a byte now and then. */
#define IDLE_TIMEOUT_S 30u
#define MAX_EXCLUDE 32
/* A connection's memory (request line, headers, query) on a server with
 * /admin/: a reconcile of LUNA_ADMIN_MAX_KEYS keys of the longest names
 * (63 + "%2F" + 253 bytes, "key=" and "&" each) is ~324 KB of query, beyond
 * libmicrohttpd's default 32 KB (414 at ~900 ordinary keys); the rest is
 * room for the headers.  Pages a request does not use are not touched. */
#define ADMIN_CONNECTION_MEMORY ((size_t)512 * 1024)
#define CONNECTION_MEMORY ((size_t)32 * 1024)
#define TEXT_PLAIN "text/plain; charset=utf-8"

/* Where a connection is: reading a request's head (since it was accepted
 * or the previous answer ended), reading its body, answering (being
 * authorized, or writing), or being closed by us. */
enum conn_phase { READ_HEAD, READ_BODY, ANSWER, CLOSING };

/* A connection's socket_context, from MHD's "started" notice to its
 * "closed" one: owned by the server's list. */
struct conn {
    struct luna_httpd *s;
    struct MHD_Connection *c;
    struct conn *prev, *next;
    enum conn_phase phase;
    double since; /* monotonic: when reading the current request began */
    struct post *post; /* the body being read on it (the connection's con_cls), or NULL */
};

struct luna_httpd {
    struct luna_mhd_loop ml;
    struct conn *conns;           /* every open connection (owned) */
    unsigned nconns;              /* of them not CLOSING */
    double read_header_timeout;   /* seconds */
    double read_timeout;
    ev_timer sweep;               /* closes connections past their deadline */
    struct luna_metrics *metrics;
    struct luna_health *health;
    struct luna_metrics_auth *auth;     /* borrowed; NULL: /metrics is open */
    luna_httpd_admin_fn admin;          /* NULL: no /admin/ */
    luna_httpd_post_fn post;            /* NULL: no POST paths */
    void *post_ud;
    size_t post_max_body;
    size_t post_bytes;                  /* bodies being read now, in all */
    void *admin_ud;
    bool tls;
    void (*prepare)(void *ud, enum luna_httpd_endpoint endpoint);
    void *ud;
    char address[INET6_ADDRSTRLEN + 16];
    int port;
};

/* con_cls of a request whose head has been seen (bodies are dropped). */
static char seen_head;

/* con_cls of a /metrics request being authorized: owned by the connection
 * (freed when MHD reports the request completed). */
struct scrape {
    bool post;                         /* false: this is a scrape (struct post below) */
    struct luna_httpd *s;
    bool admin;                        /* /admin/, else /metrics */
    struct MHD_Connection *conn;
    struct luna_metrics_auth_check *check; /* pending, or NULL */
    enum luna_metrics_auth_decision decision;
    char user[256];
};

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

/* Sends body (taken); a 405 names the methods the path takes, allow (NULL:
 * "GET, HEAD", every path but the admin actions). */
static enum MHD_Result send_text_allow(struct MHD_Connection *c, unsigned status,
                                       const char *ctype, char *body, size_t len,
                                       const char *allow)
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
        MHD_add_response_header(r, "Allow", allow ? allow : "GET, HEAD");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
        MHD_add_response_header(r, "Retry-After", "1");
    if (status == MHD_HTTP_BAD_REQUEST) /* a framing we will not guess at */
        MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *ctype,
                                 char *body, size_t len)
{
    return send_text_allow(c, status, ctype, body, len, NULL);
}

static enum MHD_Result send_static(struct MHD_Connection *c, unsigned status, const char *text)
{
    char *body = strdup(text);
    if (!body)
        return MHD_NO;
    return send_text(c, status, TEXT_PLAIN, body, strlen(body));
}

static enum MHD_Result send_buffer_allow(struct MHD_Connection *c, unsigned status,
                                         const char *ctype, struct luna_textbuf *b,
                                         const char *allow)
{
    if (b->failed) {
        luna_textbuf_free(b);
        return send_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    size_t len = 0;
    char *body = luna_textbuf_steal(b, &len);
    return send_text_allow(c, status, ctype, body, len, allow);
}

static enum MHD_Result send_buffer(struct MHD_Connection *c, unsigned status, const char *ctype,
                                   struct luna_textbuf *b)
{
    return send_buffer_allow(c, status, ctype, b, NULL);
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

static void conn_phase(struct MHD_Connection *c, enum conn_phase phase);

/* con_cls of a POST whose body is being read: owned by the connection
 * (freed when MHD reports the request completed).  Its first member says
 * it is not a struct scrape. */
struct post {
    bool post;                         /* true */
    struct luna_httpd *s;
    struct conn *conn;                 /* its connection's tracking, or NULL */
    char *buf;                         /* the body so far (malloc'd) */
    size_t len, cap;
    bool too_big;                      /* past post_max_body: dropped */
    bool no_room;                      /* the bodies in all had no room for it: dropped */
};

static void post_drop(struct post *p)
{
    p->s->post_bytes -= p->cap;
    free(p->buf);
    p->buf = NULL;
    p->len = p->cap = 0;
}

static void post_free(struct post *p)
{
    post_drop(p);
    if (p->conn)
        p->conn->post = NULL;
    free(p);
}

static struct conn *conn_of(struct MHD_Connection *c);
static void conn_close(struct conn *k, const char *why);

/* The bodies being read would pass their bound (4 x post_max_body) by
 * `need` more bytes for p: the bodies that have been read longest, other
 * than p, are dropped and their connections closed until there is room.
 * libmicrohttpd cannot answer a request whose body it is still reading,
 * so someone's upload must end without an answer: as with the connection
 * limit (make_room), it is the slowest one's.  A client that sends its
 * body at once (kube-apiserver does) is never the oldest for long, so a
 * few slow uploads cannot hold the memory every review needs.  False if
 * even then there is no room (p alone is that large). */
static bool make_body_room(struct luna_httpd *s, const struct post *p, size_t need)
{
    size_t bound = 4 * s->post_max_body;
    while (s->post_bytes + need > bound) {
        struct conn *oldest = NULL;
        for (struct conn *k = s->conns; k; k = k->next)
            if (k->post && k->post != p && k->post->cap > 0 && k->phase == READ_BODY &&
                (!oldest || k->since < oldest->since))
                oldest = k;
        if (!oldest)
            return false;
        struct post *victim = oldest->post;
        char held[32];
        snprintf(held, sizeof held, "%zu", victim->cap);
        luna_warn("HTTP request body dropped: the bodies being read had no room for a new one",
                  "address", s->address, LUNA_LOG_NUM("held_bytes"), held);
        post_drop(victim);
        victim->no_room = true;
        conn_close(oldest, "bodies being read pass their bound: the oldest makes room");
    }
    return true;
}

static enum MHD_Result send_413(struct MHD_Connection *c, size_t max)
{
    char text[160];
    snprintf(text, sizeof text, "request body too large: at most %zu bytes\n", max);
    return send_static(c, MHD_HTTP_CONTENT_TOO_LARGE, text);
}

/* The head of a request to a POST path: 405 for another method, 413 for a
 * Content-Length past the bound (at once, the body unread: MHD closes the
 * connection after the answer), else its body is read (struct post). */
static enum MHD_Result start_post(struct luna_httpd *s, struct MHD_Connection *c,
                                  const char *method, void **con_cls)
{
    if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
        *con_cls = &seen_head;
        char *text = strdup("method not allowed: POST an AdmissionReview\n");
        if (!text)
            return MHD_NO;
        return send_text_allow(c, MHD_HTTP_METHOD_NOT_ALLOWED, TEXT_PLAIN, text, strlen(text),
                               "POST");
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->post_max_body) {
        *con_cls = &seen_head;
        return send_413(c, s->post_max_body);
    }
    struct post *p = calloc(1, sizeof *p);
    if (!p)
        return MHD_NO;
    p->post = true;
    p->s = s;
    if ((p->conn = conn_of(c)))
        p->conn->post = p;
    *con_cls = p;
    conn_phase(c, READ_BODY);
    return MHD_YES;
}

/* A POST to s->post: the body read into a buffer (bounded), then
 * answered by the handler. */
static enum MHD_Result serve_post(struct luna_httpd *s, struct MHD_Connection *c,
                                  const char *url, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    struct post *p = *con_cls;
    /* libmicrohttpd takes an answer only once the body is in (queueing one
     * earlier fails and resets the connection): a body past a bound is
     * read and dropped, and answered at its end, or cut by the read
     * deadline if it never ends. */
    if (*upload_size) {
        bool dropping = p->too_big || p->no_room;
        if (!dropping && p->len + *upload_size > s->post_max_body) {
            p->too_big = dropping = true;
            post_drop(p);
        } else if (!dropping && p->len + *upload_size > p->cap) {
            size_t want = p->cap ? p->cap : 16384;
            while (want < p->len + *upload_size)
                want *= 2;
            if (want > s->post_max_body)
                want = s->post_max_body;
            char *nb = make_body_room(s, p, want - p->cap) ? realloc(p->buf, want) : NULL;
            if (!nb) {
                p->no_room = dropping = true;
                post_drop(p);
            } else {
                s->post_bytes += want - p->cap;
                p->buf = nb;
                p->cap = want;
            }
        }
        if (!dropping) {
            memcpy(p->buf + p->len, upload_data, *upload_size);
            p->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    conn_phase(c, ANSWER);
    if (p->too_big)
        return send_413(c, s->post_max_body);
    if (p->no_room)
        return send_static(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                           "too many request bodies being read\n");
    struct luna_textbuf b = LUNA_TEXTBUF_INIT;
    const char *ctype = TEXT_PLAIN;
    int status = s->post(s->post_ud, url, p->buf ? p->buf : "", p->len, &b, &ctype);
    return send_buffer(c, status < 0 ? MHD_HTTP_INTERNAL_SERVER_ERROR : (unsigned)status,
                       ctype, &b);
}

/* ---- authorized scrapes ------------------------------------------------------ */

static void scrape_decided(void *ud, enum luna_metrics_auth_decision d, const char *user)
{
    struct scrape *sc = ud;
    sc->check = NULL;
    sc->decision = d;
    snprintf(sc->user, sizeof sc->user, "%s", user);
    MHD_resume_connection(sc->conn);
    luna_mhd_loop_kick(&sc->s->ml);
}

/* The answer to a decided scrape (controller-runtime's texts). */
static void remote_of(struct MHD_Connection *c, char *buf, size_t size);

static enum MHD_Result answer_decision(struct luna_httpd *s, struct MHD_Connection *c,
                                       const struct scrape *sc, const char *url,
                                       const char *method)
{
    char text[400];
    if (sc->admin) {
        /* every use of the admin endpoints is logged, refused ones too */
        char code[8];
        snprintf(code, sizeof code, "%d", luna_metrics_auth_status(sc->decision));
        char remote[INET6_ADDRSTRLEN + 16];
        remote_of(c, remote, sizeof remote);
        luna_warn("admin request refused", "user", sc->user[0] ? sc->user : "anonymous", "remote",
                  remote[0] ? remote : NULL, "method", method, "path", url, "decision",
                  luna_metrics_auth_decision_name(sc->decision), LUNA_LOG_NUM("status"), code);
    }
    switch (sc->decision) {
    case LUNA_METRICS_AUTH_ALLOW:
        return MHD_YES; /* not reached: the caller serves */
    case LUNA_METRICS_AUTH_UNAUTHENTICATED:
        return send_static(c, MHD_HTTP_UNAUTHORIZED, "Unauthorized\n");
    case LUNA_METRICS_AUTH_FORBIDDEN:
        snprintf(text, sizeof text, "Authorization denied for user %s\n", sc->user);
        return send_static(c, MHD_HTTP_FORBIDDEN, text);
    case LUNA_METRICS_AUTH_BUSY:
        return send_static(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                           "too many scrapes waiting for authorization\n");
    case LUNA_METRICS_AUTH_ERROR:
    case LUNA_METRICS_AUTH_PENDING:
        break;
    }
    if (sc->user[0]) {
        snprintf(text, sizeof text, "Authorization for user %s failed\n", sc->user);
        return send_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text);
    }
    return send_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Authentication failed\n");
}

/* /metrics or /admin/ behind authentication and authorization: decides
 * (suspending the connection while the API server is asked), then
 * answers. */
static enum MHD_Result authorized(struct luna_httpd *s, struct MHD_Connection *c,
                                  const char *url, const char *method, bool admin,
                                  void **con_cls);

struct admin_args {
    const char *v[2 * (LUNA_ADMIN_MAX_KEYS + 8)];
    size_t n;
    bool overflow;
};

static enum MHD_Result read_admin_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    struct admin_args *a = cls;
    if (!key)
        return MHD_YES;
    if (a->n == LUNA_ADMIN_MAX_KEYS + 8) {
        a->overflow = true;
        return MHD_NO;
    }
    a->v[2 * a->n] = key;
    a->v[2 * a->n + 1] = value;
    a->n++;
    return MHD_YES;
}

/* The client's address, "1.2.3.4:5678" or "[::1]:5678", or "". */
static void remote_of(struct MHD_Connection *c, char *buf, size_t size)
{
    buf[0] = '\0';
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return;
    char ip[INET6_ADDRSTRLEN] = "?";
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &a6->sin6_addr, ip, sizeof ip);
        snprintf(buf, size, "[%s]:%u", ip, (unsigned)ntohs(a6->sin6_port));
    } else if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &a4->sin_addr, ip, sizeof ip);
        snprintf(buf, size, "%s:%u", ip, (unsigned)ntohs(a4->sin_port));
    }
}

static enum MHD_Result serve_admin(struct luna_httpd *s, struct MHD_Connection *c,
                                   const char *url, const char *method, const char *user)
{
    struct admin_args *args = calloc(1, sizeof *args);
    if (!args)
        return send_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, read_admin_arg, args);
    if (args->overflow) {
        free(args);
        static const char too_many[] = "{\"error\":\"too many parameters\"}\n";
        char *body = strdup(too_many);
        if (!body)
            return MHD_NO;
        return send_text(c, MHD_HTTP_BAD_REQUEST, "application/json", body, sizeof too_many - 1);
    }
    char remote[INET6_ADDRSTRLEN + 16];
    remote_of(c, remote, sizeof remote);
    struct luna_admin_request req = {
        .method = method, .path = url, .args = args->v, .nargs = args->n,
        .user = user, .remote = remote,
    };
    struct luna_textbuf b = LUNA_TEXTBUF_INIT;
    int status = s->admin(s->admin_ud, &req, &b);
    free(args);
    /* the list takes GET and HEAD, a controller's actions POST */
    const char *allow = strcmp(url, LUNA_ADMIN_PREFIX "controllers") == 0 ? NULL : "POST";
    return send_buffer_allow(c, status > 0 ? (unsigned)status : MHD_HTTP_INTERNAL_SERVER_ERROR,
                             "application/json", &b, allow);
}

static bool admin_path(const char *url)
{
    return strncmp(url, LUNA_ADMIN_PREFIX, sizeof LUNA_ADMIN_PREFIX - 1) == 0 ||
           strcmp(url, "/admin") == 0;
}

/* ---- connections ----------------------------------------------------------- */

/* Ends a connection from outside MHD: once its socket is shut down MHD
 * reads end of file on its next run (the epoll fd wakes the loop) and
 * closes it, telling on_connection. */
static void conn_close(struct conn *k, const char *why)
{
    if (k->phase == CLOSING)
        return;
    k->phase = CLOSING;
    k->s->nconns--;
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(k->c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *addr =
        MHD_get_connection_info(k->c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char ip[INET6_ADDRSTRLEN] = "?";
    if (addr && addr->client_addr) {
        const struct sockaddr *sa = addr->client_addr;
        if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof ip);
        else if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof ip);
    }
    luna_debug("HTTP connection closed", "address", k->s->address, "client", ip, "reason", why);
    if (fd)
        shutdown(fd->connect_fd, SHUT_RDWR);
}

/* Every connection still reading a request past its deadline: the head
 * within read_header_timeout, the whole request within read_timeout, each
 * counted from when reading it began (however often bytes come). */
static void sweep(struct luna_httpd *s)
{
    double now = luna_clock_now(luna_clock_monotonic());
    double head = s->read_header_timeout < s->read_timeout ? s->read_header_timeout
                                                           : s->read_timeout;
    for (struct conn *k = s->conns; k; k = k->next) {
        if (k->phase == READ_HEAD && now - k->since > head)
            conn_close(k, "request head not complete in time");
        else if (k->phase == READ_BODY && now - k->since > s->read_timeout)
            conn_close(k, "request body not complete in time");
    }
}

static void on_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
    sweep((struct luna_httpd *)((char *)w - offsetof(struct luna_httpd, sweep)));
}

/* The server is full (the newcomer took the last place): the connection
 * that has waited longest for a request it has not finished sending makes
 * room, so one place is always free for a client that sends its request
 * at once, such as the kubelet's probe.  A slow client can only ever push
 * out slow clients; connections being answered are never touched.  When
 * all are being answered, the newcomer past the limit is refused. */
static void make_room(struct luna_httpd *s, struct conn *newcomer)
{
    struct conn *oldest = NULL;
    for (struct conn *k = s->conns; k; k = k->next)
        if (k != newcomer && (k->phase == READ_HEAD || k->phase == READ_BODY) &&
            (!oldest || k->since < oldest->since))
            oldest = k;
    if (oldest)
        conn_close(oldest, "server full: oldest unfinished request");
    else if (s->nconns > MAX_CONNECTIONS)
        conn_close(newcomer, "server full: every connection is being answered");
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct luna_httpd *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        struct conn *k = calloc(1, sizeof *k);
        *socket_context = k;
        if (!k) {
            /* untracked, it would escape the deadlines: refuse it */
            const union MHD_ConnectionInfo *fd =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
            if (fd)
                shutdown(fd->connect_fd, SHUT_RDWR);
            return;
        }
        k->s = s;
        k->c = c;
        k->phase = READ_HEAD;
        k->since = luna_clock_now(luna_clock_monotonic());
        k->next = s->conns;
        if (s->conns)
            s->conns->prev = k;
        s->conns = k;
        if (++s->nconns >= MAX_CONNECTIONS)
            make_room(s, k);
        return;
    }
    struct conn *k = *socket_context;
    if (!k)
        return;
    if (k->post)
        k->post->conn = NULL;
    if (k->phase != CLOSING)
        s->nconns--;
    if (k->prev)
        k->prev->next = k->next;
    else
        s->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    free(k);
    *socket_context = NULL;
}

static struct conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

static void conn_phase(struct MHD_Connection *c, enum conn_phase phase)
{
    struct conn *k = conn_of(c);
    if (!k || k->phase == CLOSING)
        return;
    if (phase == READ_HEAD)
        k->since = luna_clock_now(luna_clock_monotonic());
    k->phase = phase;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    conn_phase(c, READ_HEAD); /* a kept-alive connection waits for its next request */
    if (!*con_cls || *con_cls == &seen_head)
        return;
    if (*(bool *)*con_cls) {
        post_free(*con_cls);
        *con_cls = NULL;
        return;
    }
    struct scrape *sc = *con_cls;
    luna_metrics_auth_cancel(sc->check);
    free(sc);
    *con_cls = NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
    struct luna_httpd *s = cls;
    bool fixed = (s->metrics && strcmp(url, "/metrics") == 0) ||
                 (s->health && (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0 ||
                                strncmp(url, "/healthz/", 9) == 0 ||
                                strncmp(url, "/readyz/", 8) == 0)) ||
                 (s->admin && admin_path(url));
    if (!*con_cls) {
        /* Request smuggling (mhd_loop.h): answered at once, before any body
         * byte is read; MHD then closes the connection. */
        char why[256];
        if (luna_mhd_bad_framing(c, why, sizeof why)) {
            char *body = NULL;
            int n = asprintf(&body, "400 Bad Request: %s", why);
            if (n < 0)
                return MHD_NO;
            conn_phase(c, ANSWER);
            return send_text(c, MHD_HTTP_BAD_REQUEST, TEXT_PLAIN, body, (size_t)n);
        }
        if (s->post && !fixed)
            return start_post(s, c, method, con_cls);
        *con_cls = &seen_head;
        conn_phase(c, READ_BODY);
        return MHD_YES;
    }
    if (*con_cls != &seen_head && *(bool *)*con_cls)
        return serve_post(s, c, url, upload_data, upload_size, con_cls);
    if (*upload_size) {
        *upload_size = 0; /* bodies mean nothing here */
        return MHD_YES;
    }
    conn_phase(c, ANSWER); /* the whole request is in */
    if (s->metrics && s->auth && strcmp(url, "/metrics") == 0)
        return authorized(s, c, url, method, false, con_cls);
    if (s->admin && admin_path(url))
        return s->auth ? authorized(s, c, url, method, true, con_cls)
                       : serve_admin(s, c, url, method, "");
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

static enum MHD_Result authorized(struct luna_httpd *s, struct MHD_Connection *c,
                                  const char *url, const char *method, bool admin,
                                  void **con_cls)
{
    if (*con_cls == &seen_head) {
        struct scrape *sc = calloc(1, sizeof *sc);
        if (!sc)
            return send_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        sc->s = s;
        sc->admin = admin;
        sc->conn = c;
        *con_cls = sc;
        char verb[16];
        size_t n = 0;
        for (; method[n] && n < sizeof verb - 1; n++)
            verb[n] = (char)(method[n] >= 'A' && method[n] <= 'Z' ? method[n] + 32 : method[n]);
        verb[n] = '\0';
        const char *authz = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        sc->decision = luna_metrics_auth_check(s->auth, authz, verb, url, scrape_decided, sc,
                                               &sc->check);
        if (sc->decision == LUNA_METRICS_AUTH_PENDING) {
            MHD_suspend_connection(c);
            return MHD_YES;
        }
        /* decided from the caches: who asked is the cached token's user */
        if (admin)
            luna_metrics_auth_cached_user(s->auth, authz, sc->user, sizeof sc->user);
    }
    struct scrape *sc = *con_cls;
    if (sc->decision != LUNA_METRICS_AUTH_ALLOW)
        return answer_decision(s, c, sc, url, method);
    if (sc->admin)
        return serve_admin(s, c, url, method, sc->user);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return send_static(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    return serve_metrics(s, c);
}

/* ---- binding -------------------------------------------------------------- */

/* libmicrohttpd's own messages go through luna's logger, at debug: a
 * scraper that hung up, a bind that falls back from IPv6 to IPv4, a TLS
 * handshake a plain-HTTP client broke.  What matters (cannot listen) is
 * luna's own error. */
static const struct luna_liblog_source mhd_log = {
    .source = "libmicrohttpd", .server = "metrics-and-probes", .level = LUNA_LOG_DEBUG,
};

/* A daemon on the address sa (or on the listening socket fd when fd >= 0),
 * serving TLS with cert/key when they are given. */
static struct MHD_Daemon *start_daemon(struct luna_httpd *s, const struct sockaddr *sa, int fd,
                                       unsigned flags, const char *cert, const char *key)
{
    flags |= MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    struct MHD_OptionItem opts[] = {
        { fd >= 0 ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_SOCK_ADDR, fd >= 0 ? fd : 0,
          fd >= 0 ? NULL : (void *)sa },
        { cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)cert },
        { key ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)key },
        { MHD_OPTION_END, 0, NULL },
    };
    if (cert && key)
        flags |= MHD_USE_TLS;
    else
        opts[1].option = MHD_OPTION_END;
    return MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, luna_liblog_mhd, &mhd_log,
                            MHD_OPTION_ARRAY, opts,
                            MHD_OPTION_CONNECTION_LIMIT, MHD_CONNECTION_LIMIT,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, MAX_CONNECTIONS_PER_ADDRESS,
                            MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                            s->admin ? ADMIN_CONNECTION_MEMORY : CONNECTION_MEMORY,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_END);
}

static const char *tls_cert, *tls_key; /* during luna_httpd_start only */

static struct MHD_Daemon *listen_on(struct luna_httpd *s, const struct sockaddr *sa,
                                    unsigned flags)
{
    return start_daemon(s, sa, -1, flags, tls_cert, tls_key);
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
    if (!o->metrics && !o->health && !o->post)
        return luna_error_set(err, LUNA_EINVAL, "HTTP server %s: nothing to serve", o->address);
    struct luna_httpd *s = calloc(1, sizeof *s);
    if (!s)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    if ((o->tls_cert_pem != NULL) != (o->tls_key_pem != NULL)) {
        free(s);
        return luna_error_set(err, LUNA_EINVAL, "HTTP server %s: a TLS certificate needs its key",
                              o->address);
    }
    if (o->tls_cert_pem && !MHD_is_feature_supported(MHD_FEATURE_TLS)) {
        free(s);
        return luna_error_set(err, LUNA_EINVAL, "HTTP server %s: libmicrohttpd has no TLS",
                              o->address);
    }
    s->metrics = o->metrics;
    s->health = o->health;
    s->auth = o->auth;
    s->admin = o->admin;
    s->admin_ud = o->admin_ud;
    s->post = o->post;
    s->ml.priority = o->priority;
    s->post_ud = o->post_ud;
    s->post_max_body = o->post_max_body ? o->post_max_body : (size_t)7 << 20;
    s->tls = o->tls_cert_pem != NULL;
    s->prepare = o->prepare;
    s->ud = o->ud;
    s->read_header_timeout =
        o->read_header_timeout > 0 ? o->read_header_timeout : LUNA_HTTPD_READ_HEADER_TIMEOUT;
    s->read_timeout = o->read_timeout > 0 ? o->read_timeout : LUNA_HTTPD_READ_TIMEOUT;
    tls_cert = o->tls_cert_pem;
    tls_key = o->tls_key_pem;

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
    tls_cert = tls_key = NULL;
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
    /* a quarter of the shorter deadline: a slow client is closed at most
     * that late (1 s at the defaults) */
    double every = (s->read_header_timeout < s->read_timeout ? s->read_header_timeout
                                                             : s->read_timeout) / 4;
    every = every < 0.05 ? 0.05 : every > 1 ? 1 : every;
    ev_timer_init(&s->sweep, on_sweep, every, every);
    ev_timer_start(luna_loop(), &s->sweep);
    *out = s;
    return 0;
}

void luna_httpd_free(struct luna_httpd *s)
{
    if (!s)
        return;
    ev_timer_stop(luna_loop(), &s->sweep);
    luna_mhd_loop_stop(&s->ml); /* tells on_connection of every close */
    free(s);
}

int luna_httpd_set_certificate(struct luna_httpd *s, const char *cert_pem, const char *key_pem,
                               luna_error *err)
{
    if (!s->tls)
        return luna_error_set(err, LUNA_EINVAL, "HTTP server %s serves no TLS", s->address);
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(s->ml.daemon, MHD_DAEMON_INFO_LISTEN_FD);
    int fd = info ? dup(info->listen_fd) : -1;
    if (fd < 0)
        return luna_error_set(err, LUNA_EIO, "HTTP server %s: no listening socket", s->address);
    /* The new daemon takes the same socket first, so no connection is ever
     * refused; the old one stops accepting, then stops (its connections end:
     * clients reconnect and meet the new certificate). */
    struct MHD_Daemon *next = start_daemon(s, NULL, fd, 0, cert_pem, key_pem);
    if (!next) {
        close(fd);
        return luna_error_set(err, LUNA_EINVAL, "HTTP server %s: TLS refused the certificate",
                              s->address);
    }
    int old_fd = MHD_quiesce_daemon(s->ml.daemon);
    luna_mhd_loop_stop(&s->ml);
    if (old_fd >= 0)
        close(old_fd);
    int rc = luna_mhd_loop_attach(&s->ml, next, err);
    if (rc < 0)
        luna_error("HTTP server stopped: new certificate's daemon failed", "address", s->address,
                   "error", err->msg);
    return rc;
}

const char *luna_httpd_address(const struct luna_httpd *s) { return s->address; }
