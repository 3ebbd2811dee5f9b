/* http.c — see http.h.
 *
 * Three structs, as in curl's multi-on-an-event-loop examples: the client
 * (loop, one ev_timer for curl's timeout, the multi handle), the request
 * (one easy handle; found through CURLOPT_PRIVATE), the socket (one ev_io;
 * found through curl_multi_assign).  curl's own callbacks only record:
 * headers and body bytes are buffered in the request, which is then put on
 * the client's pending list.  after() runs once curl_multi_socket_action has
 * returned: it drains curl_multi_info_read, then drives every pending
 * request, which is where user callbacks run.  Hence no user code ever runs
 * inside a libcurl callback, and curl_multi_add_handle/remove_handle are
 * never called re-entrantly.
 */
#include "client/http.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <utlist.h>

#include "base/liblog.h"
#include "base/log.h"
#include "base/ndjson.h"
#include "base/url.h"

#define USER_AGENT "luna/" LUNA_VERSION
#define KEEPALIVE_IDLE_S 30L
#define KEEPALIVE_INTERVAL_S 15L

struct http_socket {
    ev_io io;                   /* first: the callback casts back */
    luna_http_client *client;
    curl_socket_t fd;
    struct http_socket *prev, *next;
};

struct luna_http_client {
    struct ev_loop *loop;
    CURLM *multi;
    ev_timer timer;             /* curl's single timeout */
    luna_http_request *live;    /* every request not yet destroyed */
    luna_http_request *pending; /* requests with something to deliver */
    struct http_socket *sockets;
    size_t active;
    uint64_t received;          /* response body bytes, every request */
    unsigned unacked_ms;        /* TCP_USER_TIMEOUT of new connections; 0: the kernel's */
    bool warned_unacked;        /* a socket refused it: warned once */
    struct luna_liblog_stream log; /* libcurl's stderr: into luna's log (liblog.h) */
};

/* Whatever libcurl writes to its stderr (verbose output, warnings) goes
 * through luna's logger, never raw to the process's stderr. */
static const struct luna_liblog_source curl_log = {
    .source = "libcurl", .server = NULL, .level = LUNA_LOG_WARN,
};

enum body_mode { MODE_WHOLE, MODE_CHUNK, MODE_LINE };

struct luna_http_request {
    luna_http_client *client;
    CURL *easy;                 /* NULL once detached from the multi handle */
    struct curl_slist *req_headers;
    struct curl_slist *connect_to; /* tls.server_name: the name -> the host */
    char *req_body;             /* owned unless borrowed_body */
    bool borrowed_body;         /* req_body is the caller's (body_borrowed) */
    char *what;                 /* "METHOD URL", credentials removed */
    char *proxy_shown;          /* the proxy, credentials removed, or NULL */
    enum body_mode mode;
    luna_http_headers_fn on_headers;
    luna_http_data_fn on_data;
    luna_http_done_fn on_done;
    void *ud;

    /* The response head: status and headers of the final (non-1xx) head. */
    long status;
    int http_version;
    luna_http_header *hdrs;     /* name and value malloc'd */
    size_t nhdrs, hdrs_cap;
    bool head_done;             /* the final head is complete */
    bool head_delivered;        /* on_headers ran (or there is none) */

    /* Body: whole mode collects it all; streamed modes hold the bytes not
     * yet delivered. */
    char *buf;
    size_t len, cap;
    size_t received;
    size_t max_response;        /* 0: no cap */
    luna_ndjson framer;

    ev_timer idle;
    double idle_timeout;        /* 0: off */
    ev_tstamp last_rx;

    /* finished if and only if the transfer is over (curl reported it done
     * or we stopped it); failed if and only if `failure` holds its error
     * (the first one recorded wins). */
    bool finished;
    bool failed;
    bool stopped;               /* a data callback failed: deliver no more */
    luna_http_failure failure;

    bool busy;                  /* drive() is running this request's callbacks */
    bool canceled;
    bool done_called;
    bool in_pending;
    bool counted;               /* included in client->active */
    char errbuf[CURL_ERROR_SIZE];
    luna_http_request *prev, *next;           /* client->live */
    luna_http_request *pprev, *pnext;         /* client->pending */
};

