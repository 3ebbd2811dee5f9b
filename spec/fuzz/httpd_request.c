/*
 * httpd_request.c — libFuzzer target for luna's own HTTP server (the probe
 * and metrics server, serve/httpd): the bytes of one connection, parsed by
 * libmicrohttpd and answered by httpd's request handling (paths, methods,
 * the readyz query: verbose, exclude=, /readyz/NAME, /admin/ arguments).
 *
 * One server (metrics, health, an admin handler, no auth) listens on
 * 127.0.0.1 for the whole run, on luna's loop.  Per input: a client
 * connects, writes the input in pieces (control byte 0 says where to
 * cut, so a request split across reads is parsed too), the loop runs
 * until the server has nothing more to say, and the client resets the
 * connection.  Pipelined requests in one input are all answered.
 *
 * Checked: whatever comes back starts as an HTTP/1.x response with a
 * status code 100..599; nothing leaks (LeakSanitizer, at exit).
 */
#include "fuzz_input.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/textbuf.h"
#include "serve/health.h"
#include "serve/httpd.h"
#include "serve/metrics.h"

static struct luna_httpd *server;
static struct luna_metrics *metrics;
static struct luna_health *health;
static int port;

static int admin(void *ud, const struct luna_admin_request *req, struct luna_textbuf *body)
{
    (void)ud;
    luna_textbuf_puts(body, "{\"path\":\"");
    luna_textbuf_puts(body, req->path);
    luna_textbuf_puts(body, "\"}");
    return req->nargs > 3 ? 400 : 200;
}

static void cleanup(void)
{
    luna_httpd_free(server);
    luna_health_free(health);
    luna_metrics_free(metrics);
}

static void start(void)
{
    luna_error err = { 0 };
    if (luna_metrics_new(&metrics, &err) < 0)
        abort();
    struct luna_health_options ho = { 0 };
    if (luna_health_new(&ho, &health, &err) < 0)
        abort();
    struct luna_httpd_options o = { .address = "127.0.0.1:0", .metrics = metrics,
                                    .health = health, .admin = admin };
    if (luna_httpd_start(&o, &server, &err) < 0) {
        fprintf(stderr, "httpd_request: %s\n", err.msg);
        abort();
    }
    const char *a = luna_httpd_address(server);
    port = atoi(strrchr(a, ':') + 1);
    atexit(cleanup);
}

/* Checks the bytes the server sent: responses, each with a status line. */
static void check_answer(const char *buf, size_t n)
{
    if (n == 0)
        return;
    FUZZ_CHECK(n >= 12 && memcmp(buf, "HTTP/1.", 7) == 0, "not an HTTP response: %.40s", buf);
    int code = atoi(buf + 9);
    FUZZ_CHECK(code >= 100 && code < 600, "status code %d", code);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server)
        start();
    fuzz_input in = { data, size };
    uint8_t cut = fuzz_byte(&in);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        abort();
    /* Each input from the next of 62,500 loopback addresses: a connection
     * the server closed first waits in TIME_WAIT for a minute, and at a
     * thousand inputs a second one address runs out of ports. */
    static unsigned next_from;
    unsigned k = next_from++ % 62500;
    struct sockaddr_in from = { .sin_family = AF_INET };
    from.sin_addr.s_addr = htonl(0x7f000001u | (1 + k % 250) << 16 | (1 + k / 250) << 8);
    if (bind(fd, (struct sockaddr *)&from, sizeof from) < 0) {
        perror("httpd_request: bind");
        abort();
    }
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* Non-blocking, so that libFuzzer's SIGALRM (its -timeout) cannot
     * interrupt the connect half way. */
    fcntl(fd, F_SETFL, O_NONBLOCK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (errno != EINPROGRESS && errno != EINTR) {
            perror("httpd_request: connect");
            abort();
        }
        struct pollfd w = { .fd = fd, .events = POLLOUT };
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        while (poll(&w, 1, 1000) < 0 && errno == EINTR)
            ;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            fprintf(stderr, "httpd_request: connect: %s\n", strerror(soerr));
            abort();
        }
    }
    struct ev_loop *loop = luna_loop();
    size_t step = cut ? in.n / 4 + (cut % 16) : in.n;
    size_t off = 0;
    static char answer[1 << 16];
    size_t got = 0;
    /* The loop turns (without sleeping: loopback delivers at once) until
     * the input is sent and QUIET turns in a row brought no answer; each
     * turn writes the next piece, lets the server run, reads what it
     * answered. */
    enum { QUIET = 64 };
    int quiet = 0;
    bool closed = false;
    for (int turn = 0; turn < 100000 && !closed && quiet < QUIET; turn++) {
        bool progress = false;
        if (off < in.n) {
            size_t n = in.n - off < step || !step ? in.n - off : step;
            ssize_t w = send(fd, in.p + off, n, MSG_NOSIGNAL);
            if (w > 0) {
                off += (size_t)w;
                progress = true;
            }
        }
        ev_run(loop, EVRUN_NOWAIT);
        char buf[4096];
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
            closed = true;
        } else if (r > 0) {
            size_t keep = (size_t)r < sizeof answer - got ? (size_t)r : sizeof answer - got;
            memcpy(answer + got, buf, keep);
            got += keep;
            progress = true;
        }
        quiet = progress || off < in.n ? 0 : quiet + 1;
    }
    check_answer(answer, got);
    /* A reset, not a FIN: the server's epoll hears of it at once, and the
     * connection is gone before the next input connects. */
    struct linger lg = { .l_onoff = 1, .l_linger = 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    for (int i = 0; i < 8; i++)
        ev_run(loop, EVRUN_NOWAIT);
    return 0;
}
