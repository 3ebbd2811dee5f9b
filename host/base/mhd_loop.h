/*
 * mhd_loop.h — a libmicrohttpd daemon driven by luna's libev loop, shared
 * by the dev server's transport (devserver_http.c) and luna's own
 * endpoints (httpd.c).
 *
 * The daemon runs without threads of its own (MHD_USE_EPOLL, no
 * MHD_USE_INTERNAL_POLLING_THREAD): one ev_io watches MHD's epoll fd, one
 * ev_timer follows MHD_get_timeout, and either calls MHD_run.  After
 * MHD_resume_connection the owner calls luna_mhd_loop_kick so MHD runs
 * again soon: a resumed connection is only handled on the next MHD_run.
 * A kick from inside MHD_run (a write waking a suspended stream) must
 * survive the timer re-arm that follows it, hence the `kicked` flag.
 *
 * Uses libmicrohttpd, libev (luna_loop()).  Runs on the loop thread.
 *
 * Invariant: the watchers are started if and only if the daemon is
 * attached (between luna_mhd_loop_attach and luna_mhd_loop_stop).
 *
 * Ownership: the struct is caller storage (embed it in the server's
 * struct); attach takes ownership of the daemon, which
 * luna_mhd_loop_stop stops (MHD_stop_daemon).
 */
#ifndef LUNA_MHD_LOOP_H
#define LUNA_MHD_LOOP_H

#include <ev.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <microhttpd.h>

#include "base/error.h"

struct luna_mhd_loop {
    struct MHD_Daemon *daemon;  /* owned while attached; NULL otherwise */
    ev_io io;                   /* MHD's epoll fd */
    ev_timer timer;             /* MHD's next timeout, or a kick */
    bool kicked;                /* run MHD again as soon as possible */
    int priority;               /* the watchers' libev priority (set before
                                 * attach; 0: the default) */
};

/* Takes a daemon started with MHD_USE_EPOLL (no internal thread), starts
 * the watchers and runs MHD once.  LUNA_EINVAL (the daemon is then
 * stopped) if MHD reports no epoll fd. */
int luna_mhd_loop_attach(struct luna_mhd_loop *ml, struct MHD_Daemon *daemon,
                         luna_error *err);
/* Schedules an MHD_run on the next loop iteration. */
void luna_mhd_loop_kick(struct luna_mhd_loop *ml);
/* Stops the watchers and the daemon (closing its connections).  A no-op
 * when nothing is attached. */
void luna_mhd_loop_stop(struct luna_mhd_loop *ml);

/* Request smuggling: framings a proxy in front and this server could read
 * differently.  After MHD has a request's headers (its first access
 * callback), true if they are unsafe, with Go net/http's reason in why
 * (without the "400 Bad Request: " prefix): Content-Length headers that
 * differ (Go takes equal ones as one), or a Content-Length beside
 * Transfer-Encoding (RFC 9112 6.1; Go drops the length instead, see
 * docs/kube.md).  The caller answers 400 and closes the connection. */
bool luna_mhd_bad_framing(struct MHD_Connection *c, char *why, size_t why_size);

/* The port the daemon listens on (useful after port 0), or 0. */
int luna_mhd_loop_port(const struct luna_mhd_loop *ml);

#endif