static bool curl_ready;

const char *luna_http_reason_name(enum luna_http_reason reason)
{
    switch (reason) {
    case LUNA_HTTP_OK:                return "OK";
    case LUNA_HTTP_CONNECTION_FAILED: return "ConnectionFailed";
    case LUNA_HTTP_HOST_NOT_FOUND:    return "HostNotFound";
    case LUNA_HTTP_TIMEOUT:           return "Timeout";
    case LUNA_HTTP_IDLE_TIMEOUT:      return "IdleTimeout";
    case LUNA_HTTP_CANCELED:          return "Canceled";
    case LUNA_HTTP_TOO_BIG:           return "TooBig";
    case LUNA_HTTP_TLS:               return "TLSError";
    case LUNA_HTTP_PROTOCOL:          return "ProtocolError";
    case LUNA_HTTP_TRUNCATED:         return "Truncated";
    case LUNA_HTTP_CALLBACK_FAILED:   return "CallbackFailed";
    case LUNA_HTTP_INVALID:           return "InvalidRequest";
    case LUNA_HTTP_NO_MEMORY:         return "OutOfMemory";
    }
    return "Unknown";
}

/* ---- small helpers ------------------------------------------------------ */

static int set_reason(enum luna_http_reason *out, enum luna_http_reason r, int code)
{
    if (out)
        *out = r;
    return code;
}

static bool is_token(const char *s, size_t max)
{
    size_t n = 0;
    for (; *s; s++, n++) {
        unsigned char ch = (unsigned char)*s;
        if (!(isalnum(ch) || strchr("!#$%&'*+-.^_`|~", ch)))
            return false;
    }
    return n > 0 && n <= max;
}

static bool is_field_value(const char *s)
{
    for (; *s; s++)
        if (*s == '\r' || *s == '\n')
            return false;
    return true;
}

/* Records the request's outcome unless one is recorded already. */
static void record_failure(luna_http_request *r, enum luna_http_reason reason,
                           int code, const char *detail)
{
    if (r->failed)
        return;
    r->failed = true;
    r->failure.reason = reason;
    /* detail may be libcurl's, which can quote a URL (a bad proxy's). */
    char clean[sizeof r->failure.err.msg];
    luna_url_redact_buf(detail, clean, sizeof clean);
    luna_error_set(&r->failure.err, code, "%s: %s", r->what, clean);
}

static bool buf_reserve(luna_http_request *r, size_t need)
{
    if (need <= r->cap)
        return true;
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < need) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    char *buf = realloc(r->buf, cap);
    if (!buf)
        return false;
    r->buf = buf;
    r->cap = cap;
    return true;
}

static void clear_headers(luna_http_request *r)
{
    for (size_t i = 0; i < r->nhdrs; i++) {
        free((char *)r->hdrs[i].name);
        free((char *)r->hdrs[i].value);
    }
    r->nhdrs = 0;
}

static void mark_pending(luna_http_request *r)
{
    if (r->in_pending || r->canceled)
        return;
    r->in_pending = true;
    DL_APPEND2(r->client->pending, r, pprev, pnext);
}

static void unmark_pending(luna_http_request *r)
{
    if (!r->in_pending)
        return;
    r->in_pending = false;
    DL_DELETE2(r->client->pending, r, pprev, pnext);
}

static void touch(luna_http_request *r)
{
    if (r->idle_timeout > 0)
        r->last_rx = ev_now(r->client->loop);
}

/* ---- curl's callbacks: record only -------------------------------------- */

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    luna_http_request *r = userdata;
    size_t n = size * nmemb;
    touch(r);
    r->client->received += n;
    if (r->failed || r->canceled)
        return CURL_WRITEFUNC_ERROR;
    if (r->max_response && n > r->max_response - r->received) {
        char detail[96];
        snprintf(detail, sizeof detail, "response body exceeds %zu bytes", r->max_response);
        record_failure(r, LUNA_HTTP_TOO_BIG, LUNA_ETOOBIG, detail);
        return CURL_WRITEFUNC_ERROR;
    }
    /* +1 keeps room for the NUL that terminates a whole body. */
    if (!buf_reserve(r, r->len + n + 1)) {
        record_failure(r, LUNA_HTTP_NO_MEMORY, LUNA_ENOMEM, "out of memory buffering the response");
        return CURL_WRITEFUNC_ERROR;
    }
    memcpy(r->buf + r->len, ptr, n);
    r->len += n;
    r->received += n;
    if (r->mode != MODE_WHOLE)
        mark_pending(r);
    return n;
}

