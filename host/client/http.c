/* http.c — see http.h (the request's building is http_request.c).
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
#include "client/http_impl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <utlist.h>

#include "base/log.h"
#include "base/url.h"

struct http_socket {
    ev_io io;                   /* first: the callback casts back */
    luna_http_client *client;
    curl_socket_t fd;
    struct http_socket *prev, *next;
};

/* Whatever libcurl writes to its stderr (verbose output, warnings) goes
 * through luna's logger, never raw to the process's stderr. */
static const struct luna_liblog_source curl_log = {
    .source = "libcurl", .server = NULL, .level = LUNA_LOG_WARN,
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

int luna_http_set_reason(enum luna_http_reason *out, enum luna_http_reason r, int code)
{
    if (out)
        *out = r;
    return code;
}

bool luna_http_is_token(const char *s, size_t max)
{
    size_t n = 0;
    for (; *s; s++, n++) {
        unsigned char ch = (unsigned char)*s;
        if (!(isalnum(ch) || strchr("!#$%&'*+-.^_`|~", ch)))
            return false;
    }
    return n > 0 && n <= max;
}

bool luna_http_is_field_value(const char *s)
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

void luna_http_unmark_pending(luna_http_request *r)
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

size_t luna_http_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
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

size_t luna_http_header_cb(char *line, size_t size, size_t nitems, void *userdata)
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
void luna_http_detach(luna_http_request *r)
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

void luna_http_uncount(luna_http_request *r)
{
    if (r->counted) {
        r->counted = false;
        r->client->active--;
    }
}

void luna_http_destroy(luna_http_request *r)
{
    luna_http_client *c = r->client;
    ev_timer_stop(c->loop, &r->idle);
    luna_http_unmark_pending(r);
    luna_http_uncount(r);
    luna_http_detach(r);
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
    luna_http_detach(r);
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

int luna_http_framer_line(const char *line, size_t len, void *ud, luna_error *err)
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
void luna_http_drive(luna_http_request *r)
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
            luna_http_uncount(r);
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
        luna_http_destroy(r);
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
        luna_http_detach(r);
        r->finished = true;
        mark_pending(r);
    }
    while (c->pending) {
        luna_http_request *r = c->pending;
        luna_http_unmark_pending(r);
        luna_http_drive(r);
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

void luna_http_idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
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
        luna_http_destroy(r);
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
int luna_http_sockopt_cb(void *ud, curl_socket_t fd, curlsocktype purpose)
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
