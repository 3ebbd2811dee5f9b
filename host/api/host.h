/*
 * api/host.h — what the runtime hands the script API: one struct it owns
 * and installs in each Lua state's registry (api/api.h), where every
 * binding finds it (luna_api_host).  Nothing else of the runtime reaches
 * the bindings.
 *
 * Runs on the loop thread.  Ownership: the host is the runtime's; a state
 * borrows it for its whole life.
 */
#ifndef LUNA_API_HOST_H
#define LUNA_API_HOST_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct luna_kube_client;
struct luna_discovery;

/* The observer of the requests scripts make (a field of the host; `luna
 * test` records them through the runtime's test control): start(ud, ...)
 * when a request is sent,
 * returning a token (0: not kept; strings are borrowed for the call only,
 * body may be NULL), and done(ud, token, status) when it completes (status
 * 0: the transfer failed; never for a cancelled request or token 0).  ud
 * is borrowed while the observer is set. */
struct luna_api_client_observer {
    uint64_t (*start)(void *ud, const char *controller, const char *key, const char *method,
                      const char *path, const char *content_type, const char *body,
                      size_t body_len);
    void (*done)(void *ud, uint64_t token, int status);
    void *ud;
};

struct luna_event_memories;

/* What the runtime hands the script API.  Owned by the runtime, borrowed
 * by every state it is installed in (it outlives them); the runtime may
 * change a field between two calls on the loop (connect, sharding). */
struct luna_api_host {
    struct luna_kube_client *kc;     /* NULL until the runtime has connected */
    struct luna_discovery *disc;     /* NULL until the runtime has connected */
    bool shadow;                     /* --shadow: every write is a dry run */
    /* Sharding: a write (any method but GET and HEAD) is sent only if
     * write_allow(write_ud, &why) says so, and then with write_timeout
     * seconds at most; NULL: no gate (api/client.h). */
    bool (*write_allow)(void *ud, const char **why);
    double write_timeout;
    void *write_ud;
    struct luna_api_client_observer observer; /* start NULL: none (api/client.h) */
    struct luna_event_memories *events;       /* NULL: none (api/events.h) */
};

/* Puts host in L's registry (borrowed for the state's life). */
void luna_api_host_set(lua_State *L, struct luna_api_host *host);
/* The host installed in L's state, or NULL (a state without the API). */
struct luna_api_host *luna_api_host(lua_State *L);

#endif