static int http_version_of(CURL *easy)
{
    long v = 0;
    curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &v);
    switch (v) {
    case CURL_HTTP_VERSION_1_0: return 10;
    case CURL_HTTP_VERSION_1_1: return 11;
    case CURL_HTTP_VERSION_2_0: return 20;
    case CURL_HTTP_VERSION_3:   return 30;
    }
    return 0;
}

static bool add_header(luna_http_request *r, const char *name, size_t nlen,
                       const char *value, size_t vlen)
{
    if (r->nhdrs == r->hdrs_cap) {
        size_t cap = r->hdrs_cap ? r->hdrs_cap * 2 : 16;
        luna_http_header *h = realloc(r->hdrs, cap * sizeof *h);
        if (!h)
            return false;
        r->hdrs = h;
        r->hdrs_cap = cap;
    }
    char *n = strndup(name, nlen);
    char *v = strndup(value, vlen);
    if (!n || !v) {
        free(n);
        free(v);
        return false;
    }
    for (char *p = n; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    r->hdrs[r->nhdrs].name = n;
    r->hdrs[r->nhdrs].value = v;
    r->nhdrs++;
    return true;
}

/* An obsolete folded line continues the previous header's value. */
static bool continue_header(luna_http_request *r, const char *value, size_t vlen)
{
    luna_http_header *h = &r->hdrs[r->nhdrs - 1];
    size_t old = strlen(h->value);
    char *v = realloc((char *)h->value, old + 1 + vlen + 1);
    if (!v)
        return false;
    v[old] = ' ';
    memcpy(v + old + 1, value, vlen);
    v[old + 1 + vlen] = '\0';
    h->value = v;
    return true;
}

static size_t header_cb(char *line, size_t size, size_t nitems, void *userdata)
{
    luna_http_request *r = userdata;
    size_t n = size * nitems;
    touch(r);
    if (r->head_done || r->failed || r->canceled)
        return n; /* trailers, or nothing more to record */
    if (n >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        clear_headers(r); /* a new head: after 1xx, or the first one */
        return n;
    }
    size_t len = n;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    if (len == 0) {
        long status = 0;
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200) {
            r->status = status;
            r->http_version = http_version_of(r->easy);
            r->head_done = true;
            mark_pending(r);
        } else {
            clear_headers(r);
        }
        return n;
    }
    bool ok = true;
    if ((line[0] == ' ' || line[0] == '\t') && r->nhdrs > 0) {
        size_t s = 0;
        while (s < len && (line[s] == ' ' || line[s] == '\t'))
            s++;
        ok = continue_header(r, line + s, len - s);
    } else {
        const char *colon = memchr(line, ':', len);
        if (!colon)
            return n; /* not a header line: ignore it */
        size_t nlen = (size_t)(colon - line);
        size_t vs = nlen + 1;
        while (vs < len && (line[vs] == ' ' || line[vs] == '\t'))
            vs++;
        size_t ve = len;
        while (ve > vs && (line[ve - 1] == ' ' || line[ve - 1] == '\t'))
            ve--;
        ok = add_header(r, line, nlen, line + vs, ve - vs);
    }
    if (!ok) {
        record_failure(r, LUNA_HTTP_NO_MEMORY, LUNA_ENOMEM, "out of memory storing response headers");
        return CURL_WRITEFUNC_ERROR;
    }
    return n;
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents);

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    luna_http_client *c = userp;
    struct http_socket *s = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            ev_io_stop(c->loop, &s->io);
            DL_DELETE(c->sockets, s);
            free(s);
        }
        return 0;
    }
    int events = ((what & CURL_POLL_IN) ? EV_READ : 0) | ((what & CURL_POLL_OUT) ? EV_WRITE : 0);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return -1;
        s->client = c;
        s->fd = fd;
        ev_init(&s->io, io_cb);
        DL_APPEND(c->sockets, s);
        curl_multi_assign(c->multi, fd, s);
    } else {
        ev_io_stop(c->loop, &s->io);
    }
    ev_io_set(&s->io, fd, events);
    if (events)
        ev_io_start(c->loop, &s->io);
    return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    luna_http_client *c = userp;
    ev_timer_stop(c->loop, &c->timer);
    if (timeout_ms >= 0) {
        /* 0 ms means "as soon as possible": an ev_timer of 0 s fires in
         * the next loop iteration, outside this callback. */
        ev_timer_set(&c->timer, (double)timeout_ms / 1000.0, 0.);
        ev_timer_start(c->loop, &c->timer);
    }
    return 0;
}

