/*
 * runtime.h — `luna run`: loads the controller files, connects to the API
 * server, starts the shared informers, starts each controller once its own
 * informers have synced, then reconciles until SIGTERM or SIGINT.
 *
 * A controller whose kind the server does not serve does not start and is
 * reported (controller.h: luna_controller_check; the "informers-synced"
 * readiness check names it); the others run, and it starts once the kind
 * is served.  A reload (SIGHUP, --watch) is loaded and built aside, waits
 * until discovery has answered for its kinds, then takes over and logs
 * "reload done" with result success or unresolved (failure when it did
 * not load: the old code runs on).  docs/failures.md has the details.
 *
 * Uses: kubeconfig, http, kube_client, discovery, informer_factory,
 * controller, lua_host, lua_runtime, metrics (+ runtime_metrics,
 * workqueue_export), health, httpd, metrics_auth, serving_cert, leader.  Runs the loop on the calling
 * thread.
 *
 * Endpoints: /metrics on metrics_bind_address (default ":8443": HTTPS,
 * scrapes authenticated and authorized by the API server, see httpd.h and
 * metrics_auth.h; with metrics_insecure ":8080", plain and open), /healthz
 * and /readyz on health_probe_bind_address (default ":8081", plain HTTP);
 * "0" disables one; both on one address share a server (TLS then covers
 * the probes too), except port 0, which gives each a free port of its own.  The address bound is
 * logged ("metrics server listening address=127.0.0.1:43127").  Readiness
 * checks: "informers-synced" (every controller of the running code has its
 * informers synced; else the reason names each controller and what its
 * sources wait for) and "leader-or-standby" (leading, or a standby whose
 * last look at the Lease succeeded; always ok without leader election).
 *
 * Admin endpoints (admin.h: reconcile keys now, pause, resume) are served
 * under /admin/ on the metrics server, authorized like /metrics; on a
 * plain metrics server only with LUNA_ADMIN_ON (then open, and logged so).
 *
 * --shadow: every write is a dry run (api/client.h).  --shadow-reload=S:
 * a reload is first built as a candidate whose controllers run beside the
 * live ones on queues of their own, every write a dry run, for S seconds;
 * then "reload shadow report" names, per controller, the keys whose writes
 * would have changed something, the candidate is dropped, and the reload
 * goes live as a plain one (docs/operations.md).
 *
 * Leader election (--leader-elect): informers start and sync on every
 * replica, so a standby's caches are warm; a controller starts dispatching
 * only once this replica holds the Lease and the controller's informers
 * have synced.
 * Losing the Lease stops every controller from taking keys at once and
 * exits with status 1 without waiting for in-flight reconciles
 * (controller-runtime's choice: another replica may already be leading,
 * and the Deployment restarts this one as a standby).
 *
 * Shutdown: the first SIGTERM/SIGINT stops every controller from taking
 * keys, lets in-flight reconciles finish (bounded by the grace period,
 * after which they are abandoned), releases the Lease if held (so a
 * standby takes over at once), then returns 0.  The Lease is renewed
 * while reconciles drain.  A second signal exits at once (status 1).  The
 * grace period runs from the signal, and script code cannot hold the loop
 * past it: the runtime's own SIGTERM/SIGINT handler (in front of libev's,
 * whose watcher runs on the loop a stretch of script code holds) sets the
 * watchdog's shutdown deadline (script/watchdog.h), so a stretch still
 * running at the end of the grace period, or at a second signal, is
 * stopped whatever its budgets.
 */
#ifndef LUNA_RUNTIME_H
#define LUNA_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "cache/reflector.h"

struct luna_watchdog_config;

struct luna_devserver; /* the embedded dev server (host/devserver/, linked by main.c) */

/* The admin endpoints (admin.h) on the metrics server. */
enum luna_admin_mode {
    LUNA_ADMIN_AUTO,  /* on when metrics are secure (authorized), off when plain */
    LUNA_ADMIN_ON,    /* on; open on a plain (--metrics-secure=false) server */
    LUNA_ADMIN_OFF,
};

/* --webhook-cert-mode (AUTO: files with --webhook-cert-path, else self-signed). */
enum luna_webhook_cert_mode {
    LUNA_WEBHOOK_CERT_AUTO,
    LUNA_WEBHOOK_CERT_SELF_SIGNED,
    LUNA_WEBHOOK_CERT_FILES,
    LUNA_WEBHOOK_CERT_MANAGED,
};

