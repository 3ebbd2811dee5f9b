/*
 * lua_kube_stack.h — the client stack the spec bindings that talk to an
 * API server share (core.informer.env, core.leader.new): a kubeconfig, an
 * HTTP client on luna's loop and a Kubernetes client over both.
 *
 * The struct is caller storage (zero-initialise it; it lives in the
 * binding's userdata).  open() fills it or, on failure, leaves it closed;
 * close() frees what it holds, in reverse order, and may be called again.
 * Runs on the loop thread.
 */
#ifndef LUNA_LUA_KUBE_STACK_H
#define LUNA_LUA_KUBE_STACK_H

#include "client/http.h"
#include "client/kube_client.h"
#include "client/kubeconfig.h"
#include "base/error.h"

struct luna_lua_kube_stack {
    struct luna_kubeconfig *cfg;   /* owned */
    luna_http_client *http;        /* owned */
    struct luna_kube_client *kc;   /* owned; uses cfg and http */
};

/* Loads the kubeconfig ko describes (borrowed) and builds the clients.
 * Returns 0, or a negative LUNA_E* code with err set. */
int luna_lua_kube_stack_open(struct luna_lua_kube_stack *s,
                             const struct luna_kubeconfig_options *ko, luna_error *err);
void luna_lua_kube_stack_close(struct luna_lua_kube_stack *s);

#endif