/* ---- outcome ------------------------------------------------------------ */

static void map_curl_error(CURLcode rc, enum luna_http_reason *reason, int *code)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        *reason = LUNA_HTTP_HOST_NOT_FOUND; *code = LUNA_ENOTFOUND; return;
    case CURLE_OPERATION_TIMEDOUT:
        *reason = LUNA_HTTP_TIMEOUT; *code = LUNA_ETIMEOUT; return;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
        *reason = LUNA_HTTP_TLS; *code = LUNA_EIO; return;
    case CURLE_PARTIAL_FILE:
        *reason = LUNA_HTTP_TRUNCATED; *code = LUNA_EPROTO; return;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_TOO_MANY_REDIRECTS:
        *reason = LUNA_HTTP_PROTOCOL; *code = LUNA_EPROTO; return;
    case CURLE_FILESIZE_EXCEEDED:
        *reason = LUNA_HTTP_TOO_BIG; *code = LUNA_ETOOBIG; return;
    case CURLE_OUT_OF_MEMORY:
        *reason = LUNA_HTTP_NO_MEMORY; *code = LUNA_ENOMEM; return;
    default:
        *reason = LUNA_HTTP_CONNECTION_FAILED; *code = LUNA_EIO; return;
    }
}

/* Removes the easy handle from the multi handle and frees it and what only
 * curl needed.  Never called from inside a curl callback. */
static void detach(luna_http_request *r)
{
    if (!r->easy)
        return;
    if (r->status == 0) {
        long status = 0;
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
        r->status = status;
    }
    if (r->http_version == 0)
        r->http_version = http_version_of(r->easy);
    curl_multi_remove_handle(r->client->multi, r->easy);
    curl_easy_cleanup(r->easy);
    r->easy = NULL;
    curl_slist_free_all(r->req_headers);
    r->req_headers = NULL;
    curl_slist_free_all(r->connect_to);
    r->connect_to = NULL;
    if (!r->borrowed_body)
        free(r->req_body);
    r->req_body = NULL;
}

static void uncount(luna_http_request *r)
{
    if (r->counted) {
        r->counted = false;
        r->client->active--;
    }
}

static void destroy(luna_http_request *r)
{
    luna_http_client *c = r->client;
    ev_timer_stop(c->loop, &r->idle);
    unmark_pending(r);
    uncount(r);
    detach(r);
    DL_DELETE(c->live, r);
    clear_headers(r);
    free(r->hdrs);
    free(r->buf);
    luna_ndjson_destroy(&r->framer);
    free(r->what);
    free(r->proxy_shown);
    free(r);
}

/* Ends the transfer now (outside curl callbacks) with a failure. */
static void stop_with(luna_http_request *r, enum luna_http_reason reason, int code,
                      const char *detail)
{
    record_failure(r, reason, code, detail);
    ev_timer_stop(r->client->loop, &r->idle);
    detach(r);
    r->finished = true;
    mark_pending(r);
}

/* A data callback (or the line framer) returned code: stop the request
 * with its message. */
