/*
 * runtime.h — `luna run`: loads the controller files, connects to the API
 * server, starts the shared informers, waits for their caches to sync,
 * then reconciles until SIGTERM or SIGINT.
 *
 * Uses: kubeconfig, http, kube_client, discovery, informer_factory,
 * controller, lua_host, lua_runtime.  Runs the loop on the calling thread.
 *
 * Shutdown: the first SIGTERM/SIGINT stops every controller from taking
 * keys, lets in-flight reconciles finish (bounded by the grace period,
 * after which they are abandoned), then returns 0.  A second signal exits
 * at once (status 1).
 */
#ifndef LUNA_RUNTIME_H
#define LUNA_RUNTIME_H

struct luna_watchdog_config;

struct luna_run_config {
    const char *argv0;
    const char *dir;           /* controller files */
    const char *kubeconfig;    /* NULL: KUBECONFIG, ~/.kube/config, in-cluster */
    const char *context;
    double grace_period;       /* seconds; 0: 30 */
    const struct luna_watchdog_config *limits; /* script budgets; NULL: defaults */
};

/* Returns the process exit status: 0 after a clean shutdown, 1 when
 * loading or configuration failed. */
int luna_runtime_run(const struct luna_run_config *cfg);

#endif
