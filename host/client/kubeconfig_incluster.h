/*
 * kubeconfig_incluster.h — the in-cluster configuration, as client-go's
 * rest.InClusterConfig builds it: the API server at
 * https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (an IPv6 host
 * bracketed), the service-account token (a token file re-read when it
 * changes), its ca.crt (without a usable one: a warning and the system
 * roots, as client-go does) and the namespace ($POD_NAMESPACE, else the
 * namespace file, else "default").
 *
 * Used by kubeconfig.c when no kubeconfig file applies.  Runs on the loop
 * thread (reads small files synchronously).
 */
#ifndef LUNA_KUBECONFIG_INCLUSTER_H
#define LUNA_KUBECONFIG_INCLUSTER_H

#include "client/kubeconfig.h"
#include "base/error.h"

/* Fills cfg (fresh from kubeconfig.c, with its private auth allocated)
 * from the options' in-cluster variables.  Fails with LUNA_ENOTFOUND
 * ("no configuration: ...") outside a pod or when a context was asked for,
 * and with the token file's error when the token cannot be read.  What it
 * set stays in cfg for luna_kubeconfig_free(). */
int luna_kubeconfig_incluster_load(const struct luna_kubeconfig_options *o,
                                   struct luna_kubeconfig *cfg, luna_error *err);

#endif