static void stop_by_callback(luna_http_request *r, int code, const luna_error *e)
{
    enum luna_http_reason reason = LUNA_HTTP_CALLBACK_FAILED;
    if (code == LUNA_ETOOBIG)
        reason = LUNA_HTTP_TOO_BIG;
    else if (code == LUNA_ECANCELED)
        reason = LUNA_HTTP_CANCELED;
    else if (code == LUNA_ENOMEM)
        reason = LUNA_HTTP_NO_MEMORY;
    r->stopped = true;
    stop_with(r, reason, code < 0 ? code : LUNA_EIO,
              e->msg[0] ? e->msg : "a callback stopped the request");
}

static luna_http_response response_of(const luna_http_request *r, bool with_body)
{
    luna_http_response resp = {
        .status = r->status,
        .http_version = r->http_version,
        .headers = r->hdrs,
        .nheaders = r->nhdrs,
    };
    if (with_body) {
        resp.body = r->buf ? r->buf : "";
        resp.body_len = r->len;
    }
    return resp;
}

static int framer_line(const char *line, size_t len, void *ud, luna_error *err)
{
    luna_http_request *r = ud;
    int rc = r->on_data(r, line, len, r->ud, err);
    if (r->canceled)
        return LUNA_ECANCELED;
    return rc;
}

/* Delivers whatever the request has ready: head, data, completion.  The
 * only place user callbacks run.  Re-entrant: if a callback runs the loop
 * and this request gets more to deliver, the outer call delivers it once
 * the callback returns.  May free r. */
static void drive(luna_http_request *r)
{
    if (r->busy)
        return;
    r->busy = true;
    while (!r->canceled) {
        luna_error e = { 0, "" };
        if (r->head_done && !r->head_delivered) {
            r->head_delivered = true;
            if (r->on_headers && !r->stopped) {
                luna_http_response resp = response_of(r, false);
                int rc = r->on_headers(r, &resp, r->ud, &e);
                if (rc && !r->canceled)
                    stop_by_callback(r, rc, &e);
            }
            continue;
        }
        if (r->mode != MODE_WHOLE && r->len > 0 && !r->stopped) {
            /* Take the bytes out first: a callback that runs the loop may
             * receive more into a new buffer meanwhile. */
            char *data = r->buf;
            size_t n = r->len, cap = r->cap;
            r->buf = NULL;
            r->len = r->cap = 0;
            int rc = r->mode == MODE_CHUNK ? r->on_data(r, data, n, r->ud, &e)
                                           : luna_ndjson_feed(&r->framer, data, n, &e);
            if (!r->buf) {
                r->buf = data;
                r->cap = cap;
            } else {
                free(data);
            }
            if (rc && !r->canceled)
                stop_by_callback(r, rc, &e);
            continue;
        }
        if (r->finished && !r->done_called) {
            if (!r->failed && r->mode == MODE_LINE && !r->stopped) {
                if (luna_ndjson_finish(&r->framer, &e) != 0)
                    record_failure(r, LUNA_HTTP_TRUNCATED, LUNA_EPROTO, e.msg);
            }
            if (r->mode == MODE_WHOLE && r->buf)
                r->buf[r->len] = '\0';
            r->done_called = true;
            uncount(r);
            luna_http_response resp = response_of(r, r->mode == MODE_WHOLE && !r->failed);
            if (r->failed)
                luna_debug("http request failed", "request", r->what,
                           "reason", luna_http_reason_name(r->failure.reason));
            if (r->on_done)
                r->on_done(r, &resp, r->failed ? &r->failure : NULL, r->ud);
        }
        break;
    }
    r->busy = false;
    if (r->canceled || r->done_called)
        destroy(r);
}

