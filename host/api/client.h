/*
 * api/client.h — the API client as scripts see it (luna.get, luna.list,
 * luna.create, ... in lua/luna/api.lua): the two calls that wait for the
 * API server.
 *
 *   core.runtime.resolve(kind)               → resource table | nil, err   (yields)
 *   core.runtime.request(method, path [, body [, content_type]])
 *                                            → status, body | nil, err     (yields)
 *
 * Uses: kube_client (requests), discovery (kinds), controller (the
 * reconcile a call belongs to).  Runs on the loop thread.
 *
 * Both may only run inside a reconcile, on its own coroutine (not in a
 * coroutine the script made); anywhere else they raise.  A call that
 * waits records one pending operation on its reconcile
 * (luna_reconcile_wait) and yields; the answer resumes the reconcile, and
 * a reconcile that ends first cancels the operation, which then never
 * calls back.
 *
 * Shadow mode (`luna run --shadow`, luna_lua_client_set_shadow, or the
 * reconcile's controller being a shadow candidate of --shadow-reload):
 * every request but GET and HEAD is sent with dryRun=All, whatever path
 * the script built, so nothing reaches storage; core.runtime.shadow is true
 * and lua/luna/api.lua logs what each write would have changed, counted
 * through core.runtime.shadow_report(verb, changed).
 *
 * Ownership: a pending request owns its kube request until it completes
 * or is cancelled; kc and disc are borrowed (they outlive every state).
 */
#ifndef LUNA_LUA_CLIENT_H
#define LUNA_LUA_CLIENT_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/discovery.h"
#include "client/kube_client.h"

/* Adds resolve and request to the table on top of L's stack; the calls
 * use kc and disc (borrowed; NULL until the runtime has connected, which
 * registers again). */
void luna_lua_client_register(lua_State *L, struct luna_kube_client *kc,
                              struct luna_discovery *disc);

/* Shadow mode for every state registered afterwards (set before loading). */
void luna_lua_client_set_shadow(bool on);
/* Sharding (shard_set.h): a write (any method but GET and HEAD) is sent
 * only if allow(ud, &why) says so — else "shard write refused" is logged
 * and the call returns nil, err with reason ShardNotHeld and the why —
 * and then with `timeout` seconds at most.  allow NULL: no gate. */
void luna_lua_client_set_write_gate(bool (*allow)(void *ud, const char **why), double timeout,
                                    void *ud);
bool luna_lua_client_shadow(void);

/* Observes the requests scripts make (`luna test` records them through
 * the runtime's test control): start(ud, ...) when a request is sent,
 * returning a token (0: not kept; strings are borrowed for the call only,
 * body may be NULL), and done(ud, token, status) when it completes (status
 * 0: the transfer failed; never for a cancelled request or token 0).  One
 * observer for every state; NULL start removes it; ud is borrowed until
 * then. */
struct luna_lua_client_observer {
    uint64_t (*start)(void *ud, const char *controller, const char *key, const char *method,
                      const char *path, const char *content_type, const char *body,
                      size_t body_len);
    void (*done)(void *ud, uint64_t token, int status);
    void *ud;
};
void luna_lua_client_set_observer(const struct luna_lua_client_observer *obs);

#endif
