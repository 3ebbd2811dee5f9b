/* devserver_http.c — see devserver_http.h. */
#include "devserver/devserver_http.h"
#include "devserver/devserver_fields.h"

#include <arpa/inet.h>
#include <ev.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "devserver/devserver_admission.h"
#include "devserver/devserver_api.h"
#include "devserver/devserver_auth.h"
#include "devserver/devserver_faults.h"
#include "devserver/devserver_protobuf.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_status.h"
#include "devserver/devserver_watch.h"
#include "base/liblog.h"
#include "base/log.h"
#include "base/clock.h"
#include "base/loop.h"
#include "base/mhd_loop.h"

#define MAX_BODY (3u * 1024 * 1024) /* kube-apiserver's request body limit */
/* Request bodies held at once, over all connections: past it a request is
 * refused 429 as kube-apiserver's max-requests-inflight refuses, so N
 * clients uploading at once cannot make the server hold N * MAX_BODY. */
#define MAX_BODIES_IN_FLIGHT ((size_t)64 * 1024 * 1024)
/* Descriptors kept for the rest of the process, past libmicrohttpd's own
 * connection limit.  That limit is set as high as the open-file limit
 * allows, far past the cap: libmicrohttpd at its limit stops accepting
 * (clients wait in the listen backlog, and here it did not start again
 * when connections closed), so the cap is kept here instead and a
 * connection past it is accepted, answered 503 if it asks, and closed
 * within REFUSED_TIMEOUT_S if it does not. */
#define RESERVED_FDS 64u
#define REFUSAL_SLACK 1024u     /* refused connections at once, when the open-file limit is unknown */
#define REFUSED_TIMEOUT_S 2u

/* Where a connection is: reading a request's head (since it was accepted,
 * or since the previous answer ended on a kept-alive connection), or past
 * its head (reading its body, being answered, streaming a watch). */
enum conn_phase { READ_HEAD, PAST_HEAD, CLOSING };

/* A connection's socket_context, from MHD's "started" notice to its
 * "closed" one: owned by the server's list. */
struct conn {
    luna_ds_http *srv;
    struct MHD_Connection *c;
    struct conn *prev, *next;
    enum conn_phase phase;
    bool refused;            /* over the cap: its request is answered 503, then it closes */
    bool kept_alive;         /* READ_HEAD after an answer (not since the accept) */
    double since;            /* monotonic: when the current phase began */
};

/* A suspended connection, linked into its server's list so that stopping
 * can resume it first (MHD aborts when stopped with any suspended). */
struct suspension {
    struct MHD_Connection *conn;
    struct suspension *prev, *next;
    bool linked;
    ev_timer *delay;         /* a delayed request's timer (delay, hold-watches); else NULL */
};

struct luna_ds_http {
    struct luna_mhd_loop ml; /* the daemon on the loop */
    luna_ds *ds;             /* the server's state (borrowed) */
    struct suspension *suspended;
    const char *token;
    int port;
    size_t in_flight;        /* body bytes reserved by requests in progress (<= MAX_BODIES_IN_FLIGHT) */
    struct conn *conns;      /* every open connection (owned) */
    unsigned nconns;         /* of them not refused and not CLOSING (<= max_connections) */
    unsigned max_connections;
    double idle_timeout, read_header_timeout;
    ev_timer sweep;          /* closes connections past their head deadline */
    unsigned long refused_total, timed_out_total;
};

/* One watch stream: owned by its MHD response, freed in its free callback. */
struct stream {
    luna_ds_http *srv;
    struct MHD_Connection *conn;
    luna_ds_watch *watch;
    bool suspended;
    struct suspension link;
};

/* Per-request state (MHD's con_cls), freed when the request completes. */
struct request {
    luna_ds_http *srv;
    struct MHD_Connection *conn;
    char *body;
    size_t len, cap;
    size_t reserved;         /* this request's share of srv->in_flight, returned when it ends */
    bool too_big;
    bool refused;            /* no room in the in-flight bound: body discarded, 429 */
    bool delayed;            /* held back by a delay (counted in faults.waiting) */
    struct MHD_Response *ready; /* the response to queue after the delay or the webhooks */
    unsigned ready_code;
    bool resumed;            /* resumed with an answer: NULL ready means out of memory */
    luna_ds_admit_job *admission; /* the webhooks being called (owned) or NULL */
    luna_ds_convert_job *conversion; /* the conversion webhooks being called (owned) or NULL */
    json_t *answers;         /* conversions answered for this request (owned) or NULL */
    int conversions;         /* rounds of conversion webhooks */
    json_t *more;            /* warnings of earlier passes, kept across a conversion (owned) */
    json_t *user;            /* the requester, resolved on the headers (owned) */
    const char *url, *method; /* MHD's, valid until the request completes */
    int admissions;          /* rounds of webhooks (the object moved meanwhile) */
    ev_timer delay;
    struct suspension link;
};