/* Runs after every curl_multi_socket_action: completions, then delivery. */
static void after(luna_http_client *c)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURL *easy = m->easy_handle;
        CURLcode res = m->data.result; /* m dies with the easy handle */
        char *priv = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
        luna_http_request *r = (luna_http_request *)priv;
        if (!r)
            continue;
        if (res != CURLE_OK && !r->failed) {
            enum luna_http_reason reason;
            int code;
            map_curl_error(res, &reason, &code);
            const char *msg = r->errbuf[0] ? r->errbuf : curl_easy_strerror(res);
            char detail[CURL_ERROR_SIZE + 64], via[CURL_ERROR_SIZE + 600];
            if (res == CURLE_OPERATION_TIMEDOUT) {
                /* Set once connected (TLS included), also on a reused
                 * connection, where the connect times stay 0. */
                curl_off_t connected = 0;
                curl_easy_getinfo(easy, CURLINFO_PRETRANSFER_TIME_T, &connected);
                snprintf(detail, sizeof detail, "%s: %s",
                         connected ? "timed out" : "timed out while connecting", msg);
                msg = detail;
            }
            if (r->proxy_shown) {
                /* curl names the proxy's address as if it were the server's */
                snprintf(via, sizeof via, "%s (through proxy %s)", msg, r->proxy_shown);
                msg = via;
            }
            record_failure(r, reason, code, msg);
        }
        ev_timer_stop(c->loop, &r->idle);
        detach(r);
        r->finished = true;
        mark_pending(r);
    }
    while (c->pending) {
        luna_http_request *r = c->pending;
        unmark_pending(r);
        drive(r);
    }
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct http_socket *s = (struct http_socket *)w;
    luna_http_client *c = s->client; /* s may be freed by socket_action */
    int action = ((revents & EV_READ) ? CURL_CSELECT_IN : 0) |
                 ((revents & EV_WRITE) ? CURL_CSELECT_OUT : 0);
    int running;
    curl_multi_socket_action(c->multi, s->fd, action, &running);
    after(c);
}

static void client_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    luna_http_client *c = (luna_http_client *)((char *)w - offsetof(luna_http_client, timer));
    int running;
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    after(c);
}

static void idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    luna_http_request *r = (luna_http_request *)((char *)w - offsetof(luna_http_request, idle));
    double left = r->last_rx + r->idle_timeout - ev_now(loop);
    if (left > 0) {
        ev_timer_set(w, left, 0.);
        ev_timer_start(loop, w);
        return;
    }
    char detail[96];
    snprintf(detail, sizeof detail, "no data received for %g s (idle timeout)", r->idle_timeout);
    stop_with(r, LUNA_HTTP_IDLE_TIMEOUT, LUNA_ETIMEOUT, detail);
    after(r->client);
}

/* ---- client ------------------------------------------------------------- */

luna_http_client *luna_http_client_new(struct ev_loop *loop, luna_error *err)
{
    if (!curl_ready) {
        CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
        if (rc != CURLE_OK) {
            luna_error_set(err, LUNA_EIO, "cannot initialise libcurl: %s", curl_easy_strerror(rc));
            return NULL;
        }
        curl_ready = true;
    }
    luna_http_client *c = calloc(1, sizeof *c);
    if (!c) {
        luna_error_set(err, LUNA_ENOMEM, "out of memory creating the HTTP client");
        return NULL;
    }
    c->loop = loop;
    c->multi = curl_multi_init();
    if (!c->multi) {
        free(c);
        luna_error_set(err, LUNA_ENOMEM, "cannot create a curl multi handle");
        return NULL;
    }
    if (luna_liblog_stream_open(&c->log, &curl_log) < 0) {
        curl_multi_cleanup(c->multi);
        free(c);
        luna_error_set(err, LUNA_ENOMEM, "out of memory creating the HTTP client");
        return NULL;
    }
    ev_init(&c->timer, client_timer_cb);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    return c;
}

void luna_http_client_free(luna_http_client *c)
{
    if (!c)
        return;
    while (c->live) {
        luna_http_request *r = c->live;
        r->canceled = true;
        destroy(r);
    }
    curl_multi_cleanup(c->multi); /* closes the kept connections */
    struct http_socket *s, *tmp;
    DL_FOREACH_SAFE(c->sockets, s, tmp) {
        ev_io_stop(c->loop, &s->io);
        DL_DELETE(c->sockets, s);
        free(s);
    }
    ev_timer_stop(c->loop, &c->timer);
    luna_liblog_stream_close(&c->log);
    free(c);
}

uint64_t luna_http_client_received(const luna_http_client *c) { return c->received; }

