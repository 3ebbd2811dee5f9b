/*
 * devserver_state.h — everything one dev server owns, in one value: its
 * configuration, the object store (resourceVersions, history), the type
 * registry with its collections, the injected faults, the open watches and
 * the garbage collector's pending work.  The REST modules (devserver_api
 * and the files it names) take it as their first argument, so nothing in
 * the dev server is process-wide and two servers in one process share
 * nothing.
 *
 * Created and freed by devserver_api (luna_ds_api_new/_free); the other
 * modules borrow it.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_STATE_H
#define LUNA_DEVSERVER_STATE_H

#include <stdbool.h>

#include "devserver/devserver_admission.h"
#include "devserver/devserver_auth.h"
#include "devserver/devserver_convert.h"
#include "devserver/devserver_faults.h"
#include "devserver/devserver_gc.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"
#include "devserver/devserver_watch.h"

struct luna_ds_write_hooks;

struct luna_ds {
    char server_address[300];     /* "host:port" for /api */
    double bookmark_interval;     /* seconds between watch BOOKMARKs */
    bool admin;                   /* serve /luna/v1/faults */
    luna_ds_store *store;         /* owned */
    luna_ds_types *types;         /* owned; its collections come from store */
    luna_ds_faults faults;
    luna_ds_watches watches;      /* every watch must be freed before the server */
    luna_ds_gc gc;
    const struct luna_ds_write_hooks *write_hooks; /* the collector's (static) */
    luna_ds_auth auth;            /* issued tokens, the --token (devserver_auth) */
    luna_ds_admission admission;  /* webhooks: the request handled, captured calls (devserver_admission) */
    luna_ds_conversion conversion; /* conversion webhooks: this pass's (devserver_convert) */
    bool dry_run;                 /* the request being handled has dryRun=All:
                                     its writes are computed, not stored */
};

#endif
