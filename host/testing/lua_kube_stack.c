/* lua_kube_stack.c — see lua_kube_stack.h. */
#include "testing/lua_kube_stack.h"

#include "base/loop.h"

int luna_lua_kube_stack_open(struct luna_lua_kube_stack *s,
                             const struct luna_kubeconfig_options *ko, luna_error *err)
{
    int rc = luna_kubeconfig_load(ko, &s->cfg, err);
    if (rc == 0 && !(s->http = luna_http_client_new(luna_loop(), err)))
        rc = err && err->code ? err->code : LUNA_ENOMEM;
    if (rc == 0)
        rc = luna_kube_client_new(s->cfg, s->http, &s->kc, err);
    if (rc < 0)
        luna_lua_kube_stack_close(s);
    return rc;
}

void luna_lua_kube_stack_close(struct luna_lua_kube_stack *s)
{
    luna_kube_client_free(s->kc);
    s->kc = NULL;
    luna_http_client_free(s->http);
    s->http = NULL;
    luna_kubeconfig_free(s->cfg);
    s->cfg = NULL;
}