void luna_http_client_set_unacked_timeout(luna_http_client *c, double secs)
{
    double ms = secs * 1000.0;
    c->unacked_ms = !(ms > 0) ? 0 : ms >= (double)UINT_MAX ? UINT_MAX : ms < 1 ? 1 : (unsigned)ms;
}

/* Every socket curl opens: the client's bound on unacknowledged data. */
static int sockopt_cb(void *ud, curl_socket_t fd, curlsocktype purpose)
{
    luna_http_request *r = ud;
    luna_http_client *c = r->client;
    if (purpose != CURLSOCKTYPE_IPCXN || !c->unacked_ms)
        return CURL_SOCKOPT_OK;
    unsigned ms = c->unacked_ms;
    if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms) < 0) {
        /* not TCP (a unix socket): nothing is held on the way */
        if (errno != EOPNOTSUPP && errno != ENOPROTOOPT && !c->warned_unacked) {
            c->warned_unacked = true;
            luna_warn("cannot bound unacknowledged data on an API connection",
                      "error", strerror(errno));
        }
    }
    return CURL_SOCKOPT_OK;
}

size_t luna_http_client_active(const luna_http_client *c)
{
    return c ? c->active : 0;
}

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
        if (!h->name || !h->value || !is_token(h->name, 256) || !is_field_value(h->value))
            bad = h->name ? h->name : "(null)";
    }
    if (bad)
        luna_error_set(err, LUNA_EINVAL, "%s: invalid request header '%.64s' (name must be a "
                       "token, value without line breaks)", what, bad);
    else if (o->bearer_token && (!is_field_value(o->bearer_token) || !o->bearer_token[0]))
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
    return set_reason(reason, LUNA_HTTP_INVALID, LUNA_EINVAL);
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
    SET(CURLOPT_WRITEFUNCTION, write_cb);
    SET(CURLOPT_WRITEDATA, r);
    SET(CURLOPT_HEADERFUNCTION, header_cb);
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
    SET(CURLOPT_SOCKOPTFUNCTION, sockopt_cb);
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
        set_reason(reason, LUNA_HTTP_INVALID, 0);
        luna_error_set(err, LUNA_EINVAL, "HTTP request without a client or URL");
        return NULL;
    }
    const char *method = o->method ? o->method : "GET";
    if (!is_token(method, 32)) {
        set_reason(reason, LUNA_HTTP_INVALID, 0);
        luna_error_set(err, LUNA_EINVAL, "invalid HTTP method '%.32s'", method);
        return NULL;
    }
    luna_error local = { 0, "" };
    char *what = describe(method, o->url, &local);
    if (!what) {
        set_reason(reason, local.code == LUNA_ENOMEM ? LUNA_HTTP_NO_MEMORY : LUNA_HTTP_INVALID, 0);
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
        set_reason(reason, LUNA_HTTP_TOO_BIG, 0);
        luna_error_set(err, LUNA_ETOOBIG, "%s: request body of %zu bytes exceeds %zu bytes",
                       what, o->body_len, max_request);
        free(what);
        return NULL;
    }
    luna_http_request *r = calloc(1, sizeof *r);
    if (!r) {
        free(what);
        set_reason(reason, LUNA_HTTP_NO_MEMORY, 0);
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
                     framer_line, r);
    ev_init(&r->idle, idle_cb);
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
        set_reason(reason, LUNA_HTTP_NO_MEMORY, 0);
        luna_error_set(err, LUNA_ENOMEM, "%s: cannot set up the transfer", what);
        destroy(r);
        return NULL;
    }
    CURLMcode mrc = curl_multi_add_handle(c->multi, r->easy);
    if (mrc != CURLM_OK) {
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
        set_reason(reason, LUNA_HTTP_INVALID, 0);
        luna_error_set(err, LUNA_EINVAL, "%s: cannot start the transfer: %s", what,
                       curl_multi_strerror(mrc));
        destroy(r);
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
    uncount(r);
    ev_timer_stop(r->client->loop, &r->idle);
    unmark_pending(r);
    detach(r);
    if (!r->busy)
        destroy(r); /* else drive() frees it when the callback returns */
}

const char *luna_http_request_describe(const luna_http_request *r)
{
    return r->what;
}
