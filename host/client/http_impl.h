/*
 * http_impl.h — what the HTTP client's two files share, private to them:
 * http.c (the client: curl multi on libev, sockets and timers, and how a
 * transfer's head, body and end reach the caller) and http_request.c (a
 * request built into an easy handle: headers, TLS, routing by name, proxy,
 * and its start and cancel).  The contract is http.h's.
 */
#ifndef LUNA_HTTP_IMPL_H
#define LUNA_HTTP_IMPL_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/liblog.h"
#include "base/ndjson.h"
#include "client/http.h"

#define USER_AGENT "luna/" LUNA_VERSION
#define KEEPALIVE_IDLE_S 30L
#define KEEPALIVE_INTERVAL_S 15L

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

    bool busy;                  /* luna_http_drive() is running this request's callbacks */
    bool canceled;
    bool done_called;
    bool in_pending;
    bool counted;               /* included in client->active */
    char errbuf[CURL_ERROR_SIZE];
    luna_http_request *prev, *next;           /* client->live */
    luna_http_request *pprev, *pnext;         /* client->pending */
};

/* ---- http.c ---- */
void luna_http_destroy(luna_http_request *r);
void luna_http_detach(luna_http_request *r);
void luna_http_drive(luna_http_request *r);
int luna_http_framer_line(const char *line, size_t len, void *ud, luna_error *err);
size_t luna_http_header_cb(char *line, size_t size, size_t nitems, void *userdata);
void luna_http_idle_cb(struct ev_loop *loop, ev_timer *w, int revents);
bool luna_http_is_field_value(const char *s);
bool luna_http_is_token(const char *s, size_t max);
int luna_http_set_reason(enum luna_http_reason *out, enum luna_http_reason r, int code);
int luna_http_sockopt_cb(void *ud, curl_socket_t fd, curlsocktype purpose);
void luna_http_uncount(luna_http_request *r);
void luna_http_unmark_pending(luna_http_request *r);
size_t luna_http_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata);

#endif
