/*
 * http_stream — NDJSON stream throughput of the HTTP client.
 *
 * An in-process libmicrohttpd server (its own thread) streams LINES watch-
 * event-sized lines with chunked encoding; the client consumes them on the
 * libev loop in line mode (libcurl multi + the NDJSON framer) and counts.
 * Prints: bench http_stream lines=N bytes=B seconds=S lines_per_s=L mb_per_s=M
 */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/http.h"
#include "base/loop.h"

#define LINES 1000000

static char line[900];
static size_t line_len;

struct cursor {
    uint64_t total;
};

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct cursor *c = cls;
    if (pos >= c->total)
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = 0;
    while (n < max && pos + n < c->total) {
        size_t off = (size_t)((pos + n) % line_len);
        size_t k = line_len - off;
        if (k > max - n)
            k = max - n;
        if (k > c->total - pos - n)
            k = (size_t)(c->total - pos - n);
        memcpy(buf + n, line + off, k);
        n += k;
    }
    return (ssize_t)n;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    struct cursor *c = malloc(sizeof *c);
    c->total = (uint64_t)line_len * LINES;
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, reader, c, free);
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

struct result {
    size_t lines, bytes;
    bool done, failed;
};

static int on_line(luna_http_request *req, const char *data, size_t len, void *ud,
                   luna_error *err)
{
    struct result *res = ud;
    res->lines++;
    res->bytes += len + 1;
    return 0;
}

static void on_done(luna_http_request *req, const luna_http_response *resp,
                    const luna_http_failure *fail, void *ud)
{
    struct result *res = ud;
    res->done = true;
    if (fail) {
        fprintf(stderr, "http_stream: %s\n", fail->err.msg);
        res->failed = true;
    }
}

int main(void)
{
    /* A ConfigMap watch event of typical size. */
    int n = snprintf(line, sizeof line,
        "{\"type\":\"MODIFIED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
        "\"metadata\":{\"name\":\"bench-cm\",\"namespace\":\"default\",\"uid\":"
        "\"6f1c2a9e-5b1d-4c8e-9f3a-2d7e8b9c0a1f\",\"resourceVersion\":\"123456\","
        "\"labels\":{\"app\":\"bench\",\"tier\":\"backend\"}},\"data\":{\"k\":\"");
    while (n < (int)sizeof line - 8)
        line[n++] = 'v';
    memcpy(line + n, "\"}}}\n", 5);
    line_len = (size_t)n + 5;

    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL,
                                            handle, NULL, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "http_stream: cannot start the server\n");
        return 1;
    }
    unsigned port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/watch", port);

    luna_error err;
    luna_http_client *client = luna_http_client_new(luna_loop(), &err);
    struct result res = { 0 };
    luna_http_options o = { .url = url, .on_line = on_line, .on_done = on_done, .ud = &res };
    double t0 = ev_time();
    if (!client || !luna_http_request_start(client, &o, NULL, &err)) {
        fprintf(stderr, "http_stream: %s\n", err.msg);
        return 1;
    }
    while (!res.done)
        ev_run(luna_loop(), EVRUN_ONCE);
    double secs = ev_time() - t0;
    luna_http_client_free(client);
    MHD_stop_daemon(d);
    if (res.failed || res.lines != LINES) {
        fprintf(stderr, "http_stream: got %zu of %d lines\n", res.lines, LINES);
        return 1;
    }
    printf("bench http_stream lines=%zu bytes=%zu seconds=%.3f lines_per_s=%.0f mb_per_s=%.1f\n",
           res.lines, res.bytes, secs, res.lines / secs, res.bytes / secs / 1e6);
    return 0;
}