struct luna_run_config {
    const char *argv0;
    const char *dir;           /* controller files */
    const char *kubeconfig;    /* NULL: KUBECONFIG, ~/.kube/config, in-cluster */
    const char *context;
    double grace_period;       /* seconds; 0: 30 */
    const struct luna_watchdog_config *limits; /* script budgets; NULL: defaults */
    /* Run an embedded dev server seeded with these files and connect to it
     * instead of a cluster (its kubeconfig is written to a temp file that
     * kubectl can use while luna runs). */
    bool dev_server;
    const char *const *seeds;
    int nseeds;
    /* The dev server's entry points, supplied by the caller (main.c links
     * the dev server archive; the core library does not).  Required when
     * dev_server is set. */
    int (*dev_server_start)(const char *const *seeds, int nseeds, const char *token,
                            char *url, size_t url_size, struct luna_devserver **out,
                            int *failed_seed, luna_error *err);
    void (*dev_server_stop)(struct luna_devserver *srv);
    /* The embedded server's latest resourceVersion (test control's idle). */
    uint64_t (*dev_server_revision)(struct luna_devserver *srv);
    /* Objects from YAML/JSON text into the embedded server, as --seed. */
    int (*dev_server_seed)(struct luna_devserver *srv, const char *text, size_t len,
                           luna_error *err);
    /* False while the embedded server has work of its own pending. */
    bool (*dev_server_settled)(struct luna_devserver *srv);
    /* YAML/JSON manifests as a JSON array text (malloc'd; NULL and err on
     * bad input): test control's `documents`, which `luna test --kube`
     * reads manifests with.  Optional. */
    char *(*documents)(const char *text, size_t len, luna_error *err);
    /* --test-control: `luna test` steers the runtime over stdin/stdout
     * (test_control.h), against the embedded dev server (dev_server) or,
     * for `luna test --kube`, the cluster of the kubeconfig; fake_clock:
     * the controllers' queues run on a clock only the test moves. */
    bool test_control;
    bool fake_clock;
    bool watch;                /* --watch: reload on changes of dir (stored for the reloader) */
    /* --require-all: a file that fails to load at start ends the process
     * (exit 1); without it the files that load run and the others are
     * reported (log, the "controllers-current" check, metrics, an Event). */
    bool require_all;
    /* NULL: ":8443" (":8080" insecure), with dev_server "127.0.0.1:0"; "0": off */
    const char *metrics_bind_address;
    /* /metrics is served over TLS to scrapers the API server authenticates
     * (TokenReview) and authorizes (SubjectAccessReview: get on the path)
     * unless metrics_insecure (--metrics-secure=false: plain HTTP, open). */
    bool metrics_insecure;
    const char *metrics_cert_path;          /* NULL: a self-signed certificate */
    const char *metrics_cert_name;          /* NULL: "tls.crt" */
    const char *metrics_cert_key;           /* NULL: "tls.key" */
    /* NULL: ":8081", with dev_server "127.0.0.1:0"; "0": off */
    const char *health_probe_bind_address;
    /* The admission webhook server (serve/webhook_server.h), started once
     * a loaded file declares a webhook.  NULL: ":9443", with dev_server
     * "127.0.0.1:0"; "0": off. */
    const char *webhook_bind_address;
    const char *webhook_cert_path;          /* NULL: a self-signed certificate */
    /* --webhook-cert-mode: where the webhook server's certificate comes
     * from.  Managed (serve/webhook_manager.h): luna's own CA and serving
     * certificate in the Secret webhook_secret_name (NULL:
     * "luna-webhook-certs") of webhook_service_namespace (NULL:
     * $POD_NAMESPACE, else the kubeconfig's), for the Service
     * webhook_service_name (NULL: "luna-webhooks") on
     * webhook_service_port (0: 443), or webhook_url (a luna outside the
     * cluster; with dev_server and none, the address bound); luna writes
     * the configurations webhook_configuration_name (NULL: "luna") and the
     * conversion caBundle of webhook_conversion_crds (comma-separated, or
     * NULL). */
    enum luna_webhook_cert_mode webhook_cert_mode;
    const char *webhook_service_name, *webhook_service_namespace, *webhook_url;
    int webhook_service_port;
    const char *webhook_secret_name, *webhook_configuration_name;
    const char *webhook_conversion_crds;
    double webhook_cert_validity, webhook_ca_validity; /* seconds; 0: 90 days, 10 years */
    enum luna_admin_mode admin;             /* --admin-endpoints */
    /* --shadow: every write the controllers make is a server-side dry run
     * (dryRun=All) and is logged with what it would have changed
     * (api/client.h); no leader election. */
    bool shadow;
    /* --shadow-reload=S: a reload first runs the new code in shadow (every
     * write a dry run) beside the live code for S seconds, reports the
     * keys where it would change what the live code keeps ("reload shadow
     * report"), then takes over as a plain reload.  0: off. */
    double shadow_reload;
    /* --watch-list (default $LUNA_WATCH_LIST, else auto): how informers
     * get their state (cache/reflector.h): auto streams a watch list and
     * lists where the server refuses, on only streams, off only lists. */
    enum luna_watch_list_mode watch_list;
    /* --watch-idle-timeout (0: the reflector's 180 s): a watch silent that
     * long is replaced, its resourceVersion checked first. */
    double watch_idle_timeout;
    /* --min-watch-timeout (0: the reflector's 300 s): watches ask for
     * timeoutSeconds in [this, 2 x this) and are given up a grace after. */
    double min_watch_timeout;
    /* --http-read-header-timeout, --http-read-timeout (0: httpd.h's 10 s,
     * 30 s): the metrics and probe servers' deadlines for reading a
     * request's head and the whole request. */
    double http_read_header_timeout, http_read_timeout;
    bool leader_elect;
    const char *leader_election_id;         /* NULL: "luna" */
    const char *leader_election_namespace;  /* NULL: $POD_NAMESPACE, else the kubeconfig's */
    /* holderIdentity: $POD_NAME, else hostname + "_" + a random UUID */
    double lease_duration, renew_deadline, retry_period; /* 0: 15, 10, 2 */
    /* --shards: split the objects among replicas (shard_set.h), with the
     * leader election namespace, identity and timings; the Leases are
     * named after shard_set (NULL: "luna"). */
    bool shards;
    bool shard_by_namespace;               /* --shard-by=namespace (else uid) */
    const char *shard_set;
    double shard_skew_margin;              /* 0: 2 s */
    bool shard_option;                     /* a --shard-* flag was given */
};

/* Returns the process exit status: 0 after a clean shutdown, 1 when
 * loading or configuration failed. */
int luna_runtime_run(const struct luna_run_config *cfg);

#endif
