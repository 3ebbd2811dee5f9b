/* devserver_hook_client.c — see devserver_hook_client.h. */
#include "devserver/devserver_hook_client.h"

#include <curl/curl.h>
#include <ev.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/loop.h"

#define MAX_ANSWER (3u * 1024 * 1024) /* kube reads at most this much of a webhook's answer */

struct luna_ds_hook_client {
    CURLM *multi;
    ev_timer timer;              /* curl's one timeout */
    luna_ds_hook_call *calls;    /* live calls (owned) */
};

struct luna_ds_hook_call {
    luna_ds_hook_client *c;
    CURL *easy;
    struct curl_slist *headers;
    struct curl_slist *connect_to; /* CURLOPT_CONNECT_TO's list (owned; curl borrows it) */
    char *body;                  /* the request body (owned; curl borrows it) */
    char *answer;                /* the answer so far (owned) */
    size_t len, cap;
    bool too_big;
    char errbuf[CURL_ERROR_SIZE];
    luna_ds_hook_done_fn done;
    void *ud;
    luna_ds_hook_call *prev, *next;
};

/* One socket curl watches (curl_multi_assign). */
struct sock {
    ev_io io;
    luna_ds_hook_client *c;
};

static void check_done(luna_ds_hook_client *c);

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    struct sock *s = (struct sock *)w;
    int action = (revents & EV_READ ? CURL_CSELECT_IN : 0) | (revents & EV_WRITE ? CURL_CSELECT_OUT : 0);
    int running;
    /* curl may free s (CURL_POLL_REMOVE) inside the call */
    luna_ds_hook_client *c = s->c;
    curl_multi_socket_action(c->multi, w->fd, action, &running);
    check_done(c);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    luna_ds_hook_client *c = (luna_ds_hook_client *)((char *)w - offsetof(luna_ds_hook_client, timer));
    int running;
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(c);
}

static int socket_cb(CURL *e, curl_socket_t fd, int what, void *cbp, void *sockp)
{
    (void)e;
    luna_ds_hook_client *c = cbp;
    struct sock *s = sockp;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            ev_io_stop(luna_loop(), &s->io);
            free(s);
            curl_multi_assign(c->multi, fd, NULL);
        }
        return 0;
    }
    int ev = (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return -1;
        s->c = c;
        curl_multi_assign(c->multi, fd, s);
    } else {
        ev_io_stop(luna_loop(), &s->io);
    }
    ev_io_init(&s->io, on_io, fd, ev);
    ev_io_start(luna_loop(), &s->io);
    return 0;
}

static int timer_cb(CURLM *m, long ms, void *cbp)
{
    (void)m;
    luna_ds_hook_client *c = cbp;
    ev_timer_stop(luna_loop(), &c->timer);
    if (ms >= 0) {
        /* 0 must still go through the loop: curl may not be re-entered here */
        ev_timer_set(&c->timer, ms > 0 ? ms / 1000.0 : 0.001, 0);
        ev_timer_start(luna_loop(), &c->timer);
    }
    return 0;
}

static size_t write_cb(char *p, size_t size, size_t n, void *ud)
{
    luna_ds_hook_call *call = ud;
    size_t len = size * n;
    if (call->len + len > MAX_ANSWER) {
        call->too_big = true;
        return 0;
    }
    if (call->len + len + 1 > call->cap) {
        size_t cap = call->cap ? call->cap : 4096;
        while (cap < call->len + len + 1)
            cap *= 2;
        char *a = realloc(call->answer, cap);
        if (!a)
            return 0;
        call->answer = a;
        call->cap = cap;
    }
    memcpy(call->answer + call->len, p, len);
    call->len += len;
    call->answer[call->len] = '\0';
    return len;
}

luna_ds_hook_client *luna_ds_hook_client_new(void)
{
    static bool inited;
    if (!inited) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return NULL;
        inited = true;
    }
    luna_ds_hook_client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->multi = curl_multi_init();
    if (!c->multi) {
        free(c);
        return NULL;
    }
    ev_timer_init(&c->timer, on_timer, 0, 0);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    return c;
}

static void call_free(luna_ds_hook_call *call)
{
    luna_ds_hook_client *c = call->c;
    if (call->prev)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    curl_multi_remove_handle(c->multi, call->easy);
    curl_easy_cleanup(call->easy);
    curl_slist_free_all(call->headers);
    curl_slist_free_all(call->connect_to);
    free(call->body);
    free(call->answer);
    free(call);
}

void luna_ds_hook_client_free(luna_ds_hook_client *c)
{
    if (!c)
        return;
    while (c->calls)
        call_free(c->calls);
    ev_timer_stop(luna_loop(), &c->timer);
    curl_multi_cleanup(c->multi);
    free(c);
}

/* What went wrong, worded as Go's client words it, since kube's messages
 * carry it ("failed to call webhook: Post \"URL\": ..."). */