static void suspend(luna_ds_http *srv, struct suspension *l, struct MHD_Connection *conn)
{
    l->conn = conn;
    l->prev = NULL;
    l->next = srv->suspended;
    if (srv->suspended)
        srv->suspended->prev = l;
    srv->suspended = l;
    l->linked = true;
    l->delay = NULL;
    MHD_suspend_connection(conn);
}

static void unlink_suspension(luna_ds_http *srv, struct suspension *l)
{
    if (!l->linked)
        return;
    if (l->prev)
        l->prev->next = l->next;
    else
        srv->suspended = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->linked = false;
}

static void resume(luna_ds_http *srv, struct suspension *l)
{
    unlink_suspension(srv, l);
    MHD_resume_connection(l->conn);
}

static void kick(luna_ds_http *srv)
{
    luna_mhd_loop_kick(&srv->ml);
}

/* ---- connections ---- */

static double now_s(void) { return luna_clock_now(luna_clock_monotonic()); }

/* Ends a connection from outside MHD: once its socket is shut down MHD
 * reads end of file on its next run and closes it, telling on_connection. */
static void conn_close(struct conn *k)
{
    if (k->phase == CLOSING)
        return;
    if (!k->refused)
        k->srv->nconns--;
    k->phase = CLOSING;
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(k->c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (fd)
        shutdown(fd->connect_fd, SHUT_RDWR);
}

/* Go's http.Server, as kube-apiserver configures it, gives a request's
 * head ReadHeaderTimeout from when reading it began, however often bytes
 * come (a slowloris sending a byte every few seconds is closed), and a
 * kept-alive connection IdleTimeout to begin its next request; here the
 * next head must be in within both of them added. */
static void sweep(luna_ds_http *srv)
{
    double now = now_s();
    for (struct conn *k = srv->conns; k; k = k->next) {
        double limit = srv->read_header_timeout + (k->kept_alive ? srv->idle_timeout : 0);
        if (k->phase == READ_HEAD && now - k->since > limit) {
            char n[24];
            snprintf(n, sizeof n, "%lu", ++srv->timed_out_total);
            luna_debug("dev server: connection closed", "reason",
                       "request head not complete in time", "closed_total", n);
            conn_close(k);
        }
    }
}

static void on_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    sweep((luna_ds_http *)((char *)w - offsetof(luna_ds_http, sweep)));
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    luna_ds_http *srv = cls;
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
        k->srv = srv;
        k->c = c;
        k->phase = READ_HEAD;
        k->since = now_s();
        k->next = srv->conns;
        if (srv->conns)
            srv->conns->prev = k;
        srv->conns = k;
        if (srv->nconns >= srv->max_connections) {
            /* Past the cap: its request gets a 503 at once, and a client
             * that sends none is closed soon, so a refusal is an answer,
             * never a hang in the listen backlog. */
            k->refused = true;
            MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, REFUSED_TIMEOUT_S);
        } else {
            srv->nconns++;
        }
        return;
    }
    struct conn *k = *socket_context;
    if (!k)
        return;
    if (k->phase != CLOSING && !k->refused)
        srv->nconns--;
    if (k->prev)
        k->prev->next = k->next;
    else
        srv->conns = k->next;
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

/* ---- responses ---- */

/* Takes ownership of body (NULL: an empty one).  NULL when out of memory
 * (MHD then drops the connection). */
