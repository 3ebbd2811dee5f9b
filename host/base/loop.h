/*
 * loop.h — the one libev loop every module runs on.
 *
 * luna is single-threaded: informers, HTTP transfers, timers and Lua all run
 * on the loop returned here, created on first use and never freed (it lives
 * as long as the process).  Nothing in luna takes a lock.
 */
#ifndef LUNA_LOOP_H
#define LUNA_LOOP_H

#include <ev.h>

struct ev_loop *luna_loop(void);

#endif
