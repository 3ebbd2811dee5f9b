/* loop.c — see loop.h. */
#include "base/loop.h"

#include "base/liblog.h"

/* Not libev's default loop: that one installs a SIGCHLD handler, which would
 * outlive the module when luajit unloads luna.core at exit and then fire on
 * a child's exit into unmapped code.  Signal watchers work on this loop too. */
static struct ev_loop *the_loop;

struct ev_loop *luna_loop(void)
{
    if (!the_loop) {
        the_loop = ev_loop_new(EVFLAG_AUTO);
        if (!the_loop)
            luna_liblog_fatal("libev", "cannot create the event loop (bad LIBEV_FLAGS?)");
    }
    return the_loop;
}