static struct MHD_Response *json_response(char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(body ? len : 0, body,
                                                             MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return NULL;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Cache-Control", "no-cache, private");
    return r;
}

static struct MHD_Response *status_response(luna_ds_status *st)
{
    luna_ds_response resp = { 0 };
    luna_ds_reply_json(&resp, st->code, luna_ds_status_json(st));
    struct MHD_Response *r = json_response(resp.body, resp.len);
    if (r && st->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", st->retry_after);
        MHD_add_response_header(r, "Retry-After", ra);
    }
    luna_ds_status_clear(st);
    return r;
}

static void on_wake(void *ctx)
{
    struct stream *s = ctx;
    if (s->suspended) {
        s->suspended = false;
        resume(s->srv, &s->link);
        kick(s->srv);
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream *s = cls;
    ssize_t n = luna_ds_watch_read(s->watch, buf, max);
    if (n > 0)
        return n;
    if (n == LUNA_DS_WATCH_END)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (n == LUNA_DS_WATCH_DROP)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    /* nothing queued: sleep until the watch wakes us */
    s->suspended = true;
    suspend(s->srv, &s->link, s->conn);
    return 0;
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    unlink_suspension(s->srv, &s->link);
    luna_ds_watch_free(s->watch);
    free(s);
}

static const char *query_arg(void *ctx, const char *name)
{
    return MHD_lookup_connection_value(ctx, MHD_GET_ARGUMENT_KIND, name);
}

/* ---- bounds checked on the headers, before any body byte is read ---- */

static struct MHD_Response *too_large(unsigned *code)
{
    luna_ds_status st = { 0 };
    luna_ds_status_set(&st, 413, "RequestEntityTooLarge",
                       "Request entity too large: limit is %u", MAX_BODY);
    *code = 413;
    return status_response(&st);
}

/* kube-apiserver's max-requests-inflight answer, word for word. */
static struct MHD_Response *too_many(unsigned *code)
{
    luna_ds_status st = { 0 };
    luna_ds_status_set(&st, 429, "TooManyRequests", "Too many requests, please try again later.");
    st.retry_after = 1;
    st.details = json_pack("{s:i}", "retryAfterSeconds", 1);
    *code = 429;
    return status_response(&st);
}

/* Takes a share of the in-flight bound for n more body bytes. */
static bool reserve(struct request *r, size_t n)
{
    luna_ds_http *srv = r->srv;
    if (n > MAX_BODIES_IN_FLIGHT - srv->in_flight)
        return false;
    srv->in_flight += n;
    r->reserved += n;
    return true;
}

static void release(struct request *r)
{
    r->srv->in_flight -= r->reserved;
    r->reserved = 0;
}

/* The connection cap: a Status a client retries after Retry-After, and
 * the connection closed. */
static struct MHD_Response *too_many_connections(luna_ds_http *srv, unsigned *code)
{
    luna_ds_status st = { 0 };
    luna_ds_status_set(&st, 503, "ServiceUnavailable", "the dev server is serving its maximum "
                       "of %u connections (--max-connections); please try again later",
                       srv->max_connections);
    st.retry_after = 1;
    st.details = json_pack("{s:i}", "retryAfterSeconds", 1);
    *code = 503;
    struct MHD_Response *r = status_response(&st);
    if (r)
        MHD_add_response_header(r, "Connection", "close");
    return r;
}

/* Go's net/http answer to a malformed request: plain text, and the
 * connection closed (MHD reads nothing more from it). */
static struct MHD_Response *bad_framing(const char *why, unsigned *code)
{
    char *body = NULL;
    int n = asprintf(&body, "400 Bad Request: %s", why);
    if (n < 0)
        return NULL;
    struct MHD_Response *r = MHD_create_response_from_buffer((size_t)n, body,
                                                             MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return NULL;
    }
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    MHD_add_response_header(r, "Connection", "close");
    *code = 400;
    return r;
}

/* Runs on the first call for a request, when MHD has its headers and has
 * read none of its body.  A refusal queued now is sent at once and MHD
 * discards the body and closes the connection, so a request the server
 * will not serve never makes it hold its body: kube-apiserver likewise
 * authenticates before reading, refuses a declared length over the limit
 * without reading, and bounds the requests in flight.  NULL: go on. */
static struct MHD_Response *screen(struct request *r, struct MHD_Connection *c, unsigned *code)
{
    luna_ds_http *srv = r->srv;
    /* Request smuggling (mhd_loop.h): refused before anything else. */
    char why[256];
    if (luna_mhd_bad_framing(c, why, sizeof why))
        return bad_framing(why, code);
    if (srv->token) {
        /* the --token, or a token the server issued (TokenRequest) */
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        if (!luna_ds_auth_request(srv->ds, auth)) {
            luna_ds_status st = { 0 };
            luna_ds_status_set(&st, 401, "Unauthorized", "Unauthorized");
            *code = 401;
            return status_response(&st);
        }
    }
    /* who asks is settled now, with the authentication (devserver_request.h) */
    r->user = luna_ds_auth_user_info(srv->ds,
                                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"));
    if (!r->user) {
        luna_ds_status st = { 0 };
        luna_ds_status_oom(&st);
        *code = 500;
        return status_response(&st);
    }
    const char *length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (length) {
        /* MHD has already refused a length that is not a number; several
         * are equal here (luna_mhd_bad_framing) */
        unsigned long long n = strtoull(length, NULL, 10);
        if (n > MAX_BODY)
            return too_large(code);
        if (!reserve(r, (size_t)n))
            return too_many(code);
    }
    return NULL;
}

/* Keeps n more body bytes, or discards them once the request is refused
 * (over MAX_BODY, or no room left in the in-flight bound: a chunked body
 * reserves as it arrives).  false: out of memory. */
static bool take_body(struct request *r, const char *data, size_t n)
{
    if (r->too_big || r->refused)
        return true;
    if (r->len + n > MAX_BODY || (r->len + n > r->reserved && !reserve(r, r->len + n - r->reserved))) {
        if (r->len + n > MAX_BODY)
            r->too_big = true;
        else
            r->refused = true;
        free(r->body);
        r->body = NULL;
        r->len = r->cap = 0;
        release(r);
        return true;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        if (cap > MAX_BODY + 1)
            cap = MAX_BODY + 1;
        char *b = realloc(r->body, cap);
        if (!b)
            return false;
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
    return true;
}

/* ---- request handling ---- */

static bool is_admin_path(const char *url)
{
    return strncmp(url, "/luna/v1/", 9) == 0;
}

static bool is_watch(struct MHD_Connection *c)
{
    const char *w = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "watch");
    return w && (strcmp(w, "true") == 0 || strcmp(w, "1") == 0);
}

static void end_delay(struct request *r)
{
    if (r->delayed) {
        r->delayed = false;
        r->srv->ds->faults.waiting--;
    }
}

static void on_delay(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct request *r = (struct request *)((char *)w - offsetof(struct request, delay));
    end_delay(r);
    resume(r->srv, &r->link);
    kick(r->srv);
}

/* The faults were set: requests waiting out a delay or a hold
 * (hold-watches) go on now (their timers fire on the next loop iteration),
 * so a spec ends a delay by a condition it saw, not by a time it guessed. */
static void release_delayed(luna_ds_http *srv)
{
    for (struct suspension *l = srv->suspended; l; l = l->next) {
        if (!l->delay)
            continue;
        ev_timer_stop(luna_loop(), l->delay);
        ev_timer_set(l->delay, 0, 0);
        ev_timer_start(luna_loop(), l->delay);
        l->delay = NULL;
    }
}

/* The MHD response for what the API answered (resp's body and watch
 * move into it); *code becomes 500 if a stream cannot be set up. */
static struct MHD_Response *reply(struct request *r, luna_ds_response *resp, const char *url,
                                  unsigned *code)
{
    luna_ds_http *srv = r->srv;
    struct MHD_Connection *c = r->conn;
    luna_ds_status st = { 0 };
    if (resp->watch) {
        struct stream *s = calloc(1, sizeof *s);
        if (!s) {
            luna_ds_watch_free(resp->watch);
            luna_ds_status_oom(&st);
            *code = 500;
            return status_response(&st);
        }
        s->srv = srv;
        s->conn = c;
        s->watch = resp->watch;
        luna_ds_watch_set_wake(resp->watch, on_wake, s);
        struct MHD_Response *mr = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                                                    stream_read, s, stream_free);
        if (!mr) {
            stream_free(s);
            return NULL;
        }
        MHD_add_response_header(mr, "Content-Type", "application/json");
        MHD_add_response_header(mr, "Cache-Control", "no-cache, private");
        return mr;
    }
    struct MHD_Response *mr;
    if (!resp->content_type && (strcmp(url, "/healthz") == 0 || strcmp(url, "/livez") == 0 ||
                               strcmp(url, "/readyz") == 0))
        resp->content_type = "text/plain; charset=utf-8";
    if (resp->body && !resp->content_type) {
        mr = json_response(resp->body, resp->len);
    } else {
        mr = MHD_create_response_from_buffer(resp->len, resp->body, MHD_RESPMEM_MUST_FREE);
        if (!mr) {
            free(resp->body);
        } else if (resp->content_type && *resp->content_type) {
            MHD_add_response_header(mr, "Content-Type", resp->content_type);
            MHD_add_response_header(mr, "X-Content-Type-Options", "nosniff");
        }
    }
    if (mr && resp->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", resp->retry_after);
        MHD_add_response_header(mr, "Retry-After", ra);
    }
    return mr;
}


/* Hands the request to the API, leaving its answer in resp; or answers
 * it first (a refusal, an injected fault): that response, resp unset. */
static struct MHD_Response *handle(struct request *r, const char *url, const char *method,
                                   luna_ds_response *resp, unsigned *code)
{
    luna_ds_http *srv = r->srv;
    struct MHD_Connection *c = r->conn;
    luna_ds_status st = { 0 };
    if (r->too_big)
        return too_large(code);
    if (r->refused)
        return too_many(code);
    luna_ds_faults *f = &srv->ds->faults;
    /* a request handled again after its webhooks had its fault roll */
    if (!r->admissions && !r->conversions && !is_admin_path(url) &&
        luna_ds_faults_applies(f->error_on, method, is_watch(c)) &&
        (!f->error_path[0] || strstr(url, f->error_path)) &&
        luna_ds_faults_chance(f, f->error_rate)) {
        int ec = f->error_code;
        if (ec == 403)
            luna_ds_status_set(&st, 403, "Forbidden", "%s %s is forbidden: injected fault "
                               "(as RBAC refuses it)", method, url);
        else if (ec == 429)
            luna_ds_status_set(&st, 429, "TooManyRequests",
                               "Too many requests, please try again later.");
        else if (ec == 503)
            luna_ds_status_set(&st, 503, "ServiceUnavailable", "the server is currently unable "
                               "to handle the request (injected fault)");
        else
            luna_ds_status_set(&st, ec, "InternalError",
                               "Internal error occurred: injected fault");
        if (ec == 429 || ec == 503) {
            st.retry_after = f->retry_after;
            st.details = json_pack("{s:i}", "retryAfterSeconds", f->retry_after);
        }
        *code = (unsigned)ec;
        return status_response(&st);
    }
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    /* kubectl's typed generators send protobuf: read it as the JSON the
     * same client would have sent (devserver_protobuf.h). */
    char *json_body = NULL;
    size_t json_len = 0;
    if (r->len && luna_ds_protobuf_is(ct)) {
        json_body = luna_ds_protobuf_to_json(r->body, r->len, &json_len, &st);
        if (!json_body) {
            *code = (unsigned)st.code;
            return status_response(&st);
        }
        ct = "application/json";
    }
    luna_ds_request req = {
        .method = method,
        .path = url,
        .arg = query_arg,
        .arg_ctx = c,
        .content_type = ct,
        .user_agent = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "User-Agent"),
        .accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept"),
        .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
        .user = r->user,
        .conversions = r->answers,
        .body = json_body ? json_body : r->body,
        .body_len = json_body ? json_len : r->len,
    };
    luna_ds_api_handle(srv->ds, &req, resp);
    free(json_body);
    return NULL;
}

/* One header per warning, as kube-apiserver sends them. */
static void add_warnings(struct MHD_Response *mr, const json_t *warnings)
{
    size_t i;
    json_t *w;
    json_array_foreach(warnings, i, w) {
        char value[2048];
        if (luna_ds_fields_warning_header(json_string_value(w), value, sizeof value))
            MHD_add_response_header(mr, "Warning", value);
    }
}

static void drop_response(luna_ds_response *resp)
{
    free(resp->body);
    luna_ds_watch_free(resp->watch);
    json_decref(resp->warnings);
    memset(resp, 0, sizeof *resp);
}

/* Rounds of webhooks one request may take when the object keeps changing
 * under it (kube's optimistic update retries likewise, boundedly). */
#define MAX_ADMISSIONS 5

static void on_admitted(void *ud, luna_ds_admit_job *job);
static void on_converted(void *ud, luna_ds_convert_job *job);

/* Rounds of conversion webhooks one request may take: a write converts
 * what it got, then what it stores back (two rounds), and each round of
 * its admission webhooks may change the object once more. */
#define MAX_CONVERSIONS 12

/* The answer to what handle() left in resp, or NULL with *suspended set
 * when the request waits for admission webhooks (its connection is
 * suspended by the caller; on_admitted answers it). */
static struct MHD_Response *answer(struct request *r, luna_ds_response *resp, const json_t *more,
                                   unsigned *code, bool *suspended)
{
    luna_ds_http *srv = r->srv;
    /* conversions first: the pass that wanted them computed the rest on
     * objects converted apiVersion-only, its admission included */
    luna_ds_convert_job *cj = luna_ds_conversion_take(srv->ds);
    if (cj) {
        luna_ds_admit_job_free(luna_ds_admission_take(srv->ds));
        drop_response(resp);
        if (r->conversions >= MAX_CONVERSIONS || (!r->answers && !(r->answers = json_object()))) {
            luna_ds_convert_job_free(cj);
            luna_ds_status st = { 0 };
            luna_ds_status_set(&st, 409, "Conflict", "Operation cannot be fulfilled: the object "
                               "kept changing while its conversion webhooks ran; please try again");
            *code = 409;
            return status_response(&st);
        }
        r->conversions++;
        r->conversion = cj;
        r->more = json_incref((json_t *)more);
        luna_ds_convert_job_run(srv->ds, cj, r->answers, on_converted, r);
        *suspended = true;
        return NULL;
    }
    luna_ds_admit_job *job = luna_ds_admission_take(srv->ds);
    if (job && r->admissions < MAX_ADMISSIONS) {
        r->admissions++;
        drop_response(resp);
        r->admission = job;
        luna_ds_admit_job_run(srv->ds, job, on_admitted, r);
        *suspended = true;
        return NULL;
    }
    if (job) {
        luna_ds_admit_job_free(job);
        drop_response(resp);
        luna_ds_status st = { 0 };
        luna_ds_status_set(&st, 409, "Conflict", "Operation cannot be fulfilled: the object "
                           "kept changing while its admission webhooks ran; please try again");
        *code = 409;
        return status_response(&st);
    }
    *code = (unsigned)resp->code;
    json_t *warnings = resp->warnings;
    resp->warnings = NULL;
    struct MHD_Response *mr = reply(r, resp, r->url, code);
    if (mr) {
        add_warnings(mr, warnings);
        add_warnings(mr, more);
    }
    json_decref(warnings);
    return mr;
}

/* The webhooks answered: a denial is the answer; otherwise the request is
 * handled again with their verdict (devserver_admission.h). */
static void on_admitted(void *ud, luna_ds_admit_job *job)
{
    struct request *r = ud;
    luna_ds_http *srv = r->srv;
    int dcode = 0;
    const json_t *denial = luna_ds_admit_job_denial(job, &dcode);
    struct MHD_Response *mr = NULL;
    unsigned code = 500;
    bool suspended = false;
    if (denial) {
        char *body = json_dumps(denial, JSON_COMPACT);
        mr = body ? json_response(body, strlen(body)) : NULL;
        code = (unsigned)dcode;
        if (mr)
            add_warnings(mr, luna_ds_admit_job_warnings(job));
    } else {
        luna_ds_response resp;
        luna_ds_admission_replay(srv->ds, job);
        mr = handle(r, r->url, r->method, &resp, &code);
        luna_ds_admission_replay(srv->ds, NULL);
        if (!mr) {
            /* the job's warnings go out with whatever ends this request */
            json_t *more = json_incref((json_t *)luna_ds_admit_job_warnings(job));
            r->admission = NULL;
            luna_ds_admit_job_free(job);
            mr = answer(r, &resp, more, &code, &suspended);
            json_decref(more);
            if (suspended)
                return;
            job = NULL;
        }
    }
    luna_ds_admit_job_free(job);
    r->admission = NULL;
    r->ready = mr;
    r->ready_code = code;
    r->resumed = true;
    resume(srv, &r->link);
    kick(srv);
}

/* The conversion webhooks answered: a failure is the answer (kube's 500);
 * otherwise the request is handled again with their answers. */
static void on_converted(void *ud, luna_ds_convert_job *job)
{
    struct request *r = ud;
    luna_ds_http *srv = r->srv;
    const json_t *failure = luna_ds_convert_job_failure(job);
    struct MHD_Response *mr = NULL;
    unsigned code = 500;
    bool suspended = false;
    json_t *more = r->more;
    r->more = NULL;
    r->conversion = NULL;
    if (failure) {
        char *body = json_dumps(failure, JSON_COMPACT);
        mr = body ? json_response(body, strlen(body)) : NULL;
        code = (unsigned)json_integer_value(json_object_get(failure, "code"));
        luna_ds_convert_job_free(job);
        if (mr)
            add_warnings(mr, more);
    } else {
        luna_ds_convert_job_free(job);
        luna_ds_response resp;
        mr = handle(r, r->url, r->method, &resp, &code);
        if (!mr) {
            mr = answer(r, &resp, more, &code, &suspended);
            if (suspended) {
                json_decref(more);
                return;
            }
        }
    }
    json_decref(more);
    r->ready = mr;
    r->ready_code = code;
    r->resumed = true;
    resume(srv, &r->link);
    kick(srv);
}

static struct MHD_Response *dispatch(struct request *r, const char *url, const char *method,
                                     unsigned *code, bool *suspended)
{
    luna_ds_response resp;
    struct MHD_Response *early = handle(r, url, method, &resp, code);
    if (early)
        return early;
    return answer(r, &resp, NULL, code, suspended);
}
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    luna_ds_http *srv = cls;
    struct request *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        r->srv = srv;
        r->conn = c;
        ev_timer_init(&r->delay, on_delay, 0, 0);
        *con_cls = r;
        unsigned code = 500;
        struct conn *k = conn_of(c);
        struct MHD_Response *refusal = NULL;
        if (k && k->refused) {
            char n[24];
            snprintf(n, sizeof n, "%lu", ++srv->refused_total);
            luna_debug("dev server: request refused", "reason", "connection cap",
                       "refused_total", n);
            refusal = too_many_connections(srv, &code);
            if (!refusal)
                return MHD_NO;
        } else {
            if (k && k->phase == READ_HEAD) {
                k->phase = PAST_HEAD;
                k->since = now_s();
            }
            refusal = screen(r, c, &code);
        }
        if (!refusal)
            return MHD_YES;
        enum MHD_Result rc = MHD_queue_response(c, code, refusal);
        MHD_destroy_response(refusal);
        return rc;
    }
    if (*upload_size) {
        if (!take_body(r, upload_data, *upload_size))
            return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->ready) {
        /* resumed after an injected delay or the webhooks */
        enum MHD_Result rc = MHD_queue_response(c, r->ready_code, r->ready);
        MHD_destroy_response(r->ready);
        r->ready = NULL;
        return rc;
    }
    if (r->resumed)
        return MHD_NO; /* out of memory building the answer: MHD closes the connection */
    unsigned code = 500;
    bool suspended = false;
    r->url = url;
    r->method = method;
    struct MHD_Response *resp = dispatch(r, url, method, &code, &suspended);
    if (suspended) {
        suspend(srv, &r->link, c);
        return MHD_YES;
    }
    if (!resp)
        return MHD_NO; /* out of memory: MHD closes the connection */
    luna_ds_faults *f = &srv->ds->faults;
    double delay = luna_ds_faults_delay_for(f, url);
    /* The faults were set (handle_faults takes PUT and POST alike). */
    if (code == 200 && (strcmp(method, "PUT") == 0 || strcmp(method, "POST") == 0) &&
        strcmp(url, "/luna/v1/faults") == 0)
        release_delayed(srv);
    bool hold = code == 200 && is_watch(c) && luna_ds_faults_take(&f->hold_watches);
    if (hold)
        delay = f->delay > 0 ? f->delay : 60;
    if (delay > 0 && (hold || luna_ds_faults_applies(f->delay_on, method, is_watch(c)))) {
        r->ready = resp;
        r->ready_code = code;
        ev_timer_set(&r->delay, delay, 0);
        ev_timer_start(luna_loop(), &r->delay);
        suspend(r->srv, &r->link, c);
        r->link.delay = &r->delay;
        r->delayed = true;
        f->waiting++;
        return MHD_YES;
    }
    enum MHD_Result rc = MHD_queue_response(c, code, resp);
    MHD_destroy_response(resp);
    return rc;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    struct conn *k = conn_of(c);
    if (k && k->phase == PAST_HEAD) {
        /* a kept-alive connection waits for its next request */
        k->phase = READ_HEAD;
        k->kept_alive = true;
        k->since = now_s();
    }
    struct request *r = *con_cls;
    if (!r)
        return;
    ev_timer_stop(luna_loop(), &r->delay);
    end_delay(r);
    luna_ds_admit_job_free(r->admission);
    luna_ds_convert_job_free(r->conversion);
    json_decref(r->answers);
    json_decref(r->more);
    unlink_suspension(r->srv, &r->link);
    if (r->ready)
        MHD_destroy_response(r->ready);
    release(r);
    free(r->body);
    json_decref(r->user);
    free(r);
    *con_cls = NULL;
}