static void describe(luna_ds_hook_call *call, CURLcode rc, char *out, size_t n)
{
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(out, n, "context deadline exceeded");
        break;
    case CURLE_COULDNT_CONNECT: {
        char *ip = NULL;
        long port = 0;
        curl_easy_getinfo(call->easy, CURLINFO_PRIMARY_IP, &ip);
        curl_easy_getinfo(call->easy, CURLINFO_PRIMARY_PORT, &port);
        if (ip && *ip) {
            snprintf(out, n, "dial tcp %s:%ld: connect: connection refused", ip, port);
        } else {
            /* curl names no peer when none answered: the URL's host:port */
            char *u = NULL;
            curl_easy_getinfo(call->easy, CURLINFO_EFFECTIVE_URL, &u);
            const char *h = u && strstr(u, "://") ? strstr(u, "://") + 3 : "";
            size_t hl = strcspn(h, "/?#");
            bool has_port = hl && memchr(h, ':', hl) && h[0] != '[';
            snprintf(out, n, "dial tcp %.*s%s: connect: connection refused", (int)hl, h,
                     has_port ? "" : u && strncmp(u, "https", 5) == 0 ? ":443" : ":80");
        }
        break;
    }
    case CURLE_COULDNT_RESOLVE_HOST:
        snprintf(out, n, "dial tcp: lookup: no such host (%s)", call->errbuf);
        break;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CACERT_BADFILE:
        snprintf(out, n, "tls: failed to verify certificate: %s",
                 call->errbuf[0] ? call->errbuf : curl_easy_strerror(rc));
        break;
    default:
        if (call->too_big)
            snprintf(out, n, "the answer is over %u bytes", MAX_ANSWER);
        else
            snprintf(out, n, "%s", call->errbuf[0] ? call->errbuf : curl_easy_strerror(rc));
    }
}

static void check_done(luna_ds_hook_client *c)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        luna_ds_hook_call *call = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&call);
        if (!call)
            continue;
        CURLcode rc = m->data.result;
        long status = 0;
        curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
        char why[CURL_ERROR_SIZE + 128];
        luna_ds_hook_done_fn done = call->done;
        void *ud = call->ud;
        /* the call is gone before its callback runs, so the callback may
         * start and cancel others freely */
        if (rc != CURLE_OK) {
            describe(call, rc, why, sizeof why);
            call_free(call);
            done(ud, 0, NULL, 0, why);
            continue;
        }
        char *answer = call->answer;
        size_t len = call->len;
        call->answer = NULL;
        call_free(call);
        done(ud, status, answer ? answer : "", len, NULL);
        free(answer);
    }
}

luna_ds_hook_call *luna_ds_hook_call_start(luna_ds_hook_client *c, const luna_ds_hook_opts *o,
                                           char *err, size_t errn)
{
    luna_ds_hook_call *call = calloc(1, sizeof *call);
    if (!call || !(call->easy = curl_easy_init()) || !(call->body = malloc(o->body_len + 1))) {
        if (call)
            curl_easy_cleanup(call->easy);
        free(call);
        snprintf(err, errn, "out of memory");
        return NULL;
    }
    memcpy(call->body, o->body, o->body_len);
    call->body[o->body_len] = '\0';
    call->c = c;
    call->done = o->done;
    call->ud = o->ud;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (h)
        call->headers = curl_slist_append(h, "Accept: application/json, */*");
    struct curl_slist *connect_to = NULL;
    CURL *e = call->easy;
    curl_easy_setopt(e, CURLOPT_URL, o->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, call);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, call->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, call->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, call);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(o->timeout * 1000));
    /* kube's webhook client goes straight to the webhook */
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    if (o->ca_pem) {
        struct curl_blob ca = { .data = (void *)o->ca_pem, .len = o->ca_len,
                                .flags = CURL_BLOB_COPY };
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
    }
    if (o->connect_to) {
        connect_to = curl_slist_append(NULL, o->connect_to);
        curl_easy_setopt(e, CURLOPT_CONNECT_TO, connect_to);
    }
    call->connect_to = connect_to;
    CURLMcode mc = !call->headers || (o->connect_to && !connect_to)
                       ? CURLM_OUT_OF_MEMORY : curl_multi_add_handle(c->multi, e);
    if (mc != CURLM_OK) {
        snprintf(err, errn, "%s", curl_multi_strerror(mc));
        curl_slist_free_all(connect_to);
        curl_slist_free_all(call->headers);
        curl_easy_cleanup(e);
        free(call->body);
        free(call);
        return NULL;
    }
    call->next = c->calls;
    if (c->calls)
        c->calls->prev = call;
    c->calls = call;
    return call;
}

void luna_ds_hook_call_cancel(luna_ds_hook_call *call)
{
    if (call)
        call_free(call);
}
