/* dir_watch.c — see dir_watch.h. */
#include "runtime/dir_watch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "base/log.h"
#include "base/loop.h"

struct luna_dir_watch {
    int fd;
    double debounce;
    void (*changed)(void *ud);
    void *ud;
    ev_io io;
    ev_timer settle;
};

static void settle_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct luna_dir_watch *w = (struct luna_dir_watch *)((char *)t -
                                                         offsetof(struct luna_dir_watch, settle));
    w->changed(w->ud);
}

static void io_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    struct luna_dir_watch *w = (struct luna_dir_watch *)((char *)io -
                                                         offsetof(struct luna_dir_watch, io));
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool any = false;
    for (;;) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n <= 0)
            break;
        any = true;
    }
    if (any) {
        ev_timer_stop(loop, &w->settle);
        ev_timer_set(&w->settle, w->debounce, 0.);
        ev_timer_start(loop, &w->settle);
    }
}

int luna_dir_watch_new(const char *dir, double debounce, void (*changed)(void *ud), void *ud,
                       struct luna_dir_watch **out, luna_error *err)
{
    *out = NULL;
    struct luna_dir_watch *w = calloc(1, sizeof *w);
    if (!w)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) {
        free(w);
        return luna_error_set(err, LUNA_EIO, "inotify: %s", strerror(errno));
    }
    uint32_t mask = IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                    IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;
    if (inotify_add_watch(w->fd, dir, mask) < 0) {
        int e = errno;
        close(w->fd);
        free(w);
        return luna_error_set(err, LUNA_EIO, "%s: cannot watch: %s", dir, strerror(e));
    }
    w->debounce = debounce > 0 ? debounce : 0.5;
    w->changed = changed;
    w->ud = ud;
    ev_io_init(&w->io, io_cb, w->fd, EV_READ);
    ev_io_start(luna_loop(), &w->io);
    ev_timer_init(&w->settle, settle_cb, 0., 0.);
    *out = w;
    return 0;
}

void luna_dir_watch_free(struct luna_dir_watch *w)
{
    if (!w)
        return;
    ev_io_stop(luna_loop(), &w->io);
    ev_timer_stop(luna_loop(), &w->settle);
    close(w->fd);
    free(w);
}
