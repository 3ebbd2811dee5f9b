/*
 * api/client.h — the API client as scripts see it (luna.get, luna.list,
 * luna.create, ... in lua/luna/api.lua): the two calls that wait for the
 * API server.
 *
 *   core.runtime.resolve(kind)               → resource table | nil, err   (yields)
 *   core.runtime.request(method, path [, body [, content_type]])
 *                                            → status, body [, warnings] | nil, err   (yields)
 *
 * warnings: the texts of the answer's `Warning: 299` headers (client/
 * warning.h), in order, at most 64, present only when there are any; they
 * are counted in luna_api_warnings_total{controller} here, and logged with
 * the call's line and kept for luna.last_warnings() by lua/luna/api.lua.
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
 * Shadow mode (`luna run --shadow`, the host's shadow, or the
 * reconcile's controller being a shadow candidate of --shadow-reload):
 * every request but GET and HEAD is sent with dryRun=All, whatever path
 * the script built, so nothing reaches storage; core.runtime.shadow is true
 * and lua/luna/api.lua logs what each write would have changed, counted
 * through core.runtime.shadow_report(verb, changed).
 *
 * Ownership: a pending request owns its kube request until it completes
 * or is cancelled; the host is borrowed (it outlives every state).
 */
#ifndef LUNA_API_CLIENT_H
#define LUNA_API_CLIENT_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/discovery.h"
#include "client/kube_client.h"

struct luna_api_host;

/* Adds resolve, request and shadow_report to the table on top of L's
 * stack, and `shadow` (host->shadow now).  The calls use the host's kc,
 * disc, write gate and observer (api/api.h) as they are at each call:
 * host->kc NULL (not connected yet) fails a request.  A write the gate
 * refuses logs "shard write refused" and returns nil, err with reason
 * ShardNotHeld and the why. */
void luna_api_client_register(lua_State *L, struct luna_api_host *host);


#endif
