/* mhd_loop.c — see mhd_loop.h. */
#include "base/mhd_loop.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/loop.h"

/* MHD_run calls per wake-up while MHD still has work it can do at once
 * (a connection accepted in one run is read and answered in the next):
 * a request is served within one loop iteration, however long the other
 * watchers of that iteration take (script code up to its time budget). */
#define RUNS_PER_WAKE 8

static void run(struct luna_mhd_loop *ml)
{
    ml->kicked = false;
    MHD_UNSIGNED_LONG_LONG ms;
    for (int i = 0; i < RUNS_PER_WAKE; i++) {
        MHD_run(ml->daemon);
        if (ml->kicked || MHD_get_timeout(ml->daemon, &ms) != MHD_YES || ms != 0)
            break;
    }
    ev_timer_stop(luna_loop(), &ml->timer);
    if (ml->kicked) {
        ev_timer_set(&ml->timer, 0.0, 0.0);
        ev_timer_start(luna_loop(), &ml->timer);
    } else if (MHD_get_timeout(ml->daemon, &ms) == MHD_YES) {
        double secs = ms == 0 ? 0.0005 : (double)ms / 1000.0;
        ev_timer_set(&ml->timer, secs, 0.0);
        ev_timer_start(luna_loop(), &ml->timer);
    }
}

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    run((struct luna_mhd_loop *)((char *)w - offsetof(struct luna_mhd_loop, io)));
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    run((struct luna_mhd_loop *)((char *)w - offsetof(struct luna_mhd_loop, timer)));
}

int luna_mhd_loop_attach(struct luna_mhd_loop *ml, struct MHD_Daemon *daemon,
                         luna_error *err)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info || info->epoll_fd < 0) {
        MHD_stop_daemon(daemon);
        return luna_error_set(err, LUNA_EINVAL, "HTTP server: libmicrohttpd has no epoll fd");
    }
    ml->daemon = daemon;
    ml->kicked = false;
    ev_io_init(&ml->io, on_io, info->epoll_fd, EV_READ);
    ev_set_priority(&ml->io, ml->priority);
    ev_io_start(luna_loop(), &ml->io);
    ev_timer_init(&ml->timer, on_timer, 0.0, 0.0);
    ev_set_priority(&ml->timer, ml->priority);
    run(ml);
    return 0;
}

void luna_mhd_loop_kick(struct luna_mhd_loop *ml)
{
    if (!ml->daemon)
        return;
    ml->kicked = true;
    ev_timer_stop(luna_loop(), &ml->timer);
    ev_timer_set(&ml->timer, 0.0, 0.0);
    ev_timer_start(luna_loop(), &ml->timer);
}

void luna_mhd_loop_stop(struct luna_mhd_loop *ml)
{
    if (!ml->daemon)
        return;
    ev_io_stop(luna_loop(), &ml->io);
    ev_timer_stop(luna_loop(), &ml->timer);
    MHD_stop_daemon(ml->daemon);
    ml->daemon = NULL;
}

int luna_mhd_loop_port(const struct luna_mhd_loop *ml)
{
    if (!ml->daemon)
        return 0;
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(ml->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

struct framing {
    unsigned lengths, encodings;
    const char *first_length;
    bool lengths_differ;
    char got[160]; /* Go's %q of the lengths, for its message */
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    struct framing *f = cls;
    if (!key || !value)
        return MHD_YES;
    if (strcasecmp(key, "Transfer-Encoding") == 0) {
        f->encodings++;
    } else if (strcasecmp(key, "Content-Length") == 0) {
        if (f->lengths++ == 0)
            f->first_length = value;
        else if (strcmp(f->first_length, value) != 0)
            f->lengths_differ = true;
        size_t n = strlen(f->got);
        snprintf(f->got + n, sizeof f->got - n, "%s\"%.32s\"", n ? " " : "[", value);
    }
    return MHD_YES;
}

bool luna_mhd_bad_framing(struct MHD_Connection *c, char *why, size_t why_size)
{
    struct framing f = { 0 };
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    if (f.lengths_differ) {
        snprintf(why, why_size, "http: message cannot contain multiple Content-Length "
                 "headers; got %s]", f.got);
        return true;
    }
    if (f.lengths && f.encodings) {
        snprintf(why, why_size, "http: message cannot contain both Content-Length and "
                 "Transfer-Encoding headers");
        return true;
    }
    return false;
}