/* %XX decoding, '+' as space (Go clients encode query spaces as '+'). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    char *w = s;
    for (char *p = s; *p; p++) {
        if (*p == '+') {
            *w++ = ' ';
        } else if (*p == '%' && p[1] && p[2]) {
            char hex[3] = { p[1], p[2], 0 };
            char *end;
            long v = strtol(hex, &end, 16);
            if (*end == '\0') {
                *w++ = (char)v;
                p += 2;
            } else {
                *w++ = *p;
            }
        } else {
            *w++ = *p;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* libmicrohttpd's own messages (a client that went away mid-response, a
 * refused connection) go through luna's logger, at debug: they are about
 * clients, and what matters to them shows in their own logs. */
static const struct luna_liblog_source mhd_log = {
    .source = "libmicrohttpd", .server = "dev-server", .level = LUNA_LOG_DEBUG,
};

luna_ds_http *luna_ds_http_start(const luna_ds_http_opts *opts, luna_error *err)
{
    luna_ds_http *srv = calloc(1, sizeof *srv);
    if (!srv) {
        luna_error_set(err, LUNA_ENOMEM, "dev server: out of memory");
        return NULL;
    }
    struct MHD_Daemon *daemon = NULL;
    srv->ds = opts->ds;
    srv->token = opts->token;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, opts->host, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)opts->port);
    } else if (inet_pton(AF_INET6, opts->host, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)opts->port);
        flags |= MHD_USE_IPv6;
    } else {
        free(srv);
        luna_error_set(err, LUNA_EINVAL, "--listen: '%s' is not a numeric IP address", opts->host);
        return NULL;
    }
    if (opts->tls_cert && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        free(srv);
        luna_error_set(err, LUNA_EINVAL, "this libmicrohttpd has no TLS support");
        return NULL;
    }
    srv->max_connections = opts->max_connections ? opts->max_connections
                                                 : LUNA_DS_HTTP_MAX_CONNECTIONS;
    /* The cap must meet a crowd before the descriptor limit does (past it
     * accept fails and clients wait in the backlog), with room for the
     * refused ones and the rest of the process. */
    unsigned mhd_limit = srv->max_connections + REFUSAL_SLACK;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        rlim_t room = rl.rlim_cur > 2 * RESERVED_FDS ? rl.rlim_cur - RESERVED_FDS : RESERVED_FDS;
        mhd_limit = room > 4000000 ? 4000000 : (unsigned)room;
        if ((rlim_t)srv->max_connections + RESERVED_FDS > room) {
            unsigned fit = room > 2 * RESERVED_FDS ? (unsigned)(room - RESERVED_FDS) : 16;
            char want[16], got[16];
            snprintf(want, sizeof want, "%u", srv->max_connections);
            snprintf(got, sizeof got, "%u", fit);
            /* the default lowered is no news; a figure the user gave is */
            if (opts->max_connections)
                luna_warn("dev server: fewer connections than asked, for the open-file limit",
                          "max_connections", want, "serving", got);
            srv->max_connections = fit;
        }
    }
    srv->idle_timeout = opts->idle_timeout > 0 ? opts->idle_timeout : LUNA_DS_HTTP_IDLE_TIMEOUT;
    srv->read_header_timeout = opts->read_header_timeout > 0 ? opts->read_header_timeout
                                                             : LUNA_DS_HTTP_READ_HEADER_TIMEOUT;
    /* libmicrohttpd's own timeout (whole seconds, reset by every byte either
     * way) is the idle timeout: it also ends an answer nobody reads. */
    unsigned idle = (unsigned)(srv->idle_timeout + 0.999);
    struct MHD_OptionItem tls[] = {
        { opts->tls_cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)opts->tls_cert },
        { MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)opts->tls_key },
        { MHD_OPTION_END, 0, NULL },
    };
    if (opts->tls_cert)
        flags |= MHD_USE_TLS;
    daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv,
                              MHD_OPTION_EXTERNAL_LOGGER, luna_liblog_mhd, &mhd_log,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                              MHD_OPTION_UNESCAPE_CALLBACK, unescape, srv,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
                              MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
                              MHD_OPTION_CONNECTION_TIMEOUT, idle,
                              MHD_OPTION_ARRAY, tls,
                              MHD_OPTION_END);
    if (!daemon) {
        free(srv);
        luna_error_set(err, LUNA_EIO, "cannot listen on %s:%d (address in use, or bad TLS "
                       "certificate/key)", opts->host, opts->port);
        return NULL;
    }
    if (luna_mhd_loop_attach(&srv->ml, daemon, err) < 0) {
        free(srv);
        return NULL;
    }
    srv->port = luna_mhd_loop_port(&srv->ml);
    if (!srv->port)
        srv->port = opts->port;
    double every = srv->read_header_timeout / 4;
    every = every > 1 ? 1 : every < 0.05 ? 0.05 : every;
    ev_timer_init(&srv->sweep, on_sweep, every, every);
    ev_timer_start(luna_loop(), &srv->sweep);
    return srv;
}

int luna_ds_http_port(const luna_ds_http *srv) { return srv->port; }

void luna_ds_http_stop(luna_ds_http *srv)
{
    if (!srv)
        return;
    /* MHD aborts when stopped with a suspended connection. */
    while (srv->suspended)
        resume(srv, srv->suspended);
    ev_timer_stop(luna_loop(), &srv->sweep);
    luna_mhd_loop_stop(&srv->ml);
    free(srv);
}
